import Foundation

@testable import TransferBase
@testable import TransferCore

#if canImport(Glibc)
    import Glibc
#endif

/// A value handed between a test and a thread it starts.
final class Locked<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: T
    init(_ value: T) { stored = value }
    var value: T {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}

/// A plain blocking Unix-socket client for tests that read raw response bytes.
final class RawSocket {
    let fd: Int32

    init?(path: String) {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
        }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        if rc != 0 {
            close(fd)
            return nil
        }
    }

    func send(_ line: String) {
        let bytes = Array((line + "\n").utf8)
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n <= 0 { return }
            sent += n
        }
    }

    /// Reads until `\n` (or at most `limit` bytes); returns what was read.
    func readLine(limit: Int = Int.max) -> [UInt8] {
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        while out.count < limit {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, min($0.count, limit - out.count)) }
            if n <= 0 { break }
            out += chunk[0..<n]
            if chunk[n - 1] == 0x0A { break }
        }
        return out
    }

    deinit { close(fd) }
}

/// A fresh private temporary directory (short, for socket paths).
func makeTemporaryHome(_ prefix: String) throws -> String {
    let path = "/tmp/\(prefix)-\(UUID().uuidString.prefix(8))"
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}
