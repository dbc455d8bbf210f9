import CCurl
import Foundation

/// An easy handle configured from Swift values (``CurlRequestOptions``) with typed callbacks.
///
/// The only `Unmanaged` reference to it is in `CURLOPT_PRIVATE` (and the matching `*DATA`
/// options), unretained: the owner (an attempt) keeps the handle alive while it is in the multi.
/// ``CurlMulti`` finds it there when the transfer is done and calls ``onDone``. The handle is
/// cleaned up in `deinit` (the one place), after the owner removed it from the multi.
/// Loop-thread only.
public final class CurlEasy {
    /// The `CURL*`.
    let handle: UnsafeMutableRawPointer
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private var failed: [String] = []
    /// Buffer for libcurl's error message (CURLOPT_ERRORBUFFER).
    private let errorBuffer: UnsafeMutablePointer<CChar>

    /// What a body callback did with the bytes it was given.
    public enum BodyVerdict {
        /// All bytes taken.
        case accept
        /// Pause the transfer; the same bytes come again after ``unpause()``.
        case pause
        /// End the transfer (the owner keeps the reason).
        case abort
    }

    /// What a read callback (upload payload) supplied.
    public enum ReadVerdict {
        /// That many bytes were written into the buffer (0 at the end of the payload).
        case bytes(Int)
        /// Pause the transfer until ``unpause()``.
        case pause
        /// End the transfer.
        case abort
    }

    /// A response header line (status line and blank line included); false ends the transfer.
    public var onHeader: ((UnsafeRawBufferPointer) -> Bool)?
    /// Response body bytes.
    public var onBody: ((UnsafeRawBufferPointer) -> BodyVerdict)?
    /// Request body: fill the buffer.
    public var onRead: ((UnsafeMutableRawBufferPointer) -> ReadVerdict)?
    /// Rewind the request body to byte 0 (libcurl resends it on a dead reused connection);
    /// false when it cannot.
    public var onRewind: (() -> Bool)?
    /// The connection is up and the request not yet sent; false aborts (certificate pinning).
    public var onPrerequest: (() -> Bool)?
    /// The transfer ended (the handle is already out of the multi): nil, or libcurl's error as
    /// the job's error (``CurlErrorClassifier``).
    public var onDone: ((TransferError?) -> Void)?
    /// Whether libcurl gave the transfer a socket (resolving, connecting, or on a connection).
    /// One it holds back for a free connection to its host (`CURLMOPT_MAX_HOST_CONNECTIONS`) has
    /// none: it is waiting its turn, not transferring. Set by ``CurlMulti``.
    public internal(set) var engaged = false

    /// Creates an easy handle with the options every transfer shares.
    public init() throws {
        guard let h = curl_easy_init() else { throw TransferError(.io, "curl_easy_init failed", retryable: true) }
        handle = h
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(to: 0)
        let me = Unmanaged.passUnretained(self).toOpaque()
        set(CURLOPT_PRIVATE, pointer: me)
        set(CURLOPT_NOSIGNAL, 1)
        // A transfer taken away during its name lookup (cancel, pause, stop) leaves libcurl's
        // resolver thread to finish and free itself: without this, libcurl 7.88 joins it, and the
        // loop waited as long as the resolver (10 s and more for a DNS server that never answers).
        set(CURLOPT_QUICK_EXIT, 1)
        // Every connection resets when it is closed: an upload cut short (stopped, or the daemon
        // killed) drops the body bytes queued in the kernel instead of sending them on after the
        // client has moved on — whichever request opened the connection it reuses (a resumable
        // upload's append reuses its offset query's). Closing a download's or an idle connection
        // that way loses nothing.
        _ = aft_easy_reset_connections_on_close(handle)
        set(CURLOPT_ERRORBUFFER, pointer: UnsafeMutableRawPointer(errorBuffer))
        set(CURLOPT_HEADERDATA, pointer: me)
        set(
            CURLOPT_HEADERFUNCTION,
            callback: { ptr, size, n, ud in
                guard let ptr, let ud else { return 0 }
                let easy = Unmanaged<CurlEasy>.fromOpaque(ud).takeUnretainedValue()
                return easy.headerCallback(UnsafeRawBufferPointer(start: ptr, count: size * n))
            })
        set(CURLOPT_WRITEDATA, pointer: me)
        set(
            CURLOPT_WRITEFUNCTION,
            callback: { ptr, size, n, ud in
                guard let ptr, let ud else { return 0 }
                let easy = Unmanaged<CurlEasy>.fromOpaque(ud).takeUnretainedValue()
                return easy.bodyCallback(UnsafeRawBufferPointer(start: ptr, count: size * n))
            })
    }

