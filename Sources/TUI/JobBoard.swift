import DequeModule
import Scheduler

/// What the dashboard shows about the scheduler, kept up to date from its events.
///
/// The job table itself is a ``SchedulerMirror``: the one projection of the events into job
/// state, which the headless summary and a property test against the engine share. What is
/// kept here is only what the screen adds: the event pane, the finish rate, the submission
/// order that breaks ties in the table, and when that table's order may have changed. Every
/// event costs O(1) (a snapshot costs O(jobs)).
struct JobBoard: Sendable {
    /// One line of the event pane.
    struct LogEntry: Equatable, Sendable {
        var time: SchedulerTime
        var text: String
        var role: Role
    }

    /// The job table, counts, workers and slots.
    private(set) var mirror: SchedulerMirror
    /// The newest events worth a line, oldest first.
    private(set) var log: Deque<LogEntry> = []
    /// When recent jobs finished, for jobs/s.
    private var finishTimes: Deque<SchedulerTime> = []
    /// Jobs finished in each second of the last minute that had any (scheduler seconds), oldest
    /// first: the header's sparkline and ETA.
    private(set) var finishesBySecond: Deque<(second: Int, count: Int)> = []
    /// The scheduler time of the last snapshot or event.
    private(set) var lastTime: SchedulerTime = .zero
    /// Bumped whenever the order or membership of the job table may have changed.
    private(set) var orderVersion = 0
    /// Set when an event names a job this board does not know (it was dropped); the owner
    /// should fetch a fresh snapshot.
    private(set) var needsSnapshot = false
    /// Submission order, for stable ties in the table; dropped with the job (the mirror names
    /// each job it drops).
    private(set) var ordinals: [JobID: Int] = [:]
    private var nextOrdinal = 0
    /// How many times every job was gone through (a snapshot taken): an O(jobs) pass that must
    /// never come once per event.
    private(set) var fullPasses = 0

    /// One attempt of a job, as the dashboard saw it: for the details panel.
    struct Attempt: Equatable, Sendable {
        var number: Int
        var worker: String
        var start: SchedulerTime
        var end: SchedulerTime?
        /// How it ended (`exit 1`, `succeeded`, `cancelled`), once it has.
        var outcome: String?
        /// Whether it began: false while (and if ever) its worker only holds it.
        var began = true
    }

    /// The attempts of each job seen starting while the dashboard watched (a snapshot gives
    /// only the current one); dropped with the job.
    private(set) var attempts: [JobID: [Attempt]] = [:]

    /// Lines kept in the event log.
    var logLimit: Int

    /// - Parameters:
    ///   - finishedRetention: Finished jobs kept for display; older ones are dropped (the
    ///     counts keep them).
    ///   - logLimit: Lines kept in the event pane.
    init(finishedRetention: Int = 10_000, logLimit: Int = 200) {
        mirror = SchedulerMirror(finishedRetention: finishedRetention)
        self.logLimit = logLimit
    }

    /// Every job kept, by id.
    var jobs: [JobID: JobInfo] { mirror.jobs }
    /// The workers in the pool, in the order they joined.
    var workers: [WorkerDescriptor] { mirror.workers }
    /// Workers known to leave once their jobs end.
    var retiring: Set<WorkerID> { mirror.retiringWorkers }
    /// Running jobs, for the worker panel.
    var running: Set<JobID> { mirror.runningJobs }
    /// Whether dispatch is paused.
    var isPaused: Bool { mirror.isPaused }
    /// The shutdown under way, if any.
    var shutdown: ShutdownMode? { mirror.shutdown }
    /// Local slots.
    var localSlots: Int { mirror.localSlots }
    /// All slots.
    var totalSlots: Int { mirror.totalSlots }

    /// Jobs that have not ended: queued, waiting to retry, running, blocked or scheduled.
    var activeCount: Int {
        JobStateKind.allCases.reduce(0) { total, kind in kind.isFinished ? total : total.saturatingAdd(count(kind)) }
    }

    /// Whether a job or setting uses a group other than the default one: the screen then shows
    /// the groups.
    var hasGroups: Bool { mirror.hasGroups }

