import CUV
import Foundation

/// One child process run off the loop with libuv's process API (`uv_spawn`): bytes written to its
/// stdin, its stdout and stderr read together (the first ``outputLimit`` bytes kept), a time bound
/// after which its whole process group is killed, and one completion with the exit status.
/// Loop-thread only.
///
/// The child runs in its own session (`UV_PROCESS_DETACHED`), so that the time bound can kill
/// what it started too. `handle.data` of the process holds the runner unretained; the owner keeps
/// the runner alive until its completion ran. The process handle's memory is freed in its close
/// callback (``closeAndFree(_:)``), closed from the exit callback, the one place.
public final class ProcessRunner {
    /// What a finished child left.
    public struct Outcome: Sendable, Equatable {
        /// The exit status; 128 + the signal when a signal ended it (as a shell reports it).
        public var exitStatus: Int
        /// The first ``ProcessRunner/outputLimit`` bytes of stdout and stderr, interleaved.
        public var output: [UInt8]
        /// Whether the time bound ran out and the child was killed.
        public var timedOut: Bool
    }

    /// How long output is still read after the child exited (a background grandchild may hold
    /// the pipe open), in milliseconds.
    static let drainGrace: UInt64 = 200

    private let loop: EventLoop
    private let process: UnsafeMutablePointer<uv_process_t>
    private var stdinPipe: PipeStream?
    private var output: PipeStream?
    private let outputLimit: Int
    private var collected: [UInt8] = []
    private let timer: LoopTimer
    private var exited: (status: Int64, signal: Int32)?
    private var outputEnded = false
    private var timedOut = false
    private var finished = false
    private var completion: ((Outcome) -> Void)?
    /// The child's pid (also its process group's id).
    public let pid: Int32
    /// When the time bound runs out (``EventLoop/nowMillis``).
    public let deadline: UInt64

