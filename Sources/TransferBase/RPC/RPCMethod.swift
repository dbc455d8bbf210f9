/// The methods and notifications of the JSON-RPC API (`docs/rpc.md`). A case is its wire name in
/// camel case (`transfer.addMany` is ``transferAddMany``).
public enum RPCMethod: String, CaseIterable, Sendable {
    /// Queues one job; result: the job object.
    case transferAdd = "transfer.add"
    /// Queues a list of jobs in one transaction, in one message or in parts of a batch.
    case transferAddMany = "transfer.addMany"
    /// The job objects, in id order, streamed as one array.
    case transferList = "transfer.list"
    /// One job object.
    case transferGet = "transfer.get"
    /// Pauses jobs.
    case transferPause = "transfer.pause"
    /// Resumes paused jobs.
    case transferResume = "transfer.resume"
    /// Cancels jobs.
    case transferCancel = "transfer.cancel"
    /// Retries failed or cancelled jobs.
    case transferRetry = "transfer.retry"
    /// Removes jobs.
    case transferRemove = "transfer.remove"
    /// Gives a download a new URL (queued, paused, waiting or failed); result: the job object.
    case transferSetUrl = "transfer.setUrl"
    /// The ranges of a running segmented download: params `id`; result `{"segments": [...]}`.
    case transferSegments = "transfer.segments"
    /// A job's equivalent curl command, secrets redacted.
    case transferCurl = "transfer.curl"
    /// The daemon's status.
    case daemonStatus = "daemon.status"
    /// The daemon-wide bandwidth limits: params `download`, `upload`, `schedule` (each optional,
    /// as the `limit` options take them); result: the limits in force now.
    case daemonLimits = "daemon.limits"
    /// Stops the daemon as SIGTERM does.
    case daemonShutdown = "daemon.shutdown"
    /// Subscribes the connection to job notifications.
    case eventsSubscribe = "events.subscribe"
    /// Notification: a running job's progress (params: the job object).
    case transferProgress = "transfer.progress"
    /// Notification: a job changed state (params: the job object).
    case transferState = "transfer.state"
    /// Notification: a job was removed (params: its last object).
    case transferRemoved = "transfer.removed"
}

// MARK: - Transitional names
