import Foundation

/// `daemon.status`: result: ``DaemonStatus``.
struct DaemonStatusHandler: RPCHandler {
    func handle(_ request: RPCRequest) throws -> RPCReply {
        let context = request.context
        var jobs: [String: Int] = [:]
        for (state, count) in context.service.counts() { jobs[state.rawValue] = count }
        for state in TransferState.allCases where jobs[state.rawValue] == nil { jobs[state.rawValue] = 0 }
        return try .encoding(
            DaemonStatus(
                pid: getpid(), version: AFTransferVersion.string, home: context.info.home, socket: context.info.socket,
                network: context.service.isReachable ? "reachable" : "unreachable", maxActive: context.info.maxActive,
                jobs: jobs, startedAt: context.info.startedAt))
    }
}
