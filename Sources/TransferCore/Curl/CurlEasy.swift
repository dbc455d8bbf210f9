import CCurl
import Foundation

/// An easy handle with typed option setters. Owns the header list; cleaned up in `deinit`
/// (the one place), after the owner removed it from the multi. Loop-thread only.
public final class CurlEasy {
    /// The `CURL*`.
    public let handle: UnsafeMutableRawPointer
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private var failed: [String] = []
    /// Buffer for libcurl's error message (CURLOPT_ERRORBUFFER).
    private let errorBuffer: UnsafeMutablePointer<CChar>

    /// Creates an easy handle with the options every transfer shares.
    public init() throws {
        guard let h = curl_easy_init() else { throw TransferError(.io, "curl_easy_init failed", retryable: true) }
        handle = h
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(to: 0)
        set(CURLOPT_NOSIGNAL, 1)
        set(CURLOPT_ERRORBUFFER, pointer: UnsafeMutableRawPointer(errorBuffer))
    }

    deinit {
        curl_easy_cleanup(handle)
        if let headerList { curl_slist_free_all(headerList) }
        errorBuffer.deallocate()
    }

    /// Sets a long option.
    public func set(_ option: CURLoption, _ value: Int) {
        if aft_easy_setopt_long(handle, option, value) != CURLE_OK { failed.append("\(option.rawValue)") }
    }

    /// Sets a curl_off_t option.
    public func set(_ option: CURLoption, offset value: Int64) {
        if aft_easy_setopt_off(handle, option, Int(value)) != CURLE_OK { failed.append("\(option.rawValue)") }
    }

    /// Sets a string option (libcurl copies strings).
    public func set(_ option: CURLoption, _ value: String) {
        if aft_easy_setopt_string(handle, option, value) != CURLE_OK { failed.append("\(option.rawValue)") }
    }

    /// Sets a pointer option.
    public func set(_ option: CURLoption, pointer value: UnsafeMutableRawPointer?) {
        if aft_easy_setopt_pointer(handle, option, value) != CURLE_OK { failed.append("\(option.rawValue)") }
    }

    /// Sets a data callback (write, header or read function).
    public func set(_ option: CURLoption, callback: aft_curl_data_cb) {
        if aft_easy_setopt_data_cb(handle, option, callback) != CURLE_OK { failed.append("\(option.rawValue)") }
    }

    /// Sets the seek callback (CURLOPT_SEEKFUNCTION), with which libcurl rewinds an upload's body.
    public func setSeekFunction(_ callback: aft_curl_seek_cb) {
        if aft_easy_setopt_seek_cb(handle, callback) != CURLE_OK { failed.append("SEEKFUNCTION") }
    }

    /// Sets the prerequest callback (runs once the connection is up, before the request is sent).
    public func setPrereq(_ callback: aft_curl_prereq_cb) {
        if aft_easy_setopt_prereq_cb(handle, callback) != CURLE_OK { failed.append("PREREQFUNCTION") }
    }

    /// Sets the request headers (each `Name: value`).
    public func setHeaders(_ lines: [String]) {
        if let headerList { curl_slist_free_all(headerList) }
        headerList = nil
        for line in lines { headerList = curl_slist_append(headerList, line) }
        if aft_easy_setopt_slist(handle, CURLOPT_HTTPHEADER, headerList) != CURLE_OK { failed.append("HTTPHEADER") }
    }

    /// Options that libcurl refused, if any (a programming or build error worth reporting).
    public var refusedOptions: [String] { failed }

    /// libcurl's last error message for this handle.
    public var errorMessage: String { String(cString: errorBuffer) }

    /// A long info value.
    public func info(long what: CURLINFO) -> Int? {
        var v = 0
        return aft_easy_getinfo_long(handle, what, &v) == CURLE_OK ? v : nil
    }

    /// A double info value (times in seconds).
    public func info(double what: CURLINFO) -> Double? {
        var v = 0.0
        return aft_easy_getinfo_double(handle, what, &v) == CURLE_OK ? v : nil
    }

    /// A string info value.
    public func info(string what: CURLINFO) -> String? {
        var p: UnsafeMutablePointer<CChar>?
        guard aft_easy_getinfo_string(handle, what, &p) == CURLE_OK, let p else { return nil }
        return String(cString: p)
    }
}
