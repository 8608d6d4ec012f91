import DequeModule
import Scheduler

/// What the dashboard knows about the scheduler, kept up to date from its events.
///
/// A pure value: a snapshot replaces it, each event updates it. Counts follow every state
/// change, so they stay right even after old finished jobs are dropped from `jobs`.
struct JobBoard: Sendable {
    /// One line of the event pane.
    struct LogEntry: Equatable, Sendable {
        var time: SchedulerTime
        var text: String
        var role: Role
    }

    private(set) var jobs: [JobID: JobInfo] = [:]
    private(set) var counts: [JobStateKind: Int] = [:]
    private(set) var workers: [WorkerDescriptor] = []
    /// Each worker's name by id: the table and the log name a worker on every start, and a
    /// linear search of `workers` would cost O(workers) per event (thousands with a big `-j`).
    private var workerNames: [WorkerID: String] = [:]
    private(set) var retiring: Set<WorkerID> = []
    /// Running jobs, for the worker panel.
    private(set) var running: Set<JobID> = []
    private(set) var isPaused = false
    private(set) var shutdown: ShutdownMode?
    private(set) var localSlots = 0
    private(set) var totalSlots = 0
    /// The newest events worth a line, oldest first.
    private(set) var log: Deque<LogEntry> = []
    /// When recent jobs finished, for jobs/s.
    private var finishTimes: Deque<SchedulerTime> = []
    /// The scheduler time of the last snapshot or event.
    private(set) var lastTime: SchedulerTime = .zero
    /// Bumped whenever the order or membership of the job table may have changed.
    private(set) var orderVersion = 0
    /// Set when an event names a job this board does not know (it was dropped); the owner
    /// should fetch a fresh snapshot.
    private(set) var needsSnapshot = false
    /// Finished jobs still in `jobs` (the counts also hold the dropped ones).
    private(set) var finishedKept = 0
    /// Finishes in the order they happened, oldest first: the next job to drop is at the front,
    /// so dropping costs O(1) instead of a search of every job. An entry whose job finished
    /// again since (after a retry) or is gone no longer matches it and is skipped.
    private var finishOrder: Deque<(id: JobID, at: SchedulerTime)> = []
    /// How many times all of ``jobs`` was searched for old finished jobs: an O(jobs) pass that
    /// must never come once per event (only on a snapshot).
    private(set) var retentionSweeps = 0
    /// Submission order, for stable ties in the table; dropped with the job.
    private(set) var ordinals: [JobID: Int] = [:]
    private var nextOrdinal = 0

    /// Finished jobs kept for display; older ones are dropped (counts keep them).
    var finishedRetention: Int
    /// Lines kept in the event log.
    var logLimit: Int

    init(finishedRetention: Int = 10_000, logLimit: Int = 200) {
        self.finishedRetention = finishedRetention
        self.logLimit = logLimit
    }

    /// Jobs queued, waiting to retry or running.
    var activeCount: Int { count(.queued).saturatingAdd(count(.waiting)).saturatingAdd(count(.running)) }

    /// The name of worker `id`, if it is known.
    func workerName(_ id: WorkerID) -> String? { workerNames[id] }

    /// The number of jobs in `kind`.
    func count(_ kind: JobStateKind) -> Int { counts[kind, default: 0] }

    /// Jobs finished per second over the last five seconds before `now`.
    func jobsPerSecond(now: SchedulerTime) -> Double {
        let start = now - .seconds(5)
        // The times are in order: a binary search for the first one in the window, so that
        // asking costs O(log n) however many jobs finish a second.
        var low = 0
        var high = finishTimes.count
        while low < high {
            let middle = low + (high - low) / 2
            if finishTimes[middle] > start { high = middle } else { low = middle + 1 }
        }
        return Double(finishTimes.count - low) / 5
    }

    // MARK: - Updates

