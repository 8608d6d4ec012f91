import DequeModule

/// The one projection of the event stream into a job table outside the core: events in, jobs,
/// counts and slots out.
///
/// Every client that shows or sums up a scheduler (the dashboard, the headless summary, a remote
/// dashboard, tests) keeps one of these instead of re-deriving transitions of its own. After
/// the same events it equals the engine's own snapshot (a property test checks that over random
/// command sequences). It keeps what the engine keeps: every unfinished job, and the most recent
/// `finishedRetention` finished ones; counts include the evicted.
public struct SchedulerMirror: Sendable {
    /// Every job it knows, by id.
    public private(set) var jobs: [JobID: JobInfo] = [:]
    /// Jobs per state, finished jobs no longer kept included.
    public private(set) var counts: [JobStateKind: Int] = [:]
    /// Whether dispatch is paused.
    public private(set) var isPaused = false
    /// The shutdown under way, if any.
    public private(set) var shutdown: ShutdownMode?
    /// Local slots.
    public private(set) var localSlots = 0
    /// All slots.
    public private(set) var totalSlots = 0
    /// The workers that are in the pool, in the order they joined.
    public private(set) var workers: [WorkerDescriptor] = []
    /// The running jobs (what the workers are busy with: each one's worker is in its state).
    public private(set) var runningJobs: Set<JobID> = []
    /// Workers known to leave once their jobs end. No event says when a busy worker begins to
    /// retire (only its `workerLeft` when it is gone), so this is what the last snapshot said,
    /// less the workers that left since.
    public private(set) var retiringWorkers: Set<WorkerID> = []
    /// Where the workers placed running jobs (``SchedulerEvent/Kind/placed(_:_:)``): until the
    /// attempt ends.
    public private(set) var placements: [JobID: String] = [:]
    /// Running jobs sent to a worker that holds attempts and not begun there yet
    /// (``SchedulerSnapshot/heldAttempts``): until their `began` or the attempt's end.
    public private(set) var heldAttempts: Set<JobID> = []
    /// Unfinished jobs one of whose attempts began and was lost with its worker: they have run,
    /// though their attempts say 0 (as the core's count of losses says).
    private var lostAfterBeginning: Set<JobID> = []
    /// The workers by id: the dashboard names a worker on every start, and a search of
    /// ``workers`` would cost O(workers) per event (thousands with a big `-j`).
    private var workersByID: [WorkerID: WorkerDescriptor] = [:]
    /// The groups by name (the default group always among them).
    public private(set) var groups: [String: JobGroup] = [JobSpec.defaultGroup: JobGroup(name: JobSpec.defaultGroup)]
    /// Per group, its jobs running, queued, and held (blocked or scheduled).
    private var groupCounts: [String: GroupStatus] = [:]
    /// The number of the last event applied.
    public private(set) var lastSeq: UInt64 = 0
    /// Whether a lag marker came and the snapshot that repairs it has not yet.
    public private(set) var isResyncing = false
    /// How many finished jobs are kept.
    public let finishedRetention: Int
    private var finishedOrder: Deque<JobID> = []

    /// An empty mirror; the first event of a subscription (a snapshot) fills it.
    public init(finishedRetention: Int = 10_000) {
        self.finishedRetention = max(0, finishedRetention)
    }

    /// The number of jobs in `kind`.
    public func count(_ kind: JobStateKind) -> Int { counts[kind, default: 0] }

    /// Every group with its counts: the default group first, then by name.
    public var groupStatuses: [GroupStatus] {
        groups.values.sorted(by: JobGroup.listsBefore).map { group in
            var status = groupCounts[group.name] ?? GroupStatus(group: group)
            status.group = group
            return status
        }
    }

    /// Whether any job or setting uses a group other than the default one (a screen then shows
    /// groups).
    public var hasGroups: Bool { groups.count > 1 || groups[JobSpec.defaultGroup] != JobGroup(name: JobSpec.defaultGroup) }

