/// The scheduler's present state, for a screen or a late subscriber.
public struct SchedulerSnapshot: Sendable, Codable {
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
    /// Every group, the default one first, then by name.
    public var groups: [GroupStatus]
    /// The jobs: running, then queued in run order, then waiting to retry, then scheduled (by
    /// time), then blocked (in submission order), then finished
    /// (newest first; only the most recent are kept).
    public var jobs: [JobInfo]
    /// Where the workers placed running jobs, in their words (a Slurm job id, with Slurm's
    /// reason while it waits): the latest ``SchedulerEvent/Kind/placed(_:_:)`` of each.
    public var placements: [JobID: String] = [:]
    /// Running jobs whose worker holds attempts (``WorkerDescriptor/holdsAttempts``: a remote
    /// worker's prefetch, a Slurm queue) and has not begun this one: sent, waiting there for a
    /// slot. ``SchedulerEvent/Kind/began(_:attempt:)`` takes a job out.
    public var heldAttempts: Set<JobID> = []

    /// Creates a snapshot (an empty one by default: what a client shows before it has one).
    public init(
        seq: UInt64 = 0, time: SchedulerTime = .zero, isPaused: Bool = false, shutdown: ShutdownMode? = nil,
        counts: [JobStateKind: Int] = [:], localSlots: Int = 0, totalSlots: Int = 0, finishedPerSecond: Double = 0,
        workers: [WorkerStatus] = [], groups: [GroupStatus] = [], jobs: [JobInfo] = []
    ) {
        self.seq = seq
        self.time = time
        self.isPaused = isPaused
        self.shutdown = shutdown
        self.counts = counts
        self.localSlots = localSlots
        self.totalSlots = totalSlots
        self.finishedPerSecond = finishedPerSecond
        self.workers = workers
        self.groups = groups
        self.jobs = jobs
    }

    /// The number of jobs in `kind`.
    public func count(_ kind: JobStateKind) -> Int { counts[kind, default: 0] }

    /// Jobs submitted and not coalesced.
    public var total: Int { counts.values.reduce(0, +) }

    /// Whether every job has ended (none queued, waiting, blocked, scheduled or running).
    public var isSettled: Bool { JobStateKind.allCases.allSatisfy { $0.isFinished || count($0) == 0 } }
}

/// A group as a screen shows it.
public struct GroupStatus: Sendable, Equatable, Codable {
    /// The group: name, limit, paused.
    public var group: JobGroup
    /// Its jobs running now.
    public var running: Int
    /// Its jobs waiting for a slot (queued; not blocked or scheduled).
    public var queued: Int
    /// Its jobs waiting for dependencies, a start time or their retry's time
    /// (``JobStateKind/isHeldInGroup``).
    public var held: Int

    /// Creates a status.
    public init(group: JobGroup, running: Int = 0, queued: Int = 0, held: Int = 0) {
        self.group = group
        self.running = running
        self.queued = queued
        self.held = held
    }
}

/// A worker as a screen shows it.
public struct WorkerStatus: Sendable, Equatable, Codable {
    /// Who it is.
    public var descriptor: WorkerDescriptor
    /// The jobs it runs now.
    public var running: [JobID]
    /// Whether it leaves once its jobs end.
    public var isRetiring: Bool
}

/// A job as a screen shows it.
///
/// What the state says is taken from the state: ``attempts``, ``startedAt``, ``finishedAt`` and
/// ``lastFailure`` are derived from ``state`` wherever it carries them, and fall back to
/// ``history`` only in states that do not (a queued job's earlier attempts, say), so the two can
/// never contradict each other.
public struct JobInfo: Sendable, Equatable, Codable {
    /// What happened to a job's earlier attempts: read only where its state does not say.
    public struct History: Sendable, Equatable, Codable {
        /// Attempts started and counted so far.
        public var attempts: Int
        /// When the current or last attempt started.
        public var startedAt: SchedulerTime?
        /// When the job last ended.
        public var finishedAt: SchedulerTime?
        /// Why the last counted attempt failed, if one did.
        public var lastFailure: FailureReason?