    /// Applies one event.
    mutating func apply(_ event: SchedulerEvent) {
        lastTime = max(lastTime, event.time)
        let time = event.time
        switch event.kind {
        case .snapshot(let snapshot):
            replace(with: snapshot)
        case .lagged(let missed):
            append(time, "fell behind: \(missed) events skipped, resynchronized", .dim)
        case .submitted(let info):
            if let old = jobs[info.id] { leave(old.state, id: info.id) }
            jobs[info.id] = info
            assignOrdinal(info.id)
            enter(info.state, id: info.id, at: info.finishedAt ?? time)
            orderVersion &+= 1
            append(time, "\(info.id.short) submitted: \(info.displayName)", .queued)
        case .coalesced(let existing, let key):
            append(time, "\(existing.short) already active for key \(key)", .dim)
        case .started(let id, let attempt, let maxAttempts, let worker):
            update(id) { job in
                job.history.attempts = attempt
                job.maxAttempts = maxAttempts
                job.history.startedAt = time
                job.history.finishedAt = nil
                job.progress = nil
                return .running(worker: worker, attempt: attempt, since: time, stopping: nil)
            }
            let workerName = workerNames[worker] ?? worker.short
            let suffix = maxAttempts > 1 ? " (attempt \(attempt)/\(maxAttempts))" : ""
            append(time, "\(id.short) started on \(workerName)\(suffix)", .running)
        case .progress(let id, let fraction):
            if jobs[id] != nil { jobs[id]!.progress = fraction } else { needsSnapshot = true }
        case .output:
            break
        case .leftoverProcesses(let id, let count, let stopped):
            let processes = count == 1 ? "1 process" : "\(count) processes"
            append(time, "\(id.short) left \(processes) in its group; \(stopped ? "stopped" : "kept") \(count == 1 ? "it" : "them")", .dim)
        case .stopping(let id, let reason):
            update(id) { job in
                guard case .running(let worker, let attempt, let since, _) = job.state else { return job.state }
                return .running(worker: worker, attempt: attempt, since: since, stopping: reason)
            }
            append(time, "\(id.short) stopping (\(reason == .cancel ? "cancel" : "timeout"))", .waiting)
        case .retryScheduled(let id, let failedAttempt, let reason, let nextAttempt, let at):
            update(id) { job in
                job.history.lastFailure = reason
                return .waitingForRetry(until: at, failedAttempt: failedAttempt, reason: reason)
            }
            let delay = formatDuration(max(.zero, at - time))
            append(time, "\(id.short) attempt \(failedAttempt) failed (\(reason)); attempt \(nextAttempt) in \(delay)", .waiting)
        case .requeued(let id, let reason):
            update(id) { job in
                job.history.finishedAt = nil
                job.progress = nil
                return .queued
            }
            append(time, "\(id.short) requeued: \(reason)", .queued)
        case .succeeded(let id, let attempts):
            update(id) { job in
                job.history.attempts = attempts
                job.history.finishedAt = time
                return .succeeded(attempts: attempts)
            }
            finished(at: time)
            append(time, "\(id.short) succeeded\(attempts > 1 ? " after \(attempts) attempts" : "")", .succeeded)
        case .failed(let id, let reason, let attempts):
            update(id) { job in
                job.history.attempts = attempts
                job.history.finishedAt = time
                job.history.lastFailure = reason
                return .failed(reason: reason, attempts: attempts)
            }
            finished(at: time)
            append(time, "\(id.short) failed: \(reason)\(attempts > 1 ? " (\(attempts) attempts)" : "")", .failed)
        case .cancelled(let id):
            update(id) { job in
                job.history.finishedAt = time
                return .cancelled
            }
            finished(at: time)
            append(time, "\(id.short) cancelled", .cancelled)
        case .reprioritized(let id, let from, let to):
            if jobs[id] != nil {
                jobs[id]!.priority = to
                orderVersion &+= 1
            } else {
                needsSnapshot = true
            }
            append(time, "\(id.short) priority \(from) → \(to)", .normal)
        case .paused:
            isPaused = true
            append(time, "dispatch paused", .paused)
        case .resumed:
            isPaused = false
            append(time, "dispatch resumed", .normal)
        case .slotsChanged(let local, let total):
            localSlots = local
            totalSlots = total
            append(time, "slots: \(local) local, \(total) in all", .normal)
        case .workerJoined(let descriptor):
            if workerNames[descriptor.id] != nil { workers.removeAll { $0.id == descriptor.id } }
            workers.append(descriptor)
            workerNames[descriptor.id] = descriptor.name
            if descriptor.kind == .remote {
                append(time, "worker \(descriptor.name) joined (\(descriptor.slots) slots)", .normal)
            }
        case .workerLeft(let id, let reason):
            let name = workerNames[id] ?? id.short
            if workerNames.removeValue(forKey: id) != nil { workers.removeAll { $0.id == id } }
            retiring.remove(id)
            // A local slot retired by lowering the slots: the slots line already says so.
            if reason != .slotsReduced {
                append(time, "worker \(name) left: \(reason)", .dim)
            }
        case .shuttingDown(let mode):
            shutdown = mode
            append(time, "shutting down (\(mode.rawValue))", .dim)
        case .batchHalted(_, let failed):
            append(time, "\(failed.short) failed: halting the run, cancelling the rest", .failed)
        case .batchSettled:
            break
        }
    }

