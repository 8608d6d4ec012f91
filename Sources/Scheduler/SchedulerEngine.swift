/// Everything a ``Scheduler`` changes, and the code that performs what its ``SchedulerCore``
/// decides: the scheduler keeps it under one lock (``Locked``), which every command and every
/// attempt's end takes for one step.
///
/// A lock rather than the actor's isolation so that a slot reports its attempt's end and takes
/// its next job in its own task, on its own thread: through the actor, every job cost a hop onto
/// it and a hop back to the global executor, each a queued job and often a thread wake-up: about a
/// third of the scheduler's CPU in the closure benchmark. A step never awaits, so the lock is held
/// only while the core decides and its actions are performed (short; a submission of many jobs
/// at once is the longest). Events are published under it, so their numbers follow the order of
/// the steps, and a new subscriber's snapshot is built under it, so no state change is published
/// meanwhile.
///
/// Nothing a step calls takes this lock again: the events it publishes, the continuations it
/// resumes, the tasks it cancels (their cancellation handlers never take it) and the starts it
/// hands to the launcher do their own locking, or reach the scheduler later through a task.
struct SchedulerEngine: Sendable {
    let configuration: Scheduler.Configuration
    let clock: SchedulerClock
    let bus: EventBus
    let store: JobOutputStore
    /// Starts the core decided on, handed to `run()`'s task group in batches.
    let launcher: Mailbox<JobAssignmentHandle>
    var core: SchedulerCore
    var ids: IdentifierGenerator
    var workers: [WorkerID: any Worker] = [:]
    /// The control of each running attempt, by its job's handle index (no hashing per start):
    /// set when the attempt starts, cleared when it is reported; a later job at the same index
    /// replaces it when it starts.
    var controls: [JobControl?] = []
    /// Buffers the steps reuse, so a step allocates no arrays of its own.
    var stepActions: [SchedulerCore.Action] = []
    var stepStarts: [SchedulerCore.Start] = []
    var stepEvents: [SchedulerEvent.Kind] = []
    var stepEnded: [JobID] = []
    var stepStarted: [JobID] = []
    var localWorkersMade = 0
    /// Attempt ends reported in a step for a slot that found the lock taken (for tests).
    var endsReportedForOtherSlots = 0

    var timerSleeper: Task<Void, Never>?
    var sleepingUntil: SchedulerTime?
    var timerIdle: CheckedContinuation<Void, Never>?
    var isRunning = false
    var hasStopped = false
    var hasRunEnded = false
    var shutdownWaiters: [CheckedContinuation<Void, Never>] = []
    var roomWaiters = RoomWaiters()
    var nextRoomWaiter = 0
    var roomWaitersWatch: (count: Int, continuation: CheckedContinuation<Void, Never>)?
    var heldWaiters: [CheckedContinuation<Void, Never>] = []

    init(configuration: Scheduler.Configuration, clock: SchedulerClock) {
        self.configuration = configuration
        self.clock = clock
        bus = EventBus()
        launcher = Mailbox()
        store = JobOutputStore(limits: .init(
            lines: configuration.tailLines, bytes: configuration.tailBytes, finishedTails: configuration.finishedTails,
            finishedBytes: configuration.finishedTailBytes))
        core = SchedulerCore(configuration: .init(
            finishedRetention: configuration.finishedRetention,
            maxWorkerLossRequeues: configuration.maxWorkerLossRequeues,
            seed: configuration.seed, wallClockEpoch: clock.wallClockEpoch))
        ids = configuration.seed.map { IdentifierGenerator(seed: $0 &+ 1) } ?? IdentifierGenerator()
        // Nothing starts before `run()` begins: nothing could run it (a job showed as started
        // with no process, and its timeout ran out before it could run).
        _ = core.holdDispatch(true, now: .zero)
        var events: [SchedulerEvent.Kind] = []
        for number in 1...max(1, configuration.localSlots) where configuration.localSlots > 0 {
            let worker = LocalWorker(name: "local-\(number)", gracePeriod: configuration.gracePeriod)
            workers[worker.descriptor.id] = worker
            for case .emit(let kind) in core.workerJoined(worker.descriptor, now: .zero) { events.append(kind) }
        }
        localWorkersMade = configuration.localSlots
        bus.publish(events, time: .zero)
    }

    // MARK: - Steps

    /// One step: the core decides at the clock's present, then its actions are performed.
    mutating func step<Failure: Error>(
        _ scheduler: Scheduler, _ decide: (inout SchedulerCore, SchedulerTime) throws(Failure) -> [SchedulerCore.Action]
    ) throws(Failure) {
        let now = clock.now()
        let actions = try decide(&core, now)
        perform(actions, now: now, scheduler: scheduler)
    }

