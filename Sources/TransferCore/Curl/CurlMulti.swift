import CCurl
import CUV
import Foundation

/// libcurl's multi *socket* API driven by the daemon's libuv loop (the pattern of curl's
/// `docs/examples/multi-uv.c`): a `uv_poll_t` per curl socket, a `uv_timer_t` for curl's timeout,
/// and `curl_multi_info_read` drained after every `socket_action`. A handle added is started
/// within the same pass of the loop (``add(_:)``), not on curl's timer. Loop-thread only.
public final class CurlMulti {
    /// The `CURLM*`.
    let multi: UnsafeMutableRawPointer
    private let loop: EventLoop
    private let timer: UnsafeMutablePointer<uv_timer_t>
    /// Starts handles added outside curl's events once the pass's other callbacks have run
    /// (``add(_:)``); unarmed otherwise, so it never keeps the loop alive.
    private var startAdded: LoopCheck!
    /// Whether handles were added since curl last ran its timeouts.
    private var startPending = false
    /// Whether ``action(_:_:)`` is running: a handle added then is started by its last round.
    private var acting = false
    /// Stopped poll handles of sockets curl no longer watches, by descriptor: a connection back in
    /// curl's cache is removed after every transfer and added again by the next one on it, and
    /// reusing its handle saves a `uv_poll_init` (an ioctl and two epoll probes) and a close, six
    /// system calls a small file. A descriptor curl closed and the kernel gave to a new socket of
    /// curl's gets the handle again (libuv allows one handle per descriptor, and these are
    /// stopped); all are closed with the multi.
    private var idle: [curl_socket_t: SocketWatch] = [:]
    /// The poll handles libcurl watches now, by descriptor (``idle`` holds the parked ones).
    private var active: [curl_socket_t: SocketWatch] = [:]

    /// One curl socket's poll handle. Retained by `curl_multi_assign` in the socket callback and
    /// released in its `CURL_POLL_REMOVE` branch (the one place), which parks it in ``idle``; the
    /// poll handle's memory is freed in its close callback (``close()``).
    private final class SocketWatch {
        let fd: curl_socket_t
        let poll: UnsafeMutablePointer<uv_poll_t>
        unowned let owner: CurlMulti
        /// The libuv events libcurl wants now; 0 while the socket is parked (``idle``).
        var events: Int32 = 0
        /// Whether its poll handle was closed (libcurl closed the socket: ``socketClosing(_:)``).
        var closed = false
        init(fd: curl_socket_t, poll: UnsafeMutablePointer<uv_poll_t>, owner: CurlMulti) {
            self.fd = fd
            self.poll = poll
            self.owner = owner
        }
    }

    /// libcurl's global set-up; once per process, before any handle (the daemon calls it at start).
    /// The character type is set to UTF-8 first: libcurl converts an international host name
    /// (`bücher.example`) with libidn2 from the locale's encoding, and in the "C" locale that the
    /// daemon otherwise runs in every such URL failed as malformed (`curl` itself sets the locale).
    /// Only `LC_CTYPE` changes: numbers and messages stay as they are.
    public static func globalInit() {
        if setlocale(LC_CTYPE, "C.UTF-8") == nil { _ = setlocale(LC_CTYPE, "C.utf8") }
        curl_global_init(Int(CURL_GLOBAL_DEFAULT))
    }

    /// Creates a multi handle wired to `loop`.
    public init(loop: EventLoop) throws {
        guard let m = curl_multi_init() else { throw UVError(-12, "curl_multi_init") }
        multi = m
        self.loop = loop
        timer = UnsafeMutablePointer<uv_timer_t>.allocate(capacity: 1)
        uv_timer_init(loop.raw, timer)
        timer.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        let me = Unmanaged.passUnretained(self).toOpaque()
        aft_multi_setopt_pointer(multi, CURLMOPT_SOCKETDATA, me)
        aft_multi_setopt_pointer(multi, CURLMOPT_TIMERDATA, me)
        aft_multi_setopt_socket_cb(multi) { easy, s, what, userp, socketp in
            guard let userp else { return 0 }
            if what != CURL_POLL_REMOVE, let easy, let owner = CurlEasy.owner(of: easy), !owner.engaged {
                owner.engaged = true
            }
            Unmanaged<CurlMulti>.fromOpaque(userp).takeUnretainedValue().socketEvent(s, what, socketp)
            return 0
        }
        aft_multi_setopt_timer_cb(multi) { _, timeoutMs, userp in
            guard let userp else { return 0 }
            Unmanaged<CurlMulti>.fromOpaque(userp).takeUnretainedValue().setTimeout(timeoutMs)
            return 0
        }
        startAdded = LoopCheck(loop: loop) { [unowned self] in
            if self.startPending { self.action(CURL_SOCKET_TIMEOUT, 0) }
        }
    }

