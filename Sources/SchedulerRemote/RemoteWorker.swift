import Scheduler

/// A `jobtop worker` process as the coordinator's pool sees it: the engine awaits `execute`
/// exactly as for a local slot, and the transport stays behind this type.
///
/// Each `execute` queues an `Assign` on the worker's stream and suspends until the worker
/// sends `Finished` for that attempt, or until the worker is lost. Output (line endings and
/// bytes that are not UTF-8 included), progress and leftover processes the worker streams back
/// go to the assignment's reporter, so they look like a local job's. A stop (cancel, timeout)
/// becomes a `Cancel` message. A `keep_background` job is not sent to a worker too old to honour
/// it: its attempt fails with an error instead.
///
/// Losing the worker is ordered: the listener first removes the worker from the scheduler
/// (which requeues its running jobs), and only then are the pending `execute` calls resumed
/// with ``Termination/workerLost(_:)``, so the engine never sees a lost attempt while the
/// worker still holds free slots.
public final class RemoteWorker: Worker {
    public let descriptor: WorkerDescriptor

    /// One attempt sent (or held back) and not yet finished.
    private struct Pending {
        var assignment: JobAssignment
        /// Its `execute`'s; `nil` while that has not come (sent from ``assigned(_:)``).
        var continuation: CheckedContinuation<Termination, Never>?
        /// Held back because the worker is draining: never sent, so never running there.
        var isParked: Bool
        var sentAt: ContinuousClock.Instant?
    }

    private enum Phase {
        /// Takes jobs.
        case active
        /// Finishes what it has; new jobs are parked until it is released.
        case draining
        /// Gone: pending calls end once the scheduler has removed it (`isRemoved`).
        case lost(WorkerLeaveReason)
    }

    private struct State {
        var phase = Phase.active
        var pending: [AttemptKey: Pending] = [:]
        var isRemoved = false
        var isReleased = false
        /// `execute` calls that came after the loss but before the removal completed.
        var lateCalls: [CheckedContinuation<Termination, Never>] = []
        /// The scheduler has taken it out of the pool (``leave()``), and who waits for that.
        var hasLeft = false
        var leaveWaiters = Waiters()
        /// The automatic prefetch depth (`nil`: a fixed one).
        var depth: PrefetchDepth?
        /// New priorities of attempts whose `execute` has not come yet (the scheduler started
        /// them, and their job was reprioritized before the launch reached this worker): their
        /// Assign carries it.
        var earlyPriorities: [AttemptKey: Int] = [:]
        /// Attempts asked back before their `execute` came (the step that started one, and the
        /// one that asks for it back, both ran before the launch reached this worker): each ends
        /// ``Termination/withdrawn`` when it comes, never sent.
        var earlyWithdrawals: Set<AttemptKey> = []
        /// Attempts sent from ``assigned(_:)`` that ended (finished, given back, lost) before
        /// their `execute` came: it returns this at once.
        var earlyEnds: [AttemptKey: Termination] = [:]

        /// Takes `pending` (out of ``pending``) for ending as `termination`: its continuation if
        /// its `execute` came, else the end is kept for when it comes.
        mutating func ending(_ pending: Pending, key: AttemptKey, as termination: Termination) -> Pending? {
            guard pending.continuation != nil else {
                earlyEnds[key] = termination
                return nil
            }
            return pending
        }
    }

    private let state = Locked(State())
    private let outbox: Mailbox<WireCoordinatorMessage>
    /// What the worker said it can do beyond the first protocol version 1 (its hello).
    private let features: Set<Jobtop_Remote_V1_Feature>
    private let gracePeriod: Duration
    private let roundTrips: RoundTripRecorder?
    private let clock = ContinuousClock()

    /// The worker's own slots (the descriptor's slots less the prefetch depth it joined with).
    let workerSlots: Int

