import DequeModule
import HeapModule

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
        /// Publish this event.
        case emit(SchedulerEvent.Kind)
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

        /// Creates a configuration.
        public init(finishedRetention: Int = 10_000, maxWorkerLossRequeues: Int = 3, seed: UInt64? = nil) {
            self.finishedRetention = max(0, finishedRetention)
            self.maxWorkerLossRequeues = max(0, maxWorkerLossRequeues)
            self.seed = seed
        }
    }

    struct Job: Sendable {
        /// The spec as submitted, shared rather than copied each time the record is (its
        /// priority may be stale: `info.priority` is the job's priority).
        let submitted: SubmittedSpec
        var spec: JobSpec { submitted.spec }
        var info: JobInfo
        var workerLosses = 0
        /// The batch (run) it belongs to, if any.
        var batch: BatchID?
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

    /// An immutable spec behind a reference, so copying a job record does not copy it.
    final class SubmittedSpec: Sendable {
        let spec: JobSpec
        init(_ spec: JobSpec) { self.spec = spec }
    }

    struct Timer: Comparable, Sendable {
        enum Purpose: Sendable { case retry, timeout }
        var time: SchedulerTime
        var job: JobID
        var attempt: Int
        var purpose: Purpose

        static func < (a: Timer, b: Timer) -> Bool { a.time < b.time }
        static func == (a: Timer, b: Timer) -> Bool { a.time == b.time && a.job == b.job && a.attempt == b.attempt }
    }

    let configuration: Configuration
    private(set) var jobs = JobTable<Job>()
    private(set) var queue = JobQueue()
    private(set) var pool = WorkerPool()
    private var timers = Heap<Timer>()
    private var keys: [String: JobID] = [:]
    private var finishedOrder: Deque<JobID> = []
    private var finishTimes: Deque<(second: Int64, count: Int)> = []
    private var random: IdentifierGenerator
    private var actions: [Action] = []
    private var batches: [BatchID: Batch] = [:]
    private var nextBatch: UInt64 = 1
    /// Batches whose last job may have ended in this step: checked once the step's other
    /// events are out, so `batchSettled` always follows the final event of its last job.
    private var batchesToCheck: [BatchID] = []

    /// Jobs per state, including finished jobs no longer kept.
    public private(set) var counts: [JobStateKind: Int] = [:]
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
    public func info(of id: JobID) -> JobInfo? { jobs[id]?.info }

    /// The spec a job was submitted with.
    public func spec(of id: JobID) -> JobSpec? {
        guard let job = jobs[id] else { return nil }
        var spec = job.spec
        spec.priority = job.info.priority
        return spec
    }

    /// A batch as it stands, if it is known.
    public func batch(_ id: BatchID) -> BatchStatus? {
        guard let batch = batches[id] else { return nil }
        return BatchStatus(id: id, unfinished: batch.unfinished, isSealed: batch.isSealed, haltedBy: batch.haltedBy)
    }

    /// The earliest pending timer (a retry becoming due or a timeout), if any.
    public var nextDeadline: SchedulerTime? { timers.min?.time }

    /// The number of jobs running now.
    public var runningCount: Int { counts[.running, default: 0] }

    /// The queued jobs in run order.
    public var queuedInOrder: [JobID] { queue.orderedIDs() }

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
        if mode == .drain { return counts[.queued, default: 0] + counts[.waiting, default: 0] == 0 }
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
    /// - Throws: ``SchedulerError`` `.invalidArgument` for a priority outside
    ///   ``JobSpec/priorityRange``; `.notAllowed` for a batch that is unknown, sealed or halted.
    public mutating func submit(
        contentsOf specs: [JobSpec], ids: [JobID], batch: BatchID? = nil, now: SchedulerTime
    ) throws(SchedulerError) -> (ids: [JobID], actions: [Action]) {
        precondition(specs.count == ids.count, "one id per spec")
        for spec in specs where !JobSpec.priorityRange.contains(spec.priority) {
            throw SchedulerError(.invalidArgument, "priority \(spec.priority) is out of range (\(JobSpec.priorityRange.lowerBound) to \(JobSpec.priorityRange.upperBound))")
        }
        if let batch {
            guard let record = batches[batch] else { throw SchedulerError(.notAllowed, "no batch \(batch)") }
            if record.isSealed { throw SchedulerError(.notAllowed, "batch \(batch) is sealed: it takes no more jobs") }
            if record.haltedBy != nil { throw SchedulerError(.notAllowed, "batch \(batch) was halted by a failure") }
        }
        var result: [JobID] = []
        result.reserveCapacity(specs.count)
        for (spec, id) in zip(specs, ids) {
            if let key = spec.coalescingKey, let existing = keys[key] {
                actions.append(.emit(.coalesced(existing: existing, key: key)))
                result.append(existing)
                continue
            }
            let info = JobInfo(
                id: id, name: spec.name, command: spec.work.description, priority: spec.priority,
                state: .queued, attempts: 0, maxAttempts: spec.retry.maxAttempts, progress: nil,
                submittedAt: now, startedAt: nil, finishedAt: nil, lastFailure: nil, key: spec.coalescingKey)
            jobs[id] = Job(submitted: SubmittedSpec(spec), info: info, batch: batch)
            counts[.queued, default: 0] += 1
            if let batch {
                batches[batch]!.unfinished += 1
                batches[batch]!.hasSettled = false
            }
            if let key = spec.coalescingKey { keys[key] = id }
            queue.insert(id, priority: spec.priority)
            actions.append(.emit(.submitted(info)))
            result.append(id)
        }
        dispatch(now: now)
        return (result, takeActions())
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
        jobs[id] = job
        queue.updatePriority(id, to: priority)
        actions.append(.emit(.reprioritized(id, from: old, to: priority)))
        return takeActions()
    }

    /// Puts a failed or cancelled job back in the queue with a fresh retry budget.
    public mutating func retry(_ id: JobID, now: SchedulerTime) throws(SchedulerError) -> [Action] {
        guard var job = jobs[id] else { throw unknown(id) }
        switch job.info.state {
        case .failed, .cancelled: break
        default:
            throw SchedulerError(.notAllowed, "only a failed or cancelled job can be retried; job \(id.short) is \(job.info.state.name)")
        }
        if shutdownMode != nil && shutdownMode != .drain {
            throw SchedulerError(.shuttingDown, "the scheduler is shutting down")
        }
        if let key = job.spec.coalescingKey {
            if let other = keys[key], other != id {
                throw SchedulerError(.notAllowed, "job \(other.short) with the same key '\(key)' is still active")
            }
            keys[key] = id
        }
        finishedOrder.removeAll { $0 == id }
        if let batch = job.batch, batches[batch] != nil {
            batches[batch]!.unfinished += 1
            batches[batch]!.hasSettled = false
        }
        guard transition(&job, to: .queued) else {
            throw SchedulerError(.notAllowed, "job \(id.short) cannot go back to the queue from \(job.info.state.name)")
        }
        job.info.history.attempts = 0
        job.info.progress = nil
        job.info.history.finishedAt = nil
        job.workerLosses = 0
        jobs[id] = job
        queue.insert(id, priority: job.info.priority)
        actions.append(.emit(.requeued(id, reason: .retriedByUser)))
        dispatch(now: now)
        return takeActions()
    }

    /// Stops starting jobs; running ones go on.
    public mutating func pause(now: SchedulerTime) -> [Action] {
        guard !isPaused else { return [] }
        isPaused = true
        actions.append(.emit(.paused))
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
    public mutating func workerJoined(_ descriptor: WorkerDescriptor, now: SchedulerTime) -> [Action] {
        pool.join(descriptor)
        actions.append(.emit(.workerJoined(descriptor)))
        actions.append(.emit(.slotsChanged(local: localCapacity, total: capacity)))
        dispatch(now: now)
        return takeActions()
    }

    /// A worker is gone: its running jobs go back to the queue (a bounded number of times per
    /// job, then the attempt counts as failed); cancelled ones end `cancelled`.
    public mutating func workerLost(_ worker: WorkerID, reason: WorkerLeaveReason, now: SchedulerTime) -> [Action] {
        // A worker that already left (retired, say) is not lost again.
        guard pool.contains(worker) else { return [] }
        let running = pool.remove(worker)
        for id in running.sorted() {
            guard var job = jobs[id], case .running(_, let attempt, _, let stopping) = job.info.state else { continue }
            settle(&job, attempt: attempt, stopping: stopping, termination: .workerLost(reason), now: now)
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

    /// Begins a shutdown.
    public mutating func shutdown(_ mode: ShutdownMode, now: SchedulerTime) -> [Action] {
        if shutdownMode == .cancelRunning { return [] }
        if shutdownMode == .graceful && mode == .drain { return [] }
        shutdownMode = mode
        actions.append(.emit(.shuttingDown(mode)))
        if mode == .cancelRunning {
            for id in queue.orderedIDs() {
                guard var job = jobs[id] else { continue }
                queue.remove(id)
                finish(&job, as: .cancelled, now: now)
                actions.append(.emit(.cancelled(id)))
            }
            let active = jobs.values.filter { !$0.info.state.isFinished && $0.info.state.kind != .queued }
            for job in active.sorted(by: { $0.info.submittedAt < $1.info.submittedAt }) {
                _ = try? cancelInPlace(job.info.id, now: now)
            }
        } else {
            dispatch(now: now)
        }
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
        guard var job = jobs[id],
            case .running(let runningWorker, let runningAttempt, _, let stopping) = job.info.state,
            runningWorker == worker, runningAttempt == attempt
        else { return takeActions() }
        let retiredReason = pool.checkIn(id, from: worker)
        if let stopping, !stopTookEffect {
            settleUnstopped(&job, attempt: attempt, requested: stopping, termination: termination, now: now)
        } else {
            settle(&job, attempt: attempt, stopping: stopping, termination: termination, now: now)
        }
        // The job's end comes first, then its retired worker leaves.
        if let reason = retiredReason {
            actions.append(.removeWorker(worker))
            actions.append(.emit(.workerLeft(worker, reason: reason)))
        }
        dispatch(now: now)
        return takeActions()
    }

    /// Fires every timer due at `now`: retries become queued, timeouts stop their attempt.
    public mutating func timersDue(now: SchedulerTime) -> [Action] {
        while let timer = timers.min, timer.time <= now {
            _ = timers.popMin()
            guard var job = jobs[timer.job] else { continue }
            switch (timer.purpose, job.info.state) {
            case (.retry, .waitingForRetry(_, let failedAttempt, _)) where failedAttempt == timer.attempt:
                guard transition(&job, to: .queued) else { continue }
                jobs[timer.job] = job
                queue.insert(timer.job, priority: job.info.priority)
                actions.append(.emit(.requeued(timer.job, reason: .retryDue)))
            case (.timeout, .running(let worker, let attempt, let since, nil)) where attempt == timer.attempt:
                guard transition(&job, to: .running(worker: worker, attempt: attempt, since: since, stopping: .timeout)) else { continue }
                jobs[timer.job] = job
                actions.append(.emit(.stopping(timer.job, .timeout)))
                actions.append(.stop(timer.job, worker: worker, reason: .timeout))
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
        var running: [JobInfo] = []
        var waiting: [JobInfo] = []
        for job in jobs.values {
            switch job.info.state {
            case .running:
                var info = job.info
                info.progress = progress(info.id) ?? info.progress
                running.append(info)
            case .waitingForRetry: waiting.append(job.info)
            default: break
            }
        }
        running.sort { ($0.startedAt ?? .zero, $0.id) < ($1.startedAt ?? .zero, $1.id) }
        waiting.sort {
            guard case .waitingForRetry(let a, _, _) = $0.state, case .waitingForRetry(let b, _, _) = $1.state else { return false }
            return a < b
        }
        var list = running
        list.reserveCapacity(jobs.count)
        list.append(contentsOf: queue.orderedIDs().compactMap { jobs[$0]?.info })
        list.append(contentsOf: waiting)
        list.append(contentsOf: finishedOrder.reversed().compactMap { jobs[$0]?.info })
        let workers = pool.orderedMembers.map {
            WorkerStatus(descriptor: $0.descriptor, running: $0.running.sorted(), isRetiring: $0.isRetiring)
        }
        return SchedulerSnapshot(
            seq: seq, time: now, isPaused: isPaused, shutdown: shutdownMode, counts: counts,
            localSlots: localCapacity, totalSlots: capacity, finishedPerSecond: finishRate(now: now),
            workers: workers, jobs: list)
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
        if !batchesToCheck.isEmpty { emitSettledBatches() }
        defer { actions.removeAll(keepingCapacity: true) }
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
        _ job: inout Job, attempt: Int, requested: StopReason, termination: Termination, now: SchedulerTime
    ) {
        guard requested == .cancel, !termination.isSuccess, !termination.isWorkerLoss else {
            settle(&job, attempt: attempt, stopping: nil, termination: termination, now: now)
            return
        }
        let reason = FailureReason(termination)
        job.info.history.lastFailure = reason
        finish(&job, as: .failed(reason: reason, attempts: attempt), now: now)
        actions.append(.emit(.failed(job.info.id, reason: reason, attempts: attempt)))
        haltIfNeeded(after: job, now: now)
    }

    /// Halts the batch of `job`, which just failed for good, if its batch halts on failure: in
    /// this same step every other unfinished job of the batch is cancelled.
    private mutating func haltIfNeeded(after job: Job, now: SchedulerTime) {
        guard let id = job.batch, let batch = batches[id], batch.haltsOnFailure, batch.haltedBy == nil else { return }
        batches[id]!.haltedBy = job.info.id
        actions.append(.emit(.batchHalted(id, failedJob: job.info.id)))
        let others = jobs.values.filter { $0.batch == id && !$0.info.state.isFinished }
        for other in others.sorted(by: { $0.info.submittedAt < $1.info.submittedAt }) {
            _ = try? cancelInPlace(other.info.id, now: now)
        }
    }

    private func unknown(_ id: JobID) -> SchedulerError {
        SchedulerError(.unknownJob, "no job \(id.short)")
    }

    /// The one place a job changes state. An illegal move is refused, never a crash: the job
    /// keeps its state, the refusal is counted (``rejectedTransitions``), and the caller stops
    /// what it was doing with that job (a command throws).
    @discardableResult
    private mutating func transition(_ job: inout Job, to next: JobState) -> Bool {
        let current = job.info.state
        guard current.canTransition(to: next) else {
            rejectedTransitions += 1
            return false
        }
        if current.kind != next.kind {
            counts[current.kind, default: 0] -= 1
            counts[next.kind, default: 0] += 1
        }
        job.info.state = next
        return true
    }

    /// Cancels `id` without dispatching: the caller dispatches (or not) once it is done.
    private mutating func cancelInPlace(_ id: JobID, now: SchedulerTime) throws(SchedulerError) {
        guard var job = jobs[id] else { throw unknown(id) }
        switch job.info.state {
        case .queued:
            queue.remove(id)
            finish(&job, as: .cancelled, now: now)
            actions.append(.emit(.cancelled(id)))
        case .waitingForRetry:
            finish(&job, as: .cancelled, now: now)
            actions.append(.emit(.cancelled(id)))
        case .running(let worker, let attempt, let since, let stopping):
            guard stopping != .cancel else { return }
            guard transition(&job, to: .running(worker: worker, attempt: attempt, since: since, stopping: .cancel)) else {
                throw SchedulerError(.notAllowed, "job \(id.short) cannot be stopped now")
            }
            jobs[id] = job
            actions.append(.emit(.stopping(id, .cancel)))
            actions.append(.stop(id, worker: worker, reason: .cancel))
        case .succeeded, .failed, .cancelled:
            throw SchedulerError(.notAllowed, "job \(id.short) has already ended (\(job.info.state.name))")
        }
    }

    private mutating func dispatch(now: SchedulerTime) {
        guard !isPaused, !isDispatchHeld, shutdownMode == nil || shutdownMode == .drain else { return }
        while let head = queue.first, let worker = pool.checkOut(for: head) {
            _ = queue.popFirst()
            guard var job = jobs[head] else { continue }
            let attempt = job.info.attempts + 1
            job.info.history.attempts = attempt
            job.info.history.startedAt = now
            job.info.progress = nil
            guard transition(&job, to: .running(worker: worker, attempt: attempt, since: now, stopping: nil)) else {
                _ = pool.checkIn(head, from: worker)
                continue
            }
            if let timeout = job.spec.timeout {
                timers.insert(Timer(time: now + timeout, job: head, attempt: attempt, purpose: .timeout))
            }
            actions.append(.emit(.started(head, attempt: attempt, maxAttempts: job.info.maxAttempts, worker: worker)))
            actions.append(.start(head, attempt: attempt, worker: worker))
            jobs[head] = job
        }
    }

    /// Decides what an ended attempt means for its job.
    private mutating func settle(
        _ job: inout Job, attempt: Int, stopping: StopReason?, termination: Termination, now: SchedulerTime
    ) {
        let id = job.info.id
        if stopping == .cancel {
            finish(&job, as: .cancelled, now: now)
            actions.append(.emit(.cancelled(id)))
            return
        }
        let reason: FailureReason
        switch (stopping, termination) {
        case (.timeout, _):
            reason = .timeout(job.spec.timeout ?? .zero)
        case (_, .workerLost(let why)):
            job.workerLosses += 1
            if shutdownMode == .cancelRunning {
                // Everything is being cancelled: the job ends here, with the attempt it had.
                finish(&job, as: .cancelled, now: now)
                actions.append(.emit(.cancelled(id)))
                return
            }
            if job.workerLosses <= configuration.maxWorkerLossRequeues {
                // The attempt did not really happen: give it back.
                job.info.history.attempts = attempt - 1
                guard transition(&job, to: .queued) else { return }
                jobs[id] = job
                queue.insert(id, priority: job.info.priority)
                actions.append(.emit(.requeued(id, reason: .workerLost(why))))
                return
            }
            reason = .workerLost(why)
        case (_, .exit(0)):
            job.info.history.lastFailure = nil
            finish(&job, as: .succeeded(attempts: attempt), now: now)
            actions.append(.emit(.succeeded(id, attempts: attempt)))
            return
        case (_, .exit(let code)):
            reason = .exitStatus(code)
        case (_, .signal(let signal)):
            reason = .signal(signal)
        case (_, .error(let message)):
            reason = .error(message)
        }
        job.info.history.lastFailure = reason
        let mayRetry = attempt < job.spec.retry.maxAttempts && (shutdownMode == nil || shutdownMode == .drain)
        if mayRetry {
            let delay = job.spec.retry.delay(afterAttempt: attempt, unit: random.nextUnit())
            let due = now + delay
            guard transition(&job, to: .waitingForRetry(until: due, failedAttempt: attempt, reason: reason)) else { return }
            jobs[id] = job
            timers.insert(Timer(time: due, job: id, attempt: attempt, purpose: .retry))
            actions.append(.emit(.retryScheduled(id, failedAttempt: attempt, reason: reason, nextAttempt: attempt + 1, at: due)))
        } else {
            finish(&job, as: .failed(reason: reason, attempts: attempt), now: now)
            actions.append(.emit(.failed(id, reason: reason, attempts: attempt)))
            haltIfNeeded(after: job, now: now)
        }
    }

    private mutating func finish(_ job: inout Job, as state: JobState, now: SchedulerTime) {
        guard transition(&job, to: state) else { return }
        job.info.history.finishedAt = now
        let id = job.info.id
        jobs[id] = job
        if let key = job.spec.coalescingKey, keys[key] == id { keys[key] = nil }
        if let batch = job.batch, batches[batch] != nil {
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
        finishedOrder.append(id)
        while finishedOrder.count > configuration.finishedRetention, let oldest = finishedOrder.popFirst() {
            jobs[oldest] = nil
        }
    }
}
