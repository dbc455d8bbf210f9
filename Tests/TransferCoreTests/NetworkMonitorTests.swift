import CUV
import Foundation
import XCTest

@testable import TransferBase
@testable import TransferCore

final class NetworkMonitorTests: XCTestCase {
    // MARK: - The rule

    func testThatLoopbackUnspecifiedAndLinkLocalIPv4AddressesAreNotRoutable() {
        XCTAssertFalse(NetworkMonitor.isRoutableIPv4(0))
        XCTAssertFalse(NetworkMonitor.isRoutableIPv4(0x7F00_0001))  // 127.0.0.1
        XCTAssertFalse(NetworkMonitor.isRoutableIPv4(0x7F12_3456))  // 127.18.52.86
        XCTAssertFalse(NetworkMonitor.isRoutableIPv4(0xA9FE_0304))  // 169.254.3.4
        XCTAssertTrue(NetworkMonitor.isRoutableIPv4(0x0AD5_4D01))  // 10.213.77.1
        XCTAssertTrue(NetworkMonitor.isRoutableIPv4(0xA9FF_0001))  // 169.255.0.1
        XCTAssertTrue(NetworkMonitor.isRoutableIPv4(0xC0A8_0101))  // 192.168.1.1
    }

    func testThatLoopbackUnspecifiedAndLinkLocalIPv6AddressesAreNotRoutable() {
        var loopback = [UInt8](repeating: 0, count: 16)
        loopback[15] = 1
        let unspecified = [UInt8](repeating: 0, count: 16)
        var linkLocal = [UInt8](repeating: 0, count: 16)
        linkLocal[0] = 0xFE
        linkLocal[1] = 0x80
        linkLocal[15] = 7
        var linkLocalTop = linkLocal
        linkLocalTop[1] = 0xBF  // still inside fe80::/10
        var siteLocal = linkLocal
        siteLocal[1] = 0xC0  // fec0::, outside fe80::/10
        var global = [UInt8](repeating: 0, count: 16)
        global[0] = 0x20
        global[1] = 0x01
        global[2] = 0x0D
        global[3] = 0xB8
        global[15] = 1
        var uniqueLocal = [UInt8](repeating: 0, count: 16)
        uniqueLocal[0] = 0xFD
        uniqueLocal[15] = 2

        XCTAssertFalse(NetworkMonitor.isRoutableIPv6(loopback))
        XCTAssertFalse(NetworkMonitor.isRoutableIPv6(unspecified))
        XCTAssertFalse(NetworkMonitor.isRoutableIPv6(linkLocal))
        XCTAssertFalse(NetworkMonitor.isRoutableIPv6(linkLocalTop))
        XCTAssertTrue(NetworkMonitor.isRoutableIPv6(siteLocal))
        XCTAssertTrue(NetworkMonitor.isRoutableIPv6(global))
        XCTAssertTrue(NetworkMonitor.isRoutableIPv6(uniqueLocal))
    }

    // MARK: - On a real loop

    func testThatAMonitorOnARunningLoopAgreesWithAOneShotEvaluation() throws {
        let loop = try TestLoop()
        defer { loop.finish(self) }
        let monitor = try NetworkMonitor(loop: loop.pointer) { _ in }
        defer { monitor.close() }

        loop.run(for: 0.3)

        XCTAssertEqual(monitor.isReachable, NetworkMonitor.currentlyReachable())
    }

    func testThatClosingTwiceIsHarmlessAndFreesEveryHandle() throws {
        let loop = try TestLoop()
        let monitor = try NetworkMonitor(loop: loop.pointer) { _ in }
        loop.run(for: 0.05)
        monitor.close()
        monitor.close()
        // finish() runs the close callbacks and asserts that uv_loop_close finds no handle left.
        loop.finish(self)
    }