    init(
        descriptor: WorkerDescriptor, workerSlots: Int, prefetch: Prefetch, outbox: Mailbox<WireCoordinatorMessage>,
        features: Set<Jobtop_Remote_V1_Feature>, gracePeriod: Duration, roundTrips: RoundTripRecorder?
    ) {
        self.descriptor = descriptor
        self.workerSlots = workerSlots
        self.outbox = outbox
        self.features = features
        self.gracePeriod = gracePeriod
        self.roundTrips = roundTrips
        if prefetch == .automatic { state.withLock { $0.depth = PrefetchDepth(slots: workerSlots) } }
    }


    // MARK: - Worker

    /// Sends the attempt's `Assign` now, in the order the scheduler started its attempts (see
    /// ``Worker/assigned(_:)``); its `execute` then waits for its end. One this worker cannot
    /// take (a closure, `keep_background` for an older worker), or one that comes while it
    /// drains or after it was lost, is left to `execute`.
    public func assigned(_ assignment: JobAssignment) {
        guard let spec = Jobtop_Remote_V1_JobSpec(assignment.spec),
              !assignment.spec.keepBackground || features.contains(.keepBackground)
        else { return }
        let key = AttemptKey(assignment)
        let now = clock.now
        state.withLock { state in
            guard case .active = state.phase, state.pending[key] == nil, !state.earlyWithdrawals.contains(key) else { return }
            let priority = state.earlyPriorities.removeValue(forKey: key) ?? assignment.priority
            state.pending[key] = Pending(assignment: assignment, continuation: nil, isParked: false, sentAt: now)
            outbox.send(assign(key, spec: spec, priority: priority))
        }
    }

    /// The `Assign` of attempt `key`.
    private func assign(_ key: AttemptKey, spec: Jobtop_Remote_V1_JobSpec, priority: Int) -> WireCoordinatorMessage {
        .with {
            $0.assign = .with {
                $0.jobID = key.jobID
                $0.attempt = key.attempt
                $0.spec = spec
                // The real start: the attempt's run (and timeout) counts from it, and a held
                // attempt that never began is given back uncounted after a crash.
                $0.reportStart = holdsAttempts
                // So that what it holds starts by priority, whatever order the assignments
                // reach it in (an older coordinator sent each from its own task).
                $0.priority = Int32(clamping: priority)
            }
        }
    }

