import Foundation

/// The composition root of `aftransferd`: home, lock, store, engine, RPC server, signals and the
/// network monitor on one libuv loop. ``run(_:)`` returns when the daemon stops, so that a test can
/// boot one in-process. Loop-thread only.
public final class Daemon {
    /// How long `daemon.shutdown` waits before stopping, so that its answer is written first (ms).
    static let shutdownDelay: UInt64 = 20

    private let config: DaemonConfiguration
    private let loop: EventLoop
    private var engine: Engine?
    private var server: RPCServer?
    private var router: RPCRouter?
    private var monitor: NetworkMonitor?
    private var signals: [SignalWatcher] = []
    private var lockFD: Int32 = -1
    private var stopping = false
    private let startedAt = Timestamp.now()
    private var shutdownTimer: LoopTimer?
    /// The listening socket systemd passed (socket activation), or nil: then the daemon binds.
    private var inheritedListener: Int32?
    /// systemd's readiness socket (`Type=notify`), or nil.
    private var notifySocket: String?

    private init(config: DaemonConfiguration, loop: EventLoop) {
        self.config = config
        self.loop = loop
    }

    /// Runs the daemon until SIGTERM/SIGINT/SIGHUP or `daemon.shutdown`.
    /// - Returns: the exit status: 0 after a clean stop, 1 when it could not start.
    public static func run(_ configuration: DaemonConfiguration) -> Int32 {
        let userMask = umask(0o077)
        defer { umask(userMask) }
        do {
            let loop = try EventLoop()
            let d = Daemon(config: configuration, loop: loop)
            let status = d.main(userMask: userMask)
            // The database closed (its last checkpoint written) before the lock is free.
            d.engine?.store.closeConnection()
            d.releaseLock()
            return status
        } catch {
            Log.plain("aftransferd: \(error)")
            return 1
        }
    }

    /// Makes `path` 0600 when it is a regular file (through a link) with a looser mode that its
    /// owner may read and write: a stricter mode (000, 0400) or another kind of file is the user's,
    /// left as it is (and the database refused).
    private static func makePrivate(_ path: String) {
        var st = stat()
        guard stat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, st.st_mode & 0o077 != 0,
            st.st_mode & 0o600 == 0o600
        else { return }
        chmod(path, 0o600)
    }

    private func fail(_ message: String) -> Int32 {
        Log.plain("aftransferd: \(message)")
        return 1
    }

    private func releaseLock() {
        guard lockFD >= 0 else { return }
        close(lockFD)
        lockFD = -1
    }