    /// The worker with id `id`, if it is in the pool.
    public func worker(_ id: WorkerID) -> WorkerDescriptor? { workersByID[id] }

    /// Applies one event.
    ///
    /// - Returns: The job it changed, if any.
    @discardableResult
    public mutating func apply(_ event: SchedulerEvent) -> JobID? {
        apply(event) { _ in }
    }

    /// Applies one event, and names each finished job it stops keeping (the oldest beyond
    /// ``finishedRetention``), so that a view keeping something per job can drop it too.
    ///
    /// - Parameters:
    ///   - event: The event.
    ///   - evicted: Called with each job dropped from ``jobs`` by this event (not for a snapshot,
    ///     which replaces the whole table).
    /// - Returns: The job it changed, if any.
    @discardableResult
    public mutating func apply(_ event: SchedulerEvent, evicted: (JobID) -> Void) -> JobID? {
        lastSeq = max(lastSeq, event.seq)
        let time = event.time
        // A job cancelled while its worker held it never ran: the attempt does not count.
        var wasHeld = false
        switch event.kind {
        case .cancelled(let id), .requeued(let id, .workerLost):
            wasHeld = heldAttempts.contains(id)
        default:
            break
        }
        // What a worker said of an attempt, and whether it holds it unbegun, last until the
        // attempt ends (a new start says again where it is held).
        switch event.kind {
        case .started(let id, _, _, let worker):
            if !placements.isEmpty { placements[id] = nil }
            if workersByID[worker]?.holdsAttempts == true {
                heldAttempts.insert(id)
            } else if !heldAttempts.isEmpty {
                heldAttempts.remove(id)
            }
        case .retryScheduled(let id, _, _, _, _), .requeued(let id, _), .succeeded(let id, _), .failed(let id, _, _), .cancelled(let id):
            if !placements.isEmpty { placements[id] = nil }
            if !heldAttempts.isEmpty { heldAttempts.remove(id) }
        case .began(let id, _):
            if !heldAttempts.isEmpty { heldAttempts.remove(id) }
        case .snapshot(let snapshot):
            placements = snapshot.placements
            heldAttempts = snapshot.heldAttempts
        default:
            break
        }
        switch event.kind {
        case .snapshot(let snapshot):
            replace(with: snapshot)
            return nil
        case .lagged:
            isResyncing = true
            return nil
        case .submitted(let info):
            if let old = jobs[info.id] {
                counts[old.state.kind, default: 0] -= 1
                if old.state.kind == .running { runningJobs.remove(info.id) }
                countInGroup(old.group, old.state.kind, by: -1)
            }
            jobs[info.id] = info
            counts[info.state.kind, default: 0] += 1
            if info.state.kind == .running { runningJobs.insert(info.id) }
            if groups[info.group] == nil { groups[info.group] = JobGroup(name: info.group) }
            countInGroup(info.group, info.state.kind, by: 1)
            return info.id
        case .started(let id, let attempt, _, let worker):
            return update(id) { job in
                job.history.attempts = attempt
                job.history.startedAt = time
                job.progress = nil
                job.state = .running(worker: worker, attempt: attempt, since: time, stopping: nil)
            }
        case .began(let id, let attempt):
            return update(id) { job in
                guard case .running(let worker, attempt, _, let stopping) = job.state else { return }
                job.history.startedAt = time
                job.state = .running(worker: worker, attempt: attempt, since: time, stopping: stopping)
            }
        case .progress(let id, let fraction):
            // Only a running job has progress (as the engine's snapshot says).
            return update(id) { job in if case .running = job.state { job.progress = fraction } }
        case .placed(let id, let detail):
            guard case .running = jobs[id]?.state else { return nil }
            placements[id] = detail
            return id
        case .stopping(let id, let reason):
            return update(id) { job in
                guard case .running(let worker, let attempt, let since, _) = job.state else { return }
                job.state = .running(worker: worker, attempt: attempt, since: since, stopping: reason)
            }
        case .retryScheduled(let id, let failedAttempt, let reason, _, let at):
            return update(id) { job in
                job.history.lastFailure = reason
                job.progress = nil
                job.state = .waitingForRetry(until: at, failedAttempt: failedAttempt, reason: reason)
            }
        case .requeued(let id, let reason):
            if reason == .retriedByUser { finishedOrder.removeAll { $0 == id } }
            // An attempt that began and was lost: the job has run (its start stays when a later
            // held attempt is cancelled). A retry by hand starts its count afresh.
            if case .workerLost = reason, !wasHeld { lostAfterBeginning.insert(id) }
            if reason == .retriedByUser, !lostAfterBeginning.isEmpty { lostAfterBeginning.remove(id) }
            let hasRun = lostAfterBeginning.contains(id)
            return update(id) { job in
                switch reason {
                case .retryDue: break
                case .retriedByUser:
                    job.history.attempts = 0
                    job.progress = nil
                    job.history.finishedAt = nil
                    job.history.startedAt = nil
                case .workerLost, .stoppedForShutdown:
                    job.history.attempts = max(0, job.attempts - 1)
                case .withdrawn, .withdrawnForPause, .withdrawnForShutdown, .withdrawnForPriority:
                    // Never began: as the core, no start to show if none of its attempts has.
                    job.history.attempts = max(0, job.attempts - 1)
                    if job.history.attempts == 0 && !hasRun { job.history.startedAt = nil }
                }
                job.progress = nil
                job.state = .queued
            }
        case .succeeded(let id, let attempts):
            defer { finished(id, evicted: evicted) }
            return update(id) { job in
                job.history.lastFailure = nil
                job.history.finishedAt = time
                job.progress = nil
                job.state = .succeeded(attempts: attempts)
            }
        case .failed(let id, let reason, let attempts):
            defer { finished(id, evicted: evicted) }
            return update(id) { job in
                job.history.lastFailure = reason
                job.history.finishedAt = time
                job.progress = nil
                job.state = .failed(reason: reason, attempts: attempts)
            }
        case .cancelled(let id):
            defer { finished(id, evicted: evicted) }
            let hasRun = lostAfterBeginning.contains(id)
            return update(id) { job in
                job.history.finishedAt = time
                if wasHeld, job.history.attempts > 0 {
                    job.history.attempts -= 1
                    if job.history.attempts == 0 && !hasRun { job.history.startedAt = nil }
                }
                job.progress = nil
                job.state = .cancelled
            }
        case .reprioritized(let id, _, let to):
            return update(id) { $0.priority = to }
        case .edited(let id, let command):
            return update(id) { $0.command = command }
        case .blocked(let id, _):
            // A skipped job brought back by a retry leaves the finished (a scheduled one whose
            // time came was never among them).
            if jobs[id]?.state.isFinished == true { finishedOrder.removeAll { $0 == id } }
            return update(id) { job in
                job.history.finishedAt = nil
                job.state = .blocked
            }
        case .released(let id):
            return update(id) { $0.state = .queued }
        case .scheduled(let id, let at):
            if jobs[id]?.state.isFinished == true { finishedOrder.removeAll { $0 == id } }
            return update(id) { job in
                job.history.finishedAt = nil
                job.state = .scheduled(until: at)
            }
        case .skipped(let id, let reason):
            defer { finished(id, evicted: evicted) }
            return update(id) { job in
                job.history.finishedAt = time
                job.state = .skipped(reason)
            }
        case .groupChanged(let group):
            groups[group.name] = group
        case .paused:
            isPaused = true
        case .resumed:
            isPaused = false
        case .slotsChanged(let local, let total):
            localSlots = local
            totalSlots = total
        case .workerJoined(let descriptor):
            // A search of the list only for a worker that joins again.
            if workersByID[descriptor.id] != nil { workers.removeAll { $0.id == descriptor.id } }
            workers.append(descriptor)
            workersByID[descriptor.id] = descriptor
        case .workerLeft(let id, _):
            if workersByID.removeValue(forKey: id) != nil { workers.removeAll { $0.id == id } }
            retiringWorkers.remove(id)
        case .workerResized(let id, let slots):
            if workersByID[id] != nil, let index = workers.firstIndex(where: { $0.id == id }) {
                workers[index].slots = slots
                workersByID[id] = workers[index]
            }
        case .shuttingDown(let mode):
            shutdown = mode
        case .coalesced, .output, .leftoverProcesses, .batchHalted, .batchSettled:
            break
        }
        return nil
    }