    /// Runs the monitor inside a fresh network namespace (entered by this thread with `setns`),
    /// changes links and addresses there with `ip -n`, and checks every flip and its latency.
    func testThatTheMonitorReportsLinksAndAddressesComingAndGoingInAFreshNamespace() throws {
        let namespace = try TestNamespace(name: "aft-unit-\(getpid())")
        defer { namespace.remove() }
        try namespace.enter()
        defer { namespace.leave() }

        let loop = try TestLoop()
        defer { loop.finish(self) }
        let recorder = Recorder()
        let monitor = try NetworkMonitor(loop: loop.pointer) { recorder.values.append($0) }
        defer { monitor.close() }

        XCTAssertFalse(monitor.isReachable, "a fresh namespace has only lo, and it is down")
        XCTAssertFalse(NetworkMonitor.currentlyReachable())

        // Loopback never counts, with 127.0.0.1 and ::1 up.
        try namespace.ip("link", "set", "lo", "up")
        loop.run(for: 0.3)
        XCTAssertEqual(recorder.values, [])

        // A routable address on a link that is down does not count either.
        try namespace.ip("link", "add", "aft0", "type", "veth", "peer", "name", "aft1")
        try namespace.ip("addr", "add", "10.213.77.1/24", "dev", "aft0")
        loop.run(for: 0.3)
        XCTAssertEqual(recorder.values, [])

        // Up without carrier (its veth peer is down) does not count.
        try namespace.ip("link", "set", "aft0", "up")
        loop.run(for: 0.3)
        XCTAssertEqual(recorder.values, [])

        // Carrier: reachable, promptly.
        var started = Date()
        try namespace.ip("link", "set", "aft1", "up")
        XCTAssertTrue(loop.run(until: 2) { recorder.values == [true] }, "saw \(recorder.values)")
        let upLatency = Date().timeIntervalSince(started)
        XCTAssertTrue(monitor.isReachable)
        XCTAssertLessThan(upLatency, 0.5)

        // Link down: unreachable.
        started = Date()
        try namespace.ip("link", "set", "aft0", "down")
        XCTAssertTrue(loop.run(until: 2) { recorder.values == [true, false] }, "saw \(recorder.values)")
        let downLatency = Date().timeIntervalSince(started)
        XCTAssertFalse(monitor.isReachable)

        // Up with only link-local addresses (169.254/16 and the automatic fe80::): unreachable.
        try namespace.ip("addr", "flush", "dev", "aft0")
        try namespace.ip("addr", "add", "169.254.3.4/16", "dev", "aft0")
        try namespace.ip("link", "set", "aft0", "up")
        loop.run(for: 0.3)
        XCTAssertEqual(recorder.values, [true, false])
        XCTAssertFalse(monitor.isReachable)

        // An address event alone brings it back.
        started = Date()
        try namespace.ip("addr", "add", "fd00:213::1/64", "dev", "aft0", "nodad")
        XCTAssertTrue(loop.run(until: 2) { recorder.values == [true, false, true] }, "saw \(recorder.values)")
        let addressLatency = Date().timeIntervalSince(started)
        XCTAssertEqual(monitor.isReachable, NetworkMonitor.currentlyReachable())

        print(
            String(
                format: "NetworkMonitor latency: carrier up %.0f ms, link down %.0f ms, address added %.0f ms",
                upLatency * 1000, downLatency * 1000, addressLatency * 1000))
    }
}

// MARK: - Helpers

/// Collects the values given to `onChange`.
private final class Recorder {
    var values: [Bool] = []
}

/// A libuv loop of its own, driven in small steps by the test.
private final class TestLoop {
    let pointer: UnsafeMutablePointer<uv_loop_t>

    init() throws {
        pointer = .allocate(capacity: 1)
        let status = uv_loop_init(pointer)
        guard status == 0 else {
            pointer.deallocate()
            throw NSError(
                domain: "uv", code: Int(status),
                userInfo: [NSLocalizedDescriptionKey: "uv_loop_init: \(String(cString: uv_strerror(status)))"])
        }
    }

    /// Runs the loop for `seconds`.
    func run(for seconds: TimeInterval) {
        _ = run(until: seconds) { false }
    }

