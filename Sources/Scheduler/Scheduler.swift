import Foundation

/// Runs jobs on a pool of workers: the actor that performs what ``SchedulerCore`` decides.
///
/// Commands (submit, cancel, reprioritize, retry, pause, resume, slots, shutdown) go in as
/// method calls; what happens comes out as numbered events on any number of ``EventStream``s.
/// Jobs only start while ``run()`` is running: it owns the one task group in which every
/// running attempt lives. ``withScheduler(configuration:clock:_:)`` does both for you:
///
/// ```swift
/// try await Scheduler.withScheduler { scheduler in
///     let id = try await scheduler.submit(.shell("make -j2", name: "build"))
///     for await event in await scheduler.events() {
///         if case .succeeded(id, _) = event.kind { break }
///     }
/// }
/// ```
public actor Scheduler {
    /// How a scheduler is set up.
    public struct Configuration: Sendable {
        /// Local slots: jobs that run at once on this machine. 0 (a coordinator of remote
        /// workers, as `jobtop run --listen -j 0`): jobs wait until a worker is added
        /// (``addWorker(_:)``). Once running, ``setLocalSlots(_:)`` keeps at least one, but
        /// while another worker is in the pool.
        public var localSlots: Int
        /// Between SIGTERM and SIGKILL when a job is cancelled or times out.
        public var gracePeriod: Duration
        /// Events a subscriber may have unread before it is marked lagged.
        public var subscriberBufferLimit: Int
        /// Finished jobs kept in snapshots (counts keep them all).
        public var finishedRetention: Int
        /// Times a job goes back to the queue when its worker is lost before that counts as a failure.
        public var maxWorkerLossRequeues: Int
        /// Output lines kept per job.
        public var tailLines: Int
        /// Output bytes kept per job.
        public var tailBytes: Int
        /// Finished jobs whose output tail is kept.
        public var finishedTails: Int
        /// The most bytes the output tails of finished jobs keep in all (the oldest go first).
        public var finishedTailBytes: Int
        /// Seeds retry jitter and job ids (tests); `nil` seeds from the system.
        public var seed: UInt64?

        /// Creates a configuration; local slots default to the number of cores.
        public init(
            localSlots: Int = ProcessInfo.processInfo.activeProcessorCount,
            gracePeriod: Duration = .seconds(5),
            subscriberBufferLimit: Int = 65_536,
            finishedRetention: Int = 10_000,
            maxWorkerLossRequeues: Int = 3,
            tailLines: Int = 1_000,
            tailBytes: Int = 1 << 20,
            finishedTails: Int = 1_000,
            finishedTailBytes: Int = 64 << 20,
            seed: UInt64? = nil
        ) {
            self.localSlots = max(0, localSlots)
            self.gracePeriod = gracePeriod
            self.subscriberBufferLimit = subscriberBufferLimit
            self.finishedRetention = finishedRetention
            self.maxWorkerLossRequeues = maxWorkerLossRequeues
            self.tailLines = max(1, tailLines)
            self.tailBytes = max(1, tailBytes)
            self.finishedTails = max(0, finishedTails)
            self.finishedTailBytes = max(0, finishedTailBytes)
            self.seed = seed
        }
    }

    /// The configuration it was made with.
    public nonisolated let configuration: Configuration
    /// The clock it was made with: timeouts and retry delays run on it, and so do the
    /// heartbeats and deadlines of whatever serves this scheduler (the remote listener).
    public nonisolated let clock: SchedulerClock
    private let bus: EventBus
    private let store: JobOutputStore
    private let launcher: Mailbox<JobAssignmentHandle>
    /// Everything that changes, under one lock: commands take it for a step, and so does a slot
    /// reporting an attempt's end, in its own task without a hop onto this actor (see
    /// ``SchedulerEngine``). The actor is the interface; the lock is what orders the steps.
    /// Reached through ``withEngine(_:)`` only.
    private let engine: Locked<SchedulerEngine>
    /// Attempt ends whose slot found the lock taken: the step that holds it reports them before
    /// it lets go (see ``drive(_:in:)``).
    private let waitingEnds = Locked(WaitingEnds())

    private struct WaitingEnds {
        var ends: [WaitingEnd] = []
        /// Signalled when an end is left (``holdLock(untilEndsWait:held:)``, for tests).
        var watcher: DispatchSemaphore?
    }

    /// An attempt's end left for the holder of the lock to report, and where its slot awaits the
    /// next attempt.
    private struct WaitingEnd: Sendable {
        let handle: JobAssignmentHandle
        let termination: Termination
        let spare: JobControl
        let slot: CheckedContinuation<JobAssignmentHandle?, Never>
    }

    /// Creates a scheduler with its local workers. Nothing runs until ``run()``.
    public init(configuration: Configuration = .init(), clock: some Clock<Duration> = ContinuousClock()) {
        self.configuration = configuration
        let clock = SchedulerClock(clock)
        self.clock = clock
        let engine = SchedulerEngine(configuration: configuration, clock: clock)
        bus = engine.bus
        store = engine.store
        launcher = engine.launcher
        self.engine = Locked(engine)
        // A lossless subscriber that falls behind holds back new jobs until it catches up (the
        // gate also closes from other threads: output read by the reactor).
        bus.flow.observe { [weak self] in Task { await self?.flowChanged() } }
    }

    /// Runs a scheduler for the duration of `body`, then shuts it down: gracefully when `body`
    /// returns, cancelling running jobs when it throws.
    ///
    /// - Parameters:
    ///   - configuration: How to set it up.
    ///   - clock: The clock for timeouts and retry delays.
    ///   - body: What to do with it.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws.
    public static func withScheduler<R: Sendable>(
        configuration: Configuration = .init(),
        clock: some Clock<Duration> = ContinuousClock(),
        _ body: (Scheduler) async throws -> R
    ) async throws -> R {
        let scheduler = Scheduler(configuration: configuration, clock: clock)
        async let running: Void = scheduler.run()
        do {
            let result = try await body(scheduler)
            await scheduler.shutdown(.graceful)
            await running
            return result
        } catch {
            await scheduler.shutdown(.cancelRunning)
            await running
            throw error
        }
    }

    /// Attempt ends reported for slots that found the lock taken: each slot, and what it runs next.
    private typealias ReportedEnds = [(slot: CheckedContinuation<JobAssignmentHandle?, Never>, next: InlineStart?)]

    /// Runs `body` under the engine's lock; before it lets go, it reports the attempt ends that
    /// slots left meanwhile (``drive(_:in:)``), and resumes their slots once it has.
    private nonisolated func withEngine<Result, Failure: Error>(
        _ body: (inout SchedulerEngine) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        var reported: ReportedEnds = []
        // After the lock is let go, whether `body` returned or threw.
        defer { resume(reported) }
        return try engine.withLock { (engine) throws(Failure) -> Result in
            defer { reported = reportWaitingEnds(&engine) }
            return try body(&engine)
        }
    }

    /// How many times a slot tries the lock, a short spin apart, before it leaves its attempt's
    /// end for the holder: a step that finishes a job holds it for a few microseconds, and with
    /// one try a third of the ends in the closure benchmark (2 slots) went the slow way, each a
    /// suspension of the slot's task and a resumption by the holder. With 50 tries about one in a
    /// thousand does; the wall time's median over five interleaved runs of each fell 10% (10.08 ->
    /// 9.03 s, runs spread 8.0-11.3 s). A long holder (a submission of 10,000 jobs) costs a
    /// slot some tens of microseconds of spinning before it leaves its end as before.
    private static let lockTries = 50

    /// ``withEngine(_:)`` if the lock is free now or within ``lockTries`` tries; else `nil`.
    private nonisolated func withEngineIfFree<Result>(_ body: (inout SchedulerEngine) -> Result) -> Result? {
        var reported: ReportedEnds = []
        let result = engine.withLockIfFree(within: Self.lockTries) { engine -> Result in
            defer { reported = reportWaitingEnds(&engine) }
            return body(&engine)
        }
        resume(reported)
        return result
    }

    /// The handle of an attempt a slot runs next, made outside the lock.
    private nonisolated func assignmentHandle(for start: InlineStart) -> JobAssignmentHandle {
        start.handle(store: store, bus: bus, clock: clock, scheduler: self)
    }

    /// Reports every attempt end that waits; returns what each slot runs next.
    private nonisolated func reportWaitingEnds(_ engine: inout SchedulerEngine) -> ReportedEnds {
        var reported: ReportedEnds = []
        while true {
            var ends: [WaitingEnd] = []
            waitingEnds.withLock { swap(&ends, &$0.ends) }
            guard !ends.isEmpty else { return reported }
            engine.endsReportedForOtherSlots += ends.count
            for end in ends {
                reported.append((end.slot, engine.finished(end.handle, end.termination, spare: end.spare, scheduler: self)))
            }
        }
    }

    /// Resumes slots whose ends were reported (outside the lock); then, while ends wait and the
    /// lock is free, reports them too: an end left just after the last holder looked, whose slot
    /// found the lock still taken, is not stranded.
    private nonisolated func resume(_ reported: ReportedEnds) {
        var reported = reported
        while true {
            for end in reported { end.slot.resume(returning: end.next.map(assignmentHandle(for:))) }
            guard waitingEnds.withLock({ !$0.ends.isEmpty }),
                  let more = engine.withLockIfFree({ reportWaitingEnds(&$0) })
            else { return }
            reported = more
        }
    }

    /// For tests: takes the engine's lock on a thread of its own, calls `held`, and keeps the
    /// lock until `count` attempt ends wait for it; then lets go as any step does, reporting them.
    nonisolated func holdLock(untilEndsWait count: Int, held: @escaping @Sendable () -> Void) async {
        let watcher = DispatchSemaphore(value: 0)
        waitingEnds.withLock { $0.watcher = watcher }
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            // A thread, not a task: it blocks while it holds the lock.
            Thread {
                self.withEngine { _ in
                    held()
                    while self.waitingEnds.withLock({ $0.ends.count }) < count { watcher.wait() }
                }
                self.waitingEnds.withLock { $0.watcher = nil }
                done.resume()
            }.start()
        }
    }

    /// Attempt ends a step reported for a slot that found the lock taken (for tests).
    var endsReportedForOtherSlots: Int { withEngine { $0.endsReportedForOtherSlots } }

    /// One step: the core decides at the clock's present, then its actions are performed.
    private nonisolated func step<Failure: Error>(
        _ decide: (inout SchedulerCore, SchedulerTime) throws(Failure) -> [SchedulerCore.Action]
    ) throws(Failure) {
        try withEngine { (engine) throws(Failure) in try engine.step(self, decide) }
    }

    // MARK: - Running

    /// Starts jobs until a shutdown completes. Every running attempt runs in a slot's task that
    /// a child of the task group this method owns awaits (``SlotTask``); cancelling the task that
    /// runs this method cancels every job. Jobs submitted before it begins wait queued until then.
    public nonisolated func run() async {
        let begins = withEngine { engine -> Bool in
            guard !engine.isRunning else { return false }
            engine.isRunning = true
            // What was submitted before may start now.
            engine.updateDispatchHold(scheduler: self)
            return true
        }
        guard begins else { return }
        await withTaskCancellationHandler {
            await withDiscardingTaskGroup { group in
                group.addTask { await self.timerLoop() }
                while let batch = await launcher.take() {
                    for handle in batch {
                        group.addTask { await self.runSlot(handle) }
                    }
                }
            }
        } onCancel: {
            Task { await self.shutdown(.cancelRunning) }
        }
        withEngine { $0.endRun() }
    }

    /// Begins a shutdown and waits until ``run()`` has ended (at once if it is not running).
    public func shutdown(_ mode: ShutdownMode) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            withEngine { engine in
                engine.beginShutdown(mode, scheduler: self)
                if engine.isRunning && !engine.hasRunEnded {
                    engine.shutdownWaiters.append(continuation)
                } else {
                    continuation.resume()
                }
            }
        }
    }

    /// Begins a shutdown without waiting for it (``SchedulerCommand/shutdown(_:)``).
    func beginShutdown(_ mode: ShutdownMode) {
        withEngine { $0.beginShutdown(mode, scheduler: self) }
    }

    // MARK: - Commands

    /// Submits a job and returns its id, or the id of the active job with the same coalescing key.
    ///
    /// - Throws: ``SchedulerError`` `.shuttingDown` once a shutdown other than a drain began, or
    ///   once a drain has ended (or ``run()`` has returned); `.invalidArgument` as
    ///   ``submit(contentsOf:batch:)`` says.
    @discardableResult
    public func submit(_ spec: JobSpec) throws(SchedulerError) -> JobID {
        try submit(contentsOf: [spec])[0]
    }

    /// Submits jobs in one step: all are queued, then dispatch runs once, so the highest
    /// priority among them starts first whatever their order. Nothing is submitted if any spec
    /// is refused.
    ///
    /// - Parameters:
    ///   - specs: The jobs.
    ///   - batch: The batch they join (``openBatch(haltsOnFailure:)``), if any.
    /// - Returns: Per spec its job's id (an existing job's for a coalesced spec).
    /// - Throws: ``SchedulerError`` `.shuttingDown` once a shutdown other than a drain began, or
    ///   once a drain has ended (or ``run()`` has returned); `.invalidArgument` for a priority
    ///   outside ``JobSpec/priorityRange``, a timeout of zero or less, and what
    ///   ``SchedulerCore/submit(contentsOf:ids:batch:now:)`` lists; `.notAllowed` for a
    ///   batch that is sealed or halted.
    @discardableResult
    public func submit(contentsOf specs: [JobSpec], batch: BatchID? = nil) throws(SchedulerError) -> [JobID] {
        try withEngine { (engine) throws(SchedulerError) in
            try engine.submit(specs, ids: nil, batch: batch, scheduler: self)
        }
    }

    /// Submits jobs under ids the caller chose (fresh random ones, never reused): how a durable
    /// store records the jobs before they are submitted. Otherwise as ``submit(contentsOf:batch:)``.
    ///
    /// - Throws: As ``submit(contentsOf:batch:)``.
    @discardableResult
    public func submit(contentsOf specs: [JobSpec], ids: [JobID], batch: BatchID? = nil) throws(SchedulerError) -> [JobID] {
        try withEngine { (engine) throws(SchedulerError) in
            try engine.submit(specs, ids: ids, batch: batch, scheduler: self)
        }
    }

    /// Puts back the jobs a store recorded before a restart (see ``SchedulerCore/restore(_:now:)``):
    /// call it before the scheduler runs or before any other job is submitted. The restored jobs
    /// are not announced one by one (no `submitted` events): a subscriber sees them in its first
    /// snapshot.
    ///
    /// - Returns: The jobs that could not be put back, with why.
    public func restore(_ jobs: [RestoredJob]) -> [(id: JobID, error: SchedulerError)] {
        withEngine { engine in
            let now = engine.clock.now()
            let (refused, actions) = engine.core.restore(jobs, now: now)
            engine.perform(actions, now: now, scheduler: self)
            return refused
        }
    }

    /// The number of the last event published (0 before the first): a client that performed a
    /// command knows its events are numbered at most this.
    public var lastEventSeq: UInt64 { bus.lastSeq }

    /// Opens a batch: the jobs of one run, followed as a whole. Submit its jobs with its id,
    /// then ``sealBatch(_:)``; the event stream says ``SchedulerEvent/Kind/batchSettled(_:)``
    /// once every job of it has ended. With `haltsOnFailure`, the first of its jobs that fails
    /// for good cancels all the others in the same step (none starts after the failure).
    public func openBatch(haltsOnFailure: Bool = false) -> BatchID {
        withEngine { $0.core.openBatch(haltsOnFailure: haltsOnFailure) }
    }

    /// Says that no more jobs will join `batch`. A batch this scheduler does not know (never
    /// opened here) is ignored: ``batchStatus(_:)`` says whether it is known.
    public func sealBatch(_ batch: BatchID) {
        step { core, now in core.sealBatch(batch, now: now) }
    }

    /// A batch as it stands, if it is known.
    public func batchStatus(_ batch: BatchID) -> BatchStatus? {
        withEngine { $0.core.batch(batch) }
    }

    /// Waits until fewer than `limit` jobs of `batch` are unfinished, or it was halted, or the
    /// scheduler is shutting down: how a source that streams jobs (a list of millions of lines)
    /// keeps only a window of them in memory.
    ///
    /// - Returns: Whether the batch still takes jobs (`false` once halted, sealed or shutting down,
    ///   or when the calling task is cancelled: a client of the control socket that went away).
    public func waitForRoom(in batch: BatchID, below limit: Int) async -> Bool {
        while true {
            let (verdict, id) = withEngine { engine -> (Bool?, Int) in
                defer { engine.nextRoomWaiter += 1 }
                return (engine.roomVerdict(in: batch, below: limit), engine.nextRoomWaiter)
            }
            if let verdict { return verdict }
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    withEngine { engine in
                        // Checked again in the step that stores the waiter: a change, or a cancel,
                        // that came since is not missed (the loop looks again); one after it finds
                        // the waiter.
                        if engine.roomVerdict(in: batch, below: limit) != nil { return continuation.resume() }
                        engine.roomWaiters.append(.init(batch: batch, limit: max(1, limit), id: id), continuation)
                        if let watch = engine.roomWaitersWatch, engine.roomWaiters.count >= watch.count {
                            engine.roomWaitersWatch = nil
                            watch.continuation.resume()
                        }
                    }
                }
            } onCancel: {
                // Through a task: a cancel may come from a step that holds the lock (a closure
                // job that waits for room, stopped).
                Task { await self.stopWaitingForRoom(id) }
            }
        }
    }

    /// Callers of ``waitForRoom(in:below:)`` waiting now (for tests).
    var roomWaiterCount: Int { withEngine { $0.roomWaiters.count } }

    /// Returns once `count` callers wait in ``waitForRoom(in:below:)`` (for tests).
    func waitUntilWaitingForRoom(_ count: Int) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            withEngine { engine in
                if engine.roomWaiters.count >= count { return continuation.resume() }
                engine.roomWaitersWatch = (count, continuation)
            }
        }
    }

    /// Resumes the ``waitForRoom(in:below:)`` caller `id` whose task was cancelled.
    private func stopWaitingForRoom(_ id: Int) {
        withEngine { $0.roomWaiters.remove(id) }?.resume()
    }

    /// Cancels a job. A queued or waiting job ends at once; a running one has its process group
    /// sent SIGTERM, then SIGKILL after the grace period, and ends `cancelled`.
    ///
    /// - Throws: ``SchedulerError`` when the job is unknown or has ended.
    public func cancel(_ id: JobID) throws(SchedulerError) {
        try step { (core, now) throws(SchedulerError) in try core.cancel(id, now: now) }
    }

    /// Cancels job `id` if it is still queued, in one step (it cannot start meanwhile): a
    /// `jobtop worker` gives back a held assignment so.
    ///
    /// - Returns: Whether it was queued and is now cancelled; `false` for one that started,
    ///   ended or is unknown.
    public func cancelIfQueued(_ id: JobID) -> Bool {
        var cancelled = false
        step { core, now in
            let (did, actions) = core.cancelIfQueued(id, now: now)
            cancelled = did
            return actions
        }
        return cancelled
    }

    /// Cancels several jobs in one step (``cancel(_:)`` of each): none of the queued ones can
    /// start in a slot that another of them frees meanwhile.
    ///
    /// - Returns: The jobs refused (unknown, or already ended) with why; the others are cancelled.
    @discardableResult
    public func cancel(_ ids: [JobID]) -> [(id: JobID, error: SchedulerError)] {
        var refused: [(id: JobID, error: SchedulerError)] = []
        step { core, now in
            let (those, actions) = core.cancel(ids, now: now)
            refused = those
            return actions
        }
        return refused
    }

    /// Asks every running attempt to stop with no grace period: on a local worker its process
    /// group is killed (as ``killAllJobProcessesNow()`` does), a remote worker is told to kill
    /// its job now. For a user who asked twice to stop a run with remote workers. Safe from a
    /// signal source's handler (not from a signal handler).
    public nonisolated func stopEveryAttemptNow() {
        let controls = withEngine { engine in engine.controls.compactMap { $0 } }
        for control in controls { control.requestStop(control.stopRequest?.reason ?? .cancel, grace: .zero) }
    }

    /// Sends `signal` to a running job's process group (its state does not change; a signal
    /// that ends the job ends it as any exit does).
    ///
    /// - Throws: ``SchedulerError`` when the job is unknown, not running, not a process, not
    ///   on a local worker, or `signal` is not a signal number.
    public func signal(_ id: JobID, _ signal: Int32) throws(SchedulerError) {
        try withEngine { (engine) throws(SchedulerError) in
            let worker = try engine.core.signalTarget(id, signal: signal)
            guard let index = engine.core.handle(of: id).map({ Int($0.index) }), index < engine.controls.count,
                  let control = engine.controls[index], control.sendSignal(signal)
            else {
                let kind = engine.workers[worker]?.descriptor.kind
                throw SchedulerError(.notAllowed, kind == .local || kind == nil
                    ? "job \(id.short) has not started its process yet"
                    : "signals reach only local jobs; job \(id.short) runs on worker \(engine.workers[worker]?.descriptor.name ?? worker.short)")
            }
        }
    }

    /// Gives a job that is not running a new shell command (a failed, cancelled or skipped one
    /// is retried with it).
    ///
    /// - Throws: ``SchedulerError`` when the job is unknown, running or succeeded, the command
    ///   is empty, or the retry is refused.
    public func edit(_ id: JobID, command: String) throws(SchedulerError) {
        try step { (core, now) throws(SchedulerError) in try core.edit(id, command: command, now: now) }
    }

    /// Changes a job's priority; a queued job moves at once.
    ///
    /// - Throws: ``SchedulerError`` when the job is unknown or has ended.
    public func reprioritize(_ id: JobID, to priority: Int) throws(SchedulerError) {
        try step { (core, now) throws(SchedulerError) in try core.reprioritize(id, to: priority, now: now) }
    }

    /// Queues a failed, cancelled or skipped job again with a fresh retry budget (a job whose
    /// dependencies have not all succeeded goes back to `blocked`); the jobs skipped because of
    /// it come back too.
    ///
    /// - Throws: ``SchedulerError`` when the job is unknown or not failed/cancelled/skipped, or a
    ///   dependency of it failed (retry that one first).
    public func retry(_ id: JobID) throws(SchedulerError) {
        try step { (core, now) throws(SchedulerError) in try core.retry(id, now: now) }
    }

    /// Stops starting jobs; running ones go on.
    public func pause() {
        step { core, now in core.pause(now: now) }
    }

    /// Forgets every finished job still listed, and their counts (`jobtop clean`).
    ///
    /// - Returns: How many jobs were forgotten.
    @discardableResult
    public func forgetFinished() -> Int {
        let (count, forgotten) = withEngine { $0.core.forgetFinishedJobs() }
        // Their output tails go too (they stayed until more jobs ended: a serve's memory grew
        // with every round of big outputs however often it was cleaned).
        store.forget(forgotten)
        return count
    }

    /// Starts jobs again after ``pause()``.
    public func resume() {
        step { core, now in core.resume(now: now) }
    }

    /// Sets how many jobs of `group` run at once (`nil`: no limit beyond the slots), making the
    /// group if it is new. Raising it starts waiting jobs at once; lowering it stops none.
    ///
    /// - Throws: ``SchedulerError`` `.invalidArgument` for a limit below 1 or an empty name.
    public func setGroupLimit(_ group: String, to limit: Int?) throws(SchedulerError) {
        try step { (core, now) throws(SchedulerError) in try core.setGroupLimit(group, to: limit, now: now) }
    }

    /// Starts no new job of `group` (making it if it is new); its running jobs go on.
    ///
    /// - Throws: ``SchedulerError`` `.invalidArgument` for an empty name.
    public func pauseGroup(_ group: String) throws(SchedulerError) {
        try step { (core, now) throws(SchedulerError) in try core.pauseGroup(group, now: now) }
    }

    /// Starts `group`'s jobs again after ``pauseGroup(_:)``.
    ///
    /// - Throws: ``SchedulerError`` `.invalidArgument` when no such group exists.
    public func resumeGroup(_ group: String) throws(SchedulerError) {
        try step { (core, now) throws(SchedulerError) in try core.resumeGroup(group, now: now) }
    }

    /// Sets the number of local slots. New slots take work at once; removed ones leave when idle,
    /// busy ones when their job ends.
    ///
    /// - Throws: ``SchedulerError`` `.invalidArgument` for fewer than 0, or for 0 while no other
    ///   worker is in the pool.
    public func setLocalSlots(_ slots: Int) throws(SchedulerError) {
        guard slots >= 0 else { throw SchedulerError(.invalidArgument, "local slots must be 0 or more, not \(slots)") }
        try withEngine { (engine) throws(SchedulerError) in
            // None only while another worker is in the pool: with none at all nothing would run.
            if slots == 0 && engine.core.capacity == engine.core.localCapacity {
                throw SchedulerError(.invalidArgument, "local slots must be at least 1 while no other worker is in the pool (nothing would run)")
            }
            engine.setLocalSlots(slots, scheduler: self)
        }
    }

    /// Adds a worker (a remote one, say) to the pool.
    public func addWorker(_ worker: any Worker) {
        withEngine { engine in
            engine.workers[worker.descriptor.id] = worker
            engine.step(self) { core, now in core.workerJoined(worker.descriptor, holdsAttempts: worker.holdsAttempts, now: now) }
        }
    }

    /// Gives the worker `id` (in the pool, not retiring) `slots` slots: see
    /// ``SchedulerCore/setWorkerSlots(_:to:now:)``.
    public func setWorkerSlots(_ id: WorkerID, to slots: Int) {
        step { core, now in core.setWorkerSlots(id, to: slots, now: now) }
    }

    /// A worker that holds attempts (``Worker/holdsAttempts``) started one (``JobReporter/began()``):
    /// its timeout counts from now. Taken before it returns (not isolated to the actor: the
    /// engine has its lock), so the attempt's end, reported after, is taken after.
    nonisolated func attemptBegan(_ id: JobID, attempt: Int) {
        withEngine { engine in
            engine.step(self) { core, now in core.attemptBegan(id, attempt: attempt, now: now) }
            engine.rearmTimer()
        }
    }

    /// A worker takes no new jobs and leaves once its running jobs end (at once when idle), for
    /// a worker that drains. A later ``removeWorker(_:reason:)`` for it does nothing.
    public func retireWorker(_ id: WorkerID, reason: WorkerLeaveReason) {
        step { core, now in core.retireWorker(id, reason: reason, now: now) }
    }

    /// A worker is gone: its running jobs go back to the queue.
    public func removeWorker(_ id: WorkerID, reason: WorkerLeaveReason) {
        withEngine { engine in
            let now = engine.clock.now()
            let worker = engine.workers[id]
            let actions = engine.core.workerLost(id, reason: reason, now: now) { job, attempt in
                worker?.wasDelivered(job, attempt: attempt) ?? true
            }
            if let worker = engine.workers.removeValue(forKey: id) { worker.leave() }
            engine.perform(actions, now: now, scheduler: self)
        }
    }

    // MARK: - Queries

    /// Subscribes to events: the stream starts with a snapshot of the present.
    ///
    /// - Parameters:
    ///   - bufferLimit: Unread events allowed before the subscriber is marked lagged (with
    ///     ``EventDelivery/lossless``: before the jobs are slowed down).
    ///   - includeOutput: Whether job output lines are delivered (they still take sequence numbers).
    ///   - delivery: Whether a subscriber that falls behind skips ahead or slows the jobs down.
    public func events(bufferLimit: Int? = nil, includeOutput: Bool = true, delivery: EventDelivery = .latest) -> EventStream {
        // Under the lock, so that no state change is published while the snapshot is built.
        let token = withEngine { engine in
            let now = engine.clock.now()
            return bus.subscribe(
                limit: bufferLimit ?? configuration.subscriberBufferLimit, includeOutput: includeOutput,
                isLossless: delivery == .lossless, time: now
            ) { seq in
                engine.placedSnapshot(seq: seq, now: now)
            }
        }
        return EventStream(subscription: .init(bus: bus, token: token) { [weak self] token in
            await self?.resync(token)
        })
    }

    /// The slots of this machine's own workers: what ``snapshot()`` says as
    /// ``SchedulerSnapshot/localSlots``, without copying every job.
    public var localSlots: Int { withEngine { $0.core.localCapacity } }

    /// How many jobs are running now.
    public var runningCount: Int { withEngine { $0.core.runningCount } }

    /// The present state.
    public func snapshot() -> SchedulerSnapshot {
        withEngine { $0.placedSnapshot(seq: bus.lastSeq, now: clock.now()) }
    }

    /// The last lines a job printed (bounded), and how many earlier lines were dropped.
    public func output(of id: JobID) -> (lines: [OutputLine], dropped: Int) {
        store.tail(of: id)
    }

    /// A job as a screen shows it.
    public func info(of id: JobID) -> JobInfo? {
        guard var info = withEngine({ $0.core.info(of: id) }) else { return nil }
        if case .running = info.state { info.progress = store.progress(of: id) }
        return info
    }

    // MARK: - Internals

    /// The bytes finished jobs' output tails keep (for tests of the bound).
    nonisolated var finishedTailBytesKept: Int { store.finishedBytes }

    private func flowChanged() {
        withEngine { $0.updateDispatchHold(scheduler: self) }
    }

    /// Returns once new jobs are held back for a lossless subscriber (or the run has ended).
    func waitUntilDispatchIsHeld() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            withEngine { engine in
                if engine.isHeldForSubscribers || engine.hasRunEnded { return continuation.resume() }
                engine.heldWaiters.append(continuation)
            }
        }
    }

    /// The most events a lossless subscriber has had unread at once (for tests of the bound).
    var mostUnreadByLosslessSubscribers: Int { bus.mostUnreadByLosslessSubscribers }

    /// The most bytes of job output a lossless subscriber has had unread at once (for tests).
    var mostUnreadOutputBytesByLosslessSubscribers: Int { bus.mostUnreadOutputBytesByLosslessSubscribers }

    private func resync(_ token: Int) {
        withEngine { engine in
            let now = engine.clock.now()
            bus.resync(token, time: now) { seq in
                engine.placedSnapshot(seq: seq, now: now)
            }
        }
    }

    /// Runs a slot's attempts, starting with `first`, in a task of their own that a stop can
    /// cancel (``SlotTask``); cancelling the caller cancels it.
    private nonisolated func runSlot(_ first: JobAssignmentHandle) async {
        let slot = SlotTask()
        let task = Task {
            await slot.waitUntilAttached()
            await self.drive(first, in: slot)
        }
        slot.attach(task)
        await withTaskCancellationHandler {
            await task.value
        } onCancel: {
            task.cancel()
        }
    }

    /// Attempts a slot runs one after another before it lets other tasks have its thread: a
    /// closure job that never suspends would otherwise keep the thread until the queue is empty
    /// (its attempt's end no longer hops onto the actor), and the reader submitting the next
    /// jobs, and the subscribers, would wait that long.
    private static let attemptsBetweenYields = 128

    /// Runs an attempt, then the next one the scheduler gives this worker, and so on: a slot
    /// that frees up goes straight to the first waiting job without another task. Each end is
    /// reported in a step under the scheduler's lock, taken right here (no hop onto the actor).
    /// Once a stop has cancelled the slot's task, the next attempt goes to a fresh one.
    private nonisolated func drive(_ first: JobAssignmentHandle, in slot: SlotTask) async {
        var next: JobAssignmentHandle? = first
        var sinceYield = 0
        while let handle = next {
            var assignment = handle.assignment
            assignment.slotTask = (slot, slot.begin())
            let termination = await handle.worker.execute(assignment)
            // Nothing it reports from now on is published: a closure's context that outlived the
            // attempt added lines and progress after the job's end, or to its next attempt.
            assignment.reporter.end()
            let isCancelled = slot.end()
            // Reported under the lock when it is free (or frees within a short spin); else left
            // for its holder to report (a slot never sleeps on the lock: its task waits, and its
            // thread runs other tasks).
            let spare = JobControl()
            if let reported = withEngineIfFree({ $0.finished(handle, termination, spare: spare, scheduler: self) }) {
                next = reported.map(assignmentHandle(for:))
            } else {
                next = await withCheckedContinuation { (continuation: CheckedContinuation<JobAssignmentHandle?, Never>) in
                    let watcher = waitingEnds.withLock { waiting -> DispatchSemaphore? in
                        waiting.ends.append(WaitingEnd(handle: handle, termination: termination, spare: spare, slot: continuation))
                        return waiting.watcher
                    }
                    watcher?.signal()
                    // The holder may have let go since: then this reports it.
                    resume([])
                }
            }
            if isCancelled, let next {
                // The core has started it on this worker already; this task is cancelled, so
                // it runs in a fresh one (the mailbox is open: a job is running).
                launcher.send(next)
                return
            }
            sinceYield += 1
            if sinceYield == Self.attemptsBetweenYields, next != nil {
                sinceYield = 0
                await Task.yield()
            }
        }
    }

    private nonisolated func timerLoop() async {
        /// What the timer does next, decided under the lock.
        enum Next {
            case stop
            case idle
            case sleep(Task<Void, Never>)
        }
        while true {
            let next = withEngine { engine -> Next in
                if engine.hasStopped { return .stop }
                guard let deadline = engine.core.nextDeadline else { return .idle }
                let clock = engine.clock
                let sleeper = Task { _ = try? await clock.sleep(deadline) }
                engine.timerSleeper = sleeper
                engine.sleepingUntil = deadline
                return .sleep(sleeper)
            }
            switch next {
            case .stop:
                return
            case .idle:
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    withEngine { engine in
                        // Checked again in the step that stores the waiter: a deadline or a stop
                        // that came since is not missed.
                        if engine.hasStopped || engine.core.nextDeadline != nil { return continuation.resume() }
                        engine.timerIdle = continuation
                    }
                }
            case .sleep(let sleeper):
                await sleeper.value
                let stops = withEngine { engine -> Bool in
                    engine.timerSleeper = nil
                    engine.sleepingUntil = nil
                    guard !engine.hasStopped else { return true }
                    let now = engine.clock.now()
                    engine.perform(engine.core.timersDue(now: now), now: now, scheduler: self)
                    return false
                }
                if stops { return }
            }
        }
    }
}
