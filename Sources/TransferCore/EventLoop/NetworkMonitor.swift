import CUV
import Glibc

/// Watches the network the way Alamofire's `NetworkReachabilityManager` does, for Linux: a netlink
/// route socket subscribed to link, address and route events, polled by libuv on the daemon's
/// loop. After each burst of events it re-evaluates reachability and reports flips.
///
/// Reachable (SPEC "Retries and the network"): some non-loopback interface is up with carrier
/// (`IFF_UP` and `IFF_RUNNING`) and holds an address that is neither loopback nor link-local
/// (IPv4 not 127/8 or 169.254/16; IPv6 not `::1` or `fe80::/10`).
///
/// While open, the monitor's poll handle keeps the loop alive, like any other watcher.
/// Call ``close()`` before the loop is closed; `deinit` closes a monitor that is still open, so the
/// loop must outlive an open monitor.
///
/// Loop-thread only.
public final class NetworkMonitor {
    /// How long a burst of netlink messages is collected before one evaluation (milliseconds).
    /// Kept short: the SPEC wants jobs restarted within 1 s of the network returning.
    public static let defaultDebounceMilliseconds: UInt64 = 50
    /// How soon an evaluation that failed (`getifaddrs` error) is tried again (milliseconds).
    public static let defaultRetryMilliseconds: UInt64 = 1000
    /// The netlink multicast groups the monitor listens to.
    public static let netlinkGroups: UInt32 = UInt32(
        RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR | RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_ROUTE)
    /// Size of the buffer each netlink datagram is read into; longer ones are truncated, which
    /// is harmless because the messages only trigger an evaluation and are never parsed.
    static let receiveBufferSize = 16 * 1024
    /// How many datagrams one readable event reads before yielding to the rest of the loop.
    static let maximumDatagramsPerWakeup = 256

    /// Whether the network was reachable at the last evaluation.
    public private(set) var isReachable: Bool

    private let onChange: (_ reachable: Bool) -> Void
    private let debounceMilliseconds: UInt64
    private var socketFD: Int32
    // Both handles are allocated here and freed only in the close callback of `closeAndFree`
    // (EventLoop.swift). `data` holds an unretained `self`: the owner keeps the monitor alive, and
    // `close()` (or `deinit`) stops the handles before `self` goes away.
    private var poll: UnsafeMutablePointer<uv_poll_t>?
    private var timer: UnsafeMutablePointer<uv_timer_t>?
    private var evaluationPending = false
    private let buffer: UnsafeMutableRawBufferPointer

    /// Opens the netlink socket and starts watching it on `loop`.
    /// - Parameters:
    ///   - loop: the daemon's loop; the monitor's callbacks run on it.
    ///   - debounceMilliseconds: how long a burst of events is collected before one evaluation;
    ///     defaults to ``defaultDebounceMilliseconds``.
    ///   - onChange: called on the loop thread when reachability flips, with the new value; never
    ///     called for an evaluation that agrees with ``isReachable``. It may call ``close()``.
    /// - Throws: ``UVError`` when the socket cannot be created, bound or polled (a failed system
    ///   call is reported as its negative errno, as libuv does).
    public init(
        loop: UnsafeMutablePointer<uv_loop_t>,
        debounceMilliseconds: UInt64 = NetworkMonitor.defaultDebounceMilliseconds,
        onChange: @escaping (_ reachable: Bool) -> Void
    ) throws {
        self.onChange = onChange
        self.debounceMilliseconds = debounceMilliseconds
        self.buffer = .allocate(byteCount: Self.receiveBufferSize, alignment: 8)
        self.socketFD = -1
        // Evaluated before the socket exists; any change after this point shows up as a message.
        // A failed evaluation counts as reachable (see `currentlyReachable()`), and the first
        // event re-evaluates.
        self.isReachable = (try? Self.evaluate()) ?? true

        do {
            socketFD = try Self.openNetlinkSocket()
            try startHandles(loop: loop)
        } catch {
            close()
            throw error
        }
    }

    deinit {
        close()
        buffer.deallocate()
    }

    /// Stops watching: stops the poll and the debounce timer, closes the socket, and hands both
    /// handles to `uv_close` (they are freed in its callback). Safe to call more than once.
    public func close() {
        if let timer {
            uv_timer_stop(timer)
            closeAndFree(timer)
            self.timer = nil
        }
        if let poll {
            uv_poll_stop(poll)
            // uv_close forgets the descriptor synchronously, so closing it afterwards is safe.
            closeAndFree(poll)
            self.poll = nil
        }
        if socketFD >= 0 {
            _ = Glibc.close(socketFD)  // Nothing to do about a failed close of a read-only socket.
            socketFD = -1
        }
        evaluationPending = false
    }

    /// Evaluates reachability once, now, from the interfaces' flags and addresses.
    /// - Returns: whether the network is reachable; `true` when the interfaces cannot be read,
    ///   because reachability must never keep a request from being tried.
    public static func currentlyReachable() -> Bool {
        (try? evaluate()) ?? true
    }

    // MARK: - Setup