    /// The body callback's answer: the chunk taken (its size), 0 to end the transfer, or
    /// `CURL_WRITEFUNC_PAUSE` (the same bytes come again after ``unpause()``).
    private func bodyCallback(_ chunk: UnsafeRawBufferPointer) -> Int {
        if holdsResponse {
            if !responseHeld && kept.keep(chunk, header: false) { return chunk.count }
            responseHeld = true
            return Int(CURL_WRITEFUNC_PAUSE)
        }
        guard let onBody else { return chunk.count }
        switch onBody(chunk) {
        case .accept: return chunk.count
        case .pause: return Int(CURL_WRITEFUNC_PAUSE)
        case .abort:
            endedByCallback = true
            return 0
        }
    }

    /// Whether the response is held: the request is sent, and what the answer brings is kept
    /// (``HeldResponse``, up to its limit, past which libcurl is paused) rather than given to
    /// ``onHeader`` and ``onBody``, until ``CurlMulti/release(_:)`` hands it over.
    public internal(set) var holdsResponse = false
    /// What the held response brought so far.
    private var kept = HeldResponse()
    /// Whether a callback paused libcurl while ``holdsResponse`` (the response passed the limit).
    var responseHeld = false
    /// How a transfer ended while its response was held (its error, or nil for none): told to
    /// ``onDone`` when it is released (``CurlMulti/release(_:)``).
    var heldEnd: TransferError??
    /// When the held response's final status line came (monotonic seconds): the timeline's
    /// first byte, not the moment it was handed over.
    private var heldAt: Double?

    /// The header callback's answer: the chunk taken (its size), 0 to end the transfer, or
    /// `CURL_WRITEFUNC_PAUSE` to hold the response (``holdsResponse``).
    private func headerCallback(_ chunk: UnsafeRawBufferPointer) -> Int {
        if holdsResponse {
            if heldAt == nil && chunk.starts(with: "HTTP/".utf8) && !Self.isInterimStatusLine(chunk) {
                heldAt = Self.monotonicNow()
            }
            if !responseHeld && kept.keep(chunk, header: true) { return chunk.count }
            responseHeld = true
            return Int(CURL_WRITEFUNC_PAUSE)
        }
        return headerLines(chunk) ? chunk.count : 0
    }

    /// How handing over a held response went (``handOverHeld()``).
    enum HandOver {
        /// All of it was taken.
        case done
        /// A body callback paused: the rest goes on at ``CurlMulti/unpause(_:)``.
        case paused
        /// A callback ended the transfer.
        case aborted
    }

    /// Forgets a held response (the transfer was removed): nothing of it is handed over.
    func dropHeld() {
        holdsResponse = false
        responseHeld = false
        heldEnd = nil
        kept = HeldResponse()
    }

    /// Whether kept bytes of a held response are still to be handed over.
    var hasKept: Bool { !kept.isHandedOver }

    /// Hands what the held response brought to ``onHeader`` and ``onBody``, in order, in chunks
    /// no larger than libcurl's. Never call from inside a curl callback.
    func handOverHeld() -> HandOver {
        for chunk in kept.takeHeaders() {
            let ok = chunk.withUnsafeBytes { headerLines($0) }
            if !ok {
                kept = HeldResponse()
                return .aborted
            }
        }
        while true {
            let next = kept.nextBody(most: Int(CURL_MAX_WRITE_SIZE))
            if next.isEmpty { break }
            let verdict = next.withUnsafeBytes { onBody?($0) ?? .accept }
            switch verdict {
            case .accept: kept.bodyTaken(next.count)
            case .pause: return .paused
            case .abort:
                kept = HeldResponse()
                return .aborted
            }
        }
        kept = HeldResponse()
        return .done
    }

    /// Whether `line` is the status line of an interim (1xx) response: `HTTP/<version> 1`.
    private static func isInterimStatusLine(_ line: UnsafeRawBufferPointer) -> Bool {
        guard line.starts(with: "HTTP/".utf8), let space = line.firstIndex(of: UInt8(ascii: " ")) else { return false }
        return space + 1 < line.count && line[space + 1] == UInt8(ascii: "1")
    }

