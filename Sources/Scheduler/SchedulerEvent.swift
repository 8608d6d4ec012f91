/// One thing that happened, numbered.
///
/// Every subscriber sees the same numbers: they start at 1 and grow by one per event, so a
/// subscriber can tell that it missed nothing. The only gap is after a ``Kind/lagged(missed:)``
/// marker, which is followed by a fresh ``Kind/snapshot(_:)``.
public struct SchedulerEvent: Sendable, Codable {
    /// The event's number.
    public let seq: UInt64
    /// When it happened, on the scheduler's clock.
    public let time: SchedulerTime
    /// What happened.
    public let kind: Kind

    /// Creates an event.
    public init(seq: UInt64, time: SchedulerTime, kind: Kind) {
        self.seq = seq
        self.time = time
        self.kind = kind
    }

    /// What happened.
    public enum Kind: Sendable, Codable {
        // The two big payloads are boxed (`indirect`), so every event stays small to copy:
        // events are copied into each subscriber's buffer and out again.

        /// The present: sent first on every subscription and after a lag. Its `seq` is that of
        /// the last event it includes.
        indirect case snapshot(SchedulerSnapshot)
        /// This subscriber fell behind and `missed` events were dropped; a snapshot follows.
        case lagged(missed: Int)
        /// A job was submitted.
        indirect case submitted(JobInfo)
        /// A submission matched the key of job `existing`, which was returned instead.
        case coalesced(existing: JobID, key: String)
        /// An attempt started: it was handed to its worker. On a worker that may hold it before
        /// it runs (``WorkerDescriptor/holdsAttempts``: a remote worker's prefetch, a Slurm
        /// queue), `began` follows when it does.
        case started(JobID, attempt: Int, maxAttempts: Int, worker: WorkerID)
        /// An attempt that its worker held (see `started`) began to run.
        case began(JobID, attempt: Int)
        /// A running job reported progress (0...1).
        case progress(JobID, Double)
        /// A running job printed a line.
        case output(JobID, OutputLine)
        /// Where its worker placed a running job, in the worker's words, replacing what it said
        /// before: a Slurm job id, and Slurm's reason while the job waits there (`1234 Priority`).
        case placed(JobID, String)
        /// A job's main process ended and left `count` processes running in its process group;
        /// `stopped` says whether jobtop stopped them (SIGTERM, the grace period, SIGKILL) or left
        /// them running (``JobSpec/keepBackground``). Comes before the job's final event.
        case leftoverProcesses(JobID, count: Int, stopped: Bool)
        /// A running job is being stopped (SIGTERM sent; SIGKILL after the grace period).
        case stopping(JobID, StopReason)
        /// An attempt failed and another is due at `at`.
        case retryScheduled(JobID, failedAttempt: Int, reason: FailureReason, nextAttempt: Int, at: SchedulerTime)
        /// A job went back to the queue (a retry became due, its worker was lost, or a user
        /// retried it).
        case requeued(JobID, reason: RequeueReason)
        /// A job succeeded.
        case succeeded(JobID, attempts: Int)
        /// A job failed for good.
        case failed(JobID, reason: FailureReason, attempts: Int)
        /// A job was cancelled.
        case cancelled(JobID)
        /// A job's priority changed: a queued one moves in the queue; a running one keeps it for
        /// its next attempt (and a worker that holds it unbegun starts what it holds by it).
        case reprioritized(JobID, from: Int, to: Int)
        /// A job that was not running got a new shell command (`e` in the dashboard); its next
        /// attempt runs it.
        case edited(JobID, command: String)
        /// Dispatch was paused: running jobs go on, no new ones start.
        case paused
        /// Dispatch was resumed.
        case resumed
        /// The number of slots changed.
        case slotsChanged(local: Int, total: Int)
        /// A worker joined the pool.
        case workerJoined(WorkerDescriptor)
        /// A worker left the pool.
        case workerLeft(WorkerID, reason: WorkerLeaveReason)
        /// A worker's number of slots changed: a remote worker's prefetch depth, sized to its
        /// link (`WorkerListener`'s automatic prefetch). A `slotsChanged` follows.
        case workerResized(WorkerID, slots: Int)
        /// The scheduler began to shut down.
        case shuttingDown(ShutdownMode)
        /// A job of a batch that halts on failure failed for good: every other job of the batch
        /// is being cancelled (their `cancelled`/`stopping` events follow in the same step).
        case batchHalted(BatchID, failedJob: JobID)
        /// A sealed batch's last job ended.
        case batchSettled(BatchID)
        /// A job now waits for the dependencies it names (those not yet succeeded): its start
        /// time came, or a user or a retried dependency brought it back. A job submitted blocked
        /// says so in its `submitted` event instead.
        case blocked(JobID, waitingFor: [JobID])
        /// A blocked or scheduled job may start: it is queued.
        case released(JobID)
        /// A job waits until `at` before it may start (a job submitted so says so in its
        /// `submitted` event instead).
        case scheduled(JobID, at: SchedulerTime)
        /// A job will not run: a dependency failed for good, was cancelled or was skipped. Final,
        /// like `failed`; retrying the dependency brings it back (`blocked`).
        case skipped(JobID, reason: SkipReason)
        /// A group was made, or its limit or pause changed.
        case groupChanged(JobGroup)

