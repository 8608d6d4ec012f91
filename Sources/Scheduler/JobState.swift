/// A moment on the scheduler's clock: the time since the scheduler started.
public typealias SchedulerTime = Duration

/// Where a job is in its life. Each case carries exactly what is true in it.
public enum JobState: Sendable, Equatable, Codable {
    /// Waiting for a free slot.
    case queued
    /// Running `attempt` (from 1) on `worker` since `since`.
    case running(worker: WorkerID, attempt: Int, since: SchedulerTime, stopping: StopReason?)
    /// Attempt `failedAttempt` failed; the next one becomes due at `until`.
    case waitingForRetry(until: SchedulerTime, failedAttempt: Int, reason: FailureReason)
    /// Ended well after `attempts` attempts.
    case succeeded(attempts: Int)
    /// Ended badly for good.
    case failed(reason: FailureReason, attempts: Int)
    /// Cancelled by a user: never retried, never counted as failed.
    case cancelled
    /// Waiting for its dependencies to succeed (``JobInfo/dependencies`` names them).
    case blocked
    /// Waiting for its start time.
    case scheduled(until: SchedulerTime)
    /// Never ran: a dependency failed for good, was cancelled or was skipped itself. Retrying
    /// that dependency brings it back.
    case skipped(SkipReason)

    /// A short lowercase word for screens and logs.
    public var name: String {
        switch self {
        case .queued: "queued"
        case .running: "running"
        case .waitingForRetry: "waiting"
        case .succeeded: "succeeded"
        case .failed: "failed"
        case .cancelled: "cancelled"
        case .blocked: "blocked"
        case .scheduled: "scheduled"
        case .skipped: "skipped"
        }
    }

    /// What a sentence about the job says of its state: "job 3f2a1b4c succeeded", "... is
    /// queued", "... was cancelled", "... is waiting to be retried", "... is being cancelled
    /// (its process has not ended yet)".
    public var predicate: String {
        switch self {
        case .waitingForRetry: "is waiting to be retried"
        case .succeeded, .failed: name
        case .cancelled, .skipped: "was \(name)"
        // Still running, but every view shows it going: "is running" read as a refusal of a
        // job the user had just cancelled.
        case .running(_, _, _, .cancel?): "is being cancelled (its process has not ended yet)"
        case .running(_, _, _, .timeout?): "is being stopped: it timed out (its process has not ended yet)"
        case .queued, .running, .blocked, .scheduled: "is \(name)"
        }
    }

    /// The kind of state, without its data.
    public var kind: JobStateKind {
        switch self {
        case .queued: .queued
        case .running: .running
        case .waitingForRetry: .waiting
        case .succeeded: .succeeded
        case .failed: .failed
        case .cancelled: .cancelled
        case .blocked: .blocked
        case .scheduled: .scheduled
        case .skipped: .skipped
        }
    }

    /// Whether the job has ended (succeeded, failed, cancelled or skipped).
    public var isFinished: Bool { kind.isFinished }

    /// Whether moving from this state to `next` is allowed. The one place that says so.
    public func canTransition(to next: JobState) -> Bool {
        switch (kind, next.kind) {
        case (.queued, .running), (.queued, .cancelled): true
        // Not started yet: released to the queue, blocked once its time comes, skipped when a
        // dependency fails, or cancelled.
        case (.scheduled, .queued), (.scheduled, .blocked), (.scheduled, .skipped), (.scheduled, .cancelled): true
        case (.blocked, .queued), (.blocked, .skipped), (.blocked, .cancelled): true
        // A skipped job comes back when its dependency is retried.
        case (.skipped, .blocked), (.skipped, .queued), (.skipped, .scheduled): true
        case (.running, .succeeded), (.running, .failed), (.running, .waiting),
             (.running, .cancelled), (.running, .queued): true
        case (.running, .running):
            // Only the stop flag may change while running: a stop begins, or a cancel overrides
            // a timeout stop (the job then ends cancelled, not failed).
            if case .running(let w1, let a1, _, let s1) = self, case .running(let w2, let a2, _, let s2?) = next,
               w1 == w2, a1 == a2 {
                s1 == nil || (s1 == .timeout && s2 == .cancel)
            } else {
                false
            }
        case (.waiting, .queued), (.waiting, .cancelled): true
        case (.failed, .queued), (.cancelled, .queued): true
        // A user retries a job that has dependencies or a start time still to come.
        case (.failed, .blocked), (.cancelled, .blocked), (.cancelled, .scheduled): true
        default: false
        }
    }
}