    /// Runs the loop until `condition` holds or `seconds` pass; returns whether it held.
    func run(until seconds: TimeInterval, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            uv_run(pointer, UV_RUN_NOWAIT)
            if condition() { return true }
            usleep(2_000)
        }
        return condition()
    }

    /// Lets closing handles finish, then closes and frees the loop; a handle left open fails.
    func finish(_ test: XCTestCase) {
        uv_run(pointer, UV_RUN_DEFAULT)
        let status = uv_loop_close(pointer)
        XCTAssertEqual(status, 0, "uv_loop_close: \(String(cString: uv_strerror(status)))")
        if status == 0 { pointer.deallocate() }
    }
}

/// A named network namespace (`ip netns add`) that the calling thread can enter and leave.
private final class TestNamespace {
    let name: String
    private var original: Int32 = -1
    private var created = false
    /// Whether something was mounted at /run/netns before: iproute2 bind-mounts it onto itself at
    /// the first `ip netns add` on a machine and leaves it; the test takes it down again.
    private let runDirWasMounted = TestNamespace.mounted(at: "/run/netns")

    /// Creates the namespace, or skips the test where that is not allowed.
    init(name: String) throws {
        self.name = name
        guard geteuid() == 0 else { throw XCTSkip("network namespaces need root; running as uid \(geteuid())") }
        guard FileManager.default.isExecutableFile(atPath: Self.ipPath) else {
            throw XCTSkip("network namespaces need iproute2 (\(Self.ipPath) is missing)")
        }
        let (status, output) = Self.run(["netns", "add", name])
        guard status == 0 else { throw XCTSkip("cannot create a network namespace: \(output)") }
        created = true
    }

    static var ipPath: String {
        ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"].first {
            FileManager.default.isExecutableFile(atPath: $0)
        } ?? "/usr/sbin/ip"
    }

    /// Moves the calling thread into the namespace (setns affects only this thread).
    func enter() throws {
        original = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)
        guard original >= 0 else { throw XCTSkip("cannot open this thread's namespace: errno \(errno)") }
        let target = open("/run/netns/\(name)", O_RDONLY | O_CLOEXEC)
        guard target >= 0 else { throw XCTSkip("cannot open /run/netns/\(name): errno \(errno)") }
        defer { close(target) }
        guard aft_setns_net(target) == 0 else { throw XCTSkip("setns failed: errno \(errno)") }
    }

    /// Returns the calling thread to the namespace it came from.
    func leave() {
        guard original >= 0 else { return }
        XCTAssertEqual(aft_setns_net(original), 0, "setns back failed: errno \(errno)")
        close(original)
        original = -1
    }

    /// Runs `ip -n <name> ARGS...`; a failure is thrown as a test error.
    func ip(_ arguments: String...) throws {
        let (status, output) = Self.run(["-n", name] + arguments)
        guard status == 0 else {
            throw NSError(
                domain: "ip", code: Int(status),
                userInfo: [NSLocalizedDescriptionKey: "ip \(arguments.joined(separator: " ")): \(output)"])
        }
    }

    /// Deletes the namespace (and with it the interfaces made inside it).
    func remove() {
        leave()
        guard created else { return }
        let (status, output) = Self.run(["netns", "del", name])
        XCTAssertEqual(status, 0, "ip netns del \(name): \(output)")
        created = false
        let empty = (try? FileManager.default.contentsOfDirectory(atPath: "/run/netns"))?.isEmpty ?? false
        if !runDirWasMounted && Self.mounted(at: "/run/netns") && empty {
            XCTAssertEqual(umount("/run/netns"), 0, "umount /run/netns: errno \(errno)")
        }
    }

    /// Whether something is mounted at `path` (a bind mount of the same file system included).
    static func mounted(at path: String) -> Bool {
        guard let table = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return false }
        return table.split(separator: "\n").contains { line in
            let fields = line.split(separator: " ")
            return fields.count > 4 && fields[4] == path
        }
    }

    private static func run(_ arguments: [String]) -> (Int32, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: ipPath)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        do {
            try process.run()
        } catch {
            return (-1, "\(error)")
        }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}