    mutating func beginShutdown(_ mode: ShutdownMode, scheduler: Scheduler) {
        step(scheduler) { core, now in core.shutdown(mode, now: now) }
        if !isRunning || hasRunEnded, core.isShutdownComplete || !isRunning { bus.finish() }
    }

    mutating func submit(_ specs: [JobSpec], ids given: [JobID]?, batch: BatchID?, scheduler: Scheduler) throws(SchedulerError) -> [JobID] {
        if let mode = core.shutdownMode, mode != .drain {
            throw SchedulerError(.shuttingDown, "the scheduler is shutting down; no new jobs")
        }
        // A drain that has ended (or a run() that has returned) runs nothing more: a job taken
        // now stayed `running` for good, and its cancel did nothing.
        if hasStopped || hasRunEnded {
            throw SchedulerError(.shuttingDown, "the scheduler has stopped; no new jobs")
        }
        if let given, given.count != specs.count {
            throw SchedulerError(.invalidArgument, "\(specs.count) jobs but \(given.count) ids")
        }
        let now = clock.now()
        let fresh: [JobID]
        if let given {
            fresh = given
        } else {
            var made: [JobID] = []
            made.reserveCapacity(specs.count)
            for _ in specs { made.append(ids.nextJobID()) }
            fresh = made
        }
        let (result, actions) = try core.submit(contentsOf: specs, ids: fresh, batch: batch, now: now)
        perform(actions, now: now, scheduler: scheduler)
        return result
    }

    mutating func setLocalSlots(_ slots: Int, scheduler: Scheduler) {
        let now = clock.now()
        let current = core.localCapacity
        if slots > current {
            // Busy workers still to leave from a lowering come back first.
            var actions = core.keepLocalSlots(upTo: slots, now: now).actions
            for _ in core.localCapacity..<max(core.localCapacity, slots) {
                localWorkersMade += 1
                let worker = LocalWorker(name: "local-\(localWorkersMade)", gracePeriod: configuration.gracePeriod)
                workers[worker.descriptor.id] = worker
                actions.append(contentsOf: core.workerJoined(worker.descriptor, now: now))
            }
            perform(actions, now: now, scheduler: scheduler)
        } else if slots < current {
            perform(core.reduceLocalSlots(to: slots, now: now), now: now, scheduler: scheduler)
        }
    }

    /// An attempt ended: the core settles it, and the slot's next attempt is returned for the
    /// caller to run in the task it has.
    ///
    /// - Parameter spare: A control made before the step, for that next attempt (one allocation
    ///   less under the lock).
    mutating func finished(
        _ handle: JobAssignmentHandle, _ termination: Termination, spare: JobControl, scheduler: Scheduler
    ) -> InlineStart? {
        let assignment = handle.assignment
        let index = Int(handle.job.index)
        if index < controls.count, controls[index] === assignment.control { controls[index] = nil }
        let now = clock.now()
        let worker = handle.worker.descriptor.id
        core.jobFinished(
            handle.job, id: assignment.jobID, attempt: assignment.attempt, worker: worker, termination: termination,
            stopTookEffect: assignment.control.stopTookEffect, now: now)
        core.moveActions(into: &stepActions, starts: &stepStarts)
        defer {
            stepActions.removeAll(keepingCapacity: true)
            stepStarts.removeAll(keepingCapacity: true)
        }
        return perform(stepActions, starts: stepStarts, now: now, continuing: worker, spare: spare, scheduler: scheduler)
    }

    /// Holds back new jobs until `run()` begins and while a lossless subscriber is behind, and
    /// lets them go once neither holds them.
    mutating func updateDispatchHold(scheduler: Scheduler) {
        let held = !isRunning || !bus.flow.isOpen
        step(scheduler) { core, now in core.holdDispatch(held, now: now) }
        if isHeldForSubscribers {
            for waiter in heldWaiters { waiter.resume() }
            heldWaiters = []
        }
    }

    /// Whether new jobs are held back for a lossless subscriber (not only for `run()` to begin).
    var isHeldForSubscribers: Bool { isRunning && core.isDispatchHeld }

    mutating func endRun() {
        hasRunEnded = true
        for waiter in roomWaiters.removeAll() { waiter.resume() }
        for waiter in heldWaiters { waiter.resume() }
        heldWaiters = []
        bus.finish()
        for waiter in shutdownWaiters { waiter.resume() }
        shutdownWaiters = []
    }