/// The kinds of ``JobState``, for counting and filtering.
public enum JobStateKind: String, Sendable, CaseIterable, Hashable, Codable {
    case queued, running, waiting, blocked, scheduled, succeeded, failed, cancelled, skipped

    /// Whether jobs in this state have ended.
    public var isFinished: Bool {
        switch self {
        case .succeeded, .failed, .cancelled, .skipped: true
        default: false
        }
    }

    /// Whether jobs in this state have not started and wait for something other than a slot
    /// (dependencies, a start time).
    public var isHeld: Bool { self == .blocked || self == .scheduled }

    /// Whether a group's line counts jobs in this state as held (``GroupStatus/held``): they
    /// wait for something other than a slot, their retry's time included.
    public var isHeldInGroup: Bool { isHeld || self == .waiting }
}

/// Why a job was skipped: the dependency that will not succeed, and how it ended.
public struct SkipReason: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The dependency.
    public var dependency: JobID
    /// Its name as a screen shows it (its given name, else its command).
    public var dependencyName: String
    /// How it ended: failed, cancelled or skipped.
    public var outcome: JobStateKind

    /// Creates a reason.
    public init(dependency: JobID, dependencyName: String, outcome: JobStateKind) {
        self.dependency = dependency
        self.dependencyName = dependencyName
        self.outcome = outcome
    }

    /// `dependency 'fetch-a' failed`.
    public var description: String {
        let name = dependencyName.count > 60 ? String(dependencyName.prefix(57)) + "..." : dependencyName
        let what = switch outcome {
        case .cancelled: "was cancelled"
        case .skipped: "was skipped"
        default: outcome.rawValue
        }
        return "dependency '\(name)' \(what)"
    }
}

/// A group of jobs: a cap on how many of them run at once, and a pause of its own.
public struct JobGroup: Sendable, Hashable, Codable {
    /// Its name.
    public var name: String
    /// The most of its jobs that run at once; `nil` is no limit beyond the slots.
    public var limit: Int?
    /// Whether its jobs are held back (running ones go on).
    public var isPaused: Bool

    /// Creates a group.
    public init(name: String, limit: Int? = nil, isPaused: Bool = false) {
        self.name = name
        self.limit = limit
        self.isPaused = isPaused
    }
    /// The order screens and snapshots list groups in: the default group first, then by name.
    public static func listsBefore(_ a: JobGroup, _ b: JobGroup) -> Bool {
        if a.name == b.name { return false }
        if a.name == JobSpec.defaultGroup { return true }
        if b.name == JobSpec.defaultGroup { return false }
        return a.name < b.name
    }
}

/// Why a running job is being stopped.
public enum StopReason: String, Sendable, Equatable, Codable {
    /// A user cancelled it: it ends `cancelled`.
    case cancel
    /// Its attempt ran past its timeout: the attempt failed.
    case timeout
    /// The scheduler stops its running jobs and keeps its queue (``ShutdownMode/stopRunning``):
    /// the job goes back to the queue, that attempt not counted.
    case shutdown
}

/// How an attempt ended, as the worker saw it.
/// Why a worker left the pool. Data, not prose: rendered to text only at the edges (the log, the
/// dashboard), so a client can tell a drained worker from a lost one without parsing words.
public enum WorkerLeaveReason: Sendable, Hashable, Codable, CustomStringConvertible {
    /// A local slot retired because the user lowered the number of slots.
    case slotsReduced
    /// The worker finished its running jobs and left when asked to (`SIGTERM` on the worker).
    case drained
    /// The coordinator is shutting down and closed the worker's connection.
    case coordinatorShutdown
    /// Nothing was heard from the worker for this long.
    case heartbeatMissed(Duration)
    /// The worker closed its stream.
    case closedByWorker
    /// The connection broke; the transport's words (escaped, printable).
    case connectionLost(String)
    /// Removed by the program that embeds the scheduler, in its words.
    case removed(String)

    public var description: String {
        switch self {
        case .slotsReduced: "slots reduced"
        case .drained: "drained"
        case .coordinatorShutdown: "the coordinator is shutting down"
        case .heartbeatMissed(let limit): "no heartbeat for \(formatDuration(limit))"
        case .closedByWorker: "the worker closed its stream"
        case .connectionLost(let why): "connection lost: \(why)"
        case .removed(let why): why
        }
    }
}