    /// Hands ``onHeader`` the lines of one header callback: one line, except right after a
    /// transfer paused in its headers goes on, when libcurl 7.88 delivers the header lines it kept
    /// while paused in one call. False ends the transfer.
    private func headerLines(_ chunk: UnsafeRawBufferPointer) -> Bool {
        guard let onHeader else { return true }
        var start = 0
        while start < chunk.count {
            var end = start
            while end < chunk.count && chunk[end] != UInt8(ascii: "\n") { end += 1 }
            end = min(end + 1, chunk.count)
            if !onHeader(UnsafeRawBufferPointer(rebasing: chunk[start..<end])) { return false }
            start = end
        }
        return true
    }

    /// Whether the handle is in ``CurlMulti``'s multi (added, not yet finished or removed).
    var isInMulti = false {
        didSet { if isInMulti && addedAt == nil { addedAt = Self.monotonicNow() } }
    }
    /// When it was first added to the multi, and when the status line of the final response came
    /// (monotonic seconds): the time to the answer, which libcurl 7.88 gets wrong for a request
    /// with a body (it stamps the first byte *sent*; fixed in curl 8.3). It includes a wait for a
    /// free connection to the host (`--max-per-host`), which libcurl's own timers leave out.
    private var addedAt: Double?
    private var firstResponseAt: Double?
    /// Whether the request sends a body (libcurl's first-byte time is then the first byte *sent*).
    private var sendsBody = false

    /// The status line of a final response came (not an interim `100` or `104`, which may come
    /// long before the answer): the first one is the timeline's `firstByte`. Called by the header
    /// callback's reader, which parses the line anyway.
    public func finalResponseBegan() {
        if firstResponseAt == nil { firstResponseAt = heldAt ?? Self.monotonicNow() }
    }

    static func monotonicNow() -> Double {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
    }

    /// Whether a body callback asked to end the transfer since the last ``unpause()``.
    private(set) var endedByCallback = false

    /// The easy handle behind a `CURL*` that ``CurlMulti`` reports, from `CURLOPT_PRIVATE`.
    static func owner(of handle: UnsafeMutableRawPointer) -> CurlEasy? {
        var p: UnsafeMutableRawPointer?
        guard aft_easy_getinfo_pointer(handle, CURLINFO_PRIVATE, &p) == CURLE_OK, let p else { return nil }
        return Unmanaged<CurlEasy>.fromOpaque(p).takeUnretainedValue()
    }

    deinit {
        curl_easy_cleanup(handle)
        if let headerList { curl_slist_free_all(headerList) }
        errorBuffer.deallocate()
    }

    // MARK: - Configuration

    /// Applies a request's options. Options libcurl refuses are listed in ``refusedOptions``.
    public func configure(_ o: CurlRequestOptions) {
        set(CURLOPT_URL, o.url)
        set(CURLOPT_PROTOCOLS_STR, "http,https")
        set(CURLOPT_FOLLOWLOCATION, 0)  // redirects are followed by the caller, hop by hop
        set(CURLOPT_USERAGENT, o.userAgent)
        set(CURLOPT_CONNECTTIMEOUT, o.connectTimeout)
        set(CURLOPT_BUFFERSIZE, o.bufferSize)
        if let user = o.userPassword {
            set(CURLOPT_USERPWD, user)
            set(CURLOPT_HTTPAUTH, 1)  // CURLAUTH_BASIC (a macro Swift cannot import)
        }
        if let cacert = o.caFile { set(CURLOPT_CAINFO, cacert) }
        if let pin = o.pinnedPublicKey { set(CURLOPT_PINNEDPUBLICKEY, pin) }
        if o.insecure {
            set(CURLOPT_SSL_VERIFYPEER, 0)
            set(CURLOPT_SSL_VERIFYHOST, 0)
        }
        if o.freshConnection { set(CURLOPT_FRESH_CONNECT, 1) }
        if o.inspectsCertificates {
            // The chain is filled only while libcurl makes a TLS connection: a fresh one.
            set(CURLOPT_CERTINFO, 1)
            set(CURLOPT_FRESH_CONNECT, 1)
            set(CURLOPT_PREREQDATA, pointer: Unmanaged.passUnretained(self).toOpaque())
            if aft_easy_setopt_prereq_cb(
                handle,
                { clientp, _, _, _, _ in
                    guard let clientp else { return 1 }
                    let easy = Unmanaged<CurlEasy>.fromOpaque(clientp).takeUnretainedValue()
                    return easy.onPrerequest?() == false ? 1 : 0  // 1: CURL_PREREQFUNC_ABORT
                }) != CURLE_OK
            {
                failed.append("PREREQFUNCTION")
            }
        }
        if let from = o.rangeFrom { set(CURLOPT_RANGE, "\(from)-" + (o.rangeTo.map { "\($0)" } ?? "")) }
        if o.waitForMultiplexing { set(CURLOPT_PIPEWAIT, 1) }
        switch o.body {
        case .none:
            break
        case .head:
            set(CURLOPT_NOBODY, 1)
        case .bodiless(let method):
            set(CURLOPT_CUSTOMREQUEST, method)
        case .upload(let method, let length, let bufferSize):
            sendsBody = true
            enableRead(bufferSize: bufferSize)
            switch method {
            case "POST":
                set(CURLOPT_POST, 1)
                set(CURLOPT_POSTFIELDSIZE_LARGE, offset: length)
            case "PUT":
                set(CURLOPT_UPLOAD, 1)
                set(CURLOPT_INFILESIZE_LARGE, offset: length)
            default:
                set(CURLOPT_UPLOAD, 1)
                set(CURLOPT_INFILESIZE_LARGE, offset: length)
                set(CURLOPT_CUSTOMREQUEST, method)
            }
        }
        setHeaders(o.headers)
    }