    private func main(userMask: mode_t) -> Int32 {
        var cfg = config.engine
        cfg.fileMode = 0o666 & ~userMask
        cfg.directoryMode = 0o777 & ~userMask
        signal(SIGPIPE, SIG_IGN)
        // A file-size limit (`ulimit -f`) makes a write past it fail with EFBIG, which fails that
        // job (`io`); by default its signal would kill the daemon, and every restart again.
        // (libuv's children, the hooks, get every signal's default back.)
        signal(SIGXFSZ, SIG_IGN)
        // Caught until their watchers are set up below (``SignalHold``).
        SignalHold.catchStopSignals()
        defer { SignalHold.release() }
        Log.buffer()
        defer { Log.flush() }
        inheritedListener = SocketActivation.takeListener()
        notifySocket = SocketActivation.takeNotifySocket()
        CurlMulti.globalInit()
        let paths = config.paths

        do {
            try FileManager.default.createDirectory(atPath: paths.home, withIntermediateDirectories: true)
        } catch {
            return fail("cannot create home \(paths.home): \(error.localizedDescription)")
        }
        chmod(paths.home, 0o700)

        lockFD = open(paths.lock, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard lockFD >= 0 else { return fail("cannot open \(paths.lock): \(String(cString: strerror(errno)))") }
        if flock(lockFD, LOCK_EX | LOCK_NB) != 0 {
            var buf = [UInt8](repeating: 0, count: 32)
            let n = read(lockFD, &buf, 31)
            let pid =
                n > 0
                ? String(decoding: buf.prefix(n), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) : "?"
            return fail("another aftransferd (pid \(pid)) is already running for \(paths.home)")
        }
        // A lock file left by an older or hand-made home keeps its mode through `open`: made
        // private like the database (SPEC: the home's files are private).
        fchmod(lockFD, 0o600)
        ftruncate(lockFD, 0)
        let pidText = "\(getpid())\n"
        _ = pidText.withCString { write(lockFD, $0, strlen($0)) }

        // SQLite gives the WAL and shared-memory files the database's mode: a looser one is made
        // private first, so they are private too even when the database is refused below. Only a
        // regular file the owner may read and write: a stricter mode (000) or a directory in its
        // place is the user's, left as it is and refused (SPEC: never rewritten).
        Self.makePrivate(paths.database)
        // A database this user may read but not write (0400) would be opened read-only and
        // every change refused later: refused now, left as it is (an outside audit).
        if access(paths.database, F_OK) == 0 && access(paths.database, W_OK) != 0 {
            return fail(
                "cannot open the job database \(paths.database): cannot write it: \(String(cString: strerror(errno)))")
        }
        let store: JobStore
        do {
            store = try JobStore(path: paths.database)
        } catch {
            return fail("cannot open the job database \(paths.database): \(error)")
        }
        // The log and shared-memory files SQLite made, and the database if it was looser: private.
        for suffix in ["", "-wal", "-shm"] { Self.makePrivate(paths.database + suffix) }

        // Under socket activation, the socket systemd bound (whatever --socket says).
        let socketPath = inheritedListener.flatMap(SocketActivation.boundPath) ?? paths.socket
        do {
            let engine = try Engine(loop: loop, store: store, config: cfg)
            self.engine = engine
            do {
                try engine.recover()
            } catch {
                // Damage the first look did not find: the file is left as it is.
                shutdown()
                loop.run()
                return fail("cannot read the job database \(paths.database): \(error)")
            }
            let context = RPCContext(
                service: engine,
                info: RPCContext.DaemonInfo(
                    home: paths.home, socket: socketPath, maxActive: cfg.maxActive, startedAt: startedAt),
                requestShutdown: { [unowned self] in self.shutdownSoon() })
            let router = RPCRouter(context: context)
            self.router = router
            let server = try RPCServer(
                loop: loop, path: paths.socket, router: router, inheritedFD: inheritedListener)
            self.server = server
            engine.wantsEvents = { [unowned server] in server.hasSubscribers }
            engine.onEvents = { [unowned server] events in
                server.broadcast(
                    events.map { kind, job in
                        let method: RPCMethod
                        switch kind {
                        case .progress: method = .transferProgress
                        case .removed: method = .transferRemoved
                        case .stateChanged, .added: method = .transferState
                        }
                        return RPCServer.Event(method: method, job: job, added: kind == .added)
                    })
            }
            if config.watchNetwork {
                do {
                    let m = try NetworkMonitor(loop: loop.raw) { [unowned engine] reachable in
                        engine.setReachable(reachable)
                    }
                    monitor = m
                    engine.setReachable(m.isReachable)
                } catch {
                    Log.info("network monitor unavailable (\(error)); treating the network as reachable")
                }
            }
            // SIGHUP too (the terminal of a daemon started by hand closed): its default action
            // would end the daemon without the final checkpoint.
            for sig in [SIGTERM, SIGINT, SIGHUP] {
                signals.append(
                    SignalWatcher(loop: loop, signal: sig) { [unowned self] s in
                        Log.info("signal \(s): stopping")
                        self.shutdown()
                    })
            }
            if let sig = SignalHold.takeOver() {
                // Stopped before any job or owed hook starts (a hook started and killed at once
                // would count as run).
                Log.info("signal \(sig) during the start: stopping")
                shutdown()
                loop.run()
                return 0
            }
            engine.start()
        } catch {
            shutdown()
            loop.run()
            return fail("\(error)")
        }
        let how = inheritedListener != nil ? " (socket activation: fd \(SocketActivation.firstFD))" : ""
        Log.info(
            "aftransferd \(AFTransferVersion.string) pid \(getpid()) home \(paths.home) socket \(socketPath)\(how)")
        if let notifySocket { SocketActivation.notify("READY=1\nMAINPID=\(getpid())", socketPath: notifySocket) }
        loop.run()
        return 0
    }

    /// Stops after the answers of this loop pass are written (`daemon.shutdown`).
    private func shutdownSoon() {
        guard !stopping, shutdownTimer == nil else { return }
        router?.isStopping = true
        let t = LoopTimer(loop: loop)
        shutdownTimer = t
        t.start(after: Self.shutdownDelay) { [unowned self] in self.shutdown() }
    }

    /// Stops accepting, checkpoints every running transfer, closes the daemon's handles and stops
    /// the loop, so that ``run(_:)`` returns.
    private func shutdown() {
        guard !stopping else { return }
        stopping = true
        router?.isStopping = true
        server?.stopAccepting()
        // Gone from the path at once: a client finds no daemon here rather than one that no
        // longer accepts. An inherited socket belongs to systemd, which keeps listening on it; a
        // path this daemon never bound (it was refused: ``SocketPath``) is someone else's.
        if inheritedListener == nil, server != nil { unlink(config.paths.socket) }
        // The engine first: the jobs it queues again are told to subscribers before they go, and
        // commands that waited get -32004. Their clients have a moment to read it all.
        engine?.shutdown()
        if let server {
            server.close(flushingFor: RPCServer.flushBudget) { [unowned self] in self.finishShutdown() }
        } else {
            finishShutdown()
        }
    }

    /// Closes the rest of the daemon's handles and stops the loop, so that ``run(_:)`` returns.
    private func finishShutdown() {
        monitor?.close()
        for s in signals { s.close() }
        signals = []
        shutdownTimer?.close()
        if let notifySocket { SocketActivation.notify("STOPPING=1", socketPath: notifySocket) }
        Log.info("stopped")
        // The handles closed above are freed in this loop pass's close phase; uv_stop ends the
        // run after it, even if the engine's curl handles are still open.
        loop.stop()
    }
}