    /// Adds an easy handle; the transfer starts on the loop. The caller keeps it alive until it
    /// is done (``CurlEasy/onDone``) or removed.
    ///
    /// It starts (its request is sent) before the loop next waits: at the end of the curl events
    /// being handled when it was added (a finished transfer's slot going to the next job), else
    /// once the pass's other callbacks have run. Never inside the caller, whose bookkeeping a
    /// transfer failing at once would overtake; and not on curl's own timer, which is clamped to
    /// 1 ms (INTEROP) and so made every small file wait a millisecond or two before its request.
    public func add(_ easy: CurlEasy) -> Bool {
        // Every socket of this multi's connections is closed through ``socketClosing(_:)``.
        aft_easy_setopt_closesocket_cb(easy.handle) { clientp, s in
            if let clientp { Unmanaged<CurlMulti>.fromOpaque(clientp).takeUnretainedValue().socketClosing(s) }
            return Glibc.close(s) == 0 ? 0 : 1
        }
        aft_easy_setopt_pointer(easy.handle, CURLOPT_CLOSESOCKETDATA, Unmanaged.passUnretained(self).toOpaque())
        guard curl_multi_add_handle(multi, easy.handle) == CURLM_OK else { return false }
        easy.isInMulti = true
        actSoon()
        return true
    }

    /// Has curl act (start added handles, hand released responses over) before the loop next
    /// waits: at the end of the curl events being handled, else once the pass's other callbacks
    /// have run (``startAdded``).
    private func actSoon() {
        if !startPending {
            startPending = true
            if !acting { startAdded.arm() }
        }
    }

    /// Adds an easy handle whose response is held (``CurlEasy/holdsResponse``) until
    /// ``release(_:)``: the request goes out now, and the answer is read and kept for later.
    public func addHolding(_ easy: CurlEasy) -> Bool {
        easy.holdsResponse = true
        easy.responseHeld = false
        return add(easy)
    }

    /// Hands a held response to its callbacks (``addHolding(_:)``): what was kept, then how the
    /// transfer ended (its ``CurlEasy/onDone``) or the rest as libcurl reads it — once the current
    /// curl events (or the pass's other callbacks) are over, never inside the caller, as for
    /// ``add(_:)``; and before libcurl hands this transfer anything more.
    public func release(_ easy: CurlEasy) {
        easy.holdsResponse = false
        guard easy.responseHeld || easy.heldEnd != nil || easy.hasKept else { return }
        releasing.append(easy)
        actSoon()
    }

    /// Held responses released, handed over at the start of the next round of ``action(_:_:)``.
    private var releasing: [CurlEasy] = []

    /// Hands a released response over (``release(_:)``).
    private func handOver(_ easy: CurlEasy) {
        switch easy.handOverHeld() {
        case .paused:
            return  // a body callback paused (a rate limit): ``unpause(_:)`` goes on
        case .aborted:
            easy.responseHeld = false
            easy.heldEnd = nil
            if easy.isInMulti {
                finish(easy.handle, CURLE_WRITE_ERROR)
            } else {
                tell(easy, CURLE_WRITE_ERROR)
            }
            return
        case .done:
            break
        }
        if let end = easy.heldEnd {
            easy.heldEnd = nil
            withExtendedLifetime(easy) { easy.onDone?(end) }
        } else if easy.responseHeld {
            easy.responseHeld = false
            unpause(easy)  // only while still in the multi (not removed since, by a stop)
        }
    }

    /// Removes an easy handle (aborting it if running); a held response is dropped. Never call
    /// from inside a curl callback.
    public func remove(_ easy: CurlEasy) {
        curl_multi_remove_handle(multi, easy.handle)
        easy.isInMulti = false
        easy.dropHeld()
    }

    /// Resumes a transfer that its body callback paused. libcurl hands the bytes it held to the
    /// callback inside `curl_easy_pause`; when the callback ends the transfer there (a range that
    /// reached its end, a write that failed), libcurl 7.88 drops that end: the transfer is neither
    /// finished nor polled again, and sat until a stall timer found it. It is finished here as
    /// ``drain()`` finishes one: taken out of the multi, its ``CurlEasy/onDone`` called with the
    /// error. Only then: `curl_easy_pause` also fails, harmlessly, on a transfer that has no
    /// connection at that moment (43, a bad argument), which must go on. Never call from inside a
    /// curl callback.
    public func unpause(_ easy: CurlEasy) {
        if easy.hasKept {
            handOver(easy)  // a hand-over a callback paused goes on first
            return
        }
        guard easy.isInMulti else { return }
        let (code, ended) = easy.unpause()
        guard ended else { return }
        finish(easy.handle, code == CURLE_OK ? CURLE_WRITE_ERROR : code)
    }