public enum Termination: Sendable, Equatable, CustomStringConvertible {
    /// The process exited with this status (a closure job that returned is `exit(0)`).
    case exit(Int32)
    /// The process was killed by this signal.
    case signal(Int32)
    /// The work could not be started or threw: the message says why.
    case error(String)
    /// The worker running it went away (a remote worker lost): the attempt did not count.
    case workerLost(WorkerLeaveReason)
    /// The worker gave the attempt back before it began, when asked
    /// (``Worker/withdraw(_:attempt:)``): it never ran and does not count.
    case withdrawn

    /// Whether the attempt succeeded.
    public var isSuccess: Bool { self == .exit(0) }

    /// Whether the attempt did not really happen because its worker went away.
    public var isWorkerLoss: Bool {
        if case .workerLost = self { return true }
        return false
    }

    public var description: String {
        switch self {
        case .exit(let code): "exit \(code)"
        case .signal(let signal): "signal \(signal) (\(signalName(signal)))"
        case .error(let message): message
        case .workerLost(let why): "worker lost: \(why)"
        case .withdrawn: "withdrawn before it began"
        }
    }
}

/// Why an attempt failed.
public enum FailureReason: Sendable, Equatable, Codable, CustomStringConvertible {
    /// The process exited with a non-zero status.
    case exitStatus(Int32)
    /// The process was killed by a signal it did not get from jobtop.
    case signal(Int32)
    /// The attempt ran past its timeout and was stopped.
    case timeout(Duration)
    /// The command could not be run or the closure threw.
    case error(String)
    /// Its worker was lost too many times.
    case workerLost(WorkerLeaveReason)

    public var description: String {
        switch self {
        case .exitStatus(127): "exit 127 (command not found)"
        case .exitStatus(126): "exit 126 (command not executable)"
        case .exitStatus(let code): "exit \(code)"
        case .signal(let signal): "killed by \(signalName(signal))"
        case .timeout(let limit): "timed out after \(formatDuration(limit))"
        case .error(let message): message
        case .workerLost(let why): "worker lost: \(why)"
        }
    }
}

extension FailureReason {
    /// The failure an unsuccessful termination stands for.
    init(_ termination: Termination) {
        switch termination {
        case .exit(let code): self = .exitStatus(code)
        case .signal(let signal): self = .signal(signal)
        case .error(let message): self = .error(message)
        case .workerLost(let why): self = .workerLost(why)
        // (Never a failure: a withdrawn attempt goes back to the queue.)
        case .withdrawn: self = .error(termination.description)
        }
    }
}

/// `SIGTERM`-style names for the common signals.
public func signalName(_ signal: Int32) -> String {
    switch signal {
    case 1: "SIGHUP"
    case 2: "SIGINT"
    case 3: "SIGQUIT"
    case 4: "SIGILL"
    case 6: "SIGABRT"
    case 8: "SIGFPE"
    case 9: "SIGKILL"
    case 11: "SIGSEGV"
    case 13: "SIGPIPE"
    case 14: "SIGALRM"
    case 15: "SIGTERM"
    default: "signal \(signal)"
    }
}

/// Formats a duration the way the command line takes it: `500ms`, `1.5s`, `2m3s`, `1h2m`, `3d4h`.
public func formatDuration(_ duration: Duration) -> String {
    let total = duration.seconds
    if total < 1 { return "\(Int((total * 1000).rounded()))ms" }
    if total < 60 {
        let rounded = (total * 10).rounded() / 10
        return rounded == rounded.rounded() ? "\(Int(rounded))s" : "\(rounded)s"
    }
    let seconds = Int(total.rounded())
    if seconds < 3600 { return seconds % 60 == 0 ? "\(seconds / 60)m" : "\(seconds / 60)m\(seconds % 60)s" }
    if seconds < 86_400 {
        let minutes = (seconds % 3600) / 60
        return minutes == 0 ? "\(seconds / 3600)h" : "\(seconds / 3600)h\(minutes)m"
    }
    // Days from one on ("3d4h", not "76h"): a job scheduled weeks ahead, a timeout of days.
    let hours = (seconds % 86_400) / 3600
    return hours == 0 ? "\(seconds / 86_400)d" : "\(seconds / 86_400)d\(hours)h"
}