    private func enableRead(bufferSize: Int) {
        let me = Unmanaged.passUnretained(self).toOpaque()
        set(CURLOPT_UPLOAD_BUFFERSIZE, bufferSize)
        set(CURLOPT_READDATA, pointer: me)
        set(
            CURLOPT_READFUNCTION,
            callback: { ptr, size, n, ud in
                guard let ptr, let ud else { return Int(CURL_READFUNC_ABORT) }
                let easy = Unmanaged<CurlEasy>.fromOpaque(ud).takeUnretainedValue()
                guard let onRead = easy.onRead else { return Int(CURL_READFUNC_ABORT) }
                switch onRead(UnsafeMutableRawBufferPointer(start: ptr, count: size * n)) {
                case .bytes(let k): return k
                case .pause: return Int(CURL_READFUNC_PAUSE)
                case .abort: return Int(CURL_READFUNC_ABORT)
                }
            })
        set(CURLOPT_SEEKDATA, pointer: me)
        if aft_easy_setopt_seek_cb(
            handle,
            { ud, offset, origin in
                guard let ud else { return Int32(CURL_SEEKFUNC_FAIL) }
                let easy = Unmanaged<CurlEasy>.fromOpaque(ud).takeUnretainedValue()
                guard offset == 0, origin == SEEK_SET, easy.onRewind?() == true else {
                    return Int32(CURL_SEEKFUNC_CANTSEEK)
                }
                return Int32(CURL_SEEKFUNC_OK)
            }) != CURLE_OK
        {
            failed.append("SEEKFUNCTION")
        }
    }

    /// Resumes a transfer that a callback paused (through ``CurlMulti/unpause(_:)``, which sees
    /// to a transfer that a callback ends inside this call). Never call from inside a curl callback.
    /// - Returns: libcurl's result, and whether a body callback run inside the call ended the transfer.
    func unpause() -> (code: CURLcode, ended: Bool) {
        endedByCallback = false
        let code = curl_easy_pause(handle, CURLPAUSE_CONT)
        return (code, endedByCallback)
    }

    private func set(_ option: CURLoption, _ value: Int) {
        if aft_easy_setopt_long(handle, option, value) != CURLE_OK { failed.append("\(option.rawValue)") }
    }

    private func set(_ option: CURLoption, offset value: Int64) {
        if aft_easy_setopt_off(handle, option, Int(value)) != CURLE_OK { failed.append("\(option.rawValue)") }
    }

    private func set(_ option: CURLoption, _ value: String) {
        if aft_easy_setopt_string(handle, option, value) != CURLE_OK { failed.append("\(option.rawValue)") }
    }

    private func set(_ option: CURLoption, pointer value: UnsafeMutableRawPointer?) {
        if aft_easy_setopt_pointer(handle, option, value) != CURLE_OK { failed.append("\(option.rawValue)") }
    }

