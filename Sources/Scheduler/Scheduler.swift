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
        /// Local slots: jobs that run at once on this machine.
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
            self.seed = seed
        }
    }

    /// The configuration it was made with.
    public nonisolated let configuration: Configuration
    /// The clock it was made with: timeouts and retry delays run on it, and so do the
    /// heartbeats and deadlines of whatever serves this scheduler (the remote listener).
    public nonisolated let clock: SchedulerClock
    private let bus = EventBus()
    private let store: JobOutputStore
    /// Starts the core decided on, handed to `run()`'s task group in batches.
    private let launcher = Mailbox<JobAssignmentHandle>()
    private var core: SchedulerCore
    private var ids: IdentifierGenerator
    private var workers: [WorkerID: any Worker] = [:]
    /// The control of each running attempt, by its job's handle index (no hashing per start):
    /// set when the attempt starts, cleared when it is reported; a later job at the same index
    /// replaces it when it starts.
    private var controls: [JobControl?] = []
    /// Buffers the steps reuse, so a step allocates no arrays of its own.
    private var stepActions: [SchedulerCore.Action] = []
    private var stepStarts: [SchedulerCore.Start] = []
    private var stepEvents: [SchedulerEvent.Kind] = []
    private var stepEnded: [JobID] = []
    private var stepStarted: [JobID] = []
    private var localWorkersMade = 0

    private var timerSleeper: Task<Void, Never>?
    private var sleepingUntil: SchedulerTime?
    private var timerIdle: CheckedContinuation<Void, Never>?
    private var isRunning = false
    private var hasStopped = false
    private var hasRunEnded = false
    private var shutdownWaiters: [CheckedContinuation<Void, Never>] = []
    private var roomWaiters = RoomWaiters()
    private var nextRoomWaiter = 0
    private var roomWaitersWatch: (count: Int, continuation: CheckedContinuation<Void, Never>)?
    private var heldWaiters: [CheckedContinuation<Void, Never>] = []

    /// Creates a scheduler with its local workers. Nothing runs until ``run()``.
    public init(configuration: Configuration = .init(), clock: some Clock<Duration> = ContinuousClock()) {
        self.configuration = configuration
        self.clock = SchedulerClock(clock)
        store = JobOutputStore(limits: .init(
            lines: configuration.tailLines, bytes: configuration.tailBytes, finishedTails: configuration.finishedTails))
        var core = SchedulerCore(configuration: .init(
            finishedRetention: configuration.finishedRetention,
            maxWorkerLossRequeues: configuration.maxWorkerLossRequeues,
            seed: configuration.seed, wallClockEpoch: self.clock.wallClockEpoch))
        ids = configuration.seed.map { IdentifierGenerator(seed: $0 &+ 1) } ?? IdentifierGenerator()
        var events: [SchedulerEvent.Kind] = []
        for number in 1...max(1, configuration.localSlots) where configuration.localSlots > 0 {
            let worker = LocalWorker(name: "local-\(number)", gracePeriod: configuration.gracePeriod)
            workers[worker.descriptor.id] = worker
            for case .emit(let kind) in core.workerJoined(worker.descriptor, now: .zero) { events.append(kind) }
        }
        localWorkersMade = configuration.localSlots
        self.core = core
        bus.publish(events, time: .zero)
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

    // MARK: - Running

    /// Starts jobs until a shutdown completes. Every running attempt runs in a slot's task that
    /// a child of the task group this method owns awaits (``SlotTask``); cancelling the task that
    /// runs this method cancels every job.
    public nonisolated func run() async {
        guard await beginRun() else { return }
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
        await endRun()
    }

    /// Begins a shutdown and waits until ``run()`` has ended (at once if it is not running).
    public func shutdown(_ mode: ShutdownMode) async {
        beginShutdown(mode)
        guard isRunning, !hasRunEnded else { return }
        await withCheckedContinuation { shutdownWaiters.append($0) }
    }

    /// Begins a shutdown without waiting for it (``SchedulerCommand/shutdown(_:)``).
    func beginShutdown(_ mode: ShutdownMode) {
        let now = clock.now()
        perform(core.shutdown(mode, now: now), now: now)
        if !isRunning || hasRunEnded, core.isShutdownComplete || !isRunning { bus.finish() }
    }

    // MARK: - Commands

    /// Submits a job and returns its id, or the id of the active job with the same coalescing key.
    ///
    /// - Throws: ``SchedulerError`` `.shuttingDown` once a shutdown other than a drain began.
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
    /// - Throws: ``SchedulerError`` `.shuttingDown` once a shutdown other than a drain began;
    ///   `.invalidArgument` for a priority outside ``JobSpec/priorityRange``; `.notAllowed` for a
    ///   batch that is sealed or halted.
    @discardableResult
    public func submit(contentsOf specs: [JobSpec], batch: BatchID? = nil) throws(SchedulerError) -> [JobID] {
        if let mode = core.shutdownMode, mode != .drain {
            throw SchedulerError(.shuttingDown, "the scheduler is shutting down; no new jobs")
        }
        let now = clock.now()
        var fresh: [JobID] = []
        fresh.reserveCapacity(specs.count)
        for _ in specs { fresh.append(ids.nextJobID()) }
        let (result, actions) = try core.submit(contentsOf: specs, ids: fresh, batch: batch, now: now)
        perform(actions, now: now)
        return result
    }

    /// Submits jobs under ids the caller chose (fresh random ones, never reused): how a durable
    /// store records the jobs before they are submitted. Otherwise as ``submit(contentsOf:batch:)``.
    ///
    /// - Throws: As ``submit(contentsOf:batch:)``.
    @discardableResult
    public func submit(contentsOf specs: [JobSpec], ids: [JobID], batch: BatchID? = nil) throws(SchedulerError) -> [JobID] {
        if let mode = core.shutdownMode, mode != .drain {
            throw SchedulerError(.shuttingDown, "the scheduler is shutting down; no new jobs")
        }
        guard ids.count == specs.count else {
            throw SchedulerError(.invalidArgument, "\(specs.count) jobs but \(ids.count) ids")
        }
        let now = clock.now()
        let (result, actions) = try core.submit(contentsOf: specs, ids: ids, batch: batch, now: now)
        perform(actions, now: now)
        return result
    }

    /// Puts back the jobs a store recorded before a restart (see ``SchedulerCore/restore(_:now:)``):
    /// call it before the scheduler runs or before any other job is submitted. The restored jobs
    /// are not announced one by one (no `submitted` events): a subscriber sees them in its first
    /// snapshot.
    ///
    /// - Returns: The jobs that could not be put back, with why.
    public func restore(_ jobs: [RestoredJob]) -> [(id: JobID, error: SchedulerError)] {
        let now = clock.now()
        let (refused, actions) = core.restore(jobs, now: now)
        perform(actions, now: now)
        return refused
    }

    /// The number of the last event published (0 before the first): a client that performed a
    /// command knows its events are numbered at most this.
    public var lastEventSeq: UInt64 { bus.lastSeq }

    /// Opens a batch: the jobs of one run, followed as a whole. Submit its jobs with its id,
    /// then ``sealBatch(_:)``; the event stream says ``SchedulerEvent/Kind/batchSettled(_:)``
    /// once every job of it has ended. With `haltsOnFailure`, the first of its jobs that fails
    /// for good cancels all the others in the same step (none starts after the failure).
    public func openBatch(haltsOnFailure: Bool = false) -> BatchID {
        core.openBatch(haltsOnFailure: haltsOnFailure)
    }

    /// Says that no more jobs will join `batch`.
    public func sealBatch(_ batch: BatchID) {
        let now = clock.now()
        perform(core.sealBatch(batch, now: now), now: now)
    }

    /// A batch as it stands, if it is known.
    public func batchStatus(_ batch: BatchID) -> BatchStatus? {
        core.batch(batch)
    }

    /// Waits until fewer than `limit` jobs of `batch` are unfinished, or it was halted, or the
    /// scheduler is shutting down: how a source that streams jobs (a list of millions of lines)
    /// keeps only a window of them in memory.
    ///
    /// - Returns: Whether the batch still takes jobs (`false` once halted, sealed or shutting down,
    ///   or when the calling task is cancelled: a client of the control socket that went away).
    public func waitForRoom(in batch: BatchID, below limit: Int) async -> Bool {
        while true {
            guard let status = core.batch(batch), !status.isSealed, status.haltedBy == nil,
                  core.shutdownMode == nil || core.shutdownMode == .drain, !Task.isCancelled
            else { return false }
            if status.unfinished < max(1, limit) { return true }
            let id = nextRoomWaiter
            nextRoomWaiter += 1
            await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    // Checked in the same actor step that stores the waiter: a cancel that came
                    // before it is not missed, one after it finds the waiter (below).
                    if Task.isCancelled { return continuation.resume() }
                    roomWaiters.append(.init(batch: batch, limit: max(1, limit), id: id), continuation)
                    if let watch = roomWaitersWatch, roomWaiters.count >= watch.count {
                        roomWaitersWatch = nil
                        watch.continuation.resume()
                    }
                }
            } onCancel: {
                Task { await self.stopWaitingForRoom(id) }
            }
        }
    }

    /// Callers of ``waitForRoom(in:below:)`` waiting now (for tests).
    var roomWaiterCount: Int { roomWaiters.count }

    /// Returns once `count` callers wait in ``waitForRoom(in:below:)`` (for tests).
    func waitUntilWaitingForRoom(_ count: Int) async {
        guard roomWaiters.count < count else { return }
        await withCheckedContinuation { roomWaitersWatch = (count, $0) }
    }

    /// Resumes the ``waitForRoom(in:below:)`` caller `id` whose task was cancelled.
    private func stopWaitingForRoom(_ id: Int) {
        roomWaiters.remove(id)?.resume()
    }

    /// Cancels a job. A queued or waiting job ends at once; a running one has its process group
    /// sent SIGTERM, then SIGKILL after the grace period, and ends `cancelled`.
    ///
    /// - Throws: ``SchedulerError`` when the job is unknown or has ended.
    public func cancel(_ id: JobID) throws(SchedulerError) {
        let now = clock.now()
        perform(try core.cancel(id, now: now), now: now)
    }

    /// Sends `signal` to a running job's process group (its state does not change; a signal
    /// that ends the job ends it as any exit does).
    ///
    /// - Throws: ``SchedulerError`` when the job is unknown, not running, not a process, not
    ///   on a local worker, or `signal` is not a signal number.
    public func signal(_ id: JobID, _ signal: Int32) throws(SchedulerError) {
        let worker = try core.signalTarget(id, signal: signal)
        guard let index = core.handle(of: id).map({ Int($0.index) }), index < controls.count,
              let control = controls[index], control.sendSignal(signal)
        else {
            let kind = workers[worker]?.descriptor.kind
            throw SchedulerError(.notAllowed, kind == .local || kind == nil
                ? "job \(id.short) has not started its process yet"
                : "signals reach only local jobs; job \(id.short) runs on worker \(workers[worker]?.descriptor.name ?? worker.short)")
        }
    }

    /// Gives a job that is not running a new shell command (a failed, cancelled or skipped one
    /// is retried with it).
    ///
    /// - Throws: ``SchedulerError`` when the job is unknown, running or succeeded, the command
    ///   is empty, or the retry is refused.
    public func edit(_ id: JobID, command: String) throws(SchedulerError) {
        let now = clock.now()
        perform(try core.edit(id, command: command, now: now), now: now)
    }

    /// Changes a job's priority; a queued job moves at once.
    ///
    /// - Throws: ``SchedulerError`` when the job is unknown or has ended.
    public func reprioritize(_ id: JobID, to priority: Int) throws(SchedulerError) {
        let now = clock.now()
        perform(try core.reprioritize(id, to: priority, now: now), now: now)
    }

    /// Queues a failed, cancelled or skipped job again with a fresh retry budget (a job whose
    /// dependencies have not all succeeded goes back to `blocked`); the jobs skipped because of
    /// it come back too.
    ///
    /// - Throws: ``SchedulerError`` when the job is unknown or not failed/cancelled/skipped, or a
    ///   dependency of it failed (retry that one first).
    public func retry(_ id: JobID) throws(SchedulerError) {
        let now = clock.now()
        perform(try core.retry(id, now: now), now: now)
    }

    /// Stops starting jobs; running ones go on.
    public func pause() {
        let now = clock.now()
        perform(core.pause(now: now), now: now)
    }

    /// Forgets every finished job still listed, and their counts (`jobtop clean`).
    ///
    /// - Returns: How many jobs were forgotten.
    @discardableResult
    public func forgetFinished() -> Int {
        core.forgetFinished()
    }

    /// Starts jobs again after ``pause()``.
    public func resume() {
        let now = clock.now()
        perform(core.resume(now: now), now: now)
    }

    /// Sets how many jobs of `group` run at once (`nil`: no limit beyond the slots), making the
    /// group if it is new. Raising it starts waiting jobs at once; lowering it stops none.
    ///
    /// - Throws: ``SchedulerError`` `.invalidArgument` for a limit below 1 or an empty name.
    public func setGroupLimit(_ group: String, to limit: Int?) throws(SchedulerError) {
        let now = clock.now()
        perform(try core.setGroupLimit(group, to: limit, now: now), now: now)
    }

    /// Starts no new job of `group` (making it if it is new); its running jobs go on.
    ///
    /// - Throws: ``SchedulerError`` `.invalidArgument` for an empty name.
    public func pauseGroup(_ group: String) throws(SchedulerError) {
        let now = clock.now()
        perform(try core.pauseGroup(group, now: now), now: now)
    }

    /// Starts `group`'s jobs again after ``pauseGroup(_:)``.
    ///
    /// - Throws: ``SchedulerError`` `.invalidArgument` when no such group exists.
    public func resumeGroup(_ group: String) throws(SchedulerError) {
        let now = clock.now()
        perform(try core.resumeGroup(group, now: now), now: now)
    }

    /// Sets the number of local slots. New slots take work at once; removed ones leave when idle,
    /// busy ones when their job ends.
    ///
    /// - Throws: ``SchedulerError`` `.invalidArgument` for fewer than 1 slot.
    public func setLocalSlots(_ slots: Int) throws(SchedulerError) {
        guard slots >= 1 else { throw SchedulerError(.invalidArgument, "local slots must be at least 1, not \(slots)") }
        let now = clock.now()
        let current = core.localCapacity
        if slots > current {
            var actions: [SchedulerCore.Action] = []
            for _ in current..<slots {
                localWorkersMade += 1
                let worker = LocalWorker(name: "local-\(localWorkersMade)", gracePeriod: configuration.gracePeriod)
                workers[worker.descriptor.id] = worker
                actions.append(contentsOf: core.workerJoined(worker.descriptor, now: now))
            }
            perform(actions, now: now)
        } else if slots < current {
            perform(core.reduceLocalSlots(to: slots, now: now), now: now)
        }
    }

    /// Adds a worker (a remote one, say) to the pool.
    public func addWorker(_ worker: any Worker) {
        let now = clock.now()
        workers[worker.descriptor.id] = worker
        perform(core.workerJoined(worker.descriptor, holdsAttempts: worker.holdsAttempts, now: now), now: now)
    }

    /// Gives the worker `id` (in the pool, not retiring) `slots` slots: see
    /// ``SchedulerCore/setWorkerSlots(_:to:now:)``.
    public func setWorkerSlots(_ id: WorkerID, to slots: Int) {
        let now = clock.now()
        perform(core.setWorkerSlots(id, to: slots, now: now), now: now)
    }

    /// A worker that holds attempts (``Worker/holdsAttempts``) started one (``JobReporter/began()``):
    /// its timeout counts from now.
    func attemptBegan(_ id: JobID, attempt: Int) {
        let now = clock.now()
        let actions = core.attemptBegan(id, attempt: attempt, now: now)
        perform(actions, now: now)
        rearmTimer()
    }

    /// A worker takes no new jobs and leaves once its running jobs end (at once when idle), for
    /// a worker that drains. A later ``removeWorker(_:reason:)`` for it does nothing.
    public func retireWorker(_ id: WorkerID, reason: WorkerLeaveReason) {
        let now = clock.now()
        perform(core.retireWorker(id, reason: reason, now: now), now: now)
    }

    /// A worker is gone: its running jobs go back to the queue.
    public func removeWorker(_ id: WorkerID, reason: WorkerLeaveReason) {
        let now = clock.now()
        let actions = core.workerLost(id, reason: reason, now: now)
        if let worker = workers.removeValue(forKey: id) { worker.leave() }
        perform(actions, now: now)
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
        let now = clock.now()
        let token = bus.subscribe(
            limit: bufferLimit ?? configuration.subscriberBufferLimit, includeOutput: includeOutput,
            isLossless: delivery == .lossless, time: now
        ) { seq in
            placedSnapshot(seq: seq, now: now)
        }
        return EventStream(subscription: .init(bus: bus, token: token) { [weak self] token in
            await self?.resync(token)
        })
    }

    /// The slots of this machine's own workers: what ``snapshot()`` says as
    /// ``SchedulerSnapshot/localSlots``, without copying every job.
    public var localSlots: Int { core.localCapacity }

    /// The present state.
    public func snapshot() -> SchedulerSnapshot {
        placedSnapshot(seq: bus.lastSeq, now: clock.now())
    }

    /// The core's snapshot with where the workers placed the running jobs (Slurm job ids):
    /// what a screen that subscribes late, or `jobtop status`, shows for them.
    private func placedSnapshot(seq: UInt64, now: SchedulerTime) -> SchedulerSnapshot {
        var snapshot = core.snapshot(seq: seq, now: now, progress: store.progress(of:))
        snapshot.placements = store.placements(of: snapshot.workers.lazy.flatMap(\.running))
        return snapshot
    }

    /// The last lines a job printed (bounded), and how many earlier lines were dropped.
    public func output(of id: JobID) -> (lines: [OutputLine], dropped: Int) {
        store.tail(of: id)
    }

    /// A job as a screen shows it.
    public func info(of id: JobID) -> JobInfo? {
        guard var info = core.info(of: id) else { return nil }
        if case .running = info.state { info.progress = store.progress(of: id) }
        return info
    }

    // MARK: - Internals

    private func beginRun() -> Bool {
        guard !isRunning else { return false }
        isRunning = true
        return true
    }

    private func endRun() {
        hasRunEnded = true
        for waiter in roomWaiters.removeAll() { waiter.resume() }
        for waiter in heldWaiters { waiter.resume() }
        heldWaiters = []
        bus.finish()
        for waiter in shutdownWaiters { waiter.resume() }
        shutdownWaiters = []
    }

    private func flowChanged() {
        let now = clock.now()
        perform(core.holdDispatch(!bus.flow.isOpen, now: now), now: now)
        if core.isDispatchHeld {
            for waiter in heldWaiters { waiter.resume() }
            heldWaiters = []
        }
    }

    /// Returns once new jobs are held back for a lossless subscriber (or the run has ended).
    func waitUntilDispatchIsHeld() async {
        guard !core.isDispatchHeld, !hasRunEnded else { return }
        await withCheckedContinuation { heldWaiters.append($0) }
    }

    /// The most events a lossless subscriber has had unread at once (for tests of the bound).
    var mostUnreadByLosslessSubscribers: Int { bus.mostUnreadByLosslessSubscribers }

    /// The most bytes of job output a lossless subscriber has had unread at once (for tests).
    var mostUnreadOutputBytesByLosslessSubscribers: Int { bus.mostUnreadOutputBytesByLosslessSubscribers }

    private func resync(_ token: Int) {
        let now = clock.now()
        bus.resync(token, time: now) { seq in
            placedSnapshot(seq: seq, now: now)
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

    /// Runs an attempt, then the next one the scheduler gives this worker, and so on: a slot
    /// that frees up goes straight to the first waiting job without another task. Once a stop
    /// has cancelled the slot's task, the next attempt goes to a fresh one.
    private nonisolated func drive(_ first: JobAssignmentHandle, in slot: SlotTask) async {
        var next: JobAssignmentHandle? = first
        while let handle = next {
            var assignment = handle.assignment
            assignment.slotTask = (slot, slot.begin())
            let termination = await handle.worker.execute(assignment)
            let isCancelled = slot.end()
            next = await finished(handle, termination)
            if isCancelled, let next {
                // The core has started it on this worker already; this task is cancelled, so
                // it runs in a fresh one (the mailbox is open: a job is running).
                launcher.send(next)
                return
            }
        }
    }

    private func finished(_ handle: JobAssignmentHandle, _ termination: Termination) -> JobAssignmentHandle? {
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
        return perform(stepActions, starts: stepStarts, now: now, continuing: worker)
    }

    /// Resumes the ``waitForRoom(in:below:)`` callers whose batch has room now (or never will).
    /// Runs after every step while a caller waits (a streamed list's reader, nearly always): a
    /// step that wakes nobody reads each waiter's batch and limit, and copies nothing else.
    private func wakeRoomWaiters() {
        let stopping = core.shutdownMode != nil && core.shutdownMode != .drain
        // (The core is read in place: passed as an argument, it would be copied.)
        for waiter in roomWaiters.remove(where: { stopping || core.batchHasRoom($0.batch, below: $0.limit) }) {
            waiter.resume()
        }
    }

    private func timerLoop() async {
        while !hasStopped {
            guard let deadline = core.nextDeadline else {
                await withCheckedContinuation { timerIdle = $0 }
                continue
            }
            let clock = self.clock
            let sleeper = Task { _ = try? await clock.sleep(deadline) }
            timerSleeper = sleeper
            sleepingUntil = deadline
            await sleeper.value
            timerSleeper = nil
            sleepingUntil = nil
            guard !hasStopped else { return }
            let now = clock.now()
            perform(core.timersDue(now: now), now: now)
        }
    }

    private func rearmTimer() {
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
    @discardableResult
    private func perform(
        _ actions: [SchedulerCore.Action], starts: [SchedulerCore.Start]? = nil, now: SchedulerTime,
        continuing preferred: WorkerID? = nil
    ) -> JobAssignmentHandle? {
        guard !actions.isEmpty else { return nil }
        // Reused buffers (nothing here awaits, so no other step can use them meanwhile).
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
        var inline: JobAssignmentHandle?
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
                }
            case .start(let id, let attempt, let workerID):
                // (A start the core made without its `Start` is looked up: never on the path that
                // passes `starts`, where the core makes one per start.)
                let known = starts.flatMap { startIndex < $0.count ? $0[startIndex] : nil }
                startIndex += 1
                guard let worker = workers[workerID], let start = known ?? core.launch(of: id) else { continue }
                let control = JobControl()
                let index = Int(start.handle.index)
                if index >= controls.count { controls.append(contentsOf: repeatElement(nil, count: index - controls.count + 1)) }
                controls[index] = control
                started.append(id)
                let reporter = JobReporter(jobID: id, attempt: attempt, store: store, bus: bus, clock: clock, scheduler: self)
                let handle = JobAssignmentHandle(
                    assignment: JobAssignment(
                        jobID: id, attempt: attempt, submitted: start.submitted, priority: start.priority,
                        reporter: reporter, control: control),
                    worker: worker, job: start.handle)
                if inline == nil && workerID == preferred {
                    inline = handle
                } else {
                    launches.append(handle)
                }
            case .stop(let id, _, let reason):
                // A stop names a running job, whose control was set when it started.
                if let index = core.handle(of: id).map({ Int($0.index) }), index < controls.count, let control = controls[index] {
                    stops.append((control, reason))
                }
            case .removeWorker(let id):
                workers.removeValue(forKey: id)?.leave()
            }
        }
        store.attemptsStarted(started)
        // Stops are requested before their `stopping` events go out: a subscriber that acts on
        // one (a second Ctrl-C that kills every process group at once) must find the stop
        // already asked for, or the killed attempt would count as ending by itself (failed,
        // "killed by SIGKILL") instead of cancelled.
        for (control, reason) in stops { control.requestStop(reason, grace: configuration.gracePeriod) }
        // These very events may have put a lossless subscriber behind: hold back the next job
        // now, not when the flow gate's observer gets the actor (jobs finishing in a tight loop
        // would get there first).
        if bus.publish(events, time: now) && !core.isDispatchHeld { flowChanged() }
        store.jobsEnded(ended)
        launcher.send(contentsOf: launches)
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

/// The callers of ``Scheduler/waitForRoom(in:below:)`` waiting now: what each waits for, apart
/// from its continuation, so that the check after every step copies (retains) no continuation.
private struct RoomWaiters {
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