    /// How a job is named in the event pane and in messages about another job: its name, else
    /// its short id.
    func label(of id: JobID) -> String {
        if let name = mirror.jobs[id]?.name { return name }
        return id.short
    }

    /// How the event pane names a job: its name or command, cut to 24 cells, else (a job no
    /// longer kept) its short id.
    func tag(_ id: JobID) -> String {
        guard let job = mirror.jobs[id] else { return id.short }
        return TextWidth.truncate(TextWidth.visible(job.displayName), to: 24)
    }

    /// The name of worker `id`, if it is known.
    func workerName(_ id: WorkerID) -> String? { mirror.worker(id)?.name }

    /// Where the worker placed running job `id` (a Slurm job id and reason), if it said.
    func placement(_ id: JobID) -> String? { mirror.placements[id] }

    /// Whether running job `id` was sent to a worker that holds it and has not begun there (a
    /// remote worker's prefetch behind a busy slot, a Slurm queue): its STATE says `sent`.
    func isSent(_ id: JobID) -> Bool { mirror.heldAttempts.contains(id) }

    /// How many running jobs are ``isSent(_:)``.
    var sentCount: Int { mirror.heldAttempts.count }

    /// The word for `job`'s state wherever the dashboard names it: its state's name, but
    /// `stopping` for a running job being stopped and `sent` for one its worker holds.
    func stateName(of job: JobInfo) -> String {
        if case .running(_, _, _, .some) = job.state { return "stopping" }
        return isSent(job.id) ? "sent" : job.state.name
    }

    /// The number of jobs in `kind`.
    func count(_ kind: JobStateKind) -> Int { mirror.count(kind) }

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

    /// Jobs finished in each of the `seconds` whole seconds up to `now`, oldest first.
    func finishes(lastSeconds seconds: Int, now: SchedulerTime) -> [Int] {
        let end = Formatting.wholeSeconds(now.seconds)
        var counts = Array(repeating: 0, count: max(0, seconds))
        for entry in finishesBySecond {
            let offset = seconds - 1 - (end - entry.second)
            if offset >= 0 && offset < seconds { counts[offset] += entry.count }
        }
        return counts
    }

    /// Jobs finished per second over the last minute (or since the start, if shorter).
    func minuteRate(now: SchedulerTime) -> Double {
        let window = min(60, max(1, now.seconds))
        let counts = finishes(lastSeconds: 60, now: now)
        return Double(counts.reduce(0, +)) / window
    }

    // MARK: - Updates

    /// Applies one event: the mirror takes the job state, this board the event pane, the
    /// finish rate and the table's order stamp.
    ///
    /// - Returns: The jobs this event dropped (the oldest finished beyond the retention).
    @discardableResult
    mutating func apply(_ event: SchedulerEvent) -> [JobID] {
        lastTime = max(lastTime, event.time)
        let time = event.time
        if case .snapshot(let snapshot) = event.kind {
            replace(with: snapshot)
            return []
        }
        // An event about a job this board no longer keeps (it was dropped): only a fresh
        // snapshot can say what it is now.
        var before: JobStateKind?
        if let id = event.kind.jobID {
            before = mirror.jobs[id]?.state.kind
            switch event.kind {
            case .submitted, .coalesced, .output, .leftoverProcesses: break
            default: if before == nil { needsSnapshot = true }
            }
        }
        // A worker's name, looked up before the event that removes it.
        var leavingName: String?
        if case .workerLeft(let id, _) = event.kind { leavingName = workerName(id) }
        // A group as it was, to say what changed.
        var groupBefore: JobGroup?
        if case .groupChanged(let group) = event.kind { groupBefore = mirror.groups[group.name] }
        // Collected, then dropped: the closure cannot touch `self` while the mirror changes.
        var evicted: [JobID] = []
        mirror.apply(event) { evicted.append($0) }
        if let id = event.kind.jobID, let after = mirror.jobs[id]?.state.kind, after != before {
            orderVersion &+= 1
        }
        recordAttempt(event)
        if !evicted.isEmpty {
            for id in evicted {
                ordinals[id] = nil
                attempts[id] = nil
            }
            orderVersion &+= 1
        }
        // Throughput is jobs that ended running: queued jobs cancelled in bulk, or skipped,
        // ran nothing (10,000 cancelled at once showed 2000/s and an ETA of 0 s).
        if event.kind.isFinal, before == .running { finished(at: time) }
        describe(event, workerName: leavingName, groupBefore: groupBefore)
        return evicted
    }