    public func execute(_ assignment: JobAssignment) async -> Termination {
        guard let spec = Jobtop_Remote_V1_JobSpec(assignment.spec) else {
            return .error("a Swift closure job cannot run on remote worker '\(descriptor.name)'")
        }
        if assignment.spec.keepBackground && !features.contains(.keepBackground) {
            // Sent anyway, an older worker would stop what the job means to leave running.
            return .error("remote worker '\(descriptor.name)' runs an older jobtop that cannot keep background processes (keep_background); upgrade it")
        }
        let key = AttemptKey(assignment)
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                enum Next { case send, park, resume(Termination), wait }
                let now = clock.now
                let next = state.withLock { state -> Next in
                    // Sent already, from `assigned`: it waits here for its end, or has ended.
                    if let end = state.earlyEnds.removeValue(forKey: key) { return .resume(end) }
                    if let sent = state.pending[key], sent.continuation == nil {
                        state.pending[key] = Pending(assignment: sent.assignment, continuation: continuation, isParked: false, sentAt: sent.sentAt)
                        return .send
                    }
                    let priority = state.earlyPriorities.removeValue(forKey: key) ?? assignment.priority
                    if state.earlyWithdrawals.remove(key) != nil { return .resume(.withdrawn) }
                    switch state.phase {
                    case .active:
                        state.pending[key] = Pending(assignment: assignment, continuation: continuation, isParked: false, sentAt: now)
                        // Queued under the lock, so that a Reprioritize of it (sent under the
                        // lock too, once it is pending) follows it.
                        outbox.send(assign(key, spec: spec, priority: priority))
                        return .send
                    case .draining:
                        state.pending[key] = Pending(assignment: assignment, continuation: continuation, isParked: true)
                        return .park
                    case .lost(let why):
                        // Released: the scheduler has retired it, so the attempt goes back to
                        // the queue and never comes back here.
                        if state.isRemoved || state.isReleased { return .resume(.workerLost(why)) }
                        state.lateCalls.append(continuation)
                        return .wait
                    }
                }
                switch next {
                case .send:
                    // After the Assign is queued, so a stop already requested follows it.
                    assignment.control.onStop { [weak self] request in
                        self?.stop(key, reason: request.reason, grace: request.grace)
                    }
                case .park:
                    assignment.control.onStop { [weak self] request in
                        self?.stop(key, reason: request.reason, grace: request.grace)
                    }
                case .resume(let termination):
                    continuation.resume(returning: termination)
                case .wait:
                    break
                }
            }
        } onCancel: {
            stop(key, reason: .cancel, grace: gracePeriod)
        }
    }

    /// A worker that reports when an attempt's process starts (it may hold a prefetched one
    /// until a slot frees): the job's timeout counts from then. An older worker does not, and
    /// its attempts' timeouts count from the assignment, as before.
    public var holdsAttempts: Bool { features.contains(.reportsStart) }

    /// Asks the worker for a held attempt back (`Withdraw`); it answers `Withdrawn` if it had
    /// not started it, and the attempt then ends ``Termination/withdrawn``. One parked while the
    /// worker drains was never sent: it ends so at once.
    public func withdraw(_ job: JobID, attempt: Int) {
        guard features.contains(.withdraw) else { return }
        let key = AttemptKey(jobID: job.description, attempt: UInt32(clamping: attempt))
        // One whose execute has not come yet ends withdrawn when it comes (the request was
        // dropped, and the job stayed asked for, held there, while its group was paused).
        reach(key, orEndParkedWith: .withdrawn, notYetHere: { $0.earlyWithdrawals.insert(key) }) {
            .with {
                $0.withdraw = .with {
                    $0.jobID = key.jobID
                    $0.attempt = key.attempt
                }
            }
        }
    }

    /// Tells the worker the new priority of a job it holds and has not begun (`Reprioritize`),
    /// so that it starts what it holds in the new order. An older worker ignores the message.
    public func reprioritize(_ job: JobID, attempt: Int, to priority: Int) {
        guard holdsAttempts else { return }
        let key = AttemptKey(jobID: job.description, attempt: UInt32(clamping: attempt))
        // One whose execute has not come yet: its Assign will carry the new priority. One parked
        // (never sent) has nothing to reorder.
        reach(key, orEndParkedWith: nil, notYetHere: { $0.earlyPriorities[key] = priority }) {
            .with {
                $0.reprioritize = .with {
                    $0.jobID = key.jobID
                    $0.attempt = key.attempt
                    $0.priority = Int32(clamping: priority)
                }
            }
        }
    }

    public func leave() {
        // The stream's lifetime belongs to the listener's connection handler, which ends it;
        // nothing is held here once every pending call has ended. A released worker's handler
        // waits for this (``waitUntilLeft()``).
        let waiters = state.withLock { state in
            state.hasLeft = true
            state.earlyPriorities = [:]
            state.earlyWithdrawals = []
            state.earlyEnds = [:]
            return state.leaveWaiters.takeAll()
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once the scheduler has taken the worker out of its pool (``leave()``), or when
    /// the calling task is cancelled.
    func waitUntilLeft() async {
        await state.wait(in: \.leaveWaiters) { $0.hasLeft }
    }

    // MARK: - From the connection

    /// What handling a message of the worker came to.
    struct Handled {
        /// The worker is draining and has nothing left running: it may be released.
        var isIdleWhileDraining = false
        /// Its automatic prefetch depth changed to this: the listener gives it `workerSlots` +
        /// that many slots in the scheduler.
        var newDepth: Int?
    }

    /// Handles a message the worker sent (anything but the hello).
    func handle(_ message: WireWorkerMessage) -> Handled {
        switch message.kind {
        case .ack(let ack):
            let key = AttemptKey(jobID: ack.jobID, attempt: ack.attempt)
            let now = clock.now
            let (sentAt, newDepth) = state.withLock { state -> (ContinuousClock.Instant?, Int?) in
                guard let sentAt = state.pending[key]?.sentAt else { return (nil, nil) }
                return (sentAt, state.depth?.heard(roundTrip: now - sentAt))
            }
            if let sentAt, let roundTrips { roundTrips.record(now - sentAt) }
            return Handled(newDepth: newDepth)
        case .started(let started):
            let key = AttemptKey(jobID: started.jobID, attempt: started.attempt)
            state.withLock { $0.pending[key]?.assignment.reporter }?.began()
        case .output(let output):
            let key = AttemptKey(jobID: output.jobID, attempt: output.attempt)
            guard let reporter = state.withLock({ $0.pending[key]?.assignment.reporter }) else { break }
            // One publication for the message's lines (a worker may send many in one).
            reporter.lines(output.lines.flatMap(\.engineLines))
        case .leftover(let leftover):
            // Before the attempt's Finished on the same stream, so before its final event.
            let key = AttemptKey(jobID: leftover.jobID, attempt: leftover.attempt)
            state.withLock { $0.pending[key]?.assignment.reporter }?
                .leftoverProcesses(count: Int(leftover.count), stopped: leftover.stopped)
        case .progress(let progress):
            let key = AttemptKey(jobID: progress.jobID, attempt: progress.attempt)
            state.withLock { $0.pending[key]?.assignment.reporter }?.progress(progress.fraction)
        case .finished(let finished):
            return end(
                AttemptKey(jobID: finished.jobID, attempt: finished.attempt), finished.engineTermination,
                ranFor: finished.runMicros)
        case .withdrawn(let withdrawn):
            // It never started there: no Started or Finished follows.
            return end(AttemptKey(jobID: withdrawn.jobID, attempt: withdrawn.attempt), .withdrawn)
        case .draining:
            return state.withLock { state -> Handled in
                if case .active = state.phase { state.phase = .draining }
                return Handled(isIdleWhileDraining: Self.isIdleWhileDraining(state))
            }
        case .heartbeat, .hello, nil:
            break
        }
        return Handled()
    }

    /// The attempt `key` ended there as `termination` (after `runMicros` of running; 0: it never
    /// started, or the worker did not say): its `execute` returns it.
    private func end(_ key: AttemptKey, _ termination: Termination, ranFor runMicros: UInt64 = 0) -> Handled {
        let (ended, handled) = state.withLock { state -> (Pending?, Handled) in
            let ended = state.pending.removeValue(forKey: key).flatMap { state.ending($0, key: key, as: termination) }
            let newDepth = runMicros > 0 ? state.depth?.ran(for: .microseconds(runMicros)) : nil
            return (ended, Handled(isIdleWhileDraining: Self.isIdleWhileDraining(state), newDepth: newDepth))
        }
        if let ended {
            ended.assignment.control.onStop(nil)
            ended.continuation?.resume(returning: termination)
        }
        return handled
    }

    /// Marks the worker lost; the caller then removes it from the scheduler and calls
    /// ``removed()``.
    /// Sent while the connection was up: in `pending` and not parked. Once ``markLost(_:)`` has
    /// run nothing more is sent, so an attempt handed over after it (or parked) never ran here.
    public func wasDelivered(_ job: JobID, attempt: Int) -> Bool {
        let key = AttemptKey(jobID: job.description, attempt: UInt32(clamping: attempt))
        return state.withLock { $0.pending[key].map { !$0.isParked } ?? false }
    }

    func markLost(_ reason: WorkerLeaveReason) {
        state.withLock { state in
            if case .lost = state.phase { return }
            state.phase = .lost(reason)
        }
    }

    /// Releases a worker that drained and runs nothing: the jobs parked meanwhile (never sent)
    /// end as ``Termination/workerLost(_:)`` and go back to the queue, and so does any attempt
    /// handed to it from now on. The scheduler retired it when it said it drains, so it leaves
    /// the pool once those ends are recorded, after the ends of the jobs it ran
    /// (``waitUntilLeft()``); removing it at once could requeue a job whose `Finished` the
    /// scheduler has not recorded yet, and run it twice.
    /// - Returns: Whether it was released (false when it did not drain, or was released before).
    func release() -> Bool {
        let parked = state.withLock { state -> [Pending]? in
            guard case .draining = state.phase, !state.isReleased else { return nil }
            state.isReleased = true
            state.phase = .lost(.drained)
            let all = state.pending
            state.pending = [:]
            return all.compactMap { state.ending($0.value, key: $0.key, as: .workerLost(.drained)) }
        }
        guard let parked else { return false }
        for pending in parked {
            pending.assignment.control.onStop(nil)
            pending.continuation?.resume(returning: .workerLost(.drained))
        }
        return true
    }

    /// The scheduler has removed the worker: every pending call ends as `workerLost` (the
    /// engine has already requeued those attempts, so these results are ignored there).
    func removed() {
        let (ended, late, why) = state.withLock { state -> ([Pending], [CheckedContinuation<Termination, Never>], WorkerLeaveReason) in
            state.isRemoved = true
            let why: WorkerLeaveReason
            if case .lost(let reason) = state.phase { why = reason } else { why = .removed("removed") }
            let (all, late) = (state.pending, state.lateCalls)
            state.pending = [:]
            state.lateCalls = []
            return (all.compactMap { state.ending($0.value, key: $0.key, as: .workerLost(why)) }, late, why)
        }
        for pending in ended {
            pending.assignment.control.onStop(nil)
            pending.continuation?.resume(returning: .workerLost(why))
        }
        for continuation in late { continuation.resume(returning: .workerLost(why)) }
    }

    /// Returns once the scheduler's output may be read on (at once, mostly): while a lossless
    /// subscriber is behind, the worker is not read (its writes wait, its jobs block on their
    /// pipes), and its silence meanwhile is not held against it. Ends early when the calling task
    /// is cancelled.
    func waitUntilOutputFlows(_ liveness: Liveness) async {
        guard let reporter = state.withLock({ $0.pending.values.first?.assignment.reporter }), !reporter.isFlowing else {
            return
        }
        liveness.pause()
        defer { liveness.resume() }
        await reporter.waitUntilFlowing()
    }

    /// Attempts sent to the worker and not yet finished.
    var runningCount: Int { state.withLock { $0.pending.values.count { !$0.isParked } } }

    // MARK: - Internals

    private static func isIdleWhileDraining(_ state: State) -> Bool {
        guard case .draining = state.phase, !state.isReleased else { return false }
        return !state.pending.values.contains { !$0.isParked }
    }

    private func stop(_ key: AttemptKey, reason: StopReason, grace: Duration) {
        // One never sent: nothing runs anywhere; the engine settles it by the stop's reason.
        reach(key, orEndParkedWith: .signal(15)) {
            .with {
                $0.cancel = .with {
                    $0.jobID = key.jobID
                    $0.attempt = key.attempt
                    $0.reason = reason == .timeout ? .timeout : .cancel
                    $0.gracePeriodMs = grace.wireMilliseconds
                }
            }
        }
    }

    /// Sends `message` about the attempt `key` if it went to the worker (queued under the lock,
    /// as its Assign was, so it follows that: sent after it, a message could reach the worker
    /// first and be ignored there); one parked while the worker drains (never sent) is taken out
    /// and ends with `parkedEnd` at once instead (with `nil`, it is left as it is). For one whose
    /// `execute` has not come yet, `notYetHere` runs under the lock.
    private func reach(
        _ key: AttemptKey, orEndParkedWith parkedEnd: Termination?, notYetHere: (inout State) -> Void = { _ in },
        _ message: () -> WireCoordinatorMessage
    ) {
        let parked = state.withLock { state -> Pending? in
            guard let pending = state.pending[key] else {
                notYetHere(&state)
                return nil
            }
            guard pending.isParked else {
                outbox.send(message())
                return nil
            }
            guard let parkedEnd else { return nil }
            state.pending[key] = nil
            return state.ending(pending, key: key, as: parkedEnd)
        }
        if let parked, let parkedEnd {
            parked.assignment.control.onStop(nil)
            parked.continuation?.resume(returning: parkedEnd)
        }
    }
}