    /// Changes a job in place (never a copy of the table), keeping the counts in step.
    private mutating func update(_ id: JobID, _ change: (inout JobInfo) -> Void) -> JobID? {
        guard let old = jobs[id]?.state.kind else { return nil }
        change(&jobs[id]!)
        let new = jobs[id]!.state.kind
        if old != new {
            counts[old, default: 0] -= 1
            counts[new, default: 0] += 1
            if old == .running { runningJobs.remove(id) }
            if new == .running { runningJobs.insert(id) }
            let group = jobs[id]!.group
            countInGroup(group, old, by: -1)
            countInGroup(group, new, by: 1)
        }
        return id
    }

    /// Keeps a group's running, queued and held counts in step with its jobs.
    private mutating func countInGroup(_ group: String, _ kind: JobStateKind, by delta: Int) {
        switch kind {
        case .running: groupCounts[group, default: GroupStatus(group: JobGroup(name: group))].running += delta
        case .queued: groupCounts[group, default: GroupStatus(group: JobGroup(name: group))].queued += delta
        case .blocked, .scheduled, .waiting: groupCounts[group, default: GroupStatus(group: JobGroup(name: group))].held += delta
        default: break
        }
    }

    private mutating func finished(_ id: JobID, evicted: (JobID) -> Void) {
        if !lostAfterBeginning.isEmpty { lostAfterBeginning.remove(id) }
        guard jobs[id] != nil else { return }
        finishedOrder.append(id)
        while finishedOrder.count > finishedRetention, let oldest = finishedOrder.popFirst() {
            jobs[oldest] = nil
            evicted(oldest)
        }
    }