    /// Takes a fresh snapshot: clears the "needs a snapshot" flag. O(jobs).
    mutating func replace(with snapshot: SchedulerSnapshot) {
        lastTime = max(lastTime, snapshot.time)
        fullPasses += 1
        mirror.apply(SchedulerEvent(seq: snapshot.seq, time: snapshot.time, kind: .snapshot(snapshot)))
        // Ordinals: kept for the jobs still here, new ones in the snapshot's order.
        ordinals = ordinals.filter { mirror.jobs[$0.key] != nil }
        attempts = attempts.filter { mirror.jobs[$0.key] != nil }
        // A running job seen first in a snapshot: its current attempt.
        for job in snapshot.jobs {
            guard case .running(let worker, let attempt, let since, _) = job.state, attempts[job.id] == nil else { continue }
            attempts[job.id] = [Attempt(number: attempt, worker: workerName(worker) ?? worker.short, start: since)]
        }
        if ordinals.isEmpty {
            // The first snapshot: every job is new, in the snapshot's order (one insert each).
            ordinals.reserveCapacity(snapshot.jobs.count)
            for job in snapshot.jobs {
                ordinals[job.id] = nextOrdinal
                nextOrdinal &+= 1
            }
        } else {
            for job in snapshot.jobs { assignOrdinal(job.id) }
        }
        needsSnapshot = false
        orderVersion &+= 1
        if log.isEmpty { describe(snapshot) }
    }

    /// The first snapshot (a dashboard opened on a run under way, or `attach`): the event pane
    /// starts with what is going on instead of staying empty until the next event.
    private mutating func describe(_ snapshot: SchedulerSnapshot) {
        let total = snapshot.jobs.count
        guard total > 0 else { return }
        let queued = mirror.count(.queued)
        var running = snapshot.jobs.filter { $0.state.kind == .running }
        running.sort { ($0.startedAt ?? .zero) < ($1.startedAt ?? .zero) }
        for job in running.suffix(logLimit / 2) {
            guard case .running(let worker, let attempt, let since, _) = job.state else { continue }
            let suffix = job.maxAttempts > 1 ? " (attempt \(attempt)/\(job.maxAttempts))" : ""
            // One its worker holds was sent, not started (its `began` will say when it starts).
            let verb = isSent(job.id) ? "sent to" : "started on"
            append(since, "\(tag(job.id)) \(verb) \(workerName(worker) ?? worker.short)\(suffix)", .running)
        }
        // The summary is of now: after the starts, which came before it.
        append(snapshot.time, "\(total) job\(total == 1 ? "" : "s") submitted, \(queued) queued", .queued)
    }

    // MARK: - Internals

    /// Keeps the attempt history: a start opens an attempt, an end closes it.
    private mutating func recordAttempt(_ event: SchedulerEvent) {
        func close(_ id: JobID, _ outcome: String) {
            guard var list = attempts[id], let last = list.indices.last, list[last].end == nil else { return }
            list[last].end = event.time
            list[last].outcome = outcome
            attempts[id] = list
        }
        switch event.kind {
        case .started(let id, let attempt, _, let worker):
            attempts[id, default: []].append(
                Attempt(number: attempt, worker: workerName(worker) ?? worker.short, start: event.time, began: !isSent(id)))
        case .began(let id, let attempt):
            // A held attempt's run starts now, not when it was handed to its worker.
            guard var list = attempts[id], let last = list.indices.last, list[last].number == attempt, list[last].end == nil else { break }
            list[last].start = event.time
            list[last].began = true
            attempts[id] = list
        case .retryScheduled(let id, _, let reason, _, _): close(id, reason.description)
        case .failed(let id, let reason, _): close(id, reason.description)
        case .succeeded(let id, _): close(id, "succeeded")
        case .cancelled(let id): close(id, "cancelled")
        case .requeued(let id, let reason): close(id, "requeued: \(reason)")
        default: break
        }
    }