    private func set(_ option: CURLoption, callback: aft_curl_data_cb) {
        if aft_easy_setopt_data_cb(handle, option, callback) != CURLE_OK { failed.append("\(option.rawValue)") }
    }

    private func setHeaders(_ lines: [String]) {
        if let headerList { curl_slist_free_all(headerList) }
        headerList = nil
        for line in lines { headerList = curl_slist_append(headerList, line) }
        if aft_easy_setopt_slist(handle, CURLOPT_HTTPHEADER, headerList) != CURLE_OK { failed.append("HTTPHEADER") }
    }

    // MARK: - Results

    /// Options that libcurl refused, if any (a programming or build error worth reporting).
    public var refusedOptions: [String] { failed }

    /// libcurl's message for the transfer's result: its error buffer, else the code's text.
    public func message(for code: CURLcode) -> String {
        let text = String(cString: errorBuffer)
        return text.isEmpty ? String(cString: curl_easy_strerror(code)) : text
    }

    /// Whether the response came over HTTP/2 or later (one connection carries several
    /// transfers).
    public var isMultiplexed: Bool {
        var v = 0
        // CURL_HTTP_VERSION_2_0 is 3, CURL_HTTP_VERSION_3 is 30 (macros Swift cannot import).
        return aft_easy_getinfo_long(handle, CURLINFO_HTTP_VERSION, &v) == CURLE_OK && v >= 3
    }

    /// Whether the last request went over a connection an earlier transfer had opened (libcurl
    /// made no new connection for it: `CURLINFO_NUM_CONNECTS` is 0).
    public var reusedConnection: Bool {
        var v = 0
        return aft_easy_getinfo_long(handle, CURLINFO_NUM_CONNECTS, &v) == CURLE_OK && v == 0
    }

    /// The redirect target libcurl computed from the response's `Location`.
    public var redirectURL: String? { info(string: CURLINFO_REDIRECT_URL) }

    /// The timeline of the transfer (Alamofire's `Timeline`), in seconds. `firstByte` is the time
    /// to the final response's status line, measured here (libcurl's `CURLINFO_STARTTRANSFER_TIME` is
    /// the first byte sent for an upload); without a response, 0 for a request with a body (no
    /// first byte came; libcurl's would be the first byte sent), else libcurl's (0 then too).
    public var timeline: CurlTimeline {
        let total = info(double: CURLINFO_TOTAL_TIME)
        var firstByte = info(double: CURLINFO_STARTTRANSFER_TIME)
        if firstResponseAt == nil && sendsBody { firstByte = 0 }
        if let addedAt, let firstResponseAt {
            // Clocks a few microseconds apart: never past libcurl's total.
            firstByte = min(max(0, firstResponseAt - addedAt), total ?? .infinity)
        }
        return CurlTimeline(
            nameLookup: info(double: CURLINFO_NAMELOOKUP_TIME), connect: info(double: CURLINFO_CONNECT_TIME),
            tls: info(double: CURLINFO_APPCONNECT_TIME), firstByte: firstByte, total: total)
    }

    /// The PEM text of each certificate of the connection's chain (needs `inspectsCertificates`).
    public var certificateChainPEM: [String] {
        (0..<aft_certinfo_count(handle)).compactMap { i in
            aft_certinfo_pem(handle, Int32(i)).map { String(cString: $0) }
        }
    }

    private func info(double what: CURLINFO) -> Double? {
        var v = 0.0
        return aft_easy_getinfo_double(handle, what, &v) == CURLE_OK ? v : nil
    }

    private func info(string what: CURLINFO) -> String? {
        var p: UnsafeMutablePointer<CChar>?
        guard aft_easy_getinfo_string(handle, what, &p) == CURLE_OK, let p else { return nil }
        return String(cString: p)
    }
}

/// The phases of one request, in seconds from its start (libcurl's `CURLINFO_*_TIME`).
public struct CurlTimeline: Equatable, Sendable {
    /// Until the name was resolved.
    public var nameLookup: Double?
    /// Until the TCP connection was up.
    public var connect: Double?
    /// Until the TLS handshake was done (0 for plain http).
    public var tls: Double?
    /// Until the first byte of the response.
    public var firstByte: Double?
    /// The whole request.
    public var total: Double?
}
