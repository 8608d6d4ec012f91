import CProcess
import DequeModule
import HeapModule
import struct Foundation.Date
import struct Foundation.UUID

/// Everything the scheduler decides, as a pure value: commands and results in, actions out.
///
/// It never awaits, reads a clock or does I/O: the time comes with each call and randomness
/// from a seeded generator, so the same calls always give the same actions. The ``Scheduler``
/// actor performs what it returns and feeds the results back.
public struct SchedulerCore: Sendable {
    /// What the scheduler must do after a call.
    public enum Action: Sendable {
        /// Run `attempt` of job `id` on `worker`.
        case start(JobID, attempt: Int, worker: WorkerID)
        /// Stop job `id` on `worker`: SIGTERM its process group, SIGKILL after the grace period.
        case stop(JobID, worker: WorkerID, reason: StopReason)
        /// The worker has left the pool: release it.
        case removeWorker(WorkerID)
        /// Ask `worker` to give back `attempt` of job `id`, which it holds and has not begun:
        /// another worker has a slot free. It ends ``Termination/withdrawn`` if the worker still
        /// held it; else it runs there as it would have.
        case withdraw(JobID, attempt: Int, worker: WorkerID)
        /// Tell `worker`, which holds `attempt` of job `id` and has not begun it, that the job's
        /// priority is now `priority`: what a worker holds starts by priority.
        case reprioritizeHeld(JobID, attempt: Int, worker: WorkerID, priority: Int)
        /// Publish this event.
        case emit(SchedulerEvent.Kind)
    }

    /// Why a held attempt is asked back from its worker.
    enum Withdrawal: UInt8 {
        /// For a free slot elsewhere.
        case forFreeSlot
        /// Its job was paused (its group or everything): held, it would start when its worker's
        /// slot frees.
        case forPause
        /// The scheduler shuts down and keeps its queue: it starts nothing new
        /// (``ShutdownMode/graceful``), or stops its running jobs (``ShutdownMode/stopRunning``).
        case forShutdown
        /// A queued job outranks it: held, it would start before that job when its worker's
        /// slot frees; given back, the better job takes its place there.
        case forPriority
    }

    /// Limits of the core.
    public struct Configuration: Sendable {
        /// How many finished jobs stay listed (their counts are always kept).
        public var finishedRetention: Int
        /// How many times a job goes back to the queue because its worker was lost before that
        /// counts as a failed attempt.
        public var maxWorkerLossRequeues: Int
        /// Seeds the jitter of retry delays.
        public var seed: UInt64?
        /// The wall-clock time at time zero, for start times given as dates.
        public var wallClockEpoch: Date

        /// Creates a configuration.
        public init(
            finishedRetention: Int = 10_000, maxWorkerLossRequeues: Int = 3, seed: UInt64? = nil,
            wallClockEpoch: Date = Date(timeIntervalSince1970: 0)
        ) {
            self.finishedRetention = max(0, finishedRetention)
            self.maxWorkerLossRequeues = max(0, maxWorkerLossRequeues)
            self.seed = seed
            self.wallClockEpoch = wallClockEpoch
        }
    }

    struct Job: Sendable {
        // Stored in this order on purpose: the small fields a start, an end and a dependency's
        // end touch come first, then the record's `info`, then what only commands read. Jobs of
        // a DAG start and end out of submission order, so each touch of a record is a cache miss
        // per line it spans.
        /// Its group's place in ``groups``.
        var group: Int32 = 0
        /// The jobs it waits for: the first of its list in ``dependencyLinks`` (-1: none). Its
        /// `info.dependencies` stays empty (the list fills a copy that leaves the core): no
        /// array per job, which would be freed when the record is dropped, out of submission
        /// order in a DAG.
        var firstDependency: Int32 = -1
        /// Its place among the queued jobs of its priority: its serial, so submission order.
        /// Whenever it is queued (submitted, released, due, retried, given back by a lost
        /// worker) it takes this place, ahead of every job submitted after it: one rule, the
        /// one the dashboard shows and pueue and HyperQueue follow. With the small fields:
        /// queueing a job reads it, and `group` beside it.
        var queueOrder: UInt64 = 0
        /// The worker it runs on while it runs (its state names the worker's id).
        var worker: WorkerHandle?
        /// Whether its attempt on a worker that holds attempts began (``attemptBegan``); set
        /// false at each start.
        var hasBegun = false
        /// Why its held attempt was asked back (``Action/withdraw(_:attempt:worker:)``), if it
        /// was and has neither begun nor ended since.
        var withdrawal: Withdrawal?
        /// Its place in ``jobs`` (and in the queue, the pool and timers).
        let handle: JobHandle
        /// Its spec's timeout, kept here so that a start reads only the record.
        var timeout: Duration?
        var info: JobInfo
        var workerLosses = 0
        /// The batch (run) it belongs to, if any.
        var batch: BatchID?
        /// When it may start, if it was given a time.
        var notBefore: SchedulerTime?

        init(
            handle: JobHandle, info: JobInfo, batch: BatchID?, group: Int32,
            notBefore: SchedulerTime? = nil, timeout: Duration?, firstDependency: Int32 = -1
        ) {
            self.handle = handle
            self.firstDependency = firstDependency
            self.info = info
            self.batch = batch
            self.group = group
            self.notBefore = notBefore
            self.timeout = timeout
        }