    /// Starts `executable` with `arguments` (`arguments[0]` is the program's name).
    /// - Parameters:
    ///   - loop: the loop.
    ///   - executable: the program's path.
    ///   - arguments: argv, its name first.
    ///   - environment: the child's whole environment.
    ///   - input: written to the child's stdin, which is then closed.
    ///   - outputLimit: bytes of output kept.
    ///   - timeout: seconds before the child's process group is killed (SIGKILL).
    ///   - completion: runs once on the loop thread when the child exited and its output was read.
    /// - Throws: ``UVError`` when the child cannot be started.
    public init(
        loop: EventLoop, executable: String, arguments: [String], environment: [String: String], input: [UInt8],
        outputLimit: Int, timeout: Double, completion: @escaping (Outcome) -> Void
    ) throws {
        self.loop = loop
        self.outputLimit = outputLimit
        self.completion = completion
        deadline = loop.nowMillis + UInt64(max(0, timeout) * 1000)
        timer = LoopTimer(loop: loop)
        let processHandle = UnsafeMutablePointer<uv_process_t>.allocate(capacity: 1)
        processHandle.initialize(to: uv_process_t())
        process = processHandle

        // stdin: a pipe libuv creates; stdout and stderr: one pipe we create, shared by both.
        let stdinHandle = UnsafeMutablePointer<uv_pipe_t>.allocate(capacity: 1)
        guard uv_pipe_init(loop.raw, stdinHandle, 0) == 0 else {
            stdinHandle.deallocate()
            process.deallocate()
            throw UVError(-EINVAL, "uv_pipe_init")
        }
        let stdinStream = PipeStream(handle: stdinHandle)
        var fds: [uv_file] = [-1, -1]
        let piped = uv_pipe(&fds, 0, 0)
        if piped < 0 {
            stdinStream.close()
            process.deallocate()
            throw UVError(piped, "uv_pipe")
        }

        var stdio = [uv_stdio_container_t](repeating: uv_stdio_container_t(), count: 3)
        stdio[0].flags = uv_stdio_flags(rawValue: UV_CREATE_PIPE.rawValue | UV_READABLE_PIPE.rawValue)
        stdio[0].data.stream = UnsafeMutableRawPointer(stdinHandle).assumingMemoryBound(to: uv_stream_t.self)
        for i in 1...2 {
            stdio[i].flags = UV_INHERIT_FD
            stdio[i].data.fd = fds[1]
        }

        // C strings for argv and the environment, freed right after the spawn (the child has
        // its own copy by then).
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] =
            environment.sorted { $0.key < $1.key }.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for p in argv { free(p) }
            for p in envp { free(p) }
        }
        // Only the three standard streams reach the child: descriptors without FD_CLOEXEC
        // (libcurl's connections, any the daemon inherited) would otherwise outlive a hook that
        // leaves a process behind.
        _ = aft_cloexec_from(3)
        let rc: Int32 = executable.withCString { file in
            argv.withUnsafeBufferPointer { argvBuf in
                envp.withUnsafeBufferPointer { envBuf in
                    stdio.withUnsafeMutableBufferPointer { stdioBuf in
                        var options = uv_process_options_t()
                        options.file = file
                        options.args = UnsafeMutablePointer(mutating: argvBuf.baseAddress)
                        options.env = UnsafeMutablePointer(mutating: envBuf.baseAddress)
                        options.flags = UV_PROCESS_DETACHED.rawValue
                        options.stdio_count = 3
                        options.stdio = stdioBuf.baseAddress
                        options.exit_cb = { handle, status, signal in
                            guard let handle, let data = handle.pointee.data else { return }
                            Unmanaged<ProcessRunner>.fromOpaque(data).takeUnretainedValue()
                                .childExited(status: status, signal: signal)
                        }
                        return uv_spawn(loop.raw, processHandle, &options)
                    }
                }
            }
        }
        close(fds[1])
        if rc < 0 {
            close(fds[0])
            stdinStream.close()
            // A handle uv_spawn refused is still initialized: close it like any other.
            closeAndFree(process)
            throw UVError(rc, "spawn \(executable)")
        }
        pid = process.pointee.pid
        process.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        stdinPipe = stdinStream

        let outHandle = UnsafeMutablePointer<uv_pipe_t>.allocate(capacity: 1)
        if uv_pipe_init(loop.raw, outHandle, 0) == 0, uv_pipe_open(outHandle, fds[0]) == 0 {
            let out = PipeStream(handle: outHandle)
            output = out
            out.onRead = { [unowned self] bytes in
                let room = self.outputLimit - self.collected.count
                if room > 0 { self.collected += bytes.prefix(room) }
            }
            out.onEnd = { [unowned self] in
                self.outputEnded = true
                self.finishIfDone()
            }
            out.startReading()
        } else {
            outHandle.deallocate()
            close(fds[0])
            outputEnded = true
        }

        if input.isEmpty {
            stdinStream.close()
        } else {
            stdinStream.write(input) { [weak stdinStream] _ in stdinStream?.close() }
        }
        timer.start(after: deadline > loop.nowMillis ? deadline - loop.nowMillis : 0) { [unowned self] in
            guard self.exited == nil else { return }
            self.timedOut = true
            // The whole session's process group: the shell and what it started.
            uv_kill(-self.pid, SIGKILL)
            uv_kill(self.pid, SIGKILL)
        }
    }

    private func childExited(status: Int64, signal: Int32) {
        exited = (status, signal)
        process.pointee.data = nil
        closeAndFree(process)
        stdinPipe?.close()
        stdinPipe = nil
        if !outputEnded {
            timer.start(after: Self.drainGrace) { [unowned self] in
                self.outputEnded = true
                self.finishIfDone()
            }
        } else {
            timer.stop()
        }
        finishIfDone()
    }

    private func finishIfDone() {
        guard !finished, let exited, outputEnded else { return }
        finished = true
        timer.close()
        output?.close()
        output = nil
        let status = exited.signal != 0 ? 128 + Int(exited.signal) : Int(exited.status)
        let done = completion
        completion = nil
        done?(Outcome(exitStatus: status, output: collected, timedOut: timedOut))
    }

    /// Whether a process of the child's group is left (one the child started and left running).
    public var groupLingers: Bool { kill(-pid, 0) == 0 }

    /// Kills the child's process group now and gives up on it: the completion never runs and the
    /// handles are closed (the daemon stops). Returns the output read so far.
    public func abandon() -> [UInt8] {
        guard !finished else { return collected }
        finished = true
        completion = nil
        uv_kill(-pid, SIGKILL)
        uv_kill(pid, SIGKILL)
        if exited == nil {
            process.pointee.data = nil
            closeAndFree(process)
        }
        timer.close()
        stdinPipe?.close()
        stdinPipe = nil
        output?.close()
        output = nil
        return collected
    }

    deinit {
        timer.close()
        stdinPipe?.close()
        output?.close()
    }
}
