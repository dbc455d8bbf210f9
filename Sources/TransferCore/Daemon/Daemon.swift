import CCurl
import CUV
import Foundation

/// The composition root of `aftransferd`: home, lock, store, engine, RPC server, signals and the
/// network monitor on one libuv loop. Loop-thread only.
public final class Daemon {
    private let config: DaemonConfiguration
    private let loop: EventLoop
    private var engine: Engine?
    private var server: RPCServer?
    private var monitor: NetworkMonitor?
    private var signals: [SignalWatcher] = []
    private var lockFD: Int32 = -1
    private var stopping = false
    private let startedAt = Timestamp.now()
    private var exitTimer: LoopTimer?

    private init(config: DaemonConfiguration, loop: EventLoop) {
        self.config = config
        self.loop = loop
    }

    /// Runs the daemon until SIGTERM/SIGINT or `daemon.shutdown`. Returns the exit status.
    public static func run(_ configuration: DaemonConfiguration) -> Int32 {
        do {
            let loop = try EventLoop()
            let d = Daemon(config: configuration, loop: loop)
            return d.main()
        } catch {
            Log.plain("aftransferd: \(error)")
            return 1
        }
    }

    private func fail(_ message: String) -> Int32 {
        Log.plain("aftransferd: \(message)")
        return 1
    }

    private func main() -> Int32 {
        let userMask = umask(0o077)
        var cfg = config.engine
        cfg.fileMode = 0o666 & ~userMask
        cfg.directoryMode = 0o777 & ~userMask
        signal(SIGPIPE, SIG_IGN)
        curl_global_init(Int(CURL_GLOBAL_DEFAULT))
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
            let pid = n > 0 ? String(decoding: buf.prefix(n), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) : "?"
            return fail("another aftransferd (pid \(pid)) is already running for \(paths.home)")
        }
        ftruncate(lockFD, 0)
        let pidText = "\(getpid())\n"
        _ = pidText.withCString { write(lockFD, $0, strlen($0)) }

        let store: JobStore
        do {
            store = try JobStore(path: paths.database)
        } catch {
            return fail("cannot open the job database \(paths.database): \(error)")
        }
        for suffix in ["", "-wal", "-shm"] { chmod(paths.database + suffix, 0o600) }

