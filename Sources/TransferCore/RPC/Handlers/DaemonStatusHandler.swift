import Foundation

/// `daemon.status`: result: ``DaemonStatus`` (SPEC "Living with it": version, pid, uptime, home,
/// socket, network, limits, jobs, active, rate).
struct DaemonStatusHandler: RPCHandler {
    func handle(_ request: RPCRequest) throws -> RPCReply {
        try request.refuseUnknownMembers([])
        let context = request.context
        var jobs: [String: Int] = [:]
        for (state, count) in context.service.counts() { jobs[state.rawValue] = count }
        for state in TransferState.allCases where jobs[state.rawValue] == nil { jobs[state.rawValue] = 0 }
        let uptime = max(0, Timestamp.now() - context.info.startedAtSeconds)
        return try .encoding(
            DaemonStatus(
                pid: getpid(), version: AFTransferVersion.string, uptime: (uptime * 1000).rounded() / 1000,
                home: context.info.home, socket: context.info.socket,
                network: context.service.isReachable ? "reachable" : "unreachable",
                limits: context.service.currentLimits(), jobs: jobs, active: context.service.activeTransfers,
                rate: context.service.totalRate.rounded(), maxActive: context.info.maxActive,
                startedAt: context.info.startedAt))
    }
}
