import Foundation

/// Where a home's files live (SPEC "Files and environment"). Shared by the daemon and the CLI so
/// that both resolve the same home and socket from the same flags and environment.
public struct Paths: Sendable, Equatable {
    /// The home directory (database, socket, lock, log).
    public var home: String
    /// The Unix socket the daemon listens on.
    public var socket: String

    /// The job database inside home.
    public var database: String { home + "/transfers.sqlite" }
    /// The lock file that keeps one daemon per home.
    public var lock: String { home + "/aftransferd.lock" }
    /// The daemon's log when started detached.
    public var log: String { home + "/aftransferd.log" }

    /// Why no daemon can listen on ``socket``, or nil: a Unix socket's path has at most 107 bytes
    /// (`sun_path`). Both programs refuse such a path as bad usage (exit 2), before anything is
    /// created or started.
    public var socketProblem: String? {
        let length = socket.utf8.count
        guard length > UnixSocketAddress.maximumLength else { return nil }
        return "the socket path \(socket) has \(length) bytes; a Unix socket path has at most "
            + "\(UnixSocketAddress.maximumLength) (use a shorter --home or --socket)"
    }

    /// Resolves home and socket: flag, then environment, then the XDG default.
    /// - Parameters:
    ///   - home: `--home DIR`, if given.
    ///   - socket: `--socket PATH`, if given.
    ///   - environment: the process environment (defaults to the real one).
    public static func resolve(
        home: String? = nil, socket: String? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> Paths {
        let resolvedHome: String
        if let home, !home.isEmpty {
            resolvedHome = absolute(home)
        } else if let env = environment["AFTRANSFER_HOME"], !env.isEmpty {
            resolvedHome = absolute(env)
        } else {
            let state: String
            if let xdg = environment["XDG_STATE_HOME"], !xdg.isEmpty {
                state = xdg
            } else {
                state = (environment["HOME"] ?? NSHomeDirectory()) + "/.local/state"
            }
            resolvedHome = absolute(state) + "/aftransfer"
        }
        let resolvedSocket: String
        if let socket, !socket.isEmpty {
            resolvedSocket = absolute(socket)
        } else if let env = environment["AFTRANSFER_SOCKET"], !env.isEmpty {
            resolvedSocket = absolute(env)
        } else {
            resolvedSocket = resolvedHome + "/aftransferd.sock"
        }
        return Paths(home: resolvedHome, socket: resolvedSocket)
    }

    /// The position (from 1) of the first command-line argument that is not valid UTF-8, or nil.
    /// Swift reads arguments with invalid bytes repaired to U+FFFD, so such a file name would name
    /// another file (with `--replace`, overwrite it): both programs refuse it instead.
    public static func firstArgumentNotUTF8() -> Int? {
        for i in 1..<Int(CommandLine.argc) {
            guard let raw = CommandLine.unsafeArgv[i] else { continue }
            if String(validatingCString: raw) == nil { return i }
        }
        return nil
    }

    /// Makes `path` absolute against the current directory.
    public static func absolute(_ path: String) -> String {
        let full = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        // `.` and doubled `/` taken out; `..` kept: after a symbolic link it means the parent of
        // the link's target, which only the file system knows (the daemon resolves destinations,
        // ``CanonicalPath``; the kernel every other path). Taken out as text it named another file.
        let parts = full.split(separator: "/").filter { $0 != "." }
        return "/" + parts.joined(separator: "/")
    }

    /// ``absolute(_:)`` for a file the daemon is to create (`-o`, `--response`, a list's file): a
    /// name that can only mean a directory (ending in `/`, `/.` or `/..`) keeps a trailing `/`,
    /// so that the daemon refuses it ("names a directory, not a file") where normalizing would
    /// have turned `new/` into a file called `new`.
    public static func absoluteFile(_ path: String) -> String {
        let resolved = absolute(path)
        let meansDirectory =
            path.hasSuffix("/") || path == "." || path == ".." || path.hasSuffix("/.") || path.hasSuffix("/..")
        return meansDirectory && !resolved.hasSuffix("/") ? resolved + "/" : resolved
    }
}
