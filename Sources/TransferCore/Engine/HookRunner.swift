import Foundation

/// Runs `--on-end` hooks (SPEC "Living with it"): `/bin/sh -c CMD` with the job object on stdin
/// and `AFTRANSFER_JOB_ID`, `AFTRANSFER_STATE`, `AFTRANSFER_DESTINATION` in the environment,
/// at most ``timeout`` seconds, off the loop (``ProcessRunner``), one at a time per ending
/// (``Owner``).
///
/// The command is never built from job data: job data reaches the hook only through stdin and the
/// environment. Where util-linux's `setpriv` is present the shell is started through it with
/// `--pdeathsig TERM`, and ``groupKeeper`` then kills the hook's process group, so that a daemon
/// crash also ends the hook it interrupted, children included (it then runs again after the
/// restart, exactly once in all). A daemon that stops (SIGTERM, `daemon stop`) ends the hooks that
/// run itself (``stopAll()``) and records them as ended by the stop, 143: they do not run again,
/// so that a hook that stops the daemon cannot stop every later start too. What a hook's shell
/// leaves running in the background when it exits is killed at the hook's time bound (or at the
/// stop). Loop-thread only.
public final class HookRunner {
    /// The longest a hook may run, in seconds; then its process group is killed.
    public static let timeout = 60.0
    /// Bytes of a hook's output kept in the job's `hook` field.
    public static let outputLimit = 4096

    /// The kept output as text of at most ``outputLimit`` bytes of UTF-8: a character the limit
    /// cut in two is left out (not shown as U+FFFD), other bytes that are not UTF-8 become U+FFFD,
    /// and characters at the end go if those made the text longer than the limit.
    static func text(of output: [UInt8]) -> String {
        var bytes = output[...]
        // A last sequence the cut left incomplete: its lead byte and continuation bytes.
        if let lead = bytes.indices.reversed().prefix(4).first(where: { bytes[$0] & 0xC0 != 0x80 }) {
            let b = bytes[lead]
            let length = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1
            if bytes.endIndex - lead < length { bytes = bytes[..<lead] }
        }
        var text = String(decoding: bytes, as: UTF8.self)
        while text.utf8.count > outputLimit { text.removeLast() }
        return text
    }
    /// The shell that runs a hook.
    public static let shell = "/bin/sh"
    /// util-linux's `setpriv`, to tie the hook's life to the daemon's.
    public static let setpriv = "/usr/bin/setpriv"
    /// The shell script the hook's command runs under (the command is its `$0`, never part of the
    /// script): it runs the command in a shell of its own (stdin passed on through fd 3, since an
    /// asynchronous command's stdin would be /dev/null) and waits for it, exiting with its status;
    /// the daemon's death (`--pdeathsig TERM`) makes it kill the hook's whole process group, so a
    /// process the command started is ended too, not left to finish a side effect that the hook
    /// run again at the next start repeats. The group is the hook's own: it is started in a new
    /// session.
    static let groupKeeper = #"trap 'kill -KILL 0' TERM; exec 3<&0; /bin/sh -c "$0" 0<&3 3<&- & exec 3<&-; wait $!"#
    /// Hooks run at once at most; later ones wait their turn (a queue of 100,000 cancelled jobs
    /// must not fork 100,000 shells).
    public static let maxConcurrent = 4

    /// Whose hook it is: a job's current ending (its `hookPending`), or an ending a job left
    /// (``OwedHook``, by the record's id).
    public enum Owner: Hashable, Sendable {
        case job(Int64)
        case owed(Int64)
    }

    /// A hook waiting for a free slot.
    private struct Request {
        var owner: Owner
        /// The job whose ending it is, for the log.
        let job: Int64?
        let command: String
        let input: [UInt8]
        let environment: [String: String]
        let started: () -> Void
        let completion: (Owner, HookResult, Bool) -> Void
    }

    /// A running hook; its owner changes when the ending it runs for is left (``adopt(_:by:)``).
    private final class Slot {
        var owner: Owner
        let job: Int64?
        var runner: ProcessRunner?
        let completion: (Owner, HookResult, Bool) -> Void
        init(owner: Owner, job: Int64?, completion: @escaping (Owner, HookResult, Bool) -> Void) {
            self.owner = owner
            self.job = job
            self.completion = completion
        }
    }

    /// The exit status a hook that the daemon's stop ended is recorded with (128 + SIGTERM).
    public static let stoppedStatus = 128 + Int(SIGTERM)

    private let loop: EventLoop
    private var running: [Owner: Slot] = [:]
    private var waiting: [Request] = []
    private var waitingHead = 0
    /// Jobs whose hook was asked for again while one ran (a new ending): run once it finished.
    private var again: Set<Int64> = []
    /// Time bound of each hook (replaceable for tests).
    var timeout = HookRunner.timeout
    /// Whether the daemon stops: no hook starts any more.
    private var stopped = false
    /// Process groups that finished hooks left running, by group id: killed at the hook's bound.
    private var lingering: [Int32: LoopTimer] = [:]

    /// Creates the runner.
    public init(loop: EventLoop) { self.loop = loop }

    /// Whether a hook of `owner` runs now or waits for a slot.
    func isRunning(_ owner: Owner) -> Bool {
        running[owner] != nil || waiting[waitingHead...].contains { $0.owner == owner }
    }

