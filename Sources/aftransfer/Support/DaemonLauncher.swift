import Foundation
import TransferBase

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// Connects the CLI to its daemon, starting `aftransferd` for the same home when none answers
/// (SPEC "The CLI": autostart).
enum DaemonLauncher {
    /// How long to wait for a started daemon's socket to answer, in seconds.
    static let defaultStartTimeout: Double = 5
    /// The daemon's executable name.
    static let daemonName = "aftransferd"

    /// glibc's `POSIX_SPAWN_SETSID` (`<spawn.h>`, 2.26+): hidden from Swift behind `__USE_GNU`.
    private static let posixSpawnSetsid: Int32 = 0x80

    /// Why the daemon could not be started.
    struct LaunchError: Error, Sendable, CustomStringConvertible {
        /// A message for people.
        var message: String
        /// A message for people.
        var description: String { message }
    }

    /// Connects to the daemon of `paths`, starting it first if nothing answers and `autostart` is on.
    /// - Parameters:
    ///   - paths: the home and socket (``Paths/resolve(home:socket:environment:)``).
    ///   - autostart: whether to start `aftransferd` when no daemon answers.
    ///   - timeout: how long to wait for a started daemon, ``defaultStartTimeout`` by default.
    /// - Throws: ``ClientError/unreachable(path:reason:)`` when nothing answers and autostart is off;
    ///   ``LaunchError`` when the daemon cannot be started or does not answer in time.
    static func connect(
        paths: Paths, autostart: Bool, timeout: Double = DaemonLauncher.defaultStartTimeout
    ) throws -> RPCClient {
        do {
            return try RPCClient.connect(path: paths.socket)
        } catch let error as ClientError {
            guard autostart, case .unreachable = error else { throw error }
        }
        let pid = try spawn(paths: paths)
        return try awaitSocket(paths: paths, child: pid, timeout: timeout)
    }

    /// Starts `aftransferd --home HOME --socket SOCKET` detached from this process: a new session,
    /// stdin from /dev/null, stdout and stderr appended to `<home>/aftransferd.log`. Creates the home
    /// (0700) first.
    /// - Parameter paths: the home and socket to start the daemon for.
    /// - Returns: the daemon's pid.
    static func spawn(paths: Paths) throws -> pid_t {
        guard let executable = locateDaemon() else {
            throw LaunchError(
                message: "cannot start the daemon: \(daemonName) is neither next to this program nor on PATH")
        }
        try createHome(paths.home)
        closeInheritedDescriptorsOnExec()

        var actions = posix_spawn_file_actions_t()
        var attributes = posix_spawnattr_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawnattr_init(&attributes)
        defer {
            posix_spawn_file_actions_destroy(&actions)
            posix_spawnattr_destroy(&attributes)
        }
        // The log is opened here, not by the spawn: a home the daemon could not write to is then
        // reported as the log it could not open, not as a daemon that "cannot start".
        let log = open(paths.log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard log >= 0 else {
            throw LaunchError(message: "cannot open the daemon's log \(paths.log): \(String(cString: strerror(errno)))")
        }
        defer { _ = close(log) }
        fchmod(log, 0o600)  // a log made by hand or by an older version keeps its mode through `open`
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, log, 1)
        posix_spawn_file_actions_adddup2(&actions, log, 2)
        // The daemon must not inherit this process's signal mask or ignored signals.
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(
            &attributes, Int16(posixSpawnSetsid | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let arguments = [executable, "--home", paths.home, "--socket", paths.socket]
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) }
        argv.append(nil)
        defer { for pointer in argv { free(pointer) } }

        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv, environ)
        guard result == 0 else {
            throw LaunchError(
                message: "cannot start \(executable): \(String(cString: strerror(result)))")
        }
        return pid
    }

    /// Where `aftransferd` is: next to this program (`/proc/self/exe`), else on `PATH`.
    /// - Returns: an executable path, or nil when there is none.
    static func locateDaemon() -> String? {
        var candidates: [String] = []
        if let me = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            candidates.append((me as NSString).deletingLastPathComponent + "/" + daemonName)
        }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        for directory in path.split(separator: ":") where !directory.isEmpty {
            candidates.append(String(directory) + "/" + daemonName)
        }
        return candidates.first { access($0, X_OK) == 0 }
    }

    /// Waits for a just-started daemon's socket to accept a connection.
    ///
    /// If our daemon exits early (say another CLI started one for the same home at the same time
    /// and it holds the lock), keeps waiting for the socket until the deadline: the other one may
    /// still come up.
    private static func awaitSocket(paths: Paths, child: pid_t, timeout: Double) throws -> RPCClient {
        let deadline = Date().addingTimeInterval(timeout)
        var childStatus: Int32?
        while true {
            if let client = try? RPCClient.connect(path: paths.socket) { return client }
            if childStatus == nil {
                var status: Int32 = 0
                if waitpid(child, &status, WNOHANG) == child { childStatus = status }
            }
            // Ours has exited and no other daemon holds the home's lock: none is coming up.
            if childStatus != nil && DaemonLock.isHeld(at: paths.lock) != true { break }
            if Date() >= deadline { break }
            usleep(50_000)
        }
        var message = "aftransferd did not answer on \(paths.socket) within \(formatSeconds(timeout))"
        if let status = childStatus {
            message = "aftransferd exited (\(describe(waitStatus: status))) without answering on \(paths.socket)"
        }
        throw LaunchError(message: message + "; see \(paths.log)")
    }

    /// Marks every descriptor above stderr close-on-exec, so that the daemon does not keep a pipe
    /// or file of whoever ran the CLI open for its whole life (a caller waiting for EOF would hang).
    private static func closeInheritedDescriptorsOnExec() {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") else { return }
        for name in names {
            guard let fd = Int32(name), fd > 2 else { continue }
            let flags = fcntl(fd, F_GETFD)
            if flags >= 0 { _ = fcntl(fd, F_SETFD, flags | FD_CLOEXEC) }
        }
    }

    private static func createHome(_ home: String) throws {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: home, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else { throw LaunchError(message: "\(home) is not a directory") }
            return
        }
        do {
            try FileManager.default.createDirectory(
                atPath: home, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw LaunchError(message: "cannot create \(home): \(error.localizedDescription)")
        }
    }

    private static func describe(waitStatus status: Int32) -> String {
        let signal = status & 0x7f
        if signal == 0 { return "status \((status >> 8) & 0xff)" }
        return "signal \(signal)"
    }

    private static func formatSeconds(_ seconds: Double) -> String {
        seconds == seconds.rounded() ? "\(Int(seconds)) s" : "\(seconds) s"
    }
}