        /// The event's name in logs: `submitted`, `retry`, `worker-joined`, ...
        public var name: String {
            switch self {
            case .snapshot: "snapshot"
            case .lagged: "lagged"
            case .submitted: "submitted"
            case .coalesced: "coalesced"
            case .started: "started"
            case .began: "began"
            case .progress: "progress"
            case .output: "output"
            case .placed: "placed"
            case .leftoverProcesses: "leftover"
            case .stopping: "stopping"
            case .retryScheduled: "retry"
            case .requeued: "requeued"
            case .succeeded: "succeeded"
            case .failed: "failed"
            case .cancelled: "cancelled"
            case .reprioritized: "reprioritized"
            case .edited: "edited"
            case .paused: "paused"
            case .resumed: "resumed"
            case .slotsChanged: "slots"
            case .workerJoined: "worker-joined"
            case .workerLeft: "worker-left"
            case .workerResized: "worker-slots"
            case .shuttingDown: "shutdown"
            case .batchHalted: "halted"
            case .batchSettled: "settled"
            case .blocked: "blocked"
            case .released: "released"
            case .scheduled: "scheduled"
            case .skipped: "skipped"
            case .groupChanged: "group"
            }
        }

        /// The job the event is about, if any.
        public var jobID: JobID? {
            switch self {
            case .submitted(let info): info.id
            case .coalesced(let id, _), .started(let id, _, _, _), .progress(let id, _), .output(let id, _), .placed(let id, _),
                 .leftoverProcesses(let id, _, _), .stopping(let id, _), .retryScheduled(let id, _, _, _, _), .requeued(let id, _),
                 .succeeded(let id, _), .failed(let id, _, _), .cancelled(let id), .reprioritized(let id, _, _), .edited(let id, _),
                 .blocked(let id, _), .released(let id), .scheduled(let id, _), .skipped(let id, _):
                id
            default: nil
            }
        }

        /// Whether this event ends its job for good.
        public var isFinal: Bool {
            switch self {
            case .succeeded, .failed, .cancelled, .skipped: true
            default: false
            }
        }
    }
}

/// Why a job went back to the queue. Data, not prose: a mirror of the events needs to know what
/// each means for the job's attempts.
public enum RequeueReason: Sendable, Equatable, Codable, CustomStringConvertible {
    /// Its retry delay ran out: the next attempt waits for a slot (attempts unchanged).
    case retryDue
    /// A user retried the failed, cancelled or skipped job: a fresh retry budget (attempts back
    /// to 0). A job with dependencies still to succeed goes to `blocked` instead (its
    /// ``SchedulerEvent/Kind/blocked(_:waitingFor:)`` follows at once).
    case retriedByUser
    /// Its worker went away mid-attempt: that attempt does not count (attempts one less).
    case workerLost(WorkerLeaveReason)
    /// Its worker held it behind a busy slot and gave it back unbegun for another worker's free
    /// slot: that attempt never ran and does not count (attempts one less).
    case withdrawn
    /// Its worker held it behind a busy slot and gave it back unbegun because the job was paused
    /// (its group, or everything): held there, it would have started when the slot freed. That
    /// attempt never ran and does not count (attempts one less).
    case withdrawnForPause
    /// Its worker held it behind a busy slot and gave it back unbegun because the scheduler is
    /// shutting down and keeping its queue (``ShutdownMode/graceful``,
    /// ``ShutdownMode/stopRunning``). That attempt never ran and does not count (attempts one
    /// less).
    case withdrawnForShutdown
    /// Its worker held it behind a busy slot and gave it back unbegun for a queued job of a
    /// higher priority, which takes its place there: held, it would have started first. That
    /// attempt never ran and does not count (attempts one less).
    case withdrawnForPriority
    /// Its attempt was stopped by a shutdown that keeps the queue (``ShutdownMode/stopRunning``):
    /// that attempt does not count (attempts one less), as one cut off by a lost worker.
    case stoppedForShutdown