    private static func openNetlinkSocket() throws -> Int32 {
        let type = Int32(SOCK_RAW.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        let fd = socket(AF_NETLINK, type, NETLINK_ROUTE)
        guard fd >= 0 else { throw UVError(-errno, "socket(AF_NETLINK)") }

        var address = sockaddr_nl()
        address.nl_family = sa_family_t(AF_NETLINK)
        address.nl_pid = 0  // Let the kernel pick a unique port id.
        address.nl_groups = netlinkGroups
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_nl>.size))
            }
        }
        guard bound == 0 else {
            let code = errno
            _ = Glibc.close(fd)
            throw UVError(-code, "bind(netlink)")
        }
        return fd
    }

    private func startHandles(loop: UnsafeMutablePointer<uv_loop_t>) throws {
        let context = Unmanaged.passUnretained(self).toOpaque()

        let timer = UnsafeMutablePointer<uv_timer_t>.allocate(capacity: 1)
        let timerStatus = uv_timer_init(loop, timer)
        guard timerStatus == 0 else {
            // Never initialised, so never closed: free it here instead of in a close callback.
            timer.deallocate()
            throw UVError(timerStatus, "uv_timer_init")
        }
        timer.pointee.data = context
        self.timer = timer

        let poll = UnsafeMutablePointer<uv_poll_t>.allocate(capacity: 1)
        let pollStatus = uv_poll_init_socket(loop, poll, socketFD)
        guard pollStatus == 0 else {
            poll.deallocate()
            throw UVError(pollStatus, "uv_poll_init_socket")
        }
        poll.pointee.data = context
        self.poll = poll

        let started = uv_poll_start(poll, Int32(UV_READABLE.rawValue), Self.pollCallback)
        try UVError.check(started, "uv_poll_start")
    }

    // MARK: - Events

    private static let pollCallback: uv_poll_cb = { handle, _, _ in
        // An error status is treated like readability: the drain below sees the error itself,
        // and an evaluation is cheap.
        guard let data = handle?.pointee.data else { return }
        Unmanaged<NetworkMonitor>.fromOpaque(data).takeUnretainedValue().socketReadable()
    }

    private static let timerCallback: uv_timer_cb = { handle in
        guard let data = handle?.pointee.data else { return }
        Unmanaged<NetworkMonitor>.fromOpaque(data).takeUnretainedValue().reevaluate()
    }

    private func socketReadable() {
        drain()
        schedule(after: debounceMilliseconds)
    }

    /// Reads every queued datagram. The content does not matter: any link, address or route
    /// message means "evaluate again". `ENOBUFS` means the kernel dropped messages because the
    /// queue overflowed; the evaluation that follows covers whatever they said.
    /// At most ``maximumDatagramsPerWakeup`` are read at once, so a flood of route changes cannot
    /// hold the loop; the poll is level-triggered and calls again for the rest.
    private func drain() {
        var budget = Self.maximumDatagramsPerWakeup
        while socketFD >= 0, budget > 0 {
            budget -= 1
            let received = recv(socketFD, buffer.baseAddress, buffer.count, 0)
            if received >= 0 { continue }
            switch errno {
            case EINTR, ENOBUFS:
                continue
            default:
                // EAGAIN/EWOULDBLOCK: drained. Anything else (not expected on a netlink socket)
                // also ends the drain; the next readable event will try again.
                return
            }
        }
    }

    private func schedule(after milliseconds: UInt64) {
        guard let timer, !evaluationPending else { return }
        // Not restarted by later messages of the same burst, so a steady stream of events cannot
        // postpone the evaluation past the debounce delay.
        // uv_timer_start fails only for a closing handle, and close() forgets the timer first.
        if uv_timer_start(timer, Self.timerCallback, milliseconds, 0) == 0 {
            evaluationPending = true
        }
    }

    private func reevaluate() {
        evaluationPending = false
        let reachable: Bool
        do {
            reachable = try Self.evaluate()
        } catch {
            // The interfaces could not be read: keep the last answer and look again soon.
            schedule(after: Self.defaultRetryMilliseconds)
            return
        }
        guard reachable != isReachable else { return }
        isReachable = reachable
        // Last statement: the callback may close the monitor.
        onChange(reachable)
    }

    // MARK: - Evaluation

    /// Reads the interfaces with `getifaddrs` and applies the SPEC's rule.
    static func evaluate() throws -> Bool {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0 else { throw UVError(-errno, "getifaddrs") }
        defer { freeifaddrs(list) }

        var entry = list
        while let current = entry {
            defer { entry = current.pointee.ifa_next }
            let flags = current.pointee.ifa_flags
            let upWithCarrier = UInt32(IFF_UP) | UInt32(IFF_RUNNING)
            guard flags & upWithCarrier == upWithCarrier, flags & UInt32(IFF_LOOPBACK) == 0,
                let address = current.pointee.ifa_addr, isRoutable(address)
            else { continue }
            return true
        }
        return false
    }

    /// Whether an interface address counts: IPv4 or IPv6, not unspecified, loopback or link-local.
    static func isRoutable(_ address: UnsafeMutablePointer<sockaddr>) -> Bool {
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            let host = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                UInt32(bigEndian: $0.pointee.sin_addr.s_addr)
            }
            return isRoutableIPv4(host)
        case AF_INET6:
            let bytes = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                withUnsafeBytes(of: $0.pointee.sin6_addr) { Array($0) }
            }
            return isRoutableIPv6(bytes)
        default:
            return false  // AF_PACKET entries carry link-layer addresses, not network ones.
        }
    }

    /// IPv4 in host byte order: not 0.0.0.0, not 127/8, not 169.254/16.
    static func isRoutableIPv4(_ host: UInt32) -> Bool {
        if host == 0 { return false }
        if host >> 24 == 127 { return false }
        if host >> 16 == 0xA9FE { return false }
        return true
    }

    /// IPv6 as 16 bytes: not `::`, not `::1`, not `fe80::/10`.
    static func isRoutableIPv6(_ bytes: [UInt8]) -> Bool {
        guard bytes.count == 16 else { return false }
        if bytes[0] == 0xFE && bytes[1] & 0xC0 == 0x80 { return false }
        if bytes[0..<15].allSatisfy({ $0 == 0 }) && (bytes[15] == 0 || bytes[15] == 1) { return false }
        return true
    }
}
