/// The scheduler's present state, for a screen or a late subscriber.
public struct SchedulerSnapshot: Sendable {
    /// The number of the last event this snapshot includes.
    public var seq: UInt64
    /// When it was taken.
    public var time: SchedulerTime
    /// Whether dispatch is paused.
    public var isPaused: Bool
    /// The shutdown under way, if any.
    public var shutdown: ShutdownMode?
    /// Jobs per state, finished jobs no longer listed included.
    public var counts: [JobStateKind: Int]
    /// Local slots (threads of this process).
    public var localSlots: Int
    /// All slots, remote ones included.
    public var totalSlots: Int
    /// Jobs finished per second over the last few seconds.
    public var finishedPerSecond: Double
    /// Every worker, in the order they joined.
    public var workers: [WorkerStatus]
    /// The jobs: running, then queued in run order, then waiting to retry, then finished
    /// (newest first; only the most recent are kept).
    public var jobs: [JobInfo]

    /// The number of jobs in `kind`.
    public func count(_ kind: JobStateKind) -> Int { counts[kind, default: 0] }

    /// Jobs submitted and not coalesced.
    public var total: Int { counts.values.reduce(0, +) }

    /// Whether every job has ended (none queued, waiting or running).
    public var isSettled: Bool { count(.queued) + count(.waiting) + count(.running) == 0 }
}

/// A worker as a screen shows it.
public struct WorkerStatus: Sendable, Equatable {
    /// Who it is.
    public var descriptor: WorkerDescriptor
    /// The jobs it runs now.
    public var running: [JobID]
    /// Whether it leaves once its jobs end.
    public var isRetiring: Bool
}

/// A job as a screen shows it.
public struct JobInfo: Sendable, Equatable {
    /// Its identity.
    public var id: JobID
    /// The given name, if any.
    public var name: String?
    /// The command (or `<closure>`).
    public var command: String
    /// Its priority.
    public var priority: Int
    /// Where it is.
    public var state: JobState
    /// Attempts started so far.
    public var attempts: Int
    /// Attempts it may have.
    public var maxAttempts: Int
    /// The last progress reported in its current or last attempt (0...1).
    public var progress: Double?
    /// When it was submitted.
    public var submittedAt: SchedulerTime
    /// When its current or last attempt started.
    public var startedAt: SchedulerTime?
    /// When it ended.
    public var finishedAt: SchedulerTime?
    /// Why its last attempt failed, if one did.
    public var lastFailure: FailureReason?
    /// Its coalescing key.
    public var key: String?

    /// The name to show: the given name, else the command.
    public var displayName: String { name ?? command }

    /// Creates a job description, for screens and tests that build their own (a dashboard's
    /// view tests, a remote peer's mirror).
    public init(
        id: JobID,
        name: String? = nil,
        command: String,
        priority: Int = 0,
        state: JobState = .queued,
        attempts: Int = 0,
        maxAttempts: Int = 1,
        progress: Double? = nil,
        submittedAt: SchedulerTime = .zero,
        startedAt: SchedulerTime? = nil,
        finishedAt: SchedulerTime? = nil,
        lastFailure: FailureReason? = nil,
        key: String? = nil
    ) {
        self.id = id
        self.name = name
        self.command = command
        self.priority = priority
        self.state = state
        self.attempts = attempts
        self.maxAttempts = maxAttempts
        self.progress = progress
        self.submittedAt = submittedAt
        self.startedAt = startedAt
        self.finishedAt = finishedAt
        self.lastFailure = lastFailure
        self.key = key
    }
}