    /// Hands the hook that runs (or waits) for a job's current ending to the record of that
    /// ending, which the job is leaving: it finishes as `to`'s. False if none runs or waits.
    func adopt(_ from: Owner, by to: Owner) -> Bool {
        if let slot = running.removeValue(forKey: from) {
            slot.owner = to
            running[to] = slot
            return true
        }
        if let i = waiting[waitingHead...].firstIndex(where: { $0.owner == from }) {
            waiting[i].owner = to
            return true
        }
        return false
    }

    /// Notes that the job's hook must be looked at again once the running one finished.
    func runAgainLater(_ id: Int64) { again.insert(id) }

    /// Takes back a "run again" note; true if there was one.
    func takeAgain(_ id: Int64) -> Bool { again.remove(id) != nil }

    /// Starts `command` for `owner`, or queues it while ``maxConcurrent`` hooks run.
    /// - Parameters:
    ///   - job: the job whose ending it is (its log lines name it).
    ///   - input: the job object as JSON (the hook's stdin).
    ///   - environment: the variables added to the daemon's environment.
    ///   - started: runs when the hook's process is started (at once, or when a slot frees).
    ///   - completion: runs on the loop thread, once, with the hook's owner then (another if it
    ///     was adopted meanwhile), the result and whether the time bound ran out.
    /// - Returns: false when the hook waits for a slot.
    @discardableResult
    func run(
        _ owner: Owner, job: Int64? = nil, command: String, input: [UInt8], environment: [String: String],
        started: @escaping () -> Void = {}, completion: @escaping (Owner, HookResult, Bool) -> Void
    ) -> Bool {
        let request = Request(
            owner: owner, job: job, command: command, input: input, environment: environment, started: started,
            completion: completion)
        // Left pending in the store: the next start runs it.
        if stopped { return false }
        if running.count >= Self.maxConcurrent {
            waiting.append(request)
            return false
        }
        start(request)
        return true
    }

    private func startWaiting() {
        while !stopped, running.count < Self.maxConcurrent, waitingHead < waiting.count {
            let next = waiting[waitingHead]
            waitingHead += 1
            start(next)
        }
        if waitingHead == waiting.count {
            waiting = []
            waitingHead = 0
        }
    }

    /// Kills process group `group` (what a finished hook left running) when its hook's time
    /// bound runs out.
    private func killAtBound(group: Int32, deadline: UInt64, job: Int64?) {
        let timer = LoopTimer(loop: loop)
        lingering[group]?.close()
        lingering[group] = timer
        let now = loop.nowMillis
        timer.start(after: deadline > now ? deadline - now : 0) { [weak self] in
            if kill(-group, 0) == 0 {
                Log.info(
                    "killing what a hook left running (process group \(group)) at its \(Int(HookRunner.timeout)) s bound",
                    job: job)
                kill(-group, SIGKILL)
            }
            self?.lingering.removeValue(forKey: group)?.close()
        }
    }

    /// The daemon stops: every running hook's process group is killed and the hook finishes
    /// (its completion runs now) with exit status ``stoppedStatus`` and the output it had written;
    /// hooks waiting for a slot do not start (they stay pending for the next start); what
    /// finished hooks left running is killed too.
    func stopAll() {
        stopped = true
        let slots = Array(running.values)
        running = [:]
        for slot in slots {
            let output = slot.runner?.abandon() ?? []
            slot.runner = nil
            let result = HookResult(exitStatus: Self.stoppedStatus, output: Self.text(of: output))
            slot.completion(slot.owner, result, false)
        }
        for (group, timer) in lingering {
            kill(-group, SIGKILL)
            timer.close()
        }
        lingering = [:]
        waiting = []
        waitingHead = 0
    }

    private func start(_ request: Request) {
        let (command, input, environment, completion) = (
            request.command, request.input, request.environment, request.completion
        )
        var env = ProcessInfo.processInfo.environment
        for (k, v) in environment { env[k] = v }
        let viaSetpriv = access(Self.setpriv, X_OK) == 0
        let executable = viaSetpriv ? Self.setpriv : Self.shell
        let shell = [Self.shell, "-c", Self.groupKeeper, command]
        let arguments = viaSetpriv ? ["setpriv", "--pdeathsig", "TERM", "--"] + shell : shell
        let slot = Slot(owner: request.owner, job: request.job, completion: completion)
        request.started()
        do {
            slot.runner = try ProcessRunner(
                loop: loop, executable: executable, arguments: arguments, environment: env, input: input,
                outputLimit: Self.outputLimit, timeout: timeout
            ) { [weak self] outcome in
                self?.running[slot.owner] = nil
                if let runner = slot.runner, !outcome.timedOut, runner.groupLingers {
                    self?.killAtBound(group: runner.pid, deadline: runner.deadline, job: slot.job)
                }
                slot.runner = nil
                let result = HookResult(exitStatus: outcome.exitStatus, output: Self.text(of: outcome.output))
                completion(slot.owner, result, outcome.timedOut)
                self?.startWaiting()
            }
            running[slot.owner] = slot
        } catch {
            completion(slot.owner, HookResult(exitStatus: 127, output: "cannot start the hook: \(error)"), false)
        }
    }
}