        do {
            let engine = try Engine(loop: loop, store: store, config: cfg)
            self.engine = engine
            try engine.recover()
            let server = try RPCServer(loop: loop, path: paths.socket) { [unowned self] method, params, conn in
                self.handle(method, params, conn)
            }
            self.server = server
            engine.onEvent = { [unowned server] kind, job in
                server.broadcast(kind == .progress ? RPCMethod.progressEvent : RPCMethod.stateEvent, job: job)
            }
            if config.watchNetwork {
                do {
                    let m = try NetworkMonitor(loop: loop.raw) { [unowned engine] reachable in engine.setReachable(reachable) }
                    monitor = m
                    engine.setReachable(m.isReachable)
                } catch {
                    Log.info("network monitor unavailable (\(error)); treating the network as reachable")
                }
            }
            for sig in [SIGTERM, SIGINT] {
                signals.append(SignalWatcher(loop: loop, signal: sig) { [unowned self] s in
                    Log.info("signal \(s): stopping")
                    self.shutdown()
                })
            }
            engine.start()
        } catch {
            return fail("\(error)")
        }
        Log.info("aftransferd \(AFTransferVersion.string) pid \(getpid()) home \(paths.home) socket \(paths.socket)")
        loop.run()
        return 0
    }

    /// Stops accepting, checkpoints every running transfer and exits 0.
    private func shutdown() {
        guard !stopping else { return }
        stopping = true
        server?.close()
        engine?.shutdown()
        monitor?.close()
        unlink(config.paths.socket)
        Log.info("stopped")
        exit(0)
    }

    // MARK: - RPC methods

    private func decode<T: Decodable>(_ params: JSONValue?, as: T.Type) -> Result<T, RPCError> {
        do {
            return .success(try (params ?? .object([:])).decode(as: T.self))
        } catch {
            return .failure(RPCError(code: RPCErrorCode.invalidParams, message: "invalid params: \(Self.describe(error))",
                                     data: .object(["code": .string(TransferErrorCode.invalidRequest.rawValue)])))
        }
    }

    private static func describe(_ error: Error) -> String {
        switch error {
        case DecodingError.keyNotFound(let key, _): return "missing \(key.stringValue)"
        case DecodingError.typeMismatch(_, let ctx), DecodingError.valueNotFound(_, let ctx):
            return "wrong type for \(ctx.codingPath.map(\.stringValue).joined(separator: "."))"
        case DecodingError.dataCorrupted(let ctx):
            return "bad value for \(ctx.codingPath.map(\.stringValue).joined(separator: "."))"
        default: return "\(error)"
        }
    }

    private func encode<T: Encodable>(_ v: T) -> Result<JSONValue, RPCError> {
        do { return .success(try JSONValue(encoding: v)) } catch {
            return .failure(RPCError(code: RPCErrorCode.internalError, message: "cannot encode the result"))
        }
    }

    private struct CurlParams: Decodable { var id: Int64 }

    private func handle(_ method: String, _ params: JSONValue?, _ conn: RPCConnection) -> Result<JSONValue, RPCError> {
        let result = dispatch(method, params, conn)
        // Every change a request made is committed before its answer is sent.
        engine?.commit()
        return result
    }

    private struct AddManyParams: Decodable { var requests: [TransferRequest] }

    private func dispatch(_ method: String, _ params: JSONValue?, _ conn: RPCConnection) -> Result<JSONValue, RPCError> {
        guard let engine else { return .failure(RPCError(code: RPCErrorCode.internalError, message: "not ready")) }
        if stopping { return .failure(RPCError(code: RPCErrorCode.shuttingDown, message: "the daemon is shutting down")) }
        switch method {
        case RPCMethod.add:
            return decode(params, as: TransferRequest.self).flatMap { req in
                do { return encode(try engine.add(req)) } catch let e as RPCError { return .failure(e) } catch let e as TransferError {
                    return .failure(RPCError.refusedInput(e.code, e.message))
                } catch {
                    return .failure(RPCError(code: RPCErrorCode.internalError, message: "\(error)"))
                }
            }
        case RPCMethod.list:
            return decode(params, as: ListParams.self).flatMap { p in
                encode(engine.jobs(state: p.state, after: nil, limit: Int.max))
            }
        case "transfer.addMany":
            return decode(params, as: AddManyParams.self).flatMap { p in
                do {
                    return encode(["jobs": try engine.addMany(p.requests)])
                } catch let e as BatchRefusal {
                    return .failure(RPCError(code: RPCErrorCode.invalidParams, message: "request \(e.index): \(e.error.message)",
                        data: .object(["code": .string(e.error.code.rawValue), "index": .int(Int64(e.index))])))
                } catch let e as RPCError { return .failure(e) } catch {
                    return .failure(RPCError(code: RPCErrorCode.internalError, message: "\(error)"))
                }
            }
        case RPCMethod.get:
            return decode(params, as: GetParams.self).flatMap { p in
                guard let job = engine.job(p.id) else {
                    return .failure(RPCError(code: RPCErrorCode.notFound, message: "job \(p.id) does not exist"))
                }
                return encode(job)
            }
        case RPCMethod.pause, RPCMethod.resume, RPCMethod.cancel, RPCMethod.retry, RPCMethod.remove:
            return decode(params, as: ControlParams.self).flatMap { p in
                let action = ControlAction(rawValue: String(method.dropFirst("transfer.".count))) ?? .pause
                return encode(engine.control(action, ids: p.ids, deleteFiles: p.deleteFiles == true))
            }
        case "transfer.curl":
            return decode(params, as: CurlParams.self).flatMap { p in
                guard let command = engine.curlCommand(p.id) else {
                    return .failure(RPCError(code: RPCErrorCode.notFound, message: "job \(p.id) does not exist"))
                }
                return .success(.object(["command": .string(command)]))
            }
        case RPCMethod.daemonStatus:
            return encode(DaemonStatus(
                pid: getpid(), version: AFTransferVersion.string, home: config.paths.home, socket: config.paths.socket,
                network: engine.isReachable ? "reachable" : "unreachable", maxActive: config.engine.maxActive,
                jobs: Dictionary(uniqueKeysWithValues: engine.counts().map { ($0.key.rawValue, $0.value) }), startedAt: Timestamp.rfc3339(startedAt)))
        case RPCMethod.daemonShutdown:
            // Answer first, then stop on the next loop turn.
            let t = LoopTimer(loop: loop)
            exitTimer = t
            t.start(after: 20) { [unowned self] in self.shutdown() }
            return .success(.object([:]))
        case RPCMethod.subscribe:
            return decode(params, as: SubscribeParams.self).flatMap { p in
                conn.subscribed = true
                conn.subscribedIds = p.ids.map(Set.init)
                return .success(.object(["subscribed": .bool(true)]))
            }
        default:
            return .failure(RPCError(code: RPCErrorCode.methodNotFound, message: "method not found: \(method)"))
        }
    }
}