    // MARK: - curl → libuv

    /// libcurl is about to close socket `s` (its `CURLOPT_CLOSESOCKETFUNCTION`, called after the
    /// socket callback's `CURL_POLL_REMOVE`): its poll handle, parked or not, is closed now, while
    /// the descriptor is still libcurl's. Closed later — parked handles were closed with the
    /// multi — libuv takes the descriptor number out of its epoll set, and by then the kernel may
    /// have given that number to another handle: an RPC client's socket was dropped from the set,
    /// so a stopping daemon's answer to it stalled, and libuv aborted on its next change to that
    /// socket (found by an outside audit).
    private func socketClosing(_ s: curl_socket_t) {
        for watch in [idle.removeValue(forKey: s), active.removeValue(forKey: s)].compactMap({ $0 }) {
            watch.closed = true
            closeAndFree(watch.poll)
        }
    }

    private func socketEvent(_ s: curl_socket_t, _ what: Int32, _ socketp: UnsafeMutableRawPointer?) {
        if what == CURL_POLL_REMOVE {
            if let socketp {
                let watch = Unmanaged<SocketWatch>.fromOpaque(socketp).takeRetainedValue()
                curl_multi_assign(multi, s, nil)
                guard !watch.closed else { return }
                if active[s] === watch { active[s] = nil }
                uv_poll_stop(watch.poll)
                watch.events = 0
                if let old = idle.updateValue(watch, forKey: s), old !== watch {
                    old.closed = true
                    closeAndFree(old.poll)
                }
            }
            return
        }
        var assigned = socketp.map { Unmanaged<SocketWatch>.fromOpaque($0) }
        if let closed = assigned, closed.takeUnretainedValue().closed {
            // Its socket was closed (``socketClosing(_:)``) and the number is a new socket's:
            // never started again (its handle is closing); the new socket gets a handle of its own.
            closed.release()
            assigned = nil
        }
        let watch: SocketWatch
        if let assigned {
            watch = assigned.takeUnretainedValue()
        } else if let parked = idle.removeValue(forKey: s) {
            watch = parked
            curl_multi_assign(multi, s, Unmanaged.passRetained(watch).toOpaque())
        } else {
            let poll = UnsafeMutablePointer<uv_poll_t>.allocate(capacity: 1)
            if uv_poll_init_socket(loop.raw, poll, s) != 0 {
                poll.deallocate()
                return
            }
            watch = SocketWatch(fd: s, poll: poll, owner: self)
            let opaque = Unmanaged.passRetained(watch).toOpaque()
            poll.pointee.data = opaque
            curl_multi_assign(multi, s, opaque)
        }
        active[s] = watch
        var events: Int32 = 0
        if what == CURL_POLL_IN || what == CURL_POLL_INOUT { events |= Int32(UV_READABLE.rawValue) }
        if what == CURL_POLL_OUT || what == CURL_POLL_INOUT { events |= Int32(UV_WRITABLE.rawValue) }
        watch.events = events
        uv_poll_start(watch.poll, events, Self.polled)
    }

    /// libuv's poll callback: the socket's events to libcurl. An error on the socket (`POLLERR`:
    /// a kept-alive connection the server reset as it was reused) is handed over as readable and
    /// writable, so that libcurl meets the error in its own `recv`/`send` and takes its own way
    /// out — for a reused connection that died before an answer, the request again on a new one,
    /// as curl does. (As `CURL_CSELECT_ERR` it failed the transfer with "select/poll returned
    /// error", and with `--retries 0` the job, though the server never saw the request.) libuv
    /// stops a poll that reported an error: it is started again if libcurl still wants the socket.
    private static let polled: uv_poll_cb = { handle, status, events in
        guard let handle, let data = handle.pointee.data else { return }
        let watch = Unmanaged<SocketWatch>.fromOpaque(data).takeUnretainedValue()
        var flags: Int32 = 0
        if status < 0 { flags = CURL_CSELECT_IN | CURL_CSELECT_OUT }
        if events & Int32(UV_READABLE.rawValue) != 0 { flags |= CURL_CSELECT_IN }
        if events & Int32(UV_WRITABLE.rawValue) != 0 { flags |= CURL_CSELECT_OUT }
        // libcurl may park or release the watch inside socket_action: this reference keeps it.
        watch.owner.action(watch.fd, flags)
        if status < 0, watch.events != 0, !watch.closed { uv_poll_start(watch.poll, watch.events, CurlMulti.polled) }
    }

