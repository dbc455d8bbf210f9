import Foundation

/// Everything the daemon needs to run, from its flags.
public struct DaemonConfiguration: Sendable {
    /// Home and socket.
    public var paths: Paths
    /// Engine settings (`--max-active`, `--stall-timeout`, `--checkpoint-interval`).
    public var engine: EngineConfig
    /// Whether to watch netlink for reachability (off only for tests without netlink).
    public var watchNetwork = true

    /// A configuration for `paths` with `engine`'s settings.
    public init(paths: Paths, engine: EngineConfig = EngineConfig()) {
        self.paths = paths
        self.engine = engine
    }
}