    /// Takes a fresh snapshot: clears the "needs a snapshot" flag.
    mutating func replace(with snapshot: SchedulerSnapshot) {
        lastTime = max(lastTime, snapshot.time)
        var jobs: [JobID: JobInfo] = [:]
        jobs.reserveCapacity(snapshot.jobs.count)
        running = []
        finishedKept = 0
        var finished: [(id: JobID, at: SchedulerTime)] = []
        for job in snapshot.jobs {
            jobs[job.id] = job
            if case .running = job.state { running.insert(job.id) }
            if job.state.isFinished {
                finishedKept += 1
                finished.append((job.id, job.finishedAt ?? .zero))
            }
        }
        retentionSweeps += 1
        finishOrder = Deque(finished.sorted { $0.at < $1.at })
        // Ordinals: kept for the jobs still here, new ones in the snapshot's order.
        ordinals = ordinals.filter { jobs[$0.key] != nil }
        self.jobs = jobs
        for job in snapshot.jobs { assignOrdinal(job.id) }
        counts = snapshot.counts
        workers = snapshot.workers.map(\.descriptor)
        workerNames = Dictionary(workers.map { ($0.id, $0.name) }, uniquingKeysWith: { _, last in last })
        retiring = Set(snapshot.workers.filter(\.isRetiring).map(\.descriptor.id))
        isPaused = snapshot.isPaused
        shutdown = snapshot.shutdown
        localSlots = snapshot.localSlots
        totalSlots = snapshot.totalSlots
        needsSnapshot = false
        orderVersion &+= 1
        dropOldFinished()
    }

    // MARK: - Internals

    /// Changes a job's state (and whatever `change` sets), keeping counts right.
    private mutating func update(_ id: JobID, _ change: (inout JobInfo) -> JobState) {
        guard var job = jobs[id] else {
            needsSnapshot = true
            return
        }
        let old = job.state
        let new = change(&job)
        job.state = new
        jobs[id] = job
        if old != new {
            leave(old, id: id)
            enter(new, id: id, at: job.finishedAt ?? lastTime)
            if old.kind != new.kind { orderVersion &+= 1 }
        }
    }

    private mutating func assignOrdinal(_ id: JobID) {
        guard ordinals[id] == nil else { return }
        ordinals[id] = nextOrdinal
        nextOrdinal &+= 1
    }

    /// A job in `jobs` entered `state` (at `time`, which a finished job records).
    private mutating func enter(_ state: JobState, id: JobID, at time: SchedulerTime) {
        counts[state.kind, default: 0] = counts[state.kind, default: 0].saturatingAdd(1)
        if case .running = state { running.insert(id) }
        if state.isFinished {
            finishedKept += 1
            finishOrder.append((id, time))
        }
    }

    /// A job in `jobs` left `state`.
    private mutating func leave(_ state: JobState, id: JobID) {
        let count = counts[state.kind, default: 0]
        counts[state.kind, default: 0] = count > 0 ? count - 1 : 0
        if case .running = state { running.remove(id) }
        if state.isFinished { finishedKept -= 1 }
    }

    private mutating func finished(at time: SchedulerTime) {
        finishTimes.append(time)
        while let first = finishTimes.first, first <= time - .seconds(5) { finishTimes.removeFirst() }
        dropOldFinished()
    }

    /// Drops the oldest finished jobs beyond the retention: O(1) per job dropped.
    ///
    /// This once went by the counts (which keep the dropped jobs) and searched and sorted the
    /// whole table to find the oldest: past the first batch, every finish searched it again,
    /// O(jobs) per event. Now the finishes are queued in order, and the job to drop is at the
    /// front.
    private mutating func dropOldFinished() {
        var dropped = false
        while finishedKept > finishedRetention, let oldest = finishOrder.popFirst() {
            // A stale entry (the job ran again, or is gone) is only skipped.
            guard let job = jobs[oldest.id], job.state.isFinished, (job.finishedAt ?? oldest.at) == oldest.at else { continue }
            jobs[oldest.id] = nil
            ordinals[oldest.id] = nil
            finishedKept -= 1
            dropped = true
        }
        // Stale entries pile up only with retries; they are cleared out once they outnumber
        // the live ones, so the queue stays O(finished jobs kept).
        if finishOrder.count > 2 * finishedKept + 1_024 {
            finishOrder = Deque(finishOrder.filter { entry in
                jobs[entry.id].map { $0.state.isFinished && ($0.finishedAt ?? entry.at) == entry.at } ?? false
            })
        }
        if dropped { orderVersion &+= 1 }
    }

    private mutating func append(_ time: SchedulerTime, _ text: String, _ role: Role) {
        log.append(LogEntry(time: time, text: text, role: role))
        if log.count > logLimit { log.removeFirst(log.count - logLimit) }
    }
}