    /// The core's snapshot with where the workers placed the running jobs (Slurm job ids):
    /// what a screen that subscribes late, or `jobtop status`, shows for them.
    func placedSnapshot(seq: UInt64, now: SchedulerTime) -> SchedulerSnapshot {
        var snapshot = core.snapshot(seq: seq, now: now, progress: store.progress(of:))
        snapshot.placements = store.placements(of: snapshot.workers.lazy.flatMap(\.running))
        return snapshot
    }

    /// Whether a ``Scheduler/waitForRoom(in:below:)`` caller is done waiting: `true` when the
    /// batch has room, `false` when it takes no more jobs, `nil` while it must wait.
    func roomVerdict(in batch: BatchID, below limit: Int) -> Bool? {
        guard let status = core.batch(batch), !status.isSealed, status.haltedBy == nil,
              core.shutdownMode == nil || core.shutdownMode == .drain, !Task.isCancelled
        else { return false }
        return status.unfinished < max(1, limit) ? true : nil
    }

    /// Resumes the ``Scheduler/waitForRoom(in:below:)`` callers whose batch has room now (or
    /// never will). Runs after every step while a caller waits (a streamed list's reader, nearly
    /// always): a step that wakes nobody reads each waiter's batch and limit, and copies nothing
    /// else.
    private mutating func wakeRoomWaiters() {
        let stopping = core.shutdownMode != nil && core.shutdownMode != .drain
        // (The core is read in place: passed as an argument, it would be copied.)
        for waiter in roomWaiters.remove(where: { stopping || core.batchHasRoom($0.batch, below: $0.limit) }) {
            waiter.resume()
        }
    }

    mutating func rearmTimer() {
        guard let next = core.nextDeadline else { return }
        if let idle = timerIdle {
            timerIdle = nil
            idle.resume()
        } else if let until = sleepingUntil, next < until {
            timerSleeper?.cancel()
        }
    }

    /// Performs the core's actions. Events are published before any start is handed out, so a
    /// job's `started` always precedes its output. A start on `preferred` is returned instead of
    /// launched, for the caller to run in the task it already has.
    ///
    /// - Parameter starts: What launching each `.start` action needs (its job's handle and spec),
    ///   in order, when the caller has it (``SchedulerCore/moveActions(into:starts:)``); else each
    ///   job is looked up by id.
    /// - Parameter spare: The control for the start on `preferred`, if the caller made one.
    @discardableResult
    mutating func perform(
        _ actions: [SchedulerCore.Action], starts: [SchedulerCore.Start]? = nil, now: SchedulerTime,
        continuing preferred: WorkerID? = nil, spare: JobControl? = nil, scheduler: Scheduler
    ) -> InlineStart? {
        guard !actions.isEmpty else { return nil }
        // Reused buffers (a nested step, through `updateDispatchHold`, finds them taken and uses fresh ones).
        var events = stepEvents
        var ended = stepEnded
        var started = stepStarted
        stepEvents = []
        stepEnded = []
        stepStarted = []
        defer {
            events.removeAll(keepingCapacity: true)
            ended.removeAll(keepingCapacity: true)
            started.removeAll(keepingCapacity: true)
            stepEvents = events
            stepEnded = ended
            stepStarted = started
        }
        var launches: [JobAssignmentHandle] = []
        var inline: InlineStart?
        var stops: [(JobControl, StopReason)] = []
        var startIndex = 0
        for action in actions {
            switch action {
            case .emit(let kind):
                events.append(kind)
                if kind.isFinal, let id = kind.jobID { ended.append(id) }
                // Before the attempt's output (launched below): a separator after the last one's.
                if case .started(let id, let attempt, let maxAttempts, _) = kind, attempt > 1 {
                    store.attemptStarted(id, attempt: attempt, of: maxAttempts)
                } else if case .requeued(let id, let reason) = kind {
                    store.requeued(id, because: reason)
                }
            case .start(let id, let attempt, let workerID):
                // (A start the core made without its `Start` is looked up: never on the path that
                // passes `starts`, where the core makes one per start.)
                let known = starts.flatMap { startIndex < $0.count ? $0[startIndex] : nil }
                startIndex += 1
                guard let worker = workers[workerID], let start = known ?? core.launch(of: id) else { continue }
                // Only a local slot takes its next attempt in its own task: the others are made
                // here, so that each worker hears of them in the order they started (``Worker/assigned(_:)``).
                let isInline = inline == nil && workerID == preferred && worker.descriptor.kind == .local
                let control = isInline ? spare ?? JobControl() : JobControl()
                let index = Int(start.handle.index)
                if index >= controls.count { controls.append(contentsOf: repeatElement(nil, count: index - controls.count + 1)) }
                controls[index] = control
                started.append(id)
                let next = InlineStart(id: id, attempt: attempt, start: start, control: control, worker: worker)
                if isInline {
                    inline = next
                } else {
                    let handle = next.handle(store: store, bus: bus, clock: clock, scheduler: scheduler)
                    worker.assigned(handle.assignment)
                    launches.append(handle)
                }
            case .stop(let id, _, let reason):
                // A stop names a running job, whose control was set when it started.
                if let index = core.handle(of: id).map({ Int($0.index) }), index < controls.count, let control = controls[index] {
                    stops.append((control, reason))
                }
            case .removeWorker(let id):
                workers.removeValue(forKey: id)?.leave()
            case .withdraw(let id, let attempt, let worker):
                workers[worker]?.withdraw(id, attempt: attempt)
            case .reprioritizeHeld(let id, let attempt, let worker, let priority):
                workers[worker]?.reprioritize(id, attempt: attempt, to: priority)
            }
        }
        store.attemptsStarted(started)
        // Stops are requested before their `stopping` events go out: a subscriber that acts on
        // one (a second Ctrl-C that kills every process group at once) must find the stop
        // already asked for, or the killed attempt would count as ending by itself (failed,
        // "killed by SIGKILL") instead of cancelled.
        for (control, reason) in stops { control.requestStop(reason, grace: configuration.gracePeriod) }
        // These very events may have put a lossless subscriber behind: hold back the next job
        // now, not when the flow gate's observer gets the scheduler (jobs finishing in a tight
        // loop would get there first).
        if bus.publish(events, time: now) && !core.isDispatchHeld { updateDispatchHold(scheduler: scheduler) }
        store.jobsEnded(ended)
        if !launches.isEmpty { launcher.send(contentsOf: launches) }
        rearmTimer()
        if !roomWaiters.isEmpty { wakeRoomWaiters() }
        if core.shutdownMode != nil && core.isShutdownComplete && !hasStopped {
            hasStopped = true
            launcher.finish()
            timerSleeper?.cancel()
            timerIdle?.resume()
            timerIdle = nil
        }
        return inline
    }
}