        /// What fills the table's place of a removed record: holds nothing worth keeping.
        static let placeholder = Job(
            handle: JobHandle(index: -1),
            info: JobInfo(id: JobID(uuid: UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))), command: ""),
            batch: nil, group: 0, timeout: nil)
    }

    /// A job that waits for another. Its handle comes with its record's serial: a dependent that
    /// ended and was dropped may have left its handle to another job, which has another serial.
    struct Dependent: Sendable {
        // The serial first: 12 bytes, so a link of ``edges`` packs its `next` after them in 16.
        let serial: UInt64
        let handle: JobHandle
    }

    /// What a job's steps read and change of *other* jobs (a submission of its dependencies, a
    /// dependency's end of its dependents), kept apart from the job records in a dense array:
    /// 24 bytes a job where a record is about 400. Those other records are, in a large table, a
    /// cache miss away; most of a DAG's submissions only add to a dependency's list, and most
    /// of its ends only count a dependent down.
    struct JobLinks: Sendable {
        /// The record's serial (unique for the core's life), so a stale handle is recognized.
        var serial: UInt64 = 0
        /// While the job is blocked or scheduled, how many of its dependencies have not
        /// succeeded (counted afresh whenever it comes back from an end); -1 in any other state.
        var pending: Int32 = -1
        /// The jobs that wait for it: the first and last of its list in ``edges`` (-1: none).
        /// A list in one shared array rather than an array per job: no allocation per job.
        var firstDependent: Int32 = -1
        var lastDependent: Int32 = -1
        /// Whether a job named it as a dependency: its outcome is kept once its record is dropped.
        var isDependency = false
    }

    /// A dependency of a job being submitted that has a record, and whether it succeeded.
    struct DependencyRecord: Sendable {
        let handle: JobHandle
        let hasSucceeded: Bool
    }

    /// A group's place in ``groups``.
    struct GroupHandle: DenseHandle {
        let index: Int32
    }

    /// A group: its settings, its queue and what it runs.
    struct Group: Sendable {
        var info: JobGroup
        /// Its jobs running now.
        var running = 0
        /// Its jobs blocked or scheduled.
        var held = 0
        /// Its jobs waiting for a slot, in run order (orders shared by every group's queue).
        var queue = SharedPositionHeap<JobHandle>()

        /// Whether its first queued job may start when a slot is free.
        var isEligible: Bool {
            !info.isPaused && !queue.isEmpty && (info.limit.map { running < $0 } ?? true)
        }
    }

    /// A dependency that ended: what its dependents learn in the same step.
    struct EndedDependency: Sendable {
        let id: JobID
        let name: String
        let outcome: JobStateKind
        /// The first link of its dependents' list.
        let firstDependent: Int32
        /// When it ended.
        let time: SchedulerTime
    }

    /// A batch's bookkeeping: a count, never a list, so a batch of any size costs the same.
    struct Batch: Sendable {
        var haltsOnFailure: Bool
        /// Its jobs that have not ended.
        var unfinished = 0
        /// No more jobs will join it.
        var isSealed = false
        /// The job whose failure halted it.
        var haltedBy: JobID?
        /// `batchSettled` was emitted for the present round (a retry starts a new one).
        var hasSettled = false
    }

    /// An immutable spec behind a reference: made when an attempt starts on the scheduler's
    /// path, so that every copy of its assignment shares it.
    final class SubmittedSpec: Sendable {
        let spec: JobSpec
        init(_ spec: JobSpec) { self.spec = spec }
    }

    struct Timer: Comparable, Sendable {
        enum Purpose: Sendable { case retry, timeout, release }
        var time: SchedulerTime
        /// The job's handle, checked against `id` when the timer fires (the job may be gone).
        var handle: JobHandle
        var id: JobID
        var attempt: Int
        var purpose: Purpose

        static func < (a: Timer, b: Timer) -> Bool { a.time < b.time }
        static func == (a: Timer, b: Timer) -> Bool { a.time == b.time && a.id == b.id && a.attempt == b.attempt }
    }

    /// Jobs per state kind: an array indexed by kind, counted on every transition without hashing.
    struct StateCounts: Sendable {
        private var values = [Int](repeating: 0, count: JobStateKind.allCases.count)

        subscript(kind: JobStateKind) -> Int {
            get { values[kind.ordinal] }
            set { values[kind.ordinal] = newValue }
        }

        /// Every kind with its count, zeros included.
        var dictionary: [JobStateKind: Int] {
            Dictionary(uniqueKeysWithValues: JobStateKind.allCases.map { ($0, self[$0]) })
        }
    }

    let configuration: Configuration
    private(set) var jobs = JobTable<Job>(placeholder: Job.placeholder)
    /// Each record's spec as submitted, by the record's index (its priority may be stale:
    /// `info.priority` is the job's), without its dependencies (the record has them).
    ///
    /// Kept apart from the records, which a start and an end touch, and not behind an object per
    /// job: such an object is freed when its record is dropped, and in a DAG, whose jobs end out
    /// of submission order, those frees scatter the allocator's free lists (each later
    /// allocation then sorts them) where a flat run frees neighbours one after another.
    ///
    /// `nil` where a record was dropped: its spec released without copying a placeholder in.
    private var recordSpecs: [JobSpec?] = []
    /// The groups; the default group is the first. A group is never removed.
    private(set) var groups: [Group] = [Group(info: JobGroup(name: JobSpec.defaultGroup))]
    private var groupIndex: [String: Int32] = [JobSpec.defaultGroup: 0]
    /// The groups whose first queued job may start, by that job's priority and order: dispatch
    /// takes the best of them, so a group at its limit (or paused) never holds back another.
    private var heads = IndexedHeap<GroupHandle>()
    /// Each queued job's place in its group's queue (by record index; -1: not queued), shared
    /// by the groups' queues.
    private var queuePositions: [Int32] = []
    /// Dependencies that ended in this step; their dependents are released or skipped before
    /// the step dispatches.
    private var endedDependencies: [EndedDependency] = []
    /// Every job's list of dependents (16 bytes a link).
    private var edges = LinkArena<Dependent>()
    /// Per record index: its serial, while it is held its count of pending dependencies, and
    /// its list of dependents.
    private var jobLinks: [JobLinks] = []
    /// The serial of the next record, which is also its place in the queues (first submitted,
    /// first out across groups within a priority).
    private var nextSerial: UInt64 = 1
    /// Every job's list of dependencies (by id).
    private var dependencyLinks = LinkArena<JobID>()
    /// Lists of dropped or succeeded jobs, freed once the step's dependents are settled (a list
    /// may still be walked until then).
    private var listsToFree: [Int32] = []
    /// A buffer `submit` reuses for each spec's dependencies that have a record.
    private var scratchRecords: [DependencyRecord] = []
    /// Jobs that others named as dependencies and that did not succeed, once their records are
    /// dropped, with the name a skip reason shows. (Those that succeeded are only retired in
    /// ``jobs`` with ``droppedSuccess``: a job's outcome outlives its record.)
    private var droppedFailures: [JobID: (outcome: JobStateKind, name: String)] = [:]
    /// The marks of retired ids in ``jobs``.
    private static let droppedSuccess: Int32 = 0
    private static let droppedFailure: Int32 = 1
    private(set) var pool = WorkerPool()
    private var timers = Heap<Timer>()
    private var keys: [String: JobID] = [:]
    private var finishedOrder: Deque<JobHandle> = []
    private var finishTimes: Deque<(second: Int64, count: Int)> = []
    private var random: IdentifierGenerator
    private var actions: [Action] = []
    /// For each `.start` in `actions`, in the same order, what the performer needs to launch it.
    private var startedHandles: [Start] = []
    /// Whether this step's caller takes the ``Start``s (``moveActions(into:starts:)``): only then
    /// are they made. Making one retains the job's spec object, which for a job started out of
    /// submission order (a DAG's) is a cache miss the array-returning API would pay for nothing.
    private var collectsStarts = false

    /// What the performer needs to launch a `.start`: the job's handle (for reporting its end
    /// without a hashed lookup), its spec as submitted and its present priority.
    struct Start: Sendable {
        let handle: JobHandle
        let submitted: SubmittedSpec
        let priority: Int
    }
    private var batches: [BatchID: Batch] = [:]
    private var nextBatch: UInt64 = 1
    /// Batches whose last job may have ended in this step: checked once the step's other
    /// events are out, so `batchSettled` always follows the final event of its last job.
    private var batchesToCheck: [BatchID] = []

    /// Jobs per state, including finished jobs no longer kept.
    public var counts: [JobStateKind: Int] { stateCounts.dictionary }
    private var stateCounts = StateCounts()
    /// Whether dispatch is paused.
    public private(set) var isPaused = false
    /// New jobs wait while a lossless subscriber catches up (``holdDispatch(_:now:)``).
    public private(set) var isDispatchHeld = false
    /// State changes refused as illegal (a bug if ever above zero; the jobs kept their state).
    public private(set) var rejectedTransitions = 0
    /// The shutdown under way.
    public private(set) var shutdownMode: ShutdownMode?

    /// Creates an empty core.
    public init(configuration: Configuration = .init()) {
        self.configuration = configuration
        random = configuration.seed.map { IdentifierGenerator(seed: $0) } ?? IdentifierGenerator()
    }

    // MARK: - Queries

    /// The job's state, if it is known.
    public func state(of id: JobID) -> JobState? { jobs[id]?.info.state }

    /// The job as a screen shows it (without progress).
    public func info(of id: JobID) -> JobInfo? { jobs.handle(of: id).map { shownInfo($0) } }

    /// The spec a job was submitted with, its dependencies named by id (an earlier spec of its
    /// submission by that spec's job).
    public func spec(of id: JobID) -> JobSpec? {
        guard let handle = jobs.handle(of: id) else { return nil }
        var spec = recordSpecs[Int(handle.index)]!
        spec.priority = jobs[handle].info.priority
        spec.dependencies = dependencies(of: handle).map { .job($0) }
        return spec
    }

    /// A batch as it stands, if it is known.
    public func batch(_ id: BatchID) -> BatchStatus? {
        guard let batch = batches[id] else { return nil }
        return BatchStatus(id: id, unfinished: batch.unfinished, isSealed: batch.isSealed, haltedBy: batch.haltedBy)
    }

    /// Whether a caller waiting for fewer than `limit` unfinished jobs of `batch` may go on:
    /// there are fewer, or it takes no more jobs (halted, sealed, unknown). One lookup, nothing
    /// copied: asked after every step while a streamed list waits for room.
    func batchHasRoom(_ id: BatchID, below limit: Int) -> Bool {
        guard let batch = batches[id] else { return true }
        return batch.unfinished < limit || batch.haltedBy != nil || batch.isSealed
    }

    /// The earliest pending timer (a retry becoming due or a timeout), if any. Stored, not
    /// computed, so the scheduler reads it after every step without a call into the core.
    public private(set) var nextDeadline: SchedulerTime?

    /// The number of jobs running now.
    public var runningCount: Int { stateCounts[.running] }

    /// The queued jobs in run order.
    public var queuedInOrder: [JobID] { queuedHandlesInOrder().map { jobs.id(at: $0) } }

    /// Every group with its counts: the default group first, then by name.
    public var groupStatuses: [GroupStatus] {
        groups.sorted { JobGroup.listsBefore($0.info, $1.info) }
            .map { GroupStatus(group: $0.info, running: $0.running, queued: $0.queue.count, held: $0.held) }
    }

    /// A group as it stands, if it exists.
    public func group(_ name: String) -> GroupStatus? {
        guard let index = groupIndex[name] else { return nil }
        let group = groups[Int(index)]
        return GroupStatus(group: group.info, running: group.running, queued: group.queue.count, held: group.held)
    }

    /// All slots that take jobs.
    public var capacity: Int { pool.capacity }

    /// Slots of local workers that take jobs.
    public var localCapacity: Int { pool.localCapacity }

    /// Local workers, in join order, retiring ones included.
    public var localWorkers: [WorkerID] {
        pool.orderedMembers.filter { $0.descriptor.kind == .local }.map(\.descriptor.id)
    }

    /// Whether a shutdown is under way and nothing more will run: no job is running and, for a
    /// drain, none is queued or waiting either.
    public var isShutdownComplete: Bool {
        guard let mode = shutdownMode else { return false }
        if runningCount > 0 { return false }
        if mode == .drain {
            return stateCounts[.queued] + stateCounts[.waiting] + stateCounts[.blocked] + stateCounts[.scheduled] == 0
        }
        return true
    }

    // MARK: - Commands

    /// Submits a job under `id`, or returns the active job with the same coalescing key.
    ///
    /// - Throws: ``SchedulerError`` `.invalidArgument` for a priority outside
    ///   ``JobSpec/priorityRange``; `.notAllowed` for a batch that is unknown, sealed or halted.
    public mutating func submit(
        _ spec: JobSpec, id: JobID, batch: BatchID? = nil, now: SchedulerTime
    ) throws(SchedulerError) -> (id: JobID, actions: [Action]) {
        let (ids, actions) = try submit(contentsOf: [spec], ids: [id], batch: batch, now: now)
        return (ids[0], actions)
    }

    /// Submits jobs in one step: all are queued first, then dispatch runs once, so the highest
    /// priority among them starts first whatever their order. Nothing is submitted if any spec
    /// is refused.
    ///
    /// - Parameters:
    ///   - specs: The jobs.
    ///   - ids: One fresh id per spec.
    ///   - batch: The batch they join, if any (see ``openBatch(haltsOnFailure:)``).
    ///   - now: The time.
    /// - Returns: Per spec its job's id (an existing job's for a coalesced spec), and the actions.
    /// A job with dependencies starts only once all of them succeeded (``JobState/blocked``
    /// until then), and is skipped when one of them fails for good, is cancelled or skipped;
    /// a job with a start time waits for it (``JobState/scheduled(until:)``).
    ///
    /// - Throws: ``SchedulerError`` `.invalidArgument` for a priority outside
    ///   ``JobSpec/priorityRange``, a group name that is empty or has control characters, an
    ///   environment variable name that is empty or has an `=` (``validateEnvironment(_:)``), a
    ///   timeout of zero or less, or a
    ///   dependency that is not an earlier spec of the submission nor a known job, or a key that
    ///   a job the spec waits for has (it would be coalesced into its own dependency);
    ///   `.notAllowed` for a batch that is unknown, sealed or halted.
    public mutating func submit(
        contentsOf specs: [JobSpec], ids: [JobID], batch: BatchID? = nil, now: SchedulerTime
    ) throws(SchedulerError) -> (ids: [JobID], actions: [Action]) {
        precondition(specs.count == ids.count, "one id per spec")
        var dependencyCount = 0
        // Each spec's group, found once here (empty: every spec is in the default group; -1: a
        // name no group has yet, made when its job is). The specs are read in place, never
        // copied: a copy retains each of its arrays, and a DAG's specs each have a dependency
        // array of their own (an atomic count change on a line of its own, several per job).
        var specGroups: [Int32] = []
        // The keys of the specs so far, for a later spec's check (a scan per spec was quadratic).
        var earlierKeys: Set<String> = []
        for index in specs.indices {
            let priority = specs[index].priority
            if !JobSpec.priorityRange.contains(priority) {
                throw SchedulerError(.invalidArgument, "priority \(priority) is out of range (\(JobSpec.priorityRange.lowerBound) to \(JobSpec.priorityRange.upperBound))")
            }
            if !specs[index].environment.isEmpty { try Self.validateEnvironment(specs[index].environment) }
            if let timeout = specs[index].timeout, timeout <= .zero {
                // (It timed every attempt out at once, "timed out after 0ms".)
                throw SchedulerError(.invalidArgument, "job \(index + 1) of the submission has a timeout of \(timeout): it must be more than zero")
            }
            if let group = specs[index].group {
                if specGroups.isEmpty { specGroups = Array(repeating: 0, count: specs.count) }
                if let existing = existingGroup(named: group) {
                    specGroups[index] = existing
                } else {
                    try Self.validateGroupName(group)
                    specGroups[index] = -1
                }
            }
            dependencyCount += specs[index].dependencies.count
            for position in specs[index].dependencies.indices {
                switch specs[index].dependencies[position] {
                case .earlier(let other) where other < 0 || other >= index:
                    throw SchedulerError(.invalidArgument, "job \(index + 1) of the submission depends on job \(other + 1), which does not come before it")
                case .job(let id) where jobs.handle(of: id) == nil && droppedOutcome(of: id) == nil:
                    throw SchedulerError(.invalidArgument, "job \(index + 1) of the submission depends on \(id.short), which is not a known job (or one that ended before anything named it and was forgotten: the scheduler keeps the \(configuration.finishedRetention) most recent finished jobs)")
                default: break
                }
            }
            if let key = specs[index].coalescingKey {
                if !specs[index].dependencies.isEmpty { try checkKey(key, of: specs, at: index, isEarlierKey: earlierKeys.contains(key)) }
                earlierKeys.insert(key)
            }
        }
        if let batch {
            guard let record = batches[batch] else { throw SchedulerError(.notAllowed, "no batch \(batch)") }
            if record.isSealed { throw SchedulerError(.notAllowed, "batch \(batch) is sealed: it takes no more jobs") }
            if record.haltedBy != nil { throw SchedulerError(.notAllowed, "batch \(batch) was halted by a failure") }
        }
        var result: [JobID] = []
        result.reserveCapacity(specs.count)
        // Each spec's record, for the dependencies of later specs (nil for a coalesced one).
        var submittedHandles: [JobHandle?] = []
        if dependencyCount > 0 {
            submittedHandles.reserveCapacity(specs.count)
            // Room for their links at once (a DAG of 100,000 jobs grew them step by step, each
            // step fresh memory the kernel clears).
            edges.reserve(dependencyCount)
            dependencyLinks.reserve(dependencyCount)
        }
        reserveRecords(specs.count)
        for index in specs.indices {
            var group = specGroups.isEmpty ? 0 : specGroups[index]
            if group < 0 { group = groupHandle(named: specs[index].group!) }
            submitOne(specs[index], id: ids[index], group: group, batch: batch, now: now, result: &result, submittedHandles: &submittedHandles)
        }
        dispatch(now: now)
        return (result, takeActions())
    }

    /// Refuses a spec whose coalescing key is that of a job it waits for, directly or through
    /// others: it would be coalesced into its own dependency (the active job with the key, or
    /// an earlier spec of the submission with it) and never run, its `after` silently void.
    /// Only unfinished jobs are followed: a finished one's own dependencies have ended.
    /// `isEarlierKey`: an earlier spec of the submission has the key.
    private func checkKey(_ key: String, of specs: [JobSpec], at index: Int, isEarlierKey: Bool) throws(SchedulerError) {
        let holder = keys[key]
        guard holder != nil || isEarlierKey else { return }
        var specsToSee = specs[index].dependencies
        var seenSpecs: Set<Int> = []
        var seenJobs: Set<JobID> = []
        while let dependency = specsToSee.popLast() {
            let which: String
            switch dependency {
            case .earlier(let other):
                guard seenSpecs.insert(other).inserted else { continue }
                guard specs[other].coalescingKey != key else {
                    which = "job \(other + 1) of the submission"
                    break
                }
                specsToSee.append(contentsOf: specs[other].dependencies)
                continue
            case .job(let id):
                guard seenJobs.insert(id).inserted else { continue }
                guard id != holder else {
                    which = id.short
                    break
                }
                if let handle = jobs.handle(of: id), !jobs[handle].info.state.isFinished {
                    specsToSee.append(contentsOf: dependencies(of: handle).map { .job($0) })
                }
                continue
            }
            throw SchedulerError(.invalidArgument, "job \(index + 1) of the submission has the key '\(key)' of \(which), which it waits for: it would be coalesced into its own dependency and never run")
        }
    }

    /// One spec of ``submit(contentsOf:ids:batch:now:)``, checked already, in its group (found).
    /// `spec` is the caller's, borrowed: the record keeps its own copy.
    private mutating func submitOne(
        _ spec: JobSpec, id: JobID, group: Int32, batch: BatchID?, now: SchedulerTime,
        result: inout [JobID], submittedHandles: inout [JobHandle?]
    ) {
        if let key = spec.coalescingKey, let existing = keys[key] {
            actions.append(.emit(.coalesced(existing: existing, key: key)))
            result.append(existing)
            submittedHandles.append(nil)
            return
        }
        if spec.dependencies.isEmpty && spec.notBefore == nil {
            // The common case, kept lean: straight to the queue.
            let (handle, info) = queue(spec, id: id, batch: batch, now: now, group: group)
            actions.append(.emit(.submitted(info)))
            result.append(id)
            submittedHandles.append(handle)
            return
        }
        // Each dependency once, with its record's handle where it has one: an earlier spec of
        // this submission is found without hashing its id.
        var dependencies: [JobID] = []
        dependencies.reserveCapacity(spec.dependencies.count)
        // A buffer reused from spec to spec (moved out and back: never shared, never copied).
        var records: [DependencyRecord] = []
        swap(&records, &scratchRecords)
        records.removeAllKeepingStorage()
        defer { swap(&records, &scratchRecords) }
        // A long list (a fan-in of thousands) is checked for repeats with a set: a scan of the
        // list so far per dependency made it quadratic.
        var named: Set<JobID> = spec.dependencies.count > 16 ? Set(minimumCapacity: spec.dependencies.count) : []
        var pending = 0
        var failedDependency: SkipReason?
        for position in spec.dependencies.indices {
            let other: JobID
            var otherHandle: JobHandle?
            // An earlier spec of this submission that is still listed has not ended: nothing
            // runs until the submission is in, and one skipped in it is no longer listed
            // (below), so its record, and its handle, are still its own. Neither is read: in a
            // long list each is a cache miss.
            var hasNotEnded = false
            switch spec.dependencies[position] {
            case .job(let job):
                other = job
                otherHandle = jobs.handle(of: job)
            case .earlier(let index):
                other = result[index]
                if let handle = submittedHandles[index] {
                    assert(jobs.handle(handle, matches: other), "an earlier spec still listed keeps its record")
                    otherHandle = handle
                    hasNotEnded = true
                } else {
                    otherHandle = jobs.handle(of: other)
                }
            }
            let isRepeat = spec.dependencies.count > 16 ? !named.insert(other).inserted : dependencies.contains(other)
            guard other != id, !isRepeat else { continue }
            dependencies.append(other)
            guard let outcome = hasNotEnded ? .queued : outcome(of: other, handle: otherHandle) else { continue }
            if let otherHandle { records.append(DependencyRecord(handle: otherHandle, hasSucceeded: outcome == .succeeded)) }
            if outcome == .succeeded { continue }
            pending += 1
            if outcome.isFinished && failedDependency == nil {
                failedDependency = skipReason(other, handle: otherHandle, outcome: outcome)
            }
        }
        let due = spec.notBefore.map { dueTime(of: $0, submittedAt: now) }.flatMap { $0 > now ? $0 : nil }
        let state: JobState = if let due { .scheduled(until: due) } else if pending > 0 { .blocked } else { .queued }
        var info = JobInfo(
            id: id, name: spec.name, command: spec.work.description, priority: spec.priority,
            state: state, attempts: 0, maxAttempts: spec.retry.maxAttempts, progress: nil,
            submittedAt: now, startedAt: nil, finishedAt: nil, lastFailure: nil, key: spec.coalescingKey,
            group: groups[Int(group)].info.name)
        if !spec.environment.isEmpty || spec.workingDirectory != nil { info.describe(spec) }
        info.order = nextSerial  // (its record's serial: registered below)
        let firstDependency = keepDependencies(dependencies)
        let handle = jobs.insert(for: id) {
            Job(
                handle: $0, info: info, batch: batch, group: group, notBefore: due,
                timeout: spec.timeout, firstDependency: firstDependency)
        }
        // The spec kept without its dependencies (the record has them, by id): its array is the
        // caller's, and releasing it when the record is dropped (out of submission order in
        // a DAG) would be a cache miss per job.
        keepSpec(spec, at: handle, withoutDependencies: true)
        // The event's copy names them (its array is freed with the event, in order).
        info.dependencies = dependencies
        registerRecord(handle)
        stateCounts[state.kind] += 1
        joined(batch, key: spec.coalescingKey, id: id)
        if state.kind.isHeld { jobLinks[Int(handle.index)].pending = Int32(pending) }
        submittedHandles.append(handle)
        for record in records {
            jobLinks[Int(record.handle.index)].isDependency = true
            // Registered even with a dependency that failed: retrying it brings this job back.
            if !record.hasSucceeded {
                addDependent(Dependent(serial: jobLinks[Int(handle.index)].serial, handle: handle), to: record.handle)
            }
        }
        switch state {
        case .scheduled(let until):
            groups[Int(group)].held += 1
            timers.insert(Timer(time: until, handle: handle, id: id, attempt: 0, purpose: .release))
        case .blocked:
            groups[Int(group)].held += 1
        default:
            break
        }
        actions.append(.emit(.submitted(info)))
        result.append(id)
        if let failedDependency {
            skip(handle, because: failedDependency, now: now)
            // It ended: a later spec that names it reads its record.
            submittedHandles[submittedHandles.count - 1] = nil
        } else if state == .queued {
            enqueue(handle)
        }
    }

    /// Makes a job's record and queues it: a submission's common case (no dependency, no start
    /// time; the caller has checked its priority and group and handles a coalescing key).
    private mutating func queue(
        _ spec: JobSpec, id: JobID, batch: BatchID?, now: SchedulerTime, attempts: Int = 0, lastFailure: FailureReason? = nil,
        group known: Int32? = nil, submittedAt: SchedulerTime? = nil
    ) -> (JobHandle, JobInfo) {
        let group = known ?? spec.group.map { groupHandle(named: $0) } ?? 0
        var info = JobInfo(
            id: id, name: spec.name, command: spec.work.description, priority: spec.priority,
            state: .queued, attempts: attempts, maxAttempts: spec.retry.maxAttempts, progress: nil,
            submittedAt: submittedAt ?? now, startedAt: nil, finishedAt: nil, lastFailure: lastFailure, key: spec.coalescingKey,
            group: groups[Int(group)].info.name)
        if !spec.environment.isEmpty || spec.workingDirectory != nil { info.describe(spec) }
        info.order = nextSerial  // (its record's serial: registered below)
        let handle = jobs.insert(for: id) {
            Job(handle: $0, info: info, batch: batch, group: group, timeout: spec.timeout)
        }
        keepSpec(spec, at: handle)
        registerRecord(handle)
        stateCounts[.queued] += 1
        joined(batch, key: spec.coalescingKey, id: id)
        enqueue(handle)
        return (handle, info)
    }

    /// Puts jobs back as a store recorded them before a restart, in submission order, with no
    /// start until the last is in (dispatch runs once, at the end). A finished job joins the
    /// finished history with the times recorded (``RestoredJob/finishedAt``; now if none); one
    /// that was waiting for a retry waits again until its ``RestoredJob/retryAt`` (queued if that has passed); any other is
    /// queued, blocked or scheduled as its dependencies and start time say, with the attempts it
    /// already used.
    ///
    /// Restored jobs are not announced with ``SchedulerEvent/Kind/submitted(_:)`` events (what
    /// happens to them next is: a skip, a start): restore before anyone subscribes, whose first
    /// snapshot then shows them.
    ///
    /// - Returns: The jobs that could not be put back (a dependency no longer known, a priority
    ///   out of range) with why, and the actions.
    public mutating func restore(
        _ restored: [RestoredJob], now: SchedulerTime
    ) -> (refused: [(id: JobID, error: SchedulerError)], actions: [Action]) {
        let wasHeld = isDispatchHeld
        isDispatchHeld = true
        var refused: [(id: JobID, error: SchedulerError)] = []
        var collected: [Action] = []
        reserveRecords(restored.count)
        for job in restored {
            // When it was submitted, on this clock (before its zero: a negative time).
            let submittedAt = job.submittedAt.map { pastTime(of: $0, now: now) }
            if jobs.handle(of: job.id) != nil || droppedOutcome(of: job.id) != nil {
                refused.append((job.id, SchedulerError(.invalidArgument, "job \(job.id.short) is restored twice")))
                continue
            }
            if let ending = job.ending {
                guard ending.isFinished else {
                    refused.append((job.id, SchedulerError(.invalidArgument, "job \(job.id.short) is restored with an ending that is not final")))
                    continue
                }
                let finishedAt = job.finishedAt.map { pastTime(of: $0, now: now) } ?? now
                let handle = restoreRecord(job, in: ending, lastFailure: job.lastFailure, submittedAt: submittedAt, finishedAt: finishedAt, now: now)
                if let started = job.startedAt { jobs[handle].info.history.startedAt = min(pastTime(of: started, now: now), finishedAt) }
                // A job restored later may name it: its outcome outlives its record.
                jobLinks[Int(handle.index)].isDependency = true
                // Among the dependents of each of its dependencies that did not succeed, as a
                // submission registers it: retrying that one brings a skipped job back (after a
                // restart it stayed skipped, and its own retry was refused for the dependency).
                for case .job(let dependency) in job.spec.dependencies {
                    guard let record = jobs.handle(of: dependency), jobs[record].info.state.kind != .succeeded else { continue }
                    addDependent(Dependent(serial: jobLinks[Int(handle.index)].serial, handle: handle), to: record)
                }
                finishedOrder.append(handle)
                continue
            }
            let spec = job.spec
            // Nothing to resolve or check: no dependency or key, a valid priority, a group that
            // exists or may be made. (A new group sent a job waiting for its retry through a
            // submission, which queued it: the first of its group to come back after a restart
            // retried at once.)
            let isPlain = spec.dependencies.isEmpty && spec.coalescingKey == nil && JobSpec.priorityRange.contains(spec.priority)
                && (spec.group.map { existingGroup(named: $0) != nil || (try? Self.validateGroupName($0)) != nil } ?? true)
            if isPlain, let retryAt = job.retryAt, job.attempts > 0,
               case let due = dueTime(of: .date(retryAt), submittedAt: now), due > now {
                // It waits out the rest of its backoff, as it would have without the restart.
                let reason = job.lastFailure ?? .error("failed")
                let handle = restoreRecord(
                    job, in: .waitingForRetry(until: due, failedAttempt: job.attempts, reason: reason), lastFailure: reason,
                    submittedAt: submittedAt, finishedAt: nil, now: now)
                timers.insert(Timer(time: due, handle: handle, id: job.id, attempt: job.attempts, purpose: .retry))
                continue
            }
            if isPlain, spec.notBefore == nil {
                // Most of a restart: straight to the queue, with the attempts it used (no
                // submission of one, with its arrays and event, per job).
                _ = queue(spec, id: job.id, batch: nil, now: now, attempts: job.attempts, lastFailure: job.lastFailure, submittedAt: submittedAt)
                continue
            }
            do {
                let (_, actions) = try submit(contentsOf: [job.spec], ids: [job.id], now: now)
                // Not announced one by one (100,000 events a restart, each a copy of the job
                // for every subscriber, and the attempts in it not yet restored): a subscriber
                // sees the restored jobs in its first snapshot.
                for action in actions {
                    if case .emit(.submitted) = action { continue }
                    collected.append(action)
                }
            } catch {
                refused.append((job.id, error))
                continue
            }
            if let handle = jobs.handle(of: job.id) {
                jobs[handle].info.history.attempts = job.attempts
                jobs[handle].info.history.lastFailure = job.lastFailure
                if let submittedAt { jobs[handle].info.submittedAt = submittedAt }
            }
        }
        // The finished in the order they ended, as before the restart (they came in submission
        // order: `status --all` and the dashboard listed them reversed), then the oldest beyond
        // the retention dropped.
        let ended = finishedOrder.enumerated().map { (order: $0.offset, handle: $0.element) }
        finishedOrder = Deque(ended.sorted { a, b in
            let (x, y) = (jobs[a.handle].info.history.finishedAt ?? now, jobs[b.handle].info.history.finishedAt ?? now)
            return x != y ? x < y : a.order < b.order
        }.map(\.handle))
        dropFinishedBeyondRetention()
        isDispatchHeld = wasHeld
        dispatch(now: now)
        collected.append(contentsOf: takeActions())
        return (refused, collected)
    }

    /// Makes the record of a restored job that is put back in `state` as it is (ended, or
    /// waiting for a retry), with its dependencies kept by id and counted in its state. It
    /// holds no coalescing key (a finished job's may be taken by another; a job with one is not
    /// put back waiting).
    private mutating func restoreRecord(
        _ job: RestoredJob, in state: JobState, lastFailure: FailureReason?, submittedAt: SchedulerTime?, finishedAt: SchedulerTime?,
        now: SchedulerTime
    ) -> JobHandle {
        let group = job.spec.group.map { groupHandle(named: $0) } ?? 0
        var info = JobInfo(
            id: job.id, name: job.spec.name, command: job.spec.work.description, priority: job.spec.priority,
            state: state, attempts: job.attempts, maxAttempts: job.spec.retry.maxAttempts, progress: nil,
            submittedAt: submittedAt ?? now, startedAt: nil, finishedAt: finishedAt, lastFailure: lastFailure,
            key: nil, group: groups[Int(group)].info.name)
        if !job.spec.environment.isEmpty || job.spec.workingDirectory != nil { info.describe(job.spec) }
        info.order = nextSerial  // (its record's serial: registered below)
        let firstDependency = keepDependencies(job.spec.dependencies.compactMap { if case .job(let id) = $0 { id } else { nil } })
        // Its start time, if still ahead: a retry (or a skip undone) waits for it, as it would
        // have without the restart (it ran at once).
        let notBefore = job.spec.notBefore.map { dueTime(of: $0, submittedAt: submittedAt ?? now) }.flatMap { $0 > now ? $0 : nil }
        let handle = jobs.insert(for: job.id) {
            Job(handle: $0, info: info, batch: nil, group: group, notBefore: notBefore, timeout: job.spec.timeout, firstDependency: firstDependency)
        }
        keepSpec(job.spec, at: handle, withoutDependencies: true)
        registerRecord(handle)
        stateCounts[state.kind] += 1
        // Waiting for its retry: held in its group's line, as it would be without the restart.
        if state.kind.isHeldInGroup { groups[Int(group)].held += 1 }
        return handle
    }

    /// Makes room for `extra` more records and their specs at once.
    private mutating func reserveRecords(_ extra: Int) {
        jobs.reserve(extra)
        if recordSpecs.capacity < jobs.capacity { recordSpecs.reserveCapacity(jobs.capacity) }
        if jobLinks.capacity < jobs.capacity { jobLinks.reserveCapacity(jobs.capacity) }
    }

    /// Keeps `spec` as the spec of the new record at `handle` (``recordSpecs``).
    ///
    /// - Parameter withoutDependencies: Keep it with no dependencies (the record has them, by
    ///   id). They are cleared in the kept copy, in place: a spec copied without them first
    ///   (`withoutDependencies`) and then copied into the table cost two copies of every field
    ///   and a destroy per job, 3% of a DAG's core time.
    private mutating func keepSpec(_ spec: JobSpec, at handle: JobHandle, withoutDependencies: Bool = false) {
        let index = Int(handle.index)
        if index < recordSpecs.count {
            recordSpecs[index] = spec
        } else {
            if index > recordSpecs.count { recordSpecs.append(contentsOf: repeatElement(nil, count: index - recordSpecs.count)) }
            recordSpecs.append(spec)
        }
        if withoutDependencies && !spec.dependencies.isEmpty { recordSpecs[index]?.dependencies = [] }
    }

    /// Counts a new job in its batch and records its key.
    private mutating func joined(_ batch: BatchID?, key: String?, id: JobID) {
        if let batch {
            batches[batch]!.unfinished += 1
            batches[batch]!.hasSettled = false
        }
        if let key { keys[key] = id }
    }

    /// The time on this clock of a `date` a store recorded: before the clock's zero after a
    /// restart (a negative time), never after `now` (a wall clock set back since).
    private func pastTime(of date: Date, now: SchedulerTime) -> SchedulerTime {
        min(dueTime(of: .date(date), submittedAt: now), now)
    }

    /// The time on this clock a start time stands for.
    private func dueTime(of start: JobSpec.StartTime, submittedAt now: SchedulerTime) -> SchedulerTime {
        switch start {
        case .delay(let delay): now + delay
        case .date(let date):
            .nanoseconds(Int64(min(max((date.timeIntervalSince(configuration.wallClockEpoch) * 1e9).rounded(.up), -9e18), 9e18)))
        }
    }

    /// Refuses a group name no screen or log could show. Public so that a client (a job file's
    /// reader) refuses the same names before it submits anything.
    ///
    /// - Throws: ``SchedulerError`` `.invalidArgument` for an empty name, one longer than 64
    ///   bytes, or one with a space or a control character.
    public static func validateGroupName(_ name: String) throws(SchedulerError) {
        if name.isEmpty { throw SchedulerError(.invalidArgument, "a group name cannot be empty") }
        if name.utf8.count > 64 {
            throw SchedulerError(.invalidArgument, "group name '\(name.prefix(20))...' is \(name.utf8.count) bytes long; the most is 64")
        }
        if let bad = name.unicodeScalars.first(where: { $0.properties.generalCategory == .control || $0 == " " }) {
            throw SchedulerError(.invalidArgument, "group name \(name.debugDescription) has a \(bad == " " ? "space" : "control character")")
        }
    }

    /// Checks the names of the variables a spec adds to the environment: a process's
    /// environment is `NAME=value` strings, so a name with `=` would set another variable (`A=B`
    /// set `A` to `B=…`), and an empty one or one with a NUL byte none at all.
    ///
    /// - Throws: ``SchedulerError`` `.invalidArgument` naming the first bad name.
    public static func validateEnvironment(_ environment: [String: String]) throws(SchedulerError) {
        for (name, value) in environment {
            if name.isEmpty { throw SchedulerError(.invalidArgument, "an environment variable's name cannot be empty") }
            if name.utf8.contains(UInt8(ascii: "=")) {
                throw SchedulerError(.invalidArgument, "environment variable name \(name.debugDescription) has an '=' (it would set another variable)")
            }
            if name.utf8.contains(0) || value.utf8.contains(0) {
                throw SchedulerError(.invalidArgument, "environment variable \(name.debugDescription) has a NUL byte")
            }
        }
    }

    /// Opens a batch: the jobs of one run, followed as a whole.
    ///
    /// Jobs join it when submitted with its id. Once it is sealed (no more jobs will come) and
    /// every job of it has ended, the core emits ``SchedulerEvent/Kind/batchSettled(_:)``. With
    /// `haltsOnFailure`, the first job of it that fails for good halts it in the same step: every
    /// other job of it is cancelled and none of them starts after the failure.
    public mutating func openBatch(haltsOnFailure: Bool) -> BatchID {
        let id = BatchID(rawValue: nextBatch)
        nextBatch += 1
        batches[id] = Batch(haltsOnFailure: haltsOnFailure)
        return id
    }

    /// Says that no more jobs will join `batch`; it settles when its last job ends (at once when
    /// none is left).
    public mutating func sealBatch(_ id: BatchID, now: SchedulerTime) -> [Action] {
        guard batches[id] != nil, !batches[id]!.isSealed else { return [] }
        batches[id]!.isSealed = true
        batchesToCheck.append(id)
        return takeActions()
    }

    /// Cancels a job: a queued or waiting job ends at once, a running one is stopped and ends
    /// `cancelled` when its process group is gone.
    public mutating func cancel(_ id: JobID, now: SchedulerTime) throws(SchedulerError) -> [Action] {
        try cancelInPlace(id, now: now)
        dispatch(now: now)
        return takeActions()
    }

    /// Cancels job `id` only if it is queued (it has not started): what a worker does with a
    /// held assignment its coordinator asks back. Returns whether it did, and the actions.
    public mutating func cancelIfQueued(_ id: JobID, now: SchedulerTime) -> (cancelled: Bool, actions: [Action]) {
        guard let handle = jobs.handle(of: id), jobs[handle].info.state == .queued else { return (false, []) }
        guard (try? cancelInPlace(id, now: now)) != nil else { return (false, takeActions()) }
        dispatch(now: now)
        return (true, takeActions())
    }

    /// Cancels several jobs in one step, as ``cancel(_:now:)`` does each: every queued or waiting
    /// one ends before dispatch runs, so a slot that a cancelled job frees never starts another
    /// of them first. A job named twice is cancelled once.
    ///
    /// - Returns: The jobs refused (unknown, already ended) with why, in the order named, and
    ///   the actions.
    public mutating func cancel(
        _ ids: [JobID], now: SchedulerTime
    ) -> (refused: [(id: JobID, error: SchedulerError)], actions: [Action]) {
        var refused: [(id: JobID, error: SchedulerError)] = []
        var seen: Set<JobID> = []
        for id in ids where seen.insert(id).inserted {
            do throws(SchedulerError) {
                try cancelInPlace(id, now: now)
            } catch {
                refused.append((id, error))
            }
        }
        dispatch(now: now)
        return (refused, takeActions())
    }

    /// Changes a job's priority. A queued job moves in the queue at once; a waiting or running
    /// job keeps the new priority for its next attempt.
    public mutating func reprioritize(_ id: JobID, to priority: Int, now: SchedulerTime) throws(SchedulerError) -> [Action] {
        guard var job = jobs[id] else { throw unknown(id) }
        guard !job.info.state.isFinished else {
            throw SchedulerError(.notAllowed, "job \(id.short) has already ended (\(job.info.state.name))")
        }
        guard JobSpec.priorityRange.contains(priority) else {
            throw SchedulerError(.invalidArgument, "priority \(priority) is out of range (\(JobSpec.priorityRange.lowerBound) to \(JobSpec.priorityRange.upperBound))")
        }
        let old = job.info.priority
        guard old != priority else { return [] }
        job.info.priority = priority
        jobs[job.handle] = job
        if groups[Int(job.group)].queue.updatePriority(job.handle, to: priority, positions: &queuePositions) {
            refreshHead(job.group)
        }
        actions.append(.emit(.reprioritized(id, from: old, to: priority)))
        // A job sent to a worker that holds it: that worker orders what it holds by the priority
        // it was sent with, so it hears of the new one (it started after a lower one it held).
        if case .running(let worker, let attempt, _, _) = job.info.state, isHeldAtWorker(job.handle), job.withdrawal == nil {
            actions.append(.reprioritizeHeld(id, attempt: attempt, worker: worker, priority: priority))
        }
        // A queued job raised (or a held one lowered) may outrank what a worker holds now.
        if pool.withdrawingMembers > 0 { withdrawOutranked() }
        return takeActions()
    }

    /// Puts a failed, cancelled or skipped job back with a fresh retry budget: in the queue, or
    /// `blocked` while dependencies of it have not succeeded, or `scheduled` while its start time
    /// is still to come. The jobs skipped because of it come back (blocked) with it.
    ///
    /// - Throws: ``SchedulerError`` `.notAllowed` for a job in another state, or with a
    ///   dependency that failed for good (retry that one first).
    public mutating func retry(_ id: JobID, now: SchedulerTime) throws(SchedulerError) -> [Action] {
        guard let handle = jobs.handle(of: id) else { throw unknown(id) }
        switch jobs[handle].info.state {
        case .failed, .cancelled, .skipped: break
        default:
            throw SchedulerError(.notAllowed, "only a failed, cancelled or skipped job can be retried; job \(id.short) \(predicate(of: handle))")
        }
        if shutdownMode != nil && shutdownMode != .drain {
            throw SchedulerError(.shuttingDown, "the scheduler is shutting down")
        }
        let (pending, failedDependency) = dependencyStatus(dependencies(of: handle))
        if let failedDependency {
            // Through skipped ones to the job that really ended badly: the one a retry helps
            // (`retry c` of a→b→c named b, which was refused too).
            var root = failedDependency
            var seen: Set<JobID> = [id]
            while root.outcome == .skipped, seen.insert(root.dependency).inserted, let other = jobs.handle(of: root.dependency),
                  case .skipped(let next) = jobs[other].info.state {
                root = next
            }
            let which = root.dependency == failedDependency.dependency ? "that one" : "'\(root.dependencyName)'"
            throw SchedulerError(.notAllowed, "job \(id.short) cannot run: \(failedDependency); retry \(which) first")
        }
        if let key = recordSpecs[Int(handle.index)]?.coalescingKey {
            if let other = keys[key], other != id {
                throw SchedulerError(.notAllowed, "job \(other.short) with the same key '\(key)' is still active")
            }
        }
        let due = jobs[handle].notBefore.flatMap { $0 > now ? $0 : nil }
        let next: JobState = if let due { .scheduled(until: due) } else if pending > 0 { .blocked } else { .queued }
        guard transition(handle, to: next) else {
            throw SchedulerError(.notAllowed, "job \(id.short) cannot go back from \(jobs[handle].info.state.name)")
        }
        reopen(handle)
        jobs[handle].info.history.attempts = 0
        // No attempt of the new round has started (cancelled before it ran, it showed the run
        // time from its last start, long before).
        jobs[handle].info.history.startedAt = nil
        jobs[handle].info.progress = nil
        jobs[handle].workerLosses = 0
        if next.kind.isHeld { jobLinks[Int(handle.index)].pending = Int32(pending) }
        actions.append(.emit(.requeued(id, reason: .retriedByUser)))
        hold(handle, in: next)
        bringBackDependents(of: handle, now: now)
        dispatch(now: now)
        return takeActions()
    }

    /// Stops starting jobs; running ones go on.
    public mutating func pause(now: SchedulerTime) -> [Action] {
        guard !isPaused else { return [] }
        isPaused = true
        actions.append(.emit(.paused))
        withdrawHeld(for: .forPause, group: nil)
        return takeActions()
    }

    /// Starts jobs again.
    public mutating func resume(now: SchedulerTime) -> [Action] {
        guard isPaused else { return [] }
        isPaused = false
        actions.append(.emit(.resumed))
        dispatch(now: now)
        return takeActions()
    }

    /// Holds back (or lets go) the start of new jobs while a lossless subscriber catches up with
    /// the events. Not a pause: nobody asked for it, so no event says it, and running jobs go on.
    public mutating func holdDispatch(_ held: Bool, now: SchedulerTime) -> [Action] {
        guard held != isDispatchHeld else { return [] }
        isDispatchHeld = held
        if !held { dispatch(now: now) }
        return takeActions()
    }

    /// Adds a worker's slots to the pool.
    ///
    /// - Parameter holdsAttempts: An attempt handed to it may wait there before it starts
    ///   (``Worker/holdsAttempts``): its timeout counts from ``attemptBegan(_:attempt:now:)``.
    public mutating func workerJoined(_ descriptor: WorkerDescriptor, holdsAttempts: Bool = false, now: SchedulerTime) -> [Action] {
        var descriptor = descriptor
        descriptor.holdsAttempts = descriptor.holdsAttempts || holdsAttempts
        pool.join(descriptor)
        actions.append(.emit(.workerJoined(descriptor)))
        actions.append(.emit(.slotsChanged(local: localCapacity, total: capacity)))
        dispatch(now: now)
        return takeActions()
    }

    /// Gives a worker in the pool `slots` slots (at least 1): more start queued jobs at once;
    /// fewer take effect as its jobs end (none is stopped). Nothing happens for a worker that is
    /// not in the pool or retiring, or for the count it has.
    public mutating func setWorkerSlots(_ worker: WorkerID, to slots: Int, now: SchedulerTime) -> [Action] {
        guard pool.resize(worker, to: slots) else { return [] }
        actions.append(.emit(.workerResized(worker, slots: slots)))
        actions.append(.emit(.slotsChanged(local: localCapacity, total: capacity)))
        dispatch(now: now)
        return takeActions()
    }

    /// A worker is gone: its running jobs go back to the queue (a bounded number of times per
    /// job, then the attempt counts as failed); cancelled ones end `cancelled`.
    ///
    /// - Parameter delivered: Whether a job's attempt had reached the worker: one that had not
    ///   (handed to a worker whose connection had closed) is requeued without counting among
    ///   the job's worker losses.
    public mutating func workerLost(
        _ worker: WorkerID, reason: WorkerLeaveReason, now: SchedulerTime, delivered: (JobID, Int) -> Bool = { _, _ in true }
    ) -> [Action] {
        // A worker that already left (retired, say) is not lost again.
        guard let handle = pool.handle(of: worker) else { return [] }
        let holdsAttempts = pool[handle].holdsAttempts
        let running = pool.remove(handle).sorted { jobs.id(at: $0) < jobs.id(at: $1) }
        for runningHandle in running {
            jobs[runningHandle].worker = nil
            jobs[runningHandle].withdrawal = nil
            guard case .running(_, let attempt, _, let stopping) = jobs[runningHandle].info.state else { continue }
            // A loss counts against the job only for an attempt that reached its worker and
            // began there: one it held behind a busy slot never ran (a job held through four
            // losses failed "worker lost" without ever running).
            let began = !holdsAttempts || jobs[runningHandle].hasBegun
            let counts = began && delivered(jobs[runningHandle].info.id, attempt)
            settle(runningHandle, attempt: attempt, stopping: stopping, termination: .workerLost(reason), countsAsLoss: counts, began: began, now: now)
        }
        actions.append(.emit(.workerLeft(worker, reason: reason)))
        actions.append(.emit(.slotsChanged(local: localCapacity, total: capacity)))
        dispatch(now: now)
        return takeActions()
    }

    /// Retires local workers until `slots` remain: idle ones leave at once, busy ones when their
    /// job ends. Adding slots is done with ``workerJoined(_:now:)``.
    public mutating func reduceLocalSlots(to slots: Int, now: SchedulerTime) -> [Action] {
        var excess = localCapacity - max(0, slots)
        guard excess > 0 else { return [] }
        let local = pool.orderedMembers.filter { $0.descriptor.kind == .local && !$0.isRetiring }
        // Idle workers first (newest first), then busy ones.
        let candidates = local.filter { $0.running.isEmpty }.reversed() + local.filter { !$0.running.isEmpty }.reversed()
        for member in candidates where excess > 0 {
            excess -= member.descriptor.slots
            if pool.retire(member.descriptor.id, reason: .slotsReduced) {
                actions.append(.removeWorker(member.descriptor.id))
                actions.append(.emit(.workerLeft(member.descriptor.id, reason: .slotsReduced)))
            }
        }
        actions.append(.emit(.slotsChanged(local: localCapacity, total: capacity)))
        return takeActions()
    }

    /// Raises the local slots towards `slots` by keeping the local workers that were to leave
    /// once their job ended (``reduceLocalSlots(to:now:)`` on busy ones); the caller adds new
    /// workers for the rest (``workerJoined(_:holdsAttempts:now:)``).
    ///
    /// - Returns: How many slots were kept, and the actions.
    public mutating func keepLocalSlots(upTo slots: Int, now: SchedulerTime) -> (kept: Int, actions: [Action]) {
        let kept = pool.keepLeavingLocalWorkers(upTo: slots)
        guard kept > 0 else { return (0, []) }
        actions.append(.emit(.slotsChanged(local: localCapacity, total: capacity)))
        dispatch(now: now)
        return (kept, takeActions())
    }

    /// A worker takes no new jobs and leaves when its running ones end (at once when idle): a
    /// remote worker that drains, say. Its jobs are not requeued.
    public mutating func retireWorker(_ worker: WorkerID, reason: WorkerLeaveReason, now: SchedulerTime) -> [Action] {
        guard pool.contains(worker) else { return [] }
        if pool.retire(worker, reason: reason) {
            actions.append(.removeWorker(worker))
            actions.append(.emit(.workerLeft(worker, reason: reason)))
        }
        actions.append(.emit(.slotsChanged(local: localCapacity, total: capacity)))
        return takeActions()
    }

    /// Begins a shutdown. A shutdown under way only gives way to a stronger one: a drain to a
    /// graceful one, either to one that stops the running jobs, and that to one that also
    /// cancels the queue.
    public mutating func shutdown(_ mode: ShutdownMode, now: SchedulerTime) -> [Action] {
        if shutdownMode == .cancelRunning { return [] }
        if shutdownMode == .stopRunning && mode != .cancelRunning { return [] }
        if shutdownMode == .graceful && mode == .drain { return [] }
        shutdownMode = mode
        actions.append(.emit(.shuttingDown(mode)))
        if mode == .stopRunning {
            stopRunningAttempts(now: now)
        } else if mode == .cancelRunning {
            for handle in queuedHandlesInOrder() {
                let id = jobs[handle].info.id
                dequeue(handle)
                finish(handle, as: .cancelled, now: now)
                actions.append(.emit(.cancelled(id)))
            }
            let active = jobs.values.filter { !$0.info.state.isFinished && $0.info.state.kind != .queued }
            for job in active.sorted(by: { $0.info.submittedAt < $1.info.submittedAt }) {
                _ = try? cancelInPlace(job.handle, now: now)
            }
        } else {
            // A graceful shutdown starts nothing new: what a worker holds and has not begun
            // would start as soon as its slot freed (a serve's `shutdown` ran every job
            // prefetched to a worker, one after another). It is asked back, to the queue.
            if mode == .graceful { withdrawHeld(for: .forShutdown, group: nil) }
            dispatch(now: now)
        }
        return takeActions()
    }

    // MARK: - Groups

    /// Sets how many jobs of group `name` run at once (`nil`: no limit beyond the slots), making
    /// the group if it is new. Raising the limit starts waiting jobs at once; lowering it below
    /// what runs stops nothing.
    public mutating func setGroupLimit(_ name: String, to limit: Int?, now: SchedulerTime) throws(SchedulerError) -> [Action] {
        try Self.validateGroupName(name)
        if let limit, limit < 1 {
            throw SchedulerError(.invalidArgument, "group '\(name)': the limit must be at least 1, not \(limit)")
        }
        let isNew = groupIndex[name] == nil
        let group = groupHandle(named: name, announce: false)
        guard isNew || groups[Int(group)].info.limit != limit else { return takeActions() }
        groups[Int(group)].info.limit = limit
        refreshHead(group)
        actions.append(.emit(.groupChanged(groups[Int(group)].info)))
        dispatch(now: now)
        return takeActions()
    }

    /// Starts no new job of group `name` (making it if it is new); its running jobs go on.
    public mutating func pauseGroup(_ name: String, now: SchedulerTime) throws(SchedulerError) -> [Action] {
        try Self.validateGroupName(name)
        let isNew = groupIndex[name] == nil
        let group = groupHandle(named: name, announce: false)
        guard isNew || !groups[Int(group)].info.isPaused else { return takeActions() }
        groups[Int(group)].info.isPaused = true
        refreshHead(group)
        actions.append(.emit(.groupChanged(groups[Int(group)].info)))
        withdrawHeld(for: .forPause, group: group)
        return takeActions()
    }

    /// Starts group `name`'s jobs again.
    public mutating func resumeGroup(_ name: String, now: SchedulerTime) throws(SchedulerError) -> [Action] {
        guard let group = groupIndex[name] else { throw SchedulerError(.invalidArgument, "no group '\(name)'") }
        guard groups[Int(group)].info.isPaused else { return [] }
        groups[Int(group)].info.isPaused = false
        refreshHead(group)
        actions.append(.emit(.groupChanged(groups[Int(group)].info)))
        dispatch(now: now)
        return takeActions()
    }

    // MARK: - Results

    /// An attempt ended. Results for an attempt that is no longer running are ignored.
    ///
    /// - Parameters:
    ///   - stopTookEffect: Whether the stop requested for it (if any) came before the work
    ///     ended. When it came too late the attempt ended on its own and keeps its own outcome:
    ///     a job that ran to its end is reported as it ended, never `cancelled`.
    public mutating func jobFinished(
        _ id: JobID, attempt: Int, worker: WorkerID, termination: Termination, stopTookEffect: Bool = true,
        now: SchedulerTime
    ) -> [Action] {
        guard let handle = jobs.handle(of: id) else { return takeActions() }
        finishAttempt(handle, attempt: attempt, worker: worker, termination: termination, stopTookEffect: stopTookEffect, now: now)
        return takeActions()
    }

    /// ``jobFinished(_:attempt:worker:termination:stopTookEffect:now:)`` for a job the caller
    /// knows by handle (checked against `id`): the scheduler's path, without a hashed lookup.
    /// The actions wait for ``moveActions(into:starts:)``.
    mutating func jobFinished(
        _ handle: JobHandle, id: JobID, attempt: Int, worker: WorkerID, termination: Termination, stopTookEffect: Bool,
        now: SchedulerTime
    ) {
        guard jobs.handle(handle, matches: id) else { return }
        collectsStarts = true
        finishAttempt(handle, attempt: attempt, worker: worker, termination: termination, stopTookEffect: stopTookEffect, now: now)
    }

    /// Moves the actions decided so far into `buffer`, and the handles of the jobs their
    /// `.start`s name (in order) into `starts`. Both must be empty; they come back full and go
    /// back empty next time, so the scheduler's steps reuse two buffers instead of allocating
    /// an array each.
    mutating func moveActions(into buffer: inout [Action], starts: inout [Start]) {
        if let last = endedDependencies.last { dispatch(now: last.time) }
        if !batchesToCheck.isEmpty { emitSettledBatches() }
        nextDeadline = timers.min?.time
        swap(&buffer, &actions)
        swap(&starts, &startedHandles)
        collectsStarts = false
    }

    /// The handle of job `id`, if it is known (a hashed lookup).
    func handle(of id: JobID) -> JobHandle? { jobs.handle(of: id) }

    /// What the performer needs to launch a `.start` of job `id` (a hashed lookup), for actions
    /// that came without their ``Start``s.
    func launch(of id: JobID) -> Start? {
        guard let handle = jobs.handle(of: id) else { return nil }
        return Start(handle: handle, submitted: SubmittedSpec(recordSpecs[Int(handle.index)]!), priority: jobs[handle].info.priority)
    }

    private mutating func finishAttempt(
        _ handle: JobHandle, attempt: Int, worker: WorkerID, termination: Termination, stopTookEffect: Bool,
        now: SchedulerTime
    ) {
        guard case .running(let runningWorker, let runningAttempt, _, let stopping) = jobs[handle].info.state,
            runningWorker == worker, runningAttempt == attempt, let workerHandle = jobs[handle].worker
        else { return }
        jobs[handle].worker = nil
        let withdrawal = jobs[handle].withdrawal
        jobs[handle].withdrawal = nil
        let began = !pool[workerHandle].holdsAttempts || jobs[handle].hasBegun
        let retiredReason = pool.checkIn(handle, from: workerHandle)
        if termination == .withdrawn {
            // Given back unbegun: back to the queue, or cancelled if a cancel came meanwhile.
            settle(
                handle, attempt: attempt, stopping: stopping, termination: termination, began: false,
                withdrawal: withdrawal, now: now)
        } else if let stopping, !stopTookEffect {
            settleUnstopped(handle, attempt: attempt, requested: stopping, termination: termination, now: now)
        } else {
            settle(handle, attempt: attempt, stopping: stopping, termination: termination, began: began, now: now)
        }
        // The job's end comes first, then its retired worker leaves.
        if let reason = retiredReason {
            actions.append(.removeWorker(worker))
            actions.append(.emit(.workerLeft(worker, reason: reason)))
        }
        dispatch(now: now)
    }

    /// A worker that holds attempts (``Worker/holdsAttempts``) started one: it runs from `now`
    /// (its state's `since`, its `began` event), and its timeout counts from here. Nothing for an
    /// attempt that has ended or is being stopped, on another worker, or told twice.
    public mutating func attemptBegan(_ id: JobID, attempt: Int, now: SchedulerTime) -> [Action] {
        guard let handle = jobs.handle(of: id),
              case .running(let workerID, attempt, _, nil) = jobs[handle].info.state,
              let worker = jobs[handle].worker, pool[worker].holdsAttempts,  // else it began at dispatch
              !jobs[handle].hasBegun
        else { return [] }
        jobs[handle].hasBegun = true
        // Asked back too late: another that its worker still holds may take the free slot (or
        // make way for the queued job that outranked this one).
        let lapsed = jobs[handle].withdrawal == .forFreeSlot || jobs[handle].withdrawal == .forPriority
        jobs[handle].withdrawal = nil
        // The same state with its real start: a running job stays running (no transition).
        jobs[handle].info.state = .running(worker: workerID, attempt: attempt, since: now, stopping: nil)
        jobs[handle].info.history.startedAt = now
        if let timeout = jobs[handle].timeout {
            timers.insert(Timer(time: now + timeout, handle: handle, id: id, attempt: attempt, purpose: .timeout))
        }
        actions.append(.emit(.began(id, attempt: attempt)))
        if lapsed { dispatch(now: now) }
        // Asked back for a shutdown that stops what runs, too late: it is stopped as the others were.
        if shutdownMode == .stopRunning { stopForShutdown(handle) }
        return takeActions()
    }

    /// Fires every timer due at `now`: retries become queued, timeouts stop their attempt.
    public mutating func timersDue(now: SchedulerTime) -> [Action] {
        while let timer = timers.min, timer.time <= now {
            _ = timers.popMin()
            guard jobs.handle(timer.handle, matches: timer.id) else { continue }
            var job = jobs[timer.handle]
            switch (timer.purpose, job.info.state) {
            case (.retry, .waitingForRetry(_, let failedAttempt, _)) where failedAttempt == timer.attempt:
                guard transition(&job, to: .queued) else { continue }
                jobs[timer.handle] = job
                enqueue(timer.handle)
                actions.append(.emit(.requeued(timer.id, reason: .retryDue)))
            case (.release, .scheduled(let until)) where until == timer.time:
                let (pending, failedDependency) = dependencyStatus(dependencies(of: timer.handle))
                if let failedDependency {
                    skip(timer.handle, because: failedDependency, now: now)
                    continue
                }
                let next: JobState = pending > 0 ? .blocked : .queued
                guard transition(timer.handle, to: next) else { continue }
                if next.kind.isHeld { jobLinks[Int(timer.handle.index)].pending = Int32(pending) }
                if next == .queued { actions.append(.emit(.released(timer.id))) }
                hold(timer.handle, in: next)
            case (.timeout, .running(let worker, let attempt, let since, nil)) where attempt == timer.attempt:
                guard transition(&job, to: .running(worker: worker, attempt: attempt, since: since, stopping: .timeout)) else { continue }
                jobs[timer.handle] = job
                actions.append(.emit(.stopping(timer.id, .timeout)))
                actions.append(.stop(timer.id, worker: worker, reason: .timeout))
            default:
                continue  // stale: the job moved on
            }
        }
        dispatch(now: now)
        return takeActions()
    }

    // MARK: - Snapshot

    /// The present state. `progress` supplies the latest progress of running jobs.
    public func snapshot(seq: UInt64, now: SchedulerTime, progress: (JobID) -> Double?) -> SchedulerSnapshot {
        // Ties are put in submission order (a record's serial: records are made in it), never
        // in the ids' random order: a screen numbers the jobs of its first snapshot in this
        // order, and lists running jobs (started together, submitted together) by it.
        var running: [(serial: UInt64, info: JobInfo)] = []
        var waiting: [(until: SchedulerTime, serial: UInt64, info: JobInfo)] = []
        var scheduled: [(until: SchedulerTime, serial: UInt64, info: JobInfo)] = []
        var blocked: [(serial: UInt64, info: JobInfo)] = []
        var held: Set<JobID> = []
        jobs.forEachHandle { handle in
            let serial = jobLinks[Int(handle.index)].serial
            switch jobs[handle].info.state {
            case .running:
                var info = shownInfo(handle)
                info.progress = progress(info.id) ?? info.progress
                running.append((serial, info))
                if isHeldAtWorker(handle) { held.insert(info.id) }
            case .waitingForRetry(let until, _, _): waiting.append((until, serial, shownInfo(handle)))
            case .scheduled(let until): scheduled.append((until, serial, shownInfo(handle)))
            case .blocked: blocked.append((serial, shownInfo(handle)))
            default: break
            }
        }
        scheduled.sort { ($0.until, $0.serial) < ($1.until, $1.serial) }
        waiting.sort { ($0.until, $0.serial) < ($1.until, $1.serial) }
        blocked.sort { $0.serial < $1.serial }
        running.sort { $0.serial < $1.serial }
        // Each job copied once, straight into the list (not into an array per part first: with
        // 100,000 queued jobs that second copy was a tenth of serving attach's snapshot).
        var list: [JobInfo] = []
        list.reserveCapacity(jobs.count)
        for entry in running { list.append(entry.info) }
        for handle in queuedHandlesInOrder() { list.append(shownInfo(handle)) }
        for entry in waiting { list.append(entry.info) }
        for entry in scheduled { list.append(entry.info) }
        for entry in blocked { list.append(entry.info) }
        for handle in finishedOrder.reversed() { list.append(shownInfo(handle)) }
        let workers = pool.orderedMembers.map {
            WorkerStatus(descriptor: $0.descriptor, running: $0.running.map { jobs.id(at: $0) }.sorted(), isRetiring: $0.isRetiring)
        }
        var snapshot = SchedulerSnapshot(
            seq: seq, time: now, isPaused: isPaused, shutdown: shutdownMode, counts: stateCounts.dictionary,
            localSlots: localCapacity, totalSlots: capacity, finishedPerSecond: finishRate(now: now),
            workers: workers, groups: groupStatuses, jobs: list)
        snapshot.heldAttempts = held
        return snapshot
    }

    /// Jobs finished per second over the last five seconds.
    public func finishRate(now: SchedulerTime) -> Double {
        let nowSecond = now.components.seconds
        let total = finishTimes.reduce(0) { $0 + ($1.second > nowSecond - 5 ? $1.count : 0) }
        let window = min(5.0, max(now.seconds, 1e-3))
        return Double(total) / window
    }

    // MARK: - Internals

    private mutating func takeActions() -> [Action] {
        if let last = endedDependencies.last { dispatch(now: last.time) }
        if !batchesToCheck.isEmpty { emitSettledBatches() }
        nextDeadline = timers.min?.time
        startedHandles.removeAll(keepingCapacity: true)
        collectsStarts = false
        // The array goes to the caller; the next step's starts with room for a typical step (an
        // end, a release or two, a start and their events) instead of growing 1, 2, 4, 8.
        defer { actions = []; actions.reserveCapacity(8) }
        return actions
    }

    private mutating func emitSettledBatches() {
        for id in batchesToCheck {
            guard let batch = batches[id], batch.isSealed, batch.unfinished == 0, !batch.hasSettled else { continue }
            batches[id]!.hasSettled = true
            actions.append(.emit(.batchSettled(id)))
        }
        batchesToCheck.removeAll(keepingCapacity: true)
    }

    /// A stop was requested but the attempt had already ended by itself: it keeps its own
    /// outcome. A success is a success; a failure after a cancel is final (the user wanted it to
    /// stop, so it is not retried); after a timeout it is an ordinary failed attempt.
    private mutating func settleUnstopped(
        _ handle: JobHandle, attempt: Int, requested: StopReason, termination: Termination, now: SchedulerTime
    ) {
        guard requested == .cancel, !termination.isSuccess, !termination.isWorkerLoss else {
            settle(handle, attempt: attempt, stopping: nil, termination: termination, now: now)
            return
        }
        let reason = FailureReason(termination)
        let (id, batch) = (jobs[handle].info.id, jobs[handle].batch)
        jobs[handle].info.history.lastFailure = reason
        finish(handle, as: .failed(reason: reason, attempts: attempt), now: now)
        actions.append(.emit(.failed(id, reason: reason, attempts: attempt)))
        haltIfNeeded(after: id, in: batch, now: now)
    }

    /// Halts `batch`, whose job `failed` just failed for good, if the batch halts on failure: in
    /// this same step every other unfinished job of the batch is cancelled. The jobs that wait for
    /// the failed one (and theirs) are skipped first, for it, as without a halt: they could never
    /// have run, and "cancelled" would hide why.
    private mutating func haltIfNeeded(after failed: JobID, in batch: BatchID?, now: SchedulerTime) {
        guard let id = batch, let record = batches[id], record.haltsOnFailure, record.haltedBy == nil else { return }
        batches[id]!.haltedBy = failed
        actions.append(.emit(.batchHalted(id, failedJob: failed)))
        if !endedDependencies.isEmpty { settleDependents() }
        let others = jobs.values.filter { $0.batch == id && !$0.info.state.isFinished }
        for other in others.sorted(by: { $0.info.submittedAt < $1.info.submittedAt }) {
            _ = try? cancelInPlace(other.handle, now: now)
        }
    }

    // MARK: - Groups and queues

    /// The group called `name`, made (and announced, unless the caller announces it with a
    /// setting) if it is new.
    private mutating func groupHandle(named name: String, announce: Bool = true) -> Int32 {
        if let index = existingGroup(named: name) { return index }
        let index = Int32(groups.count)
        groups.append(Group(info: JobGroup(name: name)))
        groupIndex[name] = index
        if announce { actions.append(.emit(.groupChanged(groups[Int(index)].info))) }
        return index
    }

    /// The group called `name`, if there is one. A few groups are found by comparing names,
    /// without hashing: a workflow's submission names a group per job.
    private func existingGroup(named name: String) -> Int32? {
        guard groups.count <= 16 else { return groupIndex[name] }
        for index in groups.indices where groups[index].info.name == name { return Int32(index) }
        return nil
    }

    /// Queues the job at `handle` in its group, at its place: by priority, then submission
    /// order (``Job/queueOrder``).
    private mutating func enqueue(_ handle: JobHandle) {
        let group = jobs[handle].group
        groups[Int(group)].queue.insert(handle, priority: jobs[handle].info.priority, order: jobs[handle].queueOrder, positions: &queuePositions)
        // The heads order groups by their first job: a job queued behind it changes nothing
        // there (a workflow's jobs, released into ten groups, mostly queue behind others).
        if groups[Int(group)].queue.first == handle { refreshHead(group) }
    }

    /// Takes the job at `handle` out of its group's queue.
    private mutating func dequeue(_ handle: JobHandle) {
        let group = jobs[handle].group
        if groups[Int(group)].queue.remove(handle, positions: &queuePositions) { refreshHead(group) }
    }

    /// Puts a group among the heads by its first job while it may start one, or takes it out.
    private mutating func refreshHead(_ group: Int32) {
        let handle = GroupHandle(index: group)
        if groups[Int(group)].isEligible, let first = groups[Int(group)].queue.firstEntry {
            if !heads.update(handle, priority: Int(first.priority), order: first.order) {
                heads.insert(handle, priority: Int(first.priority), order: first.order)
            }
        } else {
            heads.remove(handle)
        }
    }

    /// Every group's queued jobs, merged in the order they would run.
    private func queuedHandlesInOrder() -> [JobHandle] {
        if groups.count == 1 { return groups[0].queue.ordered() }
        return groups.flatMap { $0.queue.orderedEntries() }.sorted(by: HandleQueue.runsBefore).map(\.handle)
    }

    // MARK: - Dependencies

    /// How many of `dependencies` have not succeeded, and the first that never will (failed
    /// for good, cancelled or skipped), if any. Hashed lookups: only for jobs that have
    /// dependencies, when they come due or come back (a submission finds its own).
    private func dependencyStatus(_ dependencies: [JobID]) -> (pending: Int, failed: SkipReason?) {
        var pending = 0
        var failed: SkipReason?
        for other in dependencies {
            let handle = jobs.handle(of: other)
            guard let outcome = outcome(of: other, handle: handle) else { continue }
            if outcome == .succeeded { continue }
            pending += 1
            if outcome.isFinished && failed == nil { failed = skipReason(other, handle: handle, outcome: outcome) }
        }
        return (pending, failed)
    }

    /// How the dependency `other` stands: from its record at `handle`, else as it ended once
    /// its record was dropped (`nil` never: a dependency's outcome outlives its record).
    private func outcome(of other: JobID, handle: JobHandle?) -> JobStateKind? {
        if let handle { return jobs[handle].info.state.kind }
        return droppedOutcome(of: other)?.outcome
    }

    /// Why a job is skipped when its dependency `other` ended as `outcome`: the name only for
    /// the one reason given (a success needs none).
    private func skipReason(_ other: JobID, handle: JobHandle?, outcome: JobStateKind) -> SkipReason {
        let name = handle.map { jobs[$0].info.displayName } ?? droppedOutcome(of: other)?.name ?? other.short
        return SkipReason(dependency: other, dependencyName: name, outcome: outcome)
    }

    /// How a job whose record was dropped ended, if it was a dependency.
    private func droppedOutcome(of id: JobID) -> (outcome: JobStateKind, name: String)? {
        switch jobs.mark(of: id) {
        case Self.droppedSuccess?: return (.succeeded, "")
        case Self.droppedFailure?: return droppedFailures[id]
        default: return nil
        }
    }

    /// The job at `handle` as it leaves the core: its record's `info` with its dependencies.
    private func shownInfo(_ handle: JobHandle) -> JobInfo {
        var info = jobs[handle].info
        if jobs[handle].firstDependency >= 0 { info.dependencies = dependencies(of: handle) }
        return info
    }

    /// The jobs the job at `handle` waits for (or waited for), in the order it named them.
    private func dependencies(of handle: JobHandle) -> [JobID] {
        dependencyLinks.elements(from: jobs[handle].firstDependency)
    }

    /// Keeps `ids` as a list in ``dependencyLinks``; returns its first link (-1 for none).
    private mutating func keepDependencies(_ ids: [JobID]) -> Int32 {
        dependencyLinks.makeList(ids)
    }

    /// Gives the list of dependencies of the job at `handle`, whose record is being dropped,
    /// back for reuse.
    private mutating func forgetDependencies(of handle: JobHandle) {
        dependencyLinks.freeList(from: jobs[handle].firstDependency)
        jobs[handle].firstDependency = -1
    }

    /// The dependencies of the job at `handle` that have not ended.
    private func unfinishedDependencies(of handle: JobHandle) -> [JobID] {
        dependencies(of: handle).filter { other in
            guard let otherHandle = jobs.handle(of: other) else { return false }
            return !jobs[otherHandle].info.state.isFinished
        }
    }

    /// What a job that was just put in `state` (queued, blocked or scheduled) needs: a place in
    /// its queue, a release timer, or an event naming what it waits for.
    private mutating func hold(_ handle: JobHandle, in state: JobState) {
        let id = jobs[handle].info.id
        switch state {
        case .queued:
            enqueue(handle)
        case .blocked:
            actions.append(.emit(.blocked(id, waitingFor: unfinishedDependencies(of: handle))))
            if jobLinks[Int(handle.index)].pending == 0 { release(handle) }
        case .scheduled(let until):
            timers.insert(Timer(time: until, handle: handle, id: id, attempt: 0, purpose: .release))
            actions.append(.emit(.scheduled(id, at: until)))
        default:
            break
        }
    }

    /// A blocked job whose dependencies all succeeded goes to its queue.
    private mutating func release(_ handle: JobHandle) {
        guard transition(handle, to: .queued) else { return }
        enqueue(handle)
        actions.append(.emit(.released(jobs[handle].info.id)))
    }

    /// A blocked or scheduled job will never run: it ends skipped (its own dependents follow).
    private mutating func skip(_ handle: JobHandle, because reason: SkipReason, now: SchedulerTime) {
        let id = jobs[handle].info.id
        guard jobs[handle].info.state.kind.isHeld else { return }
        finish(handle, as: .skipped(reason), now: now)
        actions.append(.emit(.skipped(id, reason: reason)))
    }

    /// Releases or skips the dependents of the jobs that ended in this step, and theirs in
    /// turn (a worklist, not recursion: a chain of any length).
    private mutating func settleDependents() {
        // Every dependent's count and record are asked for first, so their cache misses overlap
        // instead of coming one after another in the loop below. Nothing of theirs is read here
        // (a read would wait for its miss): a dependent that is no longer its job costs a hint.
        for ended in endedDependencies {
            var link = ended.firstDependent
            while link >= 0 {
                let dependent = edges.element(link)
                let index = Int(dependent.handle.index)
                jobLinks.withUnsafeBufferPointer { jt_prefetch($0.baseAddress! + index, MemoryLayout<JobLinks>.stride) }
                // Only the part of the record a release reads (the small fields, the id, the
                // priority, the state): more hints than the CPU can keep in flight make it wait.
                jobs.prefetch(dependent.handle, bytes: Self.releasedBytes)
                link = edges.next(link)
            }
        }
        var index = 0
        while index < endedDependencies.count {
            let ended = endedDependencies[index]
            index += 1
            var link = ended.firstDependent
            while link >= 0 {
                let dependent = edges.element(link)
                link = edges.next(link)
                // Not its job any more, or not held: nothing to settle. Only the dense counts are
                // read here; the record only when the job is released or skipped.
                let index = Int(dependent.handle.index)
                guard jobLinks[index].serial == dependent.serial, jobLinks[index].pending >= 0 else { continue }
                if ended.outcome == .succeeded {
                    jobLinks[index].pending -= 1
                    if jobLinks[index].pending <= 0 && jobs[dependent.handle].info.state.kind == .blocked {
                        release(dependent.handle)
                    }
                } else {
                    let reason = SkipReason(dependency: ended.id, dependencyName: ended.name, outcome: ended.outcome)
                    skip(dependent.handle, because: reason, now: ended.time)
                }
            }
        }
        endedDependencies.removeAllKeepingStorage()
        for list in listsToFree { freeList(list) }
        listsToFree.removeAllKeepingStorage()
    }

    /// How much of a record, from its start, a release reads: the small fields before `info`,
    /// and `info`'s id, priority and state.
    private static let releasedBytes = MemoryLayout<Job>.offset(of: \Job.info)! + MemoryLayout<JobInfo>.offset(of: \JobInfo.maxAttempts)!

    /// Whether `dependent`'s handle still names its job (its index may have been reused).
    private func holds(_ dependent: Dependent) -> Bool {
        jobLinks[Int(dependent.handle.index)].serial == dependent.serial
    }

    /// Gives a new record its serial, and its count of pending dependencies as not held (the
    /// caller sets it when the job is held).
    private mutating func registerRecord(_ handle: JobHandle) {
        let index = Int(handle.index)
        if index < jobLinks.count {
            jobLinks[index] = JobLinks(serial: nextSerial)
        } else {
            // Records take the table's indexes in turn: a new index is the next one.
            if index > jobLinks.count { jobLinks.append(contentsOf: repeatElement(JobLinks(), count: index - jobLinks.count)) }
            jobLinks.append(JobLinks(serial: nextSerial))
        }
        jobs[handle].queueOrder = nextSerial
        assert(jobs[handle].info.order == nextSerial, "a record's info says its serial")
        nextSerial += 1
    }

    /// Appends `dependent` to the list of the job at `handle`.
    private mutating func addDependent(_ dependent: Dependent, to handle: JobHandle) {
        let link = edges.make(dependent)
        if jobLinks[Int(handle.index)].lastDependent >= 0 {
            edges.link(jobLinks[Int(handle.index)].lastDependent, to: link)
        } else {
            jobLinks[Int(handle.index)].firstDependent = link
        }
        jobLinks[Int(handle.index)].lastDependent = link
    }

    /// The dependents in the list that starts at `link`.
    private func dependents(from link: Int32) -> [Dependent] {
        edges.elements(from: link)
    }

    /// Gives the links of the list that starts at `link` back for reuse.
    private mutating func freeList(_ link: Int32) {
        edges.freeList(from: link)
    }

    /// Takes the dependents' list from the job at `handle`, to be freed once this step's
    /// dependents are settled.
    private mutating func dropDependents(of handle: JobHandle) {
        guard jobLinks[Int(handle.index)].firstDependent >= 0 else { return }
        listsToFree.append(jobLinks[Int(handle.index)].firstDependent)
        jobLinks[Int(handle.index)].firstDependent = -1
        jobLinks[Int(handle.index)].lastDependent = -1
        if endedDependencies.isEmpty {
            for list in listsToFree { freeList(list) }
            listsToFree.removeAllKeepingStorage()
        }
    }

    /// The job at `handle` came back (a retry): the jobs skipped because of it come back too,
    /// blocked on it, and theirs in turn.
    private mutating func bringBackDependents(of handle: JobHandle, now: SchedulerTime) {
        var work = dependents(from: jobLinks[Int(handle.index)].firstDependent)
        var index = 0
        while index < work.count {
            let dependent = work[index]
            index += 1
            guard holds(dependent),
                  case .skipped(let skipped) = jobs[dependent.handle].info.state else { continue }
            let (pending, failed) = dependencyStatus(dependencies(of: dependent.handle))
            if let failed {
                // Another dependency still failed: it stays skipped, for that one now. Its reason
                // named the job retried ("dependency 'f1' failed" beside f1 running again): it
                // comes back, and is skipped again for the other, as a user's view follows it.
                guard skipped.dependency != failed.dependency, transition(dependent.handle, to: .blocked) else { continue }
                reopen(dependent.handle)
                jobLinks[Int(dependent.handle.index)].pending = Int32(pending)
                hold(dependent.handle, in: .blocked)
                skip(dependent.handle, because: failed, now: now)
                continue
            }
            if let key = recordSpecs[Int(dependent.handle.index)]?.coalescingKey, let other = keys[key], other != jobs[dependent.handle].info.id { continue }
            let due = jobs[dependent.handle].notBefore.flatMap { $0 > now ? $0 : nil }
            let next: JobState = if let due { .scheduled(until: due) } else { .blocked }
            guard transition(dependent.handle, to: next) else { continue }
            reopen(dependent.handle)
            jobLinks[Int(dependent.handle.index)].pending = Int32(pending)
            hold(dependent.handle, in: next)
            work.append(contentsOf: dependents(from: jobLinks[Int(dependent.handle.index)].firstDependent))
        }
    }

    /// A finished job comes back: it is no longer among the finished, counts again in its batch
    /// and holds its key.
    private mutating func reopen(_ handle: JobHandle) {
        finishedOrder.removeAll { $0 == handle }
        if let batch = jobs[handle].batch, batches[batch] != nil {
            batches[batch]!.unfinished += 1
            batches[batch]!.hasSettled = false
        }
        if let key = recordSpecs[Int(handle.index)]?.coalescingKey { keys[key] = jobs[handle].info.id }
        jobs[handle].info.history.finishedAt = nil
    }

    /// Gives a job a new shell command. A job that has not started (queued, blocked,
    /// scheduled) or waits for its retry keeps its place and runs the new command next; a
    /// failed, cancelled or skipped job is retried with it (as ``retry(_:now:)``, and refused
    /// as it would be, leaving the command as it was). A running or succeeded job is refused.
    public mutating func edit(_ id: JobID, command: String, now: SchedulerTime) throws(SchedulerError) -> [Action] {
        guard let handle = jobs.handle(of: id) else { throw unknown(id) }
        guard !command.allSatisfy(\.isWhitespace) else {
            throw SchedulerError(.invalidArgument, "the command is empty")
        }
        let old = jobs[handle]
        switch old.info.state {
        case .running(_, _, _, let stopping):
            // One its worker holds and has not begun shows as sent, and is said so (it said
            // running of a job every view showed waiting at its worker).
            if isHeldAtWorker(handle) {
                throw SchedulerError(.notAllowed, "job \(id.short) was sent to its worker and waits there to run: cancel it first, or edit it once it has ended")
            }
            // One being stopped is said so (it said "is running: cancel it first" of a job
            // just cancelled).
            if stopping != nil {
                throw SchedulerError(.notAllowed, "job \(id.short) \(old.info.state.predicate): edit it once it has ended")
            }
            throw SchedulerError(.notAllowed, "job \(id.short) is running: cancel it first, or edit it once it has ended")
        case .succeeded:
            throw SchedulerError(.notAllowed, "job \(id.short) has succeeded: submit a new job instead")
        case .queued, .blocked, .scheduled, .waitingForRetry, .failed, .cancelled, .skipped:
            break
        }
        let oldSpec = recordSpecs[Int(handle.index)]
        recordSpecs[Int(handle.index)]!.work = .shell(command)
        jobs[handle].info.command = command
        actions.append(.emit(.edited(id, command: command)))
        guard old.info.state.isFinished else { return takeActions() }
        do {
            // The event and the retry's actions come out together.
            return try retry(id, now: now)
        } catch {
            // Refused: nothing changed (the event is taken back with the command).
            recordSpecs[Int(handle.index)] = oldSpec
            jobs[handle].info.command = old.info.command
            actions.removeAll { if case .emit(.edited(id, _)) = $0 { true } else { false } }
            throw error
        }
    }

    /// Whether the job at `handle` was handed to a worker that holds it and has not begun it
    /// (every view shows it as sent, not running).
    private func isHeldAtWorker(_ handle: JobHandle) -> Bool {
        guard let worker = jobs[handle].worker else { return false }
        return pool[worker].holdsAttempts && !jobs[handle].hasBegun
    }

    /// What the job at `handle` is doing, for a refusal: one its worker holds is said to wait there.
    private func predicate(of handle: JobHandle) -> String {
        isHeldAtWorker(handle) ? "was sent to its worker and waits there to run" : jobs[handle].info.state.predicate
    }

    /// Whether `signal` may be sent to job `id` now: only a running job with a process (not Swift
    /// code), and only a real signal number (1 to 64).
    ///
    /// - Returns: The worker running it.
    /// - Throws: ``SchedulerError`` `.unknownJob`, `.notAllowed` (not running, no process) or
    ///   `.invalidArgument` (not a signal).
    public func signalTarget(_ id: JobID, signal: Int32) throws(SchedulerError) -> WorkerID {
        guard let handle = jobs.handle(of: id) else { throw unknown(id) }
        guard (1...64).contains(signal) else {
            throw SchedulerError(.invalidArgument, "\(signal) is not a signal number (1 to 64)")
        }
        guard case .running(let worker, _, _, _) = jobs[handle].info.state else {
            throw SchedulerError(.notAllowed, "only a running job can be signalled; job \(id.short) \(jobs[handle].info.state.predicate)")
        }
        guard recordSpecs[Int(handle.index)]?.work.isProcess ?? false else {
            throw SchedulerError(.notAllowed, "job \(id.short) is Swift code: it has no process to signal")
        }
        return worker
    }

    private func unknown(_ id: JobID) -> SchedulerError {
        SchedulerError(.unknownJob, "no job \(id.short)")
    }

    /// The one place a job changes state. An illegal move is refused, never a crash: the job
    /// keeps its state, the refusal is counted (``rejectedTransitions``), and the caller stops
    /// what it was doing with that job (a command throws).
    private static func transition(
        _ job: inout Job, to next: JobState, counts: inout StateCounts, rejected: inout Int
    ) -> Bool {
        let current = job.info.state
        guard current.canTransition(to: next) else {
            rejected += 1
            return false
        }
        if current.kind != next.kind {
            counts[current.kind] -= 1
            counts[next.kind] += 1
        }
        job.info.state = next
        return true
    }

    /// ``transition(_:to:counts:rejected:)`` of a copy the caller writes back.
    @discardableResult
    private mutating func transition(_ job: inout Job, to next: JobState) -> Bool {
        let old = job.info.state.kind
        guard Self.transition(&job, to: next, counts: &stateCounts, rejected: &rejectedTransitions) else { return false }
        if old != next.kind { countInGroup(job.group, from: old, to: next.kind) }
        if old.isHeld != next.kind.isHeld { jobLinks[Int(job.handle.index)].pending = next.kind.isHeld ? 0 : -1 }
        return true
    }

    /// ``transition(_:to:counts:rejected:)`` of the record at `handle`, in place.
    @discardableResult
    private mutating func transition(_ handle: JobHandle, to next: JobState) -> Bool {
        let old = jobs[handle].info.state.kind
        guard Self.transition(&jobs[handle], to: next, counts: &stateCounts, rejected: &rejectedTransitions) else {
            return false
        }
        if old != next.kind { countInGroup(jobs[handle].group, from: old, to: next.kind) }
        // The dense count says "held" exactly while the job is: callers set the real count
        // after a move into a held state.
        if old.isHeld != next.kind.isHeld { jobLinks[Int(handle.index)].pending = next.kind.isHeld ? 0 : -1 }
        return true
    }

    /// Keeps a group's running and held counts in step with a job that moved; a group whose
    /// running count fell below its limit may start a job again.
    private mutating func countInGroup(_ group: Int32, from old: JobStateKind, to new: JobStateKind) {
        let index = Int(group)
        if old == .running {
            groups[index].running -= 1
            // Only a group that was at its limit may start a job now (it was out of the heads).
            if let limit = groups[index].info.limit, groups[index].running >= limit - 1 { refreshHead(group) }
        } else if new == .running {
            groups[index].running += 1
        }
        if old.isHeldInGroup { groups[index].held -= 1 }
        if new.isHeldInGroup { groups[index].held += 1 }
    }

    /// Cancels `id` without dispatching: the caller dispatches (or not) once it is done.
    private mutating func cancelInPlace(_ id: JobID, now: SchedulerTime) throws(SchedulerError) {
        guard let handle = jobs.handle(of: id) else { throw unknown(id) }
        try cancelInPlace(handle, now: now)
    }

    /// Cancels the job at `handle` without dispatching.
    private mutating func cancelInPlace(_ handle: JobHandle, now: SchedulerTime) throws(SchedulerError) {
        let id = jobs[handle].info.id
        switch jobs[handle].info.state {
        case .queued:
            dequeue(handle)
            finish(handle, as: .cancelled, now: now)
            actions.append(.emit(.cancelled(id)))
        case .waitingForRetry, .blocked, .scheduled:
            finish(handle, as: .cancelled, now: now)
            actions.append(.emit(.cancelled(id)))
        case .running(let worker, let attempt, let since, let stopping):
            guard stopping != .cancel else { return }
            guard transition(handle, to: .running(worker: worker, attempt: attempt, since: since, stopping: .cancel)) else {
                throw SchedulerError(.notAllowed, "job \(id.short) cannot be stopped now")
            }
            actions.append(.emit(.stopping(id, .cancel)))
            actions.append(.stop(id, worker: worker, reason: .cancel))
        case .succeeded, .failed, .cancelled, .skipped:
            throw SchedulerError(.notAllowed, "job \(id.short) has already ended (\(jobs[handle].info.state.name))")
        }
    }

    /// Starts queued jobs while slots are free. Records change in place: no job record is
    /// copied on this path, which every job takes.
    private mutating func dispatch(now: SchedulerTime) {
        if !endedDependencies.isEmpty { settleDependents() }
        guard !isPaused, !isDispatchHeld, shutdownMode == nil || shutdownMode == .drain else { return }
        // The best first job among the groups that may start one: a group at its limit or
        // paused is not among them, so it holds back no other group.
        while let group = heads.first, let handle = groups[Int(group.index)].queue.first,
              let workerHandle = pool.checkOut(for: handle) {
            _ = groups[Int(group.index)].queue.popFirst(positions: &queuePositions)
            let head = jobs[handle].info.id
            let worker = pool[workerHandle].descriptor.id
            let attempt = jobs[handle].info.attempts + 1
            let started = transition(handle, to: .running(worker: worker, attempt: attempt, since: now, stopping: nil))
            refreshHead(group.index)
            guard started else {
                _ = pool.checkIn(handle, from: workerHandle)
                continue
            }
            jobs[handle].worker = workerHandle
            jobs[handle].hasBegun = false
            jobs[handle].info.history.attempts = attempt
            jobs[handle].info.history.startedAt = now
            jobs[handle].info.progress = nil
            // The timeout is in the record: the spec is a separate object, and reading it on every
            // start costs a cache miss when jobs start out of submission order (a DAG's do). On a
            // worker that may hold the attempt before it starts, it counts from `attemptBegan`.
            if let timeout = jobs[handle].timeout, !pool[workerHandle].holdsAttempts {
                timers.insert(Timer(time: now + timeout, handle: handle, id: head, attempt: attempt, purpose: .timeout))
            }
            actions.append(.emit(.started(head, attempt: attempt, maxAttempts: jobs[handle].info.maxAttempts, worker: worker)))
            actions.append(.start(head, attempt: attempt, worker: worker))
            if collectsStarts {
                // The spec boxed once per attempt, for every copy of its assignment.
                startedHandles.append(Start(
                    handle: handle, submitted: SubmittedSpec(recordSpecs[Int(handle.index)]!), priority: jobs[handle].info.priority))
            }
        }
        // The next job to start is known now; its record is touched on the next free slot. Jobs of a
        // DAG start out of submission order (no hardware prefetch), so ask for it in advance.
        if let group = heads.first, let next = groups[Int(group.index)].queue.first {
            jobs.prefetch(next)
            // Nothing more may start: a queued job may outrank one a worker holds.
            if pool.withdrawingMembers > 0 { withdrawOutranked() }
        } else if pool.withdrawingMembers > 0 {
            withdrawHeldAttempts()
        }
    }

    /// Nothing more may start, and queued jobs outrank attempts that workers hold unbegun
    /// behind busy slots: held, such an attempt starts when its worker's slot frees, before any
    /// job still queued. Asks for the lowest of them back, one for each queued job of a higher
    /// priority (less those asked for already); given back, it is queued again and the best
    /// queued job takes its place at that worker. Only queued jobs whose group may start one
    /// now are counted (a job of a group at its limit waits for its group, wherever it is held).
    private mutating func withdrawOutranked() {
        guard !isPaused, !isDispatchHeld, shutdownMode == nil || shutdownMode == .drain, pool.freeCount == 0,
              let best = heads.firstEntry.map({ Int($0.priority) })
        else { return }
        let candidates = heldCandidates { jobs[$0].info.priority < best }
        guard !candidates.isEmpty else { return }
        var count = askedBack(for: .forPriority)
        // The lowest first: each takes one queued job above it, after those the ones asked
        // back already took.
        for candidate in candidates.sorted(by: { startsLater($0.handle, $1.handle) }) {
            let needed = count + 1
            guard queuedCount(above: jobs[candidate.handle].info.priority, upTo: needed) >= needed else { break }
            guard case .running(_, let attempt, _, nil) = jobs[candidate.handle].info.state else { continue }
            jobs[candidate.handle].withdrawal = .forPriority
            actions.append(.withdraw(jobs[candidate.handle].info.id, attempt: attempt, worker: candidate.worker))
            count += 1
        }
    }

    /// What workers that give attempts back hold behind their busy slots and might give back
    /// now: per worker, of its unbegun attempts not asked back yet (their group not paused: back
    /// in the queue such a job could not start) for which `include` holds, those it would start
    /// last (the likeliest still held there: one it is about to start may have begun), at most as
    /// many as it holds beyond its running slots. Nothing is read of a worker that holds nothing
    /// beyond its slots (the common case, on every step with remote workers).
    private func heldCandidates(_ include: (JobHandle) -> Bool = { _ in true }) -> [(handle: JobHandle, worker: WorkerID)] {
        var candidates: [(handle: JobHandle, worker: WorkerID)] = []
        pool.forEachMember { member in
            guard member.descriptor.withdrawsHeld, member.holdsAttempts,
                  member.running.count > member.descriptor.runningSlots
            else { return }
            var unbegun = member.running.filter {
                !jobs[$0].hasBegun && jobs[$0].withdrawal == nil && !groups[Int(jobs[$0].group)].info.isPaused && include($0)
            }
            guard !unbegun.isEmpty else { return }
            // Beyond its running slots: those of its attempts that wait there.
            let held = member.running.count - member.descriptor.runningSlots - member.running.count { jobs[$0].withdrawal != nil }
            guard held > 0 else { return }
            unbegun.sort(by: startsLater)
            for job in unbegun.prefix(held) { candidates.append((job, member.descriptor.id)) }
        }
        return candidates
    }

    /// How many attempts workers were asked to give back for `reason` and have not answered.
    private func askedBack(for reason: Withdrawal) -> Int {
        var asked = 0
        pool.forEachMember { member in
            guard member.descriptor.withdrawsHeld, member.holdsAttempts else { return }
            asked += member.running.count { jobs[$0].withdrawal == reason }
        }
        return asked
    }

    /// Whether the job at `a` would start after the one at `b` (a lower priority, or the same
    /// and queued later).
    private func startsLater(_ a: JobHandle, _ b: JobHandle) -> Bool {
        let (first, second) = (jobs[a], jobs[b])
        return first.info.priority != second.info.priority
            ? first.info.priority < second.info.priority : first.queueOrder > second.queueOrder
    }

    /// How many queued jobs of a priority above `priority` may start now (their group may
    /// start one), counting at most `cap`.
    private func queuedCount(above priority: Int, upTo cap: Int) -> Int {
        var count = 0
        heads.forEach(above: priority) { group in
            groups[Int(group.index)].queue.forEach(above: priority) { _ in
                count += 1
                return count < cap
            }
            return count < cap
        }
        return count
    }

    /// A slot is free to run a job, and nothing queued may start: asks workers that hold
    /// attempts behind busy slots to give back as many as there are such free slots (less those
    /// asked for already, counted from the jobs' `withdrawal`), the first in queue order
    /// first. Each comes back ``Termination/withdrawn`` and takes the free slot, or begins where
    /// it is if its worker started it meanwhile.
    private mutating func withdrawHeldAttempts() {
        guard pool.freeRunningCount > 0 else { return }
        let candidates = heldCandidates()
        guard !candidates.isEmpty else { return }
        // Free slots less those that attempts asked back already will take. (Those asked back
        // for a pause go back paused: they take no free slot.)
        let free = pool.freeRunningCount - askedBack(for: .forFreeSlot)
        guard free > 0 else { return }
        // The job that would start first from the queue, first.
        for candidate in candidates.sorted(by: { startsLater($1.handle, $0.handle) }).prefix(free) {
            guard case .running(_, let attempt, _, nil) = jobs[candidate.handle].info.state else { continue }
            jobs[candidate.handle].withdrawal = .forFreeSlot
            actions.append(.withdraw(jobs[candidate.handle].info.id, attempt: attempt, worker: candidate.worker))
        }
    }

    /// A pause (of everything, or of group `group`), or a graceful shutdown: asks workers for
    /// what they hold of the jobs that must not start and have not begun. Held there, such a job
    /// would start as soon as its worker's slot freed, paused or not; given back, it waits in
    /// the queue (until it is resumed, or for the next start of a serve). What a worker began
    /// runs on (neither stops a running job), and so does what a worker that gives nothing back
    /// holds.
    private mutating func withdrawHeld(for withdrawal: Withdrawal, group: Int32?) {
        guard pool.withdrawingMembers > 0 else { return }
        var candidates: [(handle: JobHandle, worker: WorkerID)] = []
        pool.forEachMember { member in
            guard member.descriptor.withdrawsHeld, member.holdsAttempts else { return }
            for handle in member.running
            where !jobs[handle].hasBegun && jobs[handle].withdrawal == nil && (group == nil || jobs[handle].group == group) {
                candidates.append((handle, member.descriptor.id))
            }
        }
        // In queue order, as they would have started.
        candidates.sort { startsLater($1.handle, $0.handle) }
        for candidate in candidates {
            guard case .running(_, let attempt, _, nil) = jobs[candidate.handle].info.state else { continue }
            jobs[candidate.handle].withdrawal = withdrawal
            actions.append(.withdraw(jobs[candidate.handle].info.id, attempt: attempt, worker: candidate.worker))
        }
    }

    /// Stops every running attempt for ``ShutdownMode/stopRunning``, in submission order: one
    /// its worker holds and has not begun is asked back where the worker gives attempts back,
    /// any other is stopped (``StopReason/shutdown``); each job returns to the queue as its
    /// attempt ends. The queue and the jobs waiting for a retry, a dependency or a time stay as
    /// they are.
    private mutating func stopRunningAttempts(now: SchedulerTime) {
        var running: [(handle: JobHandle, withdraws: Bool)] = []
        pool.forEachMember { member in
            for handle in member.running { running.append((handle, member.descriptor.withdrawsHeld && member.holdsAttempts)) }
        }
        running.sort { jobs[$0.handle].queueOrder < jobs[$1.handle].queueOrder }
        for (handle, withdraws) in running {
            guard case .running(let worker, let attempt, _, let stopping) = jobs[handle].info.state else { continue }
            if withdraws && !jobs[handle].hasBegun && stopping == nil {
                // One asked back already (for a free slot, a pause) comes back to the queue as well.
                if jobs[handle].withdrawal == nil {
                    jobs[handle].withdrawal = .forShutdown
                    actions.append(.withdraw(jobs[handle].info.id, attempt: attempt, worker: worker))
                }
                continue
            }
            stopForShutdown(handle)
        }
    }

    /// Stops the running attempt at `handle` for ``ShutdownMode/stopRunning``, unless it is being
    /// stopped already (a cancel, a timeout: it ends as those do).
    private mutating func stopForShutdown(_ handle: JobHandle) {
        guard case .running(let worker, let attempt, let since, nil) = jobs[handle].info.state,
              transition(handle, to: .running(worker: worker, attempt: attempt, since: since, stopping: .shutdown))
        else { return }
        let id = jobs[handle].info.id
        actions.append(.emit(.stopping(id, .shutdown)))
        actions.append(.stop(id, worker: worker, reason: .shutdown))
    }

    /// Decides what an ended attempt means for the job at `handle` (in place).
    ///
    /// - Parameter began: Whether the attempt began: false for one its worker held and never
    ///   started. Cancelled so, the job never ran: the attempt does not count (as a loss of it
    ///   does not), and `log` says it has not run.
    private mutating func settle(
        _ handle: JobHandle, attempt: Int, stopping: StopReason?, termination: Termination, countsAsLoss: Bool = true,
        began: Bool = true, withdrawal: Withdrawal? = nil, now: SchedulerTime
    ) {
        let id = jobs[handle].info.id
        func cancel() {
            if !began {
                jobs[handle].info.history.attempts = attempt - 1
                // No start to show if none of its attempts ever began (one that began on a
                // worker lost since counts among its losses).
                if attempt == 1 && jobs[handle].workerLosses == 0 { jobs[handle].info.history.startedAt = nil }
            }
            finish(handle, as: .cancelled, now: now)
            actions.append(.emit(.cancelled(id)))
        }
        if stopping == .cancel {
            cancel()
            return
        }
        if stopping == .shutdown {
            // Stopped for a shutdown that keeps the queue: back to it, the attempt not counted.
            guard transition(handle, to: .queued) else { return }
            jobs[handle].info.history.attempts = attempt - 1
            if !began && attempt == 1 && jobs[handle].workerLosses == 0 { jobs[handle].info.history.startedAt = nil }
            enqueue(handle)
            actions.append(.emit(.requeued(id, reason: began ? .stoppedForShutdown : .withdrawnForShutdown)))
            return
        }
        let reason: FailureReason
        switch (stopping, termination) {
        case (.timeout, _):
            reason = .timeout(jobs[handle].timeout ?? .zero)
        case (_, .workerLost(let why)):
            if countsAsLoss { jobs[handle].workerLosses += 1 }
            if shutdownMode == .cancelRunning {
                // Everything is being cancelled: the job ends here, with the attempt it had.
                cancel()
                return
            }
            if jobs[handle].workerLosses <= configuration.maxWorkerLossRequeues {
                // The attempt did not really happen: give it back.
                guard transition(handle, to: .queued) else { return }
                jobs[handle].info.history.attempts = attempt - 1
                // Not its fault: it goes back to its place, ahead of the jobs submitted after it.
                enqueue(handle)
                actions.append(.emit(.requeued(id, reason: .workerLost(why))))
                return
            }
            reason = .workerLost(why)
        case (_, .withdrawn):
            if shutdownMode == .cancelRunning {
                cancel()
                return
            }
            // It never ran: it goes back to its place uncounted, for the free slot (or to wait
            // there while it is paused).
            guard transition(handle, to: .queued) else { return }
            jobs[handle].info.history.attempts = attempt - 1
            if attempt == 1 && jobs[handle].workerLosses == 0 { jobs[handle].info.history.startedAt = nil }
            enqueue(handle)
            let reason: RequeueReason = switch withdrawal {
            case .forPause: .withdrawnForPause
            case .forShutdown: .withdrawnForShutdown
            case .forPriority: .withdrawnForPriority
            case .forFreeSlot, nil: .withdrawn
            }
            actions.append(.emit(.requeued(id, reason: reason)))
            return
        case (_, .exit(0)):
            jobs[handle].info.history.lastFailure = nil
            finish(handle, as: .succeeded(attempts: attempt), now: now)
            actions.append(.emit(.succeeded(id, attempts: attempt)))
            return
        case (_, .exit(let code)):
            reason = .exitStatus(code)
        case (_, .signal(let signal)):
            reason = .signal(signal)
        case (_, .error(let message)):
            reason = .error(message)
        }
        jobs[handle].info.history.lastFailure = reason
        let retry = recordSpecs[Int(handle.index)]?.retry ?? .none  // (every record has its spec)
        let mayRetry = attempt < retry.maxAttempts && (shutdownMode == nil || shutdownMode == .drain)
        if mayRetry {
            let delay = retry.delay(afterAttempt: attempt, unit: random.nextUnit())
            let due = now + delay
            guard transition(handle, to: .waitingForRetry(until: due, failedAttempt: attempt, reason: reason)) else { return }
            timers.insert(Timer(time: due, handle: handle, id: id, attempt: attempt, purpose: .retry))
            actions.append(.emit(.retryScheduled(id, failedAttempt: attempt, reason: reason, nextAttempt: attempt + 1, at: due)))
        } else {
            let batch = jobs[handle].batch
            finish(handle, as: .failed(reason: reason, attempts: attempt), now: now)
            actions.append(.emit(.failed(id, reason: reason, attempts: attempt)))
            haltIfNeeded(after: id, in: batch, now: now)
        }
    }

    /// Ends the job at `handle` in `state`. Its record may be dropped here (the oldest finished
    /// one beyond the retention), so callers read what they need first.
    private mutating func finish(_ handle: JobHandle, as state: JobState, now: SchedulerTime) {
        guard transition(handle, to: state) else { return }
        jobs[handle].info.history.finishedAt = now
        let id = jobs[handle].info.id
        if let key = jobs[handle].info.key, keys[key] == id { keys[key] = nil }
        if let batch = jobs[handle].batch, batches[batch] != nil {
            batches[batch]!.unfinished -= 1
            if batches[batch]!.unfinished == 0 { batchesToCheck.append(batch) }
        }
        let second = now.components.seconds
        if let last = finishTimes.last, last.second == second {
            finishTimes[finishTimes.count - 1].count += 1
        } else {
            finishTimes.append((second, 1))
            while let first = finishTimes.first, first.second <= second - 6 { finishTimes.removeFirst() }
        }
        if jobLinks[Int(handle.index)].firstDependent >= 0 {
            // Its first link is asked for now, and read when the step settles its dependents
            // (after dropping an old record, say): links were written when the dependents were
            // submitted, and a DAG's jobs end out of that order.
            edges.prefetch(jobLinks[Int(handle.index)].firstDependent)
            // The name is for skip reasons: a success needs none.
            let name = state.kind == .succeeded ? "" : jobs[handle].info.displayName
            endedDependencies.append(EndedDependency(
                id: id, name: name, outcome: state.kind, firstDependent: jobLinks[Int(handle.index)].firstDependent, time: now))
            // A success is for good: nothing will ask for its dependents again.
            if state.kind == .succeeded { dropDependents(of: handle) }
        }
        finishedOrder.append(handle)
        dropFinishedBeyondRetention()
    }

    /// Drops the records of the oldest finished jobs beyond the retention (a dependency's
    /// outcome is kept).
    private mutating func dropFinishedBeyondRetention() {
        while finishedOrder.count > configuration.finishedRetention, let oldest = finishedOrder.popFirst() {
            dropFinishedRecord(oldest)
        }
        // The next records to drop, as `prefetch` in `dispatch` (jobs end out of order in a DAG).
        if finishedOrder.count >= configuration.finishedRetention, let next = finishedOrder.first {
            jobs.prefetch(next)
            // Its record was asked for one step ago (as the second): what dropping it reads — its
            // spec and its list of dependencies — can be asked for now.
            prefetchReleased(by: next)
            if finishedOrder.count > 1 { jobs.prefetch(finishedOrder[1]) }
        }
    }

    /// Asks the CPU for the objects that dropping the record at `handle` will release (a hint).
    private func prefetchReleased(by handle: JobHandle) {
        let index = Int(handle.index)
        recordSpecs.withUnsafeBufferPointer { jt_prefetch($0.baseAddress! + index, MemoryLayout<JobSpec>.stride) }
        dependencyLinks.prefetch(jobs[handle].firstDependency)
    }

    /// Drops a finished job's record; a job that waits for it still learns how it ended.
    private mutating func dropFinishedRecord(_ handle: JobHandle) {
        dropDependents(of: handle)
        forgetDependencies(of: handle)
        recordSpecs[Int(handle.index)] = nil
        guard jobLinks[Int(handle.index)].isDependency else {
            jobs.remove(handle)
            return
        }
        let outcome = jobs[handle].info.state.kind
        if outcome == .succeeded {
            jobs.retire(handle, mark: Self.droppedSuccess)
        } else {
            droppedFailures[jobs[handle].info.id] = (outcome, jobs[handle].info.displayName)
            jobs.retire(handle, mark: Self.droppedFailure)
        }
    }

    /// Forgets every finished job still listed (`jobtop clean`): their records and their
    /// counts, and then the groups left with no job that have no limit and are not paused (the
    /// default group stays). A job that waits for one of them still learns how it ended. No
    /// event: a subscriber that wants the shorter lists takes a fresh snapshot.
    ///
    /// - Returns: How many jobs were forgotten.
    public mutating func forgetFinished() -> Int {
        forgetFinishedJobs().count
    }

    /// ``forgetFinished()``, with the ids of the jobs whose records it dropped.
    mutating func forgetFinishedJobs() -> (count: Int, forgotten: Set<JobID>) {
        // Those beyond the retention are counted too, with no record: all of them go (their
        // counts stayed, and `clean` left "5 succeeded" that no later `clean` could clear).
        let finishedKinds = JobStateKind.allCases.filter(\.isFinished)
        let count = finishedKinds.reduce(0) { $0 + stateCounts[$1] }
        var forgotten = Set<JobID>(minimumCapacity: finishedOrder.count)
        while let oldest = finishedOrder.popFirst() {
            forgotten.insert(jobs[oldest].info.id)
            dropFinishedRecord(oldest)
        }
        for kind in finishedKinds { stateCounts[kind] = 0 }
        forgetUnusedGroups()
        return (count, forgotten)
    }

    /// Forgets the groups no job of which is known and that have no setting (a limit, a
    /// pause), but the default group: a group named once stayed listed for the serve's life.
    /// Their indexes are compacted: every record's group is renumbered and the heads rebuilt
    /// (a walk of the records, as rare as `clean`).
    private mutating func forgetUnusedGroups() {
        var kept = Array(repeating: false, count: groups.count)
        kept[0] = true
        for index in groups.indices where groups[index].info.limit != nil || groups[index].info.isPaused { kept[index] = true }
        var handles: [JobHandle] = []
        jobs.forEachHandle { handles.append($0) }
        for handle in handles { kept[Int(jobs[handle].group)] = true }
        guard kept.contains(false) else { return }
        var renumbered = Array(repeating: Int32(-1), count: groups.count)
        var remaining: [Group] = []
        for index in groups.indices where kept[index] {
            renumbered[index] = Int32(remaining.count)
            remaining.append(groups[index])
        }
        for index in groups.indices where !kept[index] {
            assert(groups[index].running == 0 && groups[index].held == 0 && groups[index].queue.isEmpty, "a group with no job counts none")
        }
        groups = remaining
        groupIndex = Dictionary(uniqueKeysWithValues: groups.indices.map { (groups[$0].info.name, Int32($0)) })
        for handle in handles { jobs[handle].group = renumbered[Int(jobs[handle].group)] }
        heads = IndexedHeap()
        for index in groups.indices { refreshHead(Int32(index)) }
    }
}

extension JobStateKind {
    /// The kind's position in ``allCases``: an index for per-kind arrays.
    fileprivate var ordinal: Int {
        switch self {
        case .queued: 0
        case .running: 1
        case .waiting: 2
        case .blocked: 3
        case .scheduled: 4
        case .succeeded: 5
        case .failed: 6
        case .cancelled: 7
        case .skipped: 8
        }
    }
}