    /// The event pane's line for `event`, if it gets one.
    private mutating func describe(_ event: SchedulerEvent, workerName leavingName: String?, groupBefore: JobGroup?) {
        let time = event.time
        switch event.kind {
        case .snapshot, .output, .progress, .placed, .batchSettled:
            break
        case .began(let id, _):
            // A held attempt's run starts now: its `started` line said where it was sent.
            guard case .running(let worker, _, _, _) = mirror.jobs[id]?.state else { break }
            append(time, "\(tag(id)) started on \(workerName(worker) ?? worker.short)", .running)
        case .lagged(let missed):
            append(time, "fell behind: \(missed) events skipped, resynchronized", .dim)
        case .submitted(let info):
            assignOrdinal(info.id)
            orderVersion &+= 1
            // A job submitted blocked or scheduled gets no event of its own for it.
            var text = "submitted: \(tag(info.id))"
            switch info.state {
            case .blocked:
                let waiting = info.dependencies.filter { mirror.jobs[$0]?.state.kind != .succeeded }
                text += " (waits for \(waiting.map(label(of:)).joined(separator: ", ")))"
            case .scheduled(let at):
                text += " (starts in \(formatDuration(max(.zero, at - time))))"
            default:
                break
            }
            append(time, text, .queued)
        case .coalesced(let existing, let key):
            append(time, "\(existing.short) already active for key \(key)", .dim)
        case .started(let id, let attempt, let maxAttempts, let worker):
            let workerName = workerName(worker) ?? worker.short
            let suffix = maxAttempts > 1 ? " (attempt \(attempt)/\(maxAttempts))" : ""
            // To a worker that holds it until a slot of its own is free (its `began` says when
            // it starts there): sent, not started.
            let verb = isSent(id) ? "sent to" : "started on"
            append(time, "\(tag(id)) \(verb) \(workerName)\(suffix)", .running)
        case .leftoverProcesses(let id, let count, let stopped):
            let processes = count == 1 ? "1 process" : "\(count) processes"
            append(time, "\(tag(id)) left \(processes) in its group; \(stopped ? "stopped" : "kept") \(count == 1 ? "it" : "them")", .dim)
        case .stopping(let id, let reason):
            append(time, "\(tag(id)) stopping (\(reason.rawValue))", .waiting)
        case .retryScheduled(let id, let failedAttempt, let reason, let nextAttempt, let at):
            let delay = formatDuration(max(.zero, at - time))
            append(time, "\(tag(id)) attempt \(failedAttempt) failed (\(reason)); attempt \(nextAttempt) in \(delay)", .waiting)
        case .requeued(let id, let reason):
            append(time, "\(tag(id)) requeued: \(reason)", .queued)
        case .succeeded(let id, let attempts):
            append(time, "\(tag(id)) succeeded\(attempts > 1 ? " after \(attempts) attempts" : "")", .succeeded)
        case .failed(let id, let reason, let attempts):
            append(time, "\(tag(id)) failed: \(reason)\(attempts > 1 ? " (\(attempts) attempts)" : "")", .failed)
        case .cancelled(let id):
            append(time, "\(tag(id)) cancelled", .cancelled)
        case .reprioritized(let id, let from, let to):
            // A priority changes a queued job's place even though its state stays.
            orderVersion &+= 1
            append(time, "\(tag(id)) priority \(from) → \(to)", .normal)
        case .edited(let id, let command):
            // By its name, as other events say a job; an unnamed job's name is its command, the
            // new one already: by its id then.
            let who = mirror.jobs[id]?.name.map { TextWidth.truncate(TextWidth.visible($0), to: 24) } ?? id.short
            append(time, "\(who) command now: \(TextWidth.truncate(TextWidth.visible(command), to: 60))", .normal)
        case .paused:
            append(time, "dispatch paused", .paused)
        case .resumed:
            append(time, "dispatch resumed", .normal)
        case .slotsChanged(let local, let total):
            append(time, "slots: \(local) local, \(total) in all", .normal)
        case .workerJoined(let descriptor):
            if descriptor.kind == .remote {
                let slots = descriptor.runningSlots
                let prefetch = descriptor.prefetchDepth > 0 ? ", +\(descriptor.prefetchDepth) prefetched" : ""
                append(time, "worker \(descriptor.name) joined (\(slots) slot\(slots == 1 ? "" : "s")\(prefetch))", .normal)
            }
        case .workerLeft(let id, let reason):
            // A local slot retired by lowering the slots: the slots line already says so.
            if reason != .slotsReduced {
                append(time, "worker \(leavingName ?? id.short) left: \(reason)", .dim)
            }
        case .workerResized(let id, let slots):
            append(time, "worker \(workerName(id) ?? id.short) now takes \(slots) jobs at once", .dim)
        case .shuttingDown(let mode):
            append(time, "shutting down: \(mode.summary)", .dim)
        case .batchHalted(_, let failed):
            append(time, "\(tag(failed)) failed: halting the run, cancelling the rest", .failed)
        case .blocked(let id, let waitingFor):
            append(time, "\(tag(id)) blocked: waits for \(waitingFor.map(label(of:)).joined(separator: ", "))", .blocked)
        case .released(let id):
            append(time, "\(tag(id)) released: may start", .queued)
        case .scheduled(let id, let at):
            append(time, "\(tag(id)) scheduled: starts in \(formatDuration(max(.zero, at - time)))", .waiting)
        case .skipped(let id, let reason):
            append(time, "\(tag(id)) skipped: \(reason)", .skipped)
        case .groupChanged(let group):
            append(time, Self.describe(group, before: groupBefore), group.isPaused ? .paused : .normal)
        }
    }

