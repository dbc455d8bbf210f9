import Foundation

/// fsyncs directories after renames into them, on libuv's pool, coalesced: every rename made
/// into a directory before its fsync starts is covered by that one fsync, and a request made
/// while one runs waits for the next. Loop-thread only.
public final class DirectorySyncer {
    private let loop: EventLoop
    private var inFlight: Set<String> = []
    private var waiting: [String: [(Bool) -> Void]] = [:]
    /// How many fsyncs ran (for tests and the log).
    public private(set) var syncCount = 0

    /// Creates a syncer on `loop`.
    public init(loop: EventLoop) { self.loop = loop }

    /// Makes every rename into `directory` made so far durable; `done(ok)` on the loop thread.
    public func sync(_ directory: String, _ done: @escaping (Bool) -> Void) {
        waiting[directory, default: []].append(done)
        if !inFlight.contains(directory) { start(directory) }
    }

    private func start(_ directory: String) {
        guard let batch = waiting.removeValue(forKey: directory), !batch.isEmpty else { return }
        inFlight.insert(directory)
        syncCount += 1
        WorkPool.run(loop, { Self.fsyncDirectory(directory) }) { rc in
            self.inFlight.remove(directory)
            for done in batch { done(rc == 0) }
            if self.waiting[directory] != nil { self.start(directory) }
        }
    }

    /// fsyncs a directory now, on the calling thread. Returns 0 or an errno.
    public static func fsyncDirectory(_ path: String) -> Int32 {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return errno }
        defer { close(fd) }
        return fsync(fd) == 0 ? 0 : errno
    }
}