    public var description: String {
        switch self {
        case .retryDue: "retry due"
        case .retriedByUser: "retried by user"
        case .workerLost(let why): "worker lost: \(why)"
        case .withdrawn: "withdrawn from a busy worker for a free slot"
        case .withdrawnForPause: "withdrawn unbegun from its worker: paused"
        case .withdrawnForShutdown: "withdrawn unbegun from its worker: the scheduler is stopping"
        case .withdrawnForPriority: "withdrawn unbegun from its worker for a job of higher priority"
        case .stoppedForShutdown: "stopped: the scheduler is stopping (the queue is kept)"
        }
    }
}

/// One line a job printed, or one piece of a line too long to hold.
///
/// The pieces of a job's output put back together, each `text` (or `bytes`) followed by its
/// ``ending``, are exactly the bytes the job wrote on that stream.
public struct OutputLine: Sendable, Equatable, Codable {
    /// Which stream it came from.
    public enum Stream: String, Sendable, Codable { case stdout, stderr }

    /// How a line ended in the job's output.
    public enum Ending: String, Sendable, Codable {
        /// `\n`.
        case newline
        /// `\r` alone (progress counters redraw a line this way).
        case carriageReturn
        /// `\r\n`.
        case carriageReturnNewline
        /// No line end: a piece of a longer line that follows in the next ``OutputLine``, or the
        /// last bytes of the output, written without a newline.
        case none

        /// The bytes of the ending.
        public var bytes: [UInt8] {
            switch self {
            case .newline: [0x0A]
            case .carriageReturn: [0x0D]
            case .carriageReturnNewline: [0x0D, 0x0A]
            case .none: []
            }
        }
    }

    /// The stream.
    public var stream: Stream
    /// The text, without its line end. Bytes that are not UTF-8 show as U+FFFD here.
    public var text: String
    /// How the line ended.
    public var ending: Ending
    /// The exact bytes, when they are not valid UTF-8 (so `text` is not exact); `nil` otherwise.
    public var bytes: [UInt8]?

    /// Creates a line.
    public init(stream: Stream, text: String, ending: Ending = .newline, bytes: [UInt8]? = nil) {
        self.stream = stream
        self.text = text
        self.ending = ending
        self.bytes = bytes
    }

    /// The bytes the job wrote for this line, its ending included.
    public var rawBytes: [UInt8] {
        var result = bytes ?? Array(text.utf8)
        result.append(contentsOf: ending.bytes)
        return result
    }
}

/// How ``Scheduler/shutdown(_:)`` ends things.
public enum ShutdownMode: String, Sendable, Codable {
    /// Run everything queued (retries, blocked and scheduled jobs included), then stop. It waits
    /// for what cannot start yet: a job whose start time is an hour away, a paused scheduler or
    /// group (resume them, or shut down `.graceful` or `.cancelRunning` instead). Jobs may still
    /// be submitted until it has ended.
    case drain
    /// Start nothing new; let running jobs finish; queued jobs stay queued. What a worker holds
    /// and has not begun (a remote worker's prefetch) is asked back to the queue
    /// (``RequeueReason/withdrawnForShutdown``).
    case graceful
    /// Cancel every running, queued and waiting job (process groups killed), then stop.
    case cancelRunning
    /// Stop the running jobs now (process groups killed) and start nothing new: each goes back
    /// to the queue, its attempt not counted (as when its worker is lost); what a worker holds
    /// and has not begun is asked back. Queued, waiting, blocked and scheduled jobs stay as they
    /// are (none is skipped for a dependency stopped so). How `jobtop serve` stops for a second
    /// SIGTERM: its queue is the next serve's.
    case stopRunning