    private mutating func replace(with snapshot: SchedulerSnapshot) {
        // One pass, into a table sized once: a snapshot can hold 100,000 jobs.
        var table = [JobID: JobInfo](minimumCapacity: snapshot.jobs.count)
        var running = Set<JobID>()
        var finished: [JobID] = []
        for job in snapshot.jobs {
            table[job.id] = job
            if job.state.isFinished {
                finished.append(job.id)
            } else if job.state.kind == .running {
                running.insert(job.id)
            }
        }
        jobs = table
        counts = snapshot.counts
        isPaused = snapshot.isPaused
        shutdown = snapshot.shutdown
        localSlots = snapshot.localSlots
        totalSlots = snapshot.totalSlots
        workers = snapshot.workers.map(\.descriptor)
        workersByID = Dictionary(workers.map { ($0.id, $0) }, uniquingKeysWith: { _, last in last })
        retiringWorkers = Set(snapshot.workers.filter(\.isRetiring).map(\.descriptor.id))
        runningJobs = running
        groups = [JobSpec.defaultGroup: JobGroup(name: JobSpec.defaultGroup)]
        for status in snapshot.groups { groups[status.group.name] = status.group }
        groupCounts = [:]
        for status in snapshot.groups { groupCounts[status.group.name] = status }
        lastSeq = snapshot.seq
        isResyncing = false
        // The snapshot lists finished jobs newest first.
        finishedOrder = Deque(finished.reversed())
    }
}