    /// `group gpu: paused`, `group gpu: limit 2 → 1`, `group gpu made (no limit)`.
    static func describe(_ group: JobGroup, before: JobGroup?) -> String {
        func limit(_ value: Int?) -> String { value.map(String.init) ?? "none" }
        guard let before else {
            let limit = group.limit.map { "limit \($0)" } ?? "no limit"
            return "group \(group.name) made (\(limit)\(group.isPaused ? ", paused" : ""))"
        }
        var changes: [String] = []
        if before.isPaused != group.isPaused { changes.append(group.isPaused ? "paused" : "resumed") }
        if before.limit != group.limit { changes.append("limit \(limit(before.limit)) → \(limit(group.limit))") }
        if changes.isEmpty { changes.append("limit \(limit(group.limit))\(group.isPaused ? ", paused" : "")") }
        return "group \(group.name): \(changes.joined(separator: ", "))"
    }

    private mutating func assignOrdinal(_ id: JobID) {
        guard ordinals[id] == nil else { return }
        ordinals[id] = nextOrdinal
        nextOrdinal &+= 1
    }

    private mutating func finished(at time: SchedulerTime) {
        let second = Formatting.wholeSeconds(time.seconds)
        if let last = finishesBySecond.last, last.second == second {
            finishesBySecond[finishesBySecond.count - 1].count += 1
        } else {
            finishesBySecond.append((second, 1))
        }
        while let first = finishesBySecond.first, first.second <= second - 60 { finishesBySecond.removeFirst() }
        finishTimes.append(time)
        while let first = finishTimes.first, first <= time - .seconds(5) { finishTimes.removeFirst() }
    }

    /// A line of the dashboard's own for the events pane (not a scheduler event): what its
    /// caller has to say, such as why the run stopped reading its list.
    mutating func note(_ text: String, role: Role) {
        append(lastTime, text, role)
    }

    private mutating func append(_ time: SchedulerTime, _ text: String, _ role: Role) {
        log.append(LogEntry(time: time, text: text, role: role))
        if log.count > logLimit { log.removeFirst(log.count - logLimit) }
    }
}