    private func setTimeout(_ ms: Int) {
        if ms < 0 {
            uv_timer_stop(timer)
            return
        }
        // A 0 ms timer stalls libuv's other timers (INTEROP): clamp to 1 ms, never act inline.
        uv_timer_start(
            timer,
            { t in
                guard let t, let data = t.pointee.data else { return }
                Unmanaged<CurlMulti>.fromOpaque(data).takeUnretainedValue().action(CURL_SOCKET_TIMEOUT, 0)
            }, UInt64(max(ms, 1)), 0)
    }

    /// Hands curl one event, then starts the handles added meanwhile (the next jobs of the
    /// transfers that just ended) until none is left. Called only from the loop's callbacks (a
    /// poll, the timer, the check), never from inside curl or ``drain()``.
    private func action(_ fd: curl_socket_t, _ flags: Int32) {
        acting = true
        defer { acting = false }
        var running: Int32 = 0
        var (fd, flags) = (fd, flags)
        repeat {
            if fd == CURL_SOCKET_TIMEOUT { startPending = false }
            while !releasing.isEmpty { handOver(releasing.removeFirst()) }
            curl_multi_socket_action(multi, fd, flags, &running)
            drain()
            (fd, flags) = (CURL_SOCKET_TIMEOUT, 0)
        } while startPending
    }

    /// Reads finished transfers, removes each from the multi and calls its ``CurlEasy/onDone``
    /// (the handle is found through `CURLOPT_PRIVATE` and kept alive for the call).
    private func drain() {
        var pending: Int32 = 0
        var finished: [(UnsafeMutableRawPointer, CURLcode)] = []
        while let msg = curl_multi_info_read(multi, &pending) {
            if aft_msg_is_done(msg) != 0, let easy = aft_msg_easy(msg) {
                finished.append((easy, aft_msg_result(msg)))
            }
        }
        for (handle, code) in finished { finish(handle, code) }
    }

    /// Takes a finished transfer out of the multi and calls its ``CurlEasy/onDone``.
    private func finish(_ handle: UnsafeMutableRawPointer, _ code: CURLcode) {
        curl_multi_remove_handle(multi, handle)
        guard let easy = CurlEasy.owner(of: handle) else { return }
        easy.isInMulti = false
        if easy.holdsResponse {
            easy.heldEnd = .some(error(code, easy))  // told when released
            return
        }
        tell(easy, code)
    }

    /// Calls a finished transfer's ``CurlEasy/onDone`` with libcurl's result.
    private func tell(_ easy: CurlEasy, _ code: CURLcode) {
        let error = error(code, easy)
        withExtendedLifetime(easy) { easy.onDone?(error) }
    }

    /// libcurl's result as the job's error (``CurlErrorClassifier``), nil for none.
    private func error(_ code: CURLcode, _ easy: CurlEasy) -> TransferError? {
        code == CURLE_OK
            ? nil
            : CurlErrorClassifier.error(
                curlCode: Int32(code.rawValue), message: easy.message(for: code),
                reusedConnection: easy.reusedConnection)
    }

    /// Closes the multi (after every easy handle was removed): libcurl closes its cached
    /// connections, whose poll handles its socket callback frees, then the timer is closed. The
    /// loop can then end by itself (a daemon run in-process returns cleanly).
    public func close() {
        guard !closed else { return }
        closed = true
        // libcurl closes its cached connections here, each through ``socketClosing(_:)``, which
        // closes its poll handle while the descriptor is still libcurl's.
        curl_multi_cleanup(multi)
        // Handles left parked are of sockets libcurl closed without its close callback (the
        // threaded resolver's socket pair, say): closing one takes its descriptor number out of
        // libuv's epoll set, which is harmless only while no one holds that number; held by
        // another handle now (an RPC client's: its answer stalled, and libuv aborted on its next
        // change), the stopped handle is left as it is (it keeps the loop from nothing).
        for watch in idle.values where fcntl(watch.fd, F_GETFD) == -1 && errno == EBADF {
            watch.closed = true
            closeAndFree(watch.poll)
        }
        idle = [:]
        active = [:]
        uv_timer_stop(timer)
        closeAndFree(timer)
        startAdded.close()
    }

    private var closed = false

    /// Caps the TCP connections to one host and port, idle kept-alive ones included (libcurl
    /// counts the connections in its cache too and closes an idle one to make room); transfers
    /// over the cap wait inside libcurl for a connection. HTTP/2 servers get several transfers
    /// multiplexed over one connection (``CurlRequestOptions/waitForMultiplexing``).
    public func limitConnectionsPerHost(_ n: Int) {
        aft_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, n)
        aft_multi_setopt_long(multi, CURLMOPT_PIPELINING, 2)  // CURLPIPE_MULTIPLEX (a macro)
    }

}