/// An attempt the core started on the worker whose slot just freed up, for that slot to run: its
/// handle (with the reporter it allocates) is made after the step, outside the lock.
struct InlineStart: Sendable {
    let id: JobID
    let attempt: Int
    let start: SchedulerCore.Start
    let control: JobControl
    let worker: any Worker

    func handle(store: JobOutputStore, bus: EventBus, clock: SchedulerClock, scheduler: Scheduler) -> JobAssignmentHandle {
        let reporter = JobReporter(jobID: id, attempt: attempt, store: store, bus: bus, clock: clock, scheduler: scheduler)
        return JobAssignmentHandle(
            assignment: JobAssignment(
                jobID: id, attempt: attempt, submitted: start.submitted, priority: start.priority,
                reporter: reporter, control: control),
            worker: worker, job: start.handle)
    }
}

/// The callers of ``Scheduler/waitForRoom(in:below:)`` waiting now: what each waits for, apart
/// from its continuation, so that the check after every step copies (retains) no continuation.
struct RoomWaiters {
    struct Condition {
        let batch: BatchID
        let limit: Int
        let id: Int
    }

    private var conditions: [Condition] = []
    private var continuations: [CheckedContinuation<Void, Never>] = []

    var count: Int { conditions.count }
    var isEmpty: Bool { conditions.isEmpty }

    mutating func append(_ condition: Condition, _ continuation: CheckedContinuation<Void, Never>) {
        conditions.append(condition)
        continuations.append(continuation)
    }

    /// Takes out the waiter `id`, if it still waits.
    mutating func remove(_ id: Int) -> CheckedContinuation<Void, Never>? {
        guard let index = conditions.firstIndex(where: { $0.id == id }) else { return nil }
        conditions.remove(at: index)
        return continuations.remove(at: index)
    }

    /// Takes out the waiters whose condition holds; nothing is allocated when none does.
    mutating func remove(where holds: (Condition) -> Bool) -> [CheckedContinuation<Void, Never>] {
        guard conditions.contains(where: holds) else { return [] }
        var taken: [CheckedContinuation<Void, Never>] = []
        var index = 0
        while index < conditions.count {
            if holds(conditions[index]) {
                conditions.remove(at: index)
                taken.append(continuations.remove(at: index))
            } else {
                index += 1
            }
        }
        return taken
    }

    /// Takes out every waiter.
    mutating func removeAll() -> [CheckedContinuation<Void, Never>] {
        conditions = []
        defer { continuations = [] }
        return continuations
    }
}