        public init(attempts: Int = 0, startedAt: SchedulerTime? = nil, finishedAt: SchedulerTime? = nil, lastFailure: FailureReason? = nil) {
            self.attempts = attempts
            self.startedAt = startedAt
            self.finishedAt = finishedAt
            self.lastFailure = lastFailure
        }
    }

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
    /// Attempts it may have.
    public var maxAttempts: Int
    /// The last progress reported in its current attempt (0...1), while it runs; `nil` once it
    /// has ended, waits for a retry or is queued again.
    public var progress: Double?
    /// When it was submitted.
    public var submittedAt: SchedulerTime
    /// Its place in submission order (from 1; 0 for a job no scheduler made): within a priority,
    /// ready jobs run in this order however they became ready, so a screen lists them by it
    /// (jobs of one submission share their ``submittedAt``).
    public var order: UInt64 = 0
    /// Its coalescing key.
    public var key: String?
    /// The group it runs in.
    public var group: String
    /// The jobs that must succeed before it starts.
    public var dependencies: [JobID]
    /// Its earlier attempts.
    public var history: History
    /// Where it runs, when its spec names a directory (else the scheduler's own).
    public var workingDirectory: String?
    /// The variables its spec adds to the environment, `nil` when none (jobtop's own
    /// `JOBTOP_` markers are not listed).
    public var environment: [String: String]?

    /// Attempts started so far: the running, failed-and-waiting or final attempt where the state
    /// names it.
    public var attempts: Int {
        switch state {
        case .running(_, let attempt, _, _): attempt
        case .waitingForRetry(_, let failedAttempt, _): failedAttempt
        case .succeeded(let attempts), .failed(_, let attempts): attempts
        case .queued, .cancelled, .blocked, .scheduled, .skipped: history.attempts
        }
    }

    /// When its current or last attempt started.
    public var startedAt: SchedulerTime? {
        if case .running(_, _, let since, _) = state { return since }
        return history.startedAt
    }

    /// When it ended; `nil` while it has not.
    public var finishedAt: SchedulerTime? { state.isFinished ? history.finishedAt : nil }

    /// Why its last attempt failed, if one did; `nil` once it succeeded.
    public var lastFailure: FailureReason? {
        switch state {
        case .waitingForRetry(_, _, let reason), .failed(let reason, _): reason
        case .succeeded: nil
        case .queued, .running, .cancelled, .blocked, .scheduled, .skipped: history.lastFailure
        }
    }

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
        key: String? = nil,
        group: String = JobSpec.defaultGroup,
        dependencies: [JobID] = [],
        workingDirectory: String? = nil,
        environment: [String: String]? = nil
    ) {
        self.id = id
        self.name = name
        self.command = command
        self.priority = priority
        self.state = state
        self.maxAttempts = maxAttempts
        self.progress = progress
        self.submittedAt = submittedAt
        self.key = key
        self.group = group
        self.dependencies = dependencies
        self.history = History(attempts: attempts, startedAt: startedAt, finishedAt: finishedAt, lastFailure: lastFailure)
        self.workingDirectory = workingDirectory
        self.environment = environment
    }

    /// Sets ``workingDirectory`` and ``environment`` from `spec`.
    mutating func describe(_ spec: JobSpec) {
        workingDirectory = spec.workingDirectory
        // A durable serve's jobs carry only its own JOBTOP_ variables: no new table for them.
        guard spec.environment.keys.contains(where: { !$0.hasPrefix("JOBTOP_") }) else {
            environment = nil
            return
        }
        let shown = spec.environment.filter { !$0.key.hasPrefix("JOBTOP_") }
        environment = shown.isEmpty ? nil : shown
    }
}
