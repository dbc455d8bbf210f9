import TransferBase

/// What shows followed jobs as they change: the progress bars (``ProgressRenderer``) and the
/// queue view (``QueueView``).
protocol JobsView: AnyObject {
    /// Redraws with the jobs' latest state (throttled unless `force`).
    func update(_ jobs: [JobSnapshot], gone: Set<Int64>, force: Bool)
    /// Draws the last state and leaves the cursor on a fresh line.
    func finish(_ jobs: [JobSnapshot], gone: Set<Int64>)
    /// Leaves the cursor on a fresh line (after an error or an interrupt).
    func abandon()
}

extension ProgressRenderer: JobsView {}
extension QueueView: JobsView {}