    /// Whether it stops the running jobs now (``stopRunning``, ``cancelRunning``): a serve told
    /// so cancels nothing on disk, so a job's `cancelled` then is the serve going away.
    public var stopsRunningJobs: Bool { self == .stopRunning || self == .cancelRunning }

    /// How strong it is: a shutdown under way gives way only to a stronger one (drain, graceful,
    /// stop running, cancel running).
    public var strength: Int {
        switch self {
        case .drain: 0
        case .graceful: 1
        case .stopRunning: 2
        case .cancelRunning: 3
        }
    }

    /// What a person reads of it: "the queue runs first", "running jobs finish", "running jobs
    /// are stopped" (the raw value, `cancelRunning`, showed on screens).
    public var summary: String {
        switch self {
        case .drain: "the queue runs first"
        case .graceful: "running jobs finish"
        case .cancelRunning: "running jobs are stopped"
        case .stopRunning: "running jobs are stopped, the queue is kept"
        }
    }
}

extension OutputLine {
    /// The line jobtop puts between two attempts' output (the kept tail, the durable output
    /// files): `--- jobtop: attempt 2 of 3 ---`.
    public static func attemptSeparator(_ attempt: Int, of maxAttempts: Int) -> String {
        "--- jobtop: attempt \(attempt) of \(maxAttempts) ---"
    }

    /// The line jobtop puts after a job's output when the job is retried by hand (`r`,
    /// `jobtop retry`, `edit` of an ended job): its attempts count from 1 again, so the next
    /// attempt's output gets no ``attemptSeparator(_:of:)`` of its own.
    public static let retrySeparator = "--- jobtop: retried by hand ---"

    /// The line jobtop puts after a job's output when its worker was lost mid-attempt and the
    /// job went back to the queue: that attempt does not count, so the next one has the same
    /// number and gets no ``attemptSeparator(_:of:)`` of its own.
    public static let workerLostSeparator = "--- jobtop: worker lost; the attempt runs again ---"

    /// The line jobtop puts after a job's output when a shutdown that keeps the queue stopped it
    /// (`jobtop shutdown --now`): that attempt does not count, and the next serve runs it again
    /// with the same number (its output followed the stopped run's with no mark between).
    public static let shutdownStopSeparator = "--- jobtop: stopped by a shutdown; the attempt runs again ---"

    /// The line that marks where a requeued job's next run begins, if its reason needs one (a
    /// retry that came due gets the next attempt's separator instead).
    public static func requeueSeparator(_ reason: RequeueReason) -> String? {
        switch reason {
        case .retriedByUser: retrySeparator
        case .workerLost: workerLostSeparator
        case .stoppedForShutdown: shutdownStopSeparator
        case .retryDue, .withdrawn, .withdrawnForPause, .withdrawnForShutdown, .withdrawnForPriority: nil
        }
    }

    /// Whether an attempt's `header` (``attemptSeparator(_:of:)``) would repeat what the output
    /// ends with, `lastLine`: the header itself (an attempt held at its worker, never begun,
    /// handed back and started again) or the worker-lost line (a lost attempt runs again with
    /// its number, as that line says). The kept tail and the durable output files both follow it.
    public static func headerRepeats(_ header: String, after lastLine: String) -> Bool {
        lastLine == header || lastLine == workerLostSeparator
    }

    /// Whether the worker-lost line, about to follow a job's output, marks nothing: it marks
    /// where a lost attempt's output stops, so after no output at all (`lastLine` nil and
    /// `hasOutput` false) or right after another separator line, the lost attempt printed
    /// nothing (or never began: one its worker held) and the line would only say a loss that
    /// left no trace. `lastLine` is nil too when the output ends mid-line.
    public static func workerLostLineIsEmpty(after lastLine: String?, hasOutput: Bool) -> Bool {
        guard hasOutput else { return true }
        return lastLine.map(isSeparator) ?? false
    }

    /// Whether `text` is one of jobtop's separator lines.
    public static func isSeparator(_ text: String) -> Bool {
        text.hasPrefix("--- jobtop: attempt ") || text == retrySeparator || text == workerLostSeparator
    }
}
