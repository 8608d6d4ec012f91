import Testing
@testable import Scheduler

/// Table tests of the pure decision maker: every (state, event) pair that matters, races included.
@Suite struct SchedulerCoreTests {
    static let w1 = WorkerDescriptor(id: WorkerID(), name: "w1", kind: .local, slots: 1)
    static let w2 = WorkerDescriptor(id: WorkerID(), name: "w2", kind: .local, slots: 1)

    var core = SchedulerCore(configuration: .init(seed: 7))
    var ids = IdentifierGenerator(seed: 1)

    mutating func submit(_ command: String = "true", priority: Int = 0, retries: Int = 0, timeout: Duration? = nil,
                         key: String? = nil, at now: Duration = .zero) -> (JobID, [SchedulerCore.Action]) {
        var spec = JobSpec.shell(command, priority: priority)
        spec.retry = .retries(retries, backoff: .seconds(1))
        spec.timeout = timeout
        spec.coalescingKey = key
        let result = try! core.submit(spec, id: ids.nextJobID(), now: now)
        return (result.id, result.actions)
    }

    static func starts(_ actions: [SchedulerCore.Action]) -> [(JobID, Int, WorkerID)] {
        actions.compactMap { if case .start(let id, let attempt, let worker) = $0 { (id, attempt, worker) } else { nil } }
    }

    static func stops(_ actions: [SchedulerCore.Action]) -> [(JobID, StopReason)] {
        actions.compactMap { if case .stop(let id, _, let reason) = $0 { (id, reason) } else { nil } }
    }

    static func events(_ actions: [SchedulerCore.Action]) -> [String] {
        actions.compactMap { if case .emit(let kind) = $0 { kind.name } else { nil } }
    }

    // MARK: submit and dispatch

    @Test mutating func aSubmittedJobWaitsQueuedUntilAWorkerJoinsThenStarts() {
        let (id, actions) = submit()
        #expect(core.state(of: id) == .queued)
        #expect(Self.starts(actions).isEmpty)
        let joined = core.workerJoined(Self.w1, now: .zero)
        #expect(Self.starts(joined).map(\.0) == [id])
        #expect(core.state(of: id)?.kind == .running)
        #expect(Self.events(joined) == ["worker-joined", "slots", "started"])
    }

    @Test mutating func higherPriorityRunsFirstAndEqualPrioritiesRunInSubmissionOrder() {
        let (low1, _) = submit(priority: 0)
        let (high, _) = submit(priority: 5)
        let (low2, _) = submit(priority: 0)
        let (mid, _) = submit(priority: 3)
        #expect(core.queuedInOrder == [high, mid, low1, low2])
    }

    @Test mutating func heldDispatchStartsNothingUntilLetGoAndIsNotAPause() {
        _ = core.workerJoined(Self.w1, now: .zero)
        let held = core.holdDispatch(true, now: .zero)
        #expect(held.isEmpty, "holding says nothing: it is not a user's pause")
        let (id, actions) = submit()
        #expect(Self.starts(actions).isEmpty)
        #expect(core.state(of: id) == .queued)
        #expect(!core.isPaused)
        let released = core.holdDispatch(false, now: .seconds(1))
        #expect(Self.starts(released).map(\.0) == [id])
        #expect(Self.events(released) == ["started"])
    }

    // MARK: cancel in every state

    @Test mutating func cancellingAQueuedJobEndsItAtOnce() throws {
        let (id, _) = submit()
        let actions = try core.cancel(id, now: .seconds(1))
        #expect(core.state(of: id) == .cancelled)
        #expect(Self.events(actions) == ["cancelled"])
        #expect(core.queuedInOrder.isEmpty)
        #expect(core.counts[.cancelled] == 1 && core.counts[.queued] == 0)
    }

    @Test mutating func cancellingARunningJobStopsItAndItEndsCancelledWhateverItsExit() throws {
        _ = core.workerJoined(Self.w1, now: .zero)
        let (id, _) = submit(retries: 3)
        let actions = try core.cancel(id, now: .seconds(1))
        #expect(Self.stops(actions).map(\.1) == [.cancel])
        #expect(core.state(of: id)?.kind == .running)
        // A second cancel while stopping asks for nothing more.
        #expect(try core.cancel(id, now: .seconds(1)).isEmpty)
        let finished = core.jobFinished(id, attempt: 1, worker: Self.w1.id, termination: .signal(15), now: .seconds(2))
        #expect(core.state(of: id) == .cancelled)
        #expect(Self.events(finished) == ["cancelled"])
        #expect(core.counts[.failed, default: 0] == 0)
    }

    @Test mutating func cancellingSeveralJobsAtOnceStartsNoneOfThemInTheSlotsTheyFree() throws {
        _ = core.workerJoined(Self.w1, now: .zero)
        let (running, _) = submit("sleep 100")
        let (second, _) = submit()
        let (third, _) = submit()
        let (other, _) = submit()
        let (ended, _) = submit()
        _ = try core.cancel(ended, now: .zero)
        let unknown = ids.nextJobID()
        // Named twice, one ended, one unknown: the others are cancelled, those two refused.
        let (refused, actions) = core.cancel([running, second, second, ended, third, unknown], now: .seconds(1))
        #expect(refused.map(\.id) == [ended, unknown])
        #expect(refused.map(\.error.code) == [.notAllowed, .unknownJob])
        #expect(Self.starts(actions).isEmpty)
        #expect(Self.stops(actions).map(\.0) == [running])
        #expect(core.state(of: second) == .cancelled && core.state(of: third) == .cancelled)
        // The running one's slot, once its process is gone, goes to the job not named.
        let finished = core.jobFinished(running, attempt: 1, worker: Self.w1.id, termination: .signal(15), now: .seconds(2))
        #expect(core.state(of: running) == .cancelled)
        #expect(Self.starts(finished).map(\.0) == [other])
    }

    @Test mutating func aSnapshotListsJobsStartedOrHeldTogetherInSubmissionOrderNotByTheirIds() throws {
        let many = WorkerDescriptor(id: WorkerID(), name: "many", kind: .local, slots: 8)
        let running = (0..<8).map { _ in ids.nextJobID() }
        let blocked = (0..<8).map { _ in ids.nextJobID() }
        var specs = running.map { _ in JobSpec.shell("true") }
        specs += running.indices.map { var spec = JobSpec.shell("true"); spec.dependencies = [.earlier($0)]; return spec }
        _ = try core.submit(contentsOf: specs, ids: running + blocked, now: .zero)
        _ = core.workerJoined(many, now: .seconds(1))
        let listed = core.snapshot(seq: 0, now: .seconds(1), progress: { _ in nil }).jobs.map(\.id)
        #expect(listed == running + blocked)
        #expect(running.sorted() != running, "the ids are not already in order")
    }

    @Test mutating func cancellingAJobWaitingForRetryEndsItAndItsRetryTimerDoesNothing() throws {
        _ = core.workerJoined(Self.w1, now: .zero)
        let (id, _) = submit(retries: 2)
        _ = core.jobFinished(id, attempt: 1, worker: Self.w1.id, termination: .exit(1), now: .seconds(1))
        guard case .waitingForRetry(let due, 1, .exitStatus(1)) = core.state(of: id) else {
            Issue.record("expected waiting, got \(String(describing: core.state(of: id)))")
            return
        }
        _ = try core.cancel(id, now: .seconds(1))
        #expect(core.state(of: id) == .cancelled)
        let fired = core.timersDue(now: due)
        #expect(Self.starts(fired).isEmpty)
        #expect(core.state(of: id) == .cancelled)
    }

    @Test mutating func cancellingAFinishedJobIsRefused() {
        _ = core.workerJoined(Self.w1, now: .zero)
        let (id, _) = submit()
        _ = core.jobFinished(id, attempt: 1, worker: Self.w1.id, termination: .exit(0), now: .seconds(1))
        #expect(throws: SchedulerError.self) { try core.cancel(id, now: .seconds(2)) }
    }

    @Test mutating func cancelAfterATimeoutStopWinsAndTheJobIsCancelledNotFailed() throws {
        _ = core.workerJoined(Self.w1, now: .zero)
        let (id, _) = submit(retries: 3, timeout: .seconds(10))
        let timedOut = core.timersDue(now: .seconds(10))
        #expect(Self.stops(timedOut).map(\.1) == [.timeout])
        let cancel = try core.cancel(id, now: .seconds(11))
        #expect(Self.stops(cancel).map(\.1) == [.cancel])
        _ = core.jobFinished(id, attempt: 1, worker: Self.w1.id, termination: .signal(15), now: .seconds(12))
        #expect(core.state(of: id) == .cancelled)
    }

    @Test mutating func onAWorkerThatHoldsAttemptsTheTimeoutCountsFromTheAttemptsStartNotItsDispatch() throws {
        _ = core.workerJoined(Self.w1, holdsAttempts: true, now: .zero)
        let (id, actions) = submit(timeout: .seconds(10))
        #expect(Self.starts(actions).map(\.0) == [id])
        #expect(core.nextDeadline == nil, "no timer while the worker holds it")
        #expect(Self.stops(core.timersDue(now: .seconds(60))).isEmpty)
        // The worker starts it at 100 s: 10 s from then, not from 0.
        _ = core.attemptBegan(id, attempt: 1, now: .seconds(100))
        #expect(core.nextDeadline == .seconds(110))
        #expect(Self.stops(core.timersDue(now: .seconds(109))).isEmpty)
        #expect(Self.stops(core.timersDue(now: .seconds(110))).map(\.1) == [.timeout])
        // A late or repeated report of a start changes nothing for an attempt being stopped or over.
        #expect(core.attemptBegan(id, attempt: 1, now: .seconds(111)).isEmpty)
        #expect(core.nextDeadline == nil)
        _ = core.jobFinished(id, attempt: 1, worker: Self.w1.id, termination: .signal(9), now: .seconds(112))
        #expect(core.attemptBegan(id, attempt: 1, now: .seconds(113)).isEmpty)
        #expect(core.nextDeadline == nil)
    }

    @Test("A held attempt's start is announced with 'began', and it runs (its since, its startedAt) from then; the workerJoined event says the worker holds attempts")
    mutating func aHeldAttemptBeginsWithAnEvent() throws {
        let joined = core.workerJoined(Self.w1, holdsAttempts: true, now: .zero)
        let descriptors = joined.compactMap { if case .emit(.workerJoined(let d)) = $0 { d } else { nil } }
        #expect(descriptors.map(\.holdsAttempts) == [true])
        let (id, _) = submit()
        #expect(core.info(of: id)?.startedAt == .zero)
        // Until it begins, the snapshot says it was sent and is held there.
        #expect(core.snapshot(seq: 0, now: .seconds(1), progress: { _ in nil }).heldAttempts == [id])
        // An edit is refused as for a running job, in the words its row shows (it said running).
        #expect(throws: SchedulerError(.notAllowed, "job \(id.short) was sent to its worker and waits there to run: cancel it first, or edit it once it has ended")) {
            try core.edit(id, command: "true", now: .seconds(1))
        }
        let began = core.attemptBegan(id, attempt: 1, now: .seconds(30))
        #expect(core.snapshot(seq: 0, now: .seconds(31), progress: { _ in nil }).heldAttempts.isEmpty)
        #expect(Self.events(began) == ["began"])
        #expect(began.contains { if case .emit(.began(id, attempt: 1)) = $0 { true } else { false } })
        #expect(core.info(of: id)?.startedAt == .seconds(30))
        #expect(core.state(of: id) == .running(worker: Self.w1.id, attempt: 1, since: .seconds(30), stopping: nil))
        #expect(throws: SchedulerError(.notAllowed, "job \(id.short) is running: cancel it first, or edit it once it has ended")) {
            try core.edit(id, command: "true", now: .seconds(31))
        }
        // Told twice (a repeated report), or for another attempt: nothing more.
        #expect(core.attemptBegan(id, attempt: 1, now: .seconds(31)).isEmpty)
        #expect(core.attemptBegan(id, attempt: 2, now: .seconds(31)).isEmpty)
        #expect(core.info(of: id)?.startedAt == .seconds(30))
    }

    @Test mutating func onAnOrdinaryWorkerTheTimeoutCountsFromDispatchAndAStartReportAddsNothing() {
        _ = core.workerJoined(Self.w1, now: .zero)
        let (id, _) = submit(timeout: .seconds(10))
        #expect(core.snapshot(seq: 0, now: .zero, progress: { _ in nil }).heldAttempts.isEmpty, "it runs at once: not held")
        #expect(core.nextDeadline == .seconds(10))
        #expect(core.attemptBegan(id, attempt: 1, now: .seconds(5)).isEmpty, "no 'began': it began at dispatch")
        #expect(core.info(of: id)?.startedAt == .zero)
        #expect(Self.stops(core.timersDue(now: .seconds(10))).map(\.1) == [.timeout])
        #expect(core.nextDeadline == nil, "no second timer from the start report")
    }

    // MARK: results

    @Test mutating func aTimeoutIsARetryableFailure() {
        _ = core.workerJoined(Self.w1, now: .zero)
        let (id, _) = submit(retries: 1, timeout: .seconds(5))
        #expect(core.nextDeadline == .seconds(5))
        _ = core.timersDue(now: .seconds(5))
        let finished = core.jobFinished(id, attempt: 1, worker: Self.w1.id, termination: .signal(15), now: .seconds(6))
        #expect(Self.events(finished) == ["retry"])
        guard case .waitingForRetry(_, 1, .timeout(.seconds(5))) = core.state(of: id) else {
            Issue.record("expected a timeout retry, got \(String(describing: core.state(of: id)))")
            return
        }
    }

    @Test mutating func aTimeoutTimerOfAnEarlierAttemptIsIgnored() {
        _ = core.workerJoined(Self.w1, now: .zero)
        let (id, _) = submit(retries: 1, timeout: .seconds(5))
        _ = core.jobFinished(id, attempt: 1, worker: Self.w1.id, termination: .exit(0), now: .seconds(1))
        #expect(Self.stops(core.timersDue(now: .seconds(5))).isEmpty)
        #expect(core.state(of: id) == .succeeded(attempts: 1))
    }

    @Test mutating func failuresRetryWithBackoffUntilTheBudgetIsSpentThenFail() {
        _ = core.workerJoined(Self.w1, now: .zero)
        let (id, _) = submit(retries: 2)
        var now = Duration.zero
        for attempt in 1...2 {
            now += .seconds(1)
            _ = core.jobFinished(id, attempt: attempt, worker: Self.w1.id, termination: .exit(3), now: now)
            guard case .waitingForRetry(let due, attempt, .exitStatus(3)) = core.state(of: id) else {
                Issue.record("attempt \(attempt): expected waiting, got \(String(describing: core.state(of: id)))")
                return
            }
            // Backoff 1s then 2s, with at most 20% jitter taken off.
            let base = Duration.seconds(1 << (attempt - 1))
            #expect(due - now <= base && due - now >= base * 0.8)
            let fired = core.timersDue(now: due)
            #expect(Self.starts(fired).map(\.1) == [attempt + 1])
            now = due
        }
        let last = core.jobFinished(id, attempt: 3, worker: Self.w1.id, termination: .exit(3), now: now + .seconds(1))
        #expect(Self.events(last) == ["failed"])
        #expect(core.state(of: id) == .failed(reason: .exitStatus(3), attempts: 3))
    }

    @Test mutating func aResultForAnAttemptThatIsNoLongerRunningIsIgnored() {
        _ = core.workerJoined(Self.w1, now: .zero)
        let (id, _) = submit(retries: 1)
        _ = core.jobFinished(id, attempt: 1, worker: Self.w1.id, termination: .exit(1), now: .seconds(1))
        let stale = core.jobFinished(id, attempt: 1, worker: Self.w1.id, termination: .exit(0), now: .seconds(1))
        #expect(stale.isEmpty)
        #expect(core.state(of: id)?.kind == .waiting)
    }

    @Test mutating func aFreedSlotGoesStraightToTheFirstQueuedJob() {
        _ = core.workerJoined(Self.w1, now: .zero)
        let (first, _) = submit()
        let (second, _) = submit(priority: 1)
        let (third, _) = submit(priority: 2)
        let actions = core.jobFinished(first, attempt: 1, worker: Self.w1.id, termination: .exit(0), now: .seconds(1))
        #expect(Self.starts(actions).map(\.0) == [third])
        #expect(core.queuedInOrder == [second])
    }

    // MARK: workers

    @Test mutating func aLostWorkersJobsGoBackToTheQueueABoundedNumberOfTimes() {
        var core = SchedulerCore(configuration: .init(maxWorkerLossRequeues: 1, seed: 1))
        var ids = IdentifierGenerator(seed: 3)
        let id = ids.nextJobID()
        _ = try! core.submit(.shell("true"), id: id, now: .zero)
        _ = core.workerJoined(Self.w1, now: .zero)
        let lost = core.workerLost(Self.w1.id, reason: .connectionLost("dropped"), now: .seconds(1))
        #expect(Self.events(lost).contains("requeued"))
        #expect(core.state(of: id) == .queued)
        #expect(core.info(of: id)?.attempts == 0)
        _ = core.workerJoined(Self.w2, now: .seconds(2))
        _ = core.workerLost(Self.w2.id, reason: .heartbeatMissed(.seconds(3)), now: .seconds(3))
        #expect(core.state(of: id) == .failed(reason: .workerLost(.heartbeatMissed(.seconds(3))), attempts: 1))
    }

    @Test mutating func slotsRaisedAgainKeepTheBusyWorkerThatWasToLeave() {
        // Given two local one-slot workers running jobs 1 and 2, job 3 queued
        var core = SchedulerCore(configuration: .init(seed: 1))
        var ids = IdentifierGenerator(seed: 3)
        let jobs = (0..<3).map { _ in ids.nextJobID() }
        let one = WorkerDescriptor(id: WorkerID(), name: "local-1", kind: .local, slots: 1)
        let two = WorkerDescriptor(id: WorkerID(), name: "local-2", kind: .local, slots: 1)
        _ = core.workerJoined(one, now: .zero)
        _ = core.workerJoined(two, now: .zero)
        _ = try! core.submit(contentsOf: (0..<3).map { JobSpec.shell("job \($0)") }, ids: jobs, now: .zero)
        // When the slots go to 1 (a busy worker is to leave once its job ends) and back to 2
        _ = core.reduceLocalSlots(to: 1, now: .seconds(1))
        #expect(core.localCapacity == 1)
        let (kept, actions) = core.keepLocalSlots(upTo: 2, now: .seconds(2))
        // Then that worker stays: 2 slots, no new worker needed, nothing more starts
        #expect(kept == 1 && core.localCapacity == 2)
        #expect(!actions.contains { if case .start = $0 { true } else { false } })
        // and when its job ends it takes the queued one (it would have left)
        let ended = core.jobFinished(jobs[1], attempt: 1, worker: two.id, termination: .exit(0), now: .seconds(3))
        #expect(ended.contains { if case .start(jobs[2], _, two.id) = $0 { true } else { false } })
        #expect(!ended.contains { if case .removeWorker = $0 { true } else { false } })
    }

    @Test("Slots lowered below what runs: the kept worker's end starts nothing until fewer run than the slots (a busy one that was to leave stays in its place)")
    mutating func slotsLoweredBelowWhatRunsStartNothingUntilUnder() {
        // Given three local one-slot workers running jobs 0-2, jobs 3 and 4 queued
        var core = SchedulerCore(configuration: .init(seed: 1))
        var ids = IdentifierGenerator(seed: 3)
        let jobs = (0..<5).map { _ in ids.nextJobID() }
        let workers = (1...3).map { WorkerDescriptor(id: WorkerID(), name: "local-\($0)", kind: .local, slots: 1) }
        for worker in workers { _ = core.workerJoined(worker, now: .zero) }
        _ = try! core.submit(contentsOf: (0..<5).map { JobSpec.shell("job \($0)") }, ids: jobs, now: .zero)
        let runsOn = Dictionary(uniqueKeysWithValues: jobs.prefix(3).compactMap { id -> (JobID, WorkerID)? in
            guard case .running(let worker, _, _, _) = core.info(of: id)?.state else { return nil }
            return (id, worker)
        })
        #expect(runsOn.count == 3)
        // When the slots go to 1: local-1 is kept, 2 and 3 are to leave once their jobs end
        _ = core.reduceLocalSlots(to: 1, now: .seconds(1))
        #expect(core.localCapacity == 1)
        let kept = workers[0].id
        let onKept = runsOn.first { $0.value == kept }!.key
        // Then the kept worker's end starts nothing: it leaves, a busy one stays in its place
        let first = core.jobFinished(onKept, attempt: 1, worker: kept, termination: .exit(0), now: .seconds(2))
        #expect(Self.starts(first).isEmpty)
        #expect(first.contains { if case .removeWorker(kept) = $0 { true } else { false } })
        #expect(first.contains { if case .emit(.workerLeft(kept, .slotsReduced)) = $0 { true } else { false } })
        #expect(core.localCapacity == 1 && core.queuedInOrder == [jobs[3], jobs[4]])
        // and so does the next end (one still runs, on one slot)
        let others = runsOn.filter { $0.value != kept }.sorted { $0.key.description < $1.key.description }
        let second = core.jobFinished(others[0].key, attempt: 1, worker: others[0].value, termination: .exit(0), now: .seconds(3))
        #expect(Self.starts(second).isEmpty && core.localCapacity == 1)
        // The last one's end starts the next job in its slot
        let third = core.jobFinished(others[1].key, attempt: 1, worker: others[1].value, termination: .exit(0), now: .seconds(4))
        #expect(Self.starts(third).map(\.0) == [jobs[3]])
        #expect(core.localCapacity == 1 && core.queuedInOrder == [jobs[4]])
    }

    @Test mutating func aLostWorkersJobsGoBackToTheirPlaceInTheQueue() {
        // Given jobs 1 and 2 running on a worker that is lost, 3 and 4 queued after them
        var core = SchedulerCore(configuration: .init(seed: 1))
        var ids = IdentifierGenerator(seed: 3)
        let jobs = (0..<4).map { _ in ids.nextJobID() }
        let two = WorkerDescriptor(id: WorkerID(), name: "two", kind: .remote, slots: 2)
        _ = core.workerJoined(two, now: .zero)
        _ = try! core.submit(contentsOf: (0..<4).map { JobSpec.shell("job \($0)") }, ids: jobs, now: .zero)
        #expect(core.queuedInOrder == [jobs[2], jobs[3]])
        // When it is lost, then 1 and 2 queue ahead of 3 and 4 again (they went behind them)
        _ = core.workerLost(two.id, reason: .connectionLost("dropped"), now: .seconds(1))
        #expect(core.queuedInOrder == jobs)
        let started = core.workerJoined(Self.w1, now: .seconds(2)).compactMap { action -> JobID? in
            if case .start(let id, _, _) = action { id } else { nil }
        }
        #expect(started == [jobs[0]])
    }

    @Test("No job waits in a worker's prefetch behind a busy slot while any worker has a slot free: running slots first, then room to hold")
    mutating func runningSlotsBeforePrefetchRoom() {
        // Given two remote workers that run one job each and hold one more (prefetch 1)
        var core = SchedulerCore(configuration: .init(seed: 1))
        var ids = IdentifierGenerator(seed: 3)
        let four = WorkerDescriptor(id: WorkerID(), name: "w4", kind: .remote, slots: 2, holdsAttempts: true, ownSlots: 1)
        let five = WorkerDescriptor(id: WorkerID(), name: "w5", kind: .remote, slots: 2, holdsAttempts: true, ownSlots: 1)
        _ = core.workerJoined(four, now: .zero)
        _ = core.workerJoined(five, now: .zero)
        func submit(_ count: Int, at seconds: Int) -> [(JobID, Int, WorkerID)] {
            let jobs = (0..<count).map { _ in ids.nextJobID() }
            return Self.starts(try! core.submit(contentsOf: jobs.map { _ in JobSpec.shell("sleep 2") }, ids: jobs, now: .seconds(seconds)).actions)
        }
        // When two jobs come, then one runs on each (the second went behind the first on w4)
        let first = submit(2, at: 0)
        #expect(first.map(\.2) == [four.id, five.id])
        // and two more are held, one behind each
        let held = Set(submit(2, at: 1).map(\.2))
        #expect(held == [four.id, five.id])
        // When w4's running job ends, its held one runs there: its room to hold goes to the next
        _ = core.jobFinished(first[0].0, attempt: 1, worker: four.id, termination: .exit(0), now: .seconds(2))
        #expect(submit(1, at: 2).map(\.2) == [four.id])

        // Given a local slot beside a remote worker that runs one and holds one
        var mixed = SchedulerCore(configuration: .init(seed: 1))
        let local = WorkerDescriptor(id: WorkerID(), name: "local-1", kind: .local, slots: 1)
        _ = mixed.workerJoined(four, now: .zero)
        _ = mixed.workerJoined(local, now: .zero)
        // When a job runs on the remote worker and ends, and a long one takes the local slot
        // and ends, then each new job goes to a running slot, never behind a busy one
        let a = ids.nextJobID(), b = ids.nextJobID(), c = ids.nextJobID()
        var started = Self.starts(try! mixed.submit(contentsOf: [.shell("a"), .shell("b")], ids: [a, b], now: .zero).actions)
        let workers = Set(started.map(\.2))
        #expect(workers == [four.id, local.id])
        let onLocal = started.first { $0.2 == local.id }!.0
        _ = mixed.jobFinished(onLocal, attempt: 1, worker: local.id, termination: .exit(0), now: .seconds(1))
        started = Self.starts(try! mixed.submit(contentsOf: [.shell("c")], ids: [c], now: .seconds(1)).actions)
        #expect(started.map(\.2) == [local.id], "the local slot is free: not behind the remote worker's busy one")
    }

    @Test("An attempt a lost worker held and never began is not held against the job; one that began is")
    mutating func aHeldAttemptLostBeforeItBeganDoesNotCount() {
        var core = SchedulerCore(configuration: .init(maxWorkerLossRequeues: 1, seed: 1))
        var ids = IdentifierGenerator(seed: 3)
        let (running, held) = (ids.nextJobID(), ids.nextJobID())
        _ = try! core.submit(contentsOf: [.shell("sleep 100"), .shell("sleep 1")], ids: [running, held], now: .zero)
        // Five times: a worker that runs one and holds one takes both, begins the first, is lost
        for number in 0..<5 {
            let worker = WorkerDescriptor(id: WorkerID(), name: "far-\(number)", kind: .remote, slots: 2, holdsAttempts: true, ownSlots: 1)
            let started = Self.starts(core.workerJoined(worker, now: .seconds(number))).map(\.0)
            guard started.count == 2 else { break }
            _ = core.attemptBegan(running, attempt: 1, now: .seconds(number))
            _ = core.workerLost(worker.id, reason: .connectionLost("gone"), now: .seconds(number))
        }
        // The one that ran counts its losses (failed after the one requeue allowed); the held
        // one never ran: given back each time, it runs now on the next worker, as attempt 1
        #expect(core.state(of: running) == .failed(reason: .workerLost(.connectionLost("gone")), attempts: 1))
        guard case .running(_, 1, _, nil) = core.state(of: held) else {
            Issue.record("held: \(String(describing: core.state(of: held)))")
            return
        }
    }

    @Test("A job cancelled while its worker held it never ran: no attempt, no start (one that began keeps its attempt)")
    mutating func aHeldAttemptCancelledBeforeItBeganDoesNotCount() throws {
        var core = SchedulerCore(configuration: .init(seed: 1))
        var ids = IdentifierGenerator(seed: 4)
        let (running, held) = (ids.nextJobID(), ids.nextJobID())
        let worker = WorkerDescriptor(id: WorkerID(), name: "far", kind: .remote, slots: 2, holdsAttempts: true, ownSlots: 1)
        _ = core.workerJoined(worker, now: .zero)
        _ = try core.submit(contentsOf: [.shell("sleep 100"), .shell("sleep 1")], ids: [running, held], now: .zero)
        _ = core.attemptBegan(running, attempt: 1, now: .seconds(1))
        // Both cancelled; the worker reports both stopped
        for id in [running, held] {
            _ = try core.cancel(id, now: .seconds(2))
            _ = core.jobFinished(id, attempt: 1, worker: worker.id, termination: .signal(15), now: .seconds(3))
        }
        #expect(core.state(of: held) == .cancelled && core.state(of: running) == .cancelled)
        #expect(core.info(of: held)?.attempts == 0 && core.info(of: held)?.startedAt == nil)
        #expect(core.info(of: running)?.attempts == 1 && core.info(of: running)?.startedAt == .seconds(1))
        // One that ran on a worker since lost, then was held at another and cancelled there,
        // keeps its start: it has run (a trial's `log` said it had not)
        core = SchedulerCore(configuration: .init(seed: 1))
        let again = ids.nextJobID()
        let first = WorkerDescriptor(id: WorkerID(), name: "first", kind: .remote, slots: 1, holdsAttempts: true, ownSlots: 1)
        _ = try core.submit(contentsOf: [.shell("sleep 5")], ids: [again], now: .seconds(4))
        _ = core.workerJoined(first, now: .seconds(4))
        _ = core.attemptBegan(again, attempt: 1, now: .seconds(5))
        _ = core.workerLost(first.id, reason: .connectionLost("gone"), now: .seconds(6))
        #expect(core.info(of: again)?.attempts == 0)
        let second = WorkerDescriptor(id: WorkerID(), name: "second", kind: .remote, slots: 1, holdsAttempts: true, ownSlots: 1)
        _ = core.workerJoined(second, now: .seconds(7))
        _ = try core.cancel(again, now: .seconds(8))
        _ = core.jobFinished(again, attempt: 1, worker: second.id, termination: .signal(15), now: .seconds(9))
        #expect(core.state(of: again) == .cancelled)
        #expect(core.info(of: again)?.attempts == 0 && core.info(of: again)?.startedAt != nil)
    }

    @Test mutating func anAttemptThatNeverReachedItsLostWorkerIsNotHeldAgainstTheJob() {
        // A stalled coordinator's workers all went away at once: each requeue handed the job to
        // the next, whose connection had closed already. Those losses do not count.
        var core = SchedulerCore(configuration: .init(maxWorkerLossRequeues: 1, seed: 1))
        var ids = IdentifierGenerator(seed: 3)
        let id = ids.nextJobID()
        _ = try! core.submit(.shell("true"), id: id, now: .zero)
        for number in 0..<5 {
            let worker = WorkerDescriptor(id: WorkerID(), name: "gone-\(number)", kind: .remote, slots: 1)
            #expect(Self.starts(core.workerJoined(worker, now: .seconds(number))).map(\.0) == [id])
            var asked: [(JobID, Int)] = []
            let lost = core.workerLost(worker.id, reason: .closedByWorker, now: .seconds(number)) { job, attempt in
                asked.append((job, attempt))
                return false
            }
            #expect(asked.map(\.0) == [id] && asked.map(\.1) == [1])
            #expect(Self.events(lost).contains("requeued"))
            #expect(core.state(of: id) == .queued)
        }
        // One that did reach its worker counts, as before.
        _ = core.workerJoined(Self.w1, now: .seconds(10))
        _ = core.workerLost(Self.w1.id, reason: .closedByWorker, now: .seconds(11)) { _, _ in true }
        #expect(core.state(of: id) == .queued)
        _ = core.workerJoined(Self.w2, now: .seconds(12))
        _ = core.workerLost(Self.w2.id, reason: .closedByWorker, now: .seconds(13)) { _, _ in true }
        #expect(core.state(of: id)?.kind == .failed)
    }

    @Test mutating func aCancelledJobOnALostWorkerEndsCancelled() throws {
        _ = core.workerJoined(Self.w1, now: .zero)
        let (id, _) = submit()
        _ = try core.cancel(id, now: .seconds(1))
        _ = core.workerLost(Self.w1.id, reason: .removed("gone"), now: .seconds(2))
        #expect(core.state(of: id) == .cancelled)
    }

    @Test mutating func reducingSlotsRetiresIdleWorkersAtOnceAndBusyOnesWhenTheirJobEnds() {
        _ = core.workerJoined(Self.w1, now: .zero)
        _ = core.workerJoined(Self.w2, now: .zero)
        let (busy, _) = submit()
        #expect(core.capacity == 2)
        let reduced = core.reduceLocalSlots(to: 0, now: .seconds(1))
        #expect(core.capacity == 0)
        let removed = reduced.compactMap { if case .removeWorker(let w) = $0 { w } else { nil } }
        #expect(removed == [Self.w2.id])
        let (queued, _) = submit()
        let finished = core.jobFinished(busy, attempt: 1, worker: Self.w1.id, termination: .exit(0), now: .seconds(2))
        #expect(finished.contains { if case .removeWorker(Self.w1.id) = $0 { true } else { false } })
        #expect(Self.starts(finished).isEmpty)
        #expect(core.state(of: queued) == .queued)
    }

    @Test mutating func aRetiredWorkerGetsNoNewJobsAndLeavesWhenItsJobEndsWithoutRequeueing() {
        _ = core.workerJoined(Self.w1, now: .zero)
        let (running, _) = submit()
        let (queued, _) = submit()
        let retired = core.retireWorker(Self.w1.id, reason: .drained, now: .seconds(1))
        #expect(Self.starts(retired).isEmpty)
        #expect(core.capacity == 0)
        let finished = core.jobFinished(running, attempt: 1, worker: Self.w1.id, termination: .exit(0), now: .seconds(2))
        #expect(core.state(of: running) == .succeeded(attempts: 1))
        #expect(Self.starts(finished).isEmpty)
        #expect(finished.contains { if case .emit(.workerLeft(Self.w1.id, .drained)) = $0 { true } else { false } })
        #expect(core.state(of: queued) == .queued)
        // The connection closing afterwards is no second loss.
        #expect(core.workerLost(Self.w1.id, reason: .closedByWorker, now: .seconds(3)).isEmpty)
    }

    // MARK: pause, reprioritize, coalesce, retry, shutdown

    @Test mutating func pausedDispatchStartsNothingUntilResumed() {
        _ = core.pause(now: .zero)
        _ = core.workerJoined(Self.w1, now: .zero)
        let (id, actions) = submit()
        #expect(Self.starts(actions).isEmpty)
        let resumed = core.resume(now: .seconds(1))
        #expect(Self.starts(resumed).map(\.0) == [id])
        #expect(Self.events(resumed).first == "resumed")
    }

    @Test mutating func reprioritizingAQueuedJobMovesItAtOnce() throws {
        let (a, _) = submit()
        let (b, _) = submit()
        let (c, _) = submit()
        let actions = try core.reprioritize(c, to: 9, now: .zero)
        #expect(Self.events(actions) == ["reprioritized"])
        #expect(core.queuedInOrder == [c, a, b])
        _ = try core.reprioritize(c, to: -1, now: .zero)
        #expect(core.queuedInOrder == [a, b, c])
    }

    @Test mutating func aRetriedJobReturnsToTheQueueAtItsPriority() {
        _ = core.workerJoined(Self.w1, now: .zero)
        let (running, _) = submit()
        let (failing, _) = submit(priority: 1, retries: 1)
        let (other, _) = submit(priority: 0)
        _ = core.jobFinished(running, attempt: 1, worker: Self.w1.id, termination: .exit(0), now: .seconds(1))
        // `failing` (priority 1) started; it fails and is retried while `other` waits.
        _ = core.jobFinished(failing, attempt: 1, worker: Self.w1.id, termination: .exit(1), now: .seconds(2))
        #expect(core.state(of: other)?.kind == .running)
        let (extra, _) = submit(priority: 0)
        _ = core.timersDue(now: .seconds(10))
        #expect(core.queuedInOrder == [failing, extra])
    }

    @Test mutating func aSubmissionWithTheKeyOfAnActiveJobReturnsThatJob() {
        let (first, _) = submit(key: "build")
        let (second, actions) = submit(key: "build")
        #expect(second == first)
        #expect(Self.events(actions) == ["coalesced"])
        #expect(core.queuedInOrder == [first])
        _ = try? core.cancel(first, now: .zero)
        let (third, _) = submit(key: "build")
        #expect(third != first)
    }

    @Test("A first retry delay longer than the cap is kept, not cut to it (--backoff 10m waited 60 s); later ones stay at it; jitter only shortens")
    func aLongFirstBackoffIsNotCut() {
        let long = RetryPolicy.retries(3, backoff: .seconds(600))
        #expect(long.delay(afterAttempt: 1, unit: 0) == .seconds(600))
        #expect(long.delay(afterAttempt: 2, unit: 0) == .seconds(600))
        #expect(long.delay(afterAttempt: 1, unit: 0.5) == .seconds(540))
        let short = RetryPolicy.retries(9, backoff: .seconds(1))
        #expect(short.delay(afterAttempt: 3, unit: 0) == .seconds(4))
        #expect(short.delay(afterAttempt: 9, unit: 0) == .seconds(60))
    }

    @Test("A job being cancelled, or stopped for its timeout, is refused a retry or an edit as going, not as running (it said 'is running: cancel it first' of a job just cancelled)")
    mutating func aJobBeingStoppedIsRefusedAsGoing() throws {
        _ = core.workerJoined(Self.w1, now: .zero)
        let (id, _) = submit()
        _ = try core.cancel(id, now: .seconds(1))
        guard case .running(_, _, _, .cancel?) = core.state(of: id) else {
            Issue.record("not being cancelled: \(String(describing: core.state(of: id)))")
            return
        }
        #expect(throws: SchedulerError(.notAllowed, "only a failed, cancelled or skipped job can be retried; job \(id.short) is being cancelled (its process has not ended yet)")) {
            try core.retry(id, now: .seconds(2))
        }
        #expect(throws: SchedulerError(.notAllowed, "job \(id.short) is being cancelled (its process has not ended yet): edit it once it has ended")) {
            try core.edit(id, command: "true", now: .seconds(2))
        }
        #expect(JobState.running(worker: Self.w1.id, attempt: 1, since: .zero, stopping: .timeout).predicate
            == "is being stopped: it timed out (its process has not ended yet)")
    }

    @Test("A job retried by hand and cancelled before it ran again has no start (its TIME counted from its last run, long before), in the core and in a mirror")
    mutating func aRetriedJobCancelledBeforeItRanHasNoStart() throws {
        _ = core.workerJoined(Self.w1, now: .zero)
        var mirror = SchedulerMirror()
        var seq: UInt64 = 1
        _ = mirror.apply(SchedulerEvent(seq: 1, time: .zero, kind: .snapshot(core.snapshot(seq: 1, now: .zero, progress: { _ in nil }))))
        func feed(_ actions: [SchedulerCore.Action], at time: Duration) {
            for case .emit(let kind) in actions {
                seq += 1
                _ = mirror.apply(SchedulerEvent(seq: seq, time: time, kind: kind))
            }
        }
        let (id, submitted) = submit()
        feed(submitted, at: .zero)
        feed(core.jobFinished(id, attempt: 1, worker: Self.w1.id, termination: .exit(1), now: .seconds(1)), at: .seconds(1))
        feed(core.pause(now: .seconds(2)), at: .seconds(2))
        feed(try core.retry(id, now: .seconds(2)), at: .seconds(2))
        feed(try core.cancel(id, now: .seconds(30)), at: .seconds(30))
        #expect(core.state(of: id) == .cancelled)
        #expect(core.info(of: id)?.startedAt == nil)
        #expect(mirror.jobs[id]?.startedAt == nil)
    }

    @Test mutating func aUserRetryRequeuesAFailedJobWithAFreshBudget() throws {
        _ = core.workerJoined(Self.w1, now: .zero)
        let (id, _) = submit()
        _ = core.jobFinished(id, attempt: 1, worker: Self.w1.id, termination: .exit(1), now: .seconds(1))
        let actions = try core.retry(id, now: .seconds(2))
        #expect(Self.starts(actions).map { $0.1 } == [1])
        #expect(throws: SchedulerError(.notAllowed, "only a failed, cancelled or skipped job can be retried; job \(id.short) is running")) {
            try core.retry(id, now: .seconds(3))
        }
        _ = core.jobFinished(id, attempt: 1, worker: Self.w1.id, termination: .exit(0), now: .seconds(4))
        // The refusal reads as a sentence whatever the state ("succeeded", not "is succeeded").
        #expect(throws: SchedulerError(.notAllowed, "only a failed, cancelled or skipped job can be retried; job \(id.short) succeeded")) {
            try core.retry(id, now: .seconds(5))
        }
    }

    @Test mutating func shutdownCancelRunningEndsQueuedJobsAndStopsRunningOnes() {
        _ = core.workerJoined(Self.w1, now: .zero)
        let (running, _) = submit()
        let (queued, _) = submit()
        let actions = core.shutdown(.cancelRunning, now: .seconds(1))
        #expect(core.state(of: queued) == .cancelled)
        #expect(Self.stops(actions).map(\.0) == [running])
        #expect(!core.isShutdownComplete)
        _ = core.jobFinished(running, attempt: 1, worker: Self.w1.id, termination: .signal(15), now: .seconds(2))
        #expect(core.isShutdownComplete)
    }

    @Test mutating func stopRunningStopsWhatRunsAndKeepsTheQueue() throws {
        _ = core.workerJoined(Self.w1, now: .zero)
        let (running, _) = submit()
        let (queued, _) = submit()
        // One that waits for the running job, and one that waits for its time.
        var after = JobSpec.shell("true")
        after.dependencies = [.job(running)]
        let blocked = try core.submit(after, id: ids.nextJobID(), now: .zero).id
        var later = JobSpec.shell("true")
        later.notBefore = .delay(.seconds(3600))
        let scheduled = try core.submit(later, id: ids.nextJobID(), now: .zero).id
        let actions = core.shutdown(.stopRunning, now: .seconds(1))
        #expect(Self.stops(actions).map(\.0) == [running])
        #expect(actions.contains { if case .stop(running, _, .shutdown) = $0 { true } else { false } })
        #expect(core.state(of: queued) == .queued && core.state(of: blocked) == .blocked)
        #expect(core.state(of: scheduled)?.kind == .scheduled)
        #expect(!core.isShutdownComplete)
        // A weaker shutdown changes nothing now.
        #expect(core.shutdown(.graceful, now: .seconds(1)).isEmpty && core.shutdownMode == .stopRunning)
        let ended = core.jobFinished(running, attempt: 1, worker: Self.w1.id, termination: .signal(15), now: .seconds(2))
        // Back in the queue, its attempt not counted; its dependent still waits for it; nothing starts.
        #expect(core.state(of: running) == .queued && core.info(of: running)?.attempts == 0)
        #expect(ended.contains { if case .emit(.requeued(running, .stoppedForShutdown)) = $0 { true } else { false } })
        #expect(Self.starts(ended).isEmpty && core.state(of: blocked) == .blocked)
        #expect(core.isShutdownComplete)
        // A stronger one still may: it cancels what is left.
        _ = core.shutdown(.cancelRunning, now: .seconds(3))
        #expect(core.state(of: queued) == .cancelled && core.shutdownMode == .cancelRunning)
    }

    @Test mutating func stopRunningAsksBackWhatAWorkerHoldsUnbegun() {
        let worker = WorkerDescriptor(id: WorkerID(), name: "r", kind: .remote, slots: 2, holdsAttempts: true, ownSlots: 1, withdrawsHeld: true)
        _ = core.workerJoined(worker, now: .zero)
        let (first, _) = submit()
        let (held, _) = submit()
        _ = core.attemptBegan(first, attempt: 1, now: .seconds(1))
        let actions = core.shutdown(.stopRunning, now: .seconds(2))
        #expect(Self.stops(actions).map(\.0) == [first])
        #expect(actions.contains { if case .withdraw(held, 1, _) = $0 { true } else { false } })
        let given = core.jobFinished(held, attempt: 1, worker: worker.id, termination: .withdrawn, now: .seconds(3))
        #expect(given.contains { if case .emit(.requeued(held, .withdrawnForShutdown)) = $0 { true } else { false } })
        #expect(core.state(of: held) == .queued && core.info(of: held)?.startedAt == nil)
        _ = core.jobFinished(first, attempt: 1, worker: worker.id, termination: .signal(15), now: .seconds(4))
        #expect(core.state(of: first) == .queued && core.isShutdownComplete)
    }

    @Test("A graceful shutdown asks back what a worker holds unbegun (held, it started when the slot freed), and leaves the running job to finish")
    mutating func gracefulShutdownAsksBackWhatAWorkerHoldsUnbegun() {
        let worker = WorkerDescriptor(id: WorkerID(), name: "r", kind: .remote, slots: 3, holdsAttempts: true, ownSlots: 2, withdrawsHeld: true)
        _ = core.workerJoined(worker, now: .zero)
        let (first, _) = submit()
        let (begun, _) = submit()
        let (held, _) = submit()
        // The worker's two slots began theirs; the third attempt waits there.
        _ = core.attemptBegan(first, attempt: 1, now: .seconds(1))
        _ = core.attemptBegan(begun, attempt: 1, now: .seconds(1))
        let actions = core.shutdown(.graceful, now: .seconds(2))
        #expect(Self.stops(actions).isEmpty)
        #expect(actions.compactMap { if case .withdraw(let id, 1, worker.id) = $0 { id } else { nil } } == [held])
        let given = core.jobFinished(held, attempt: 1, worker: worker.id, termination: .withdrawn, now: .seconds(3))
        #expect(given.contains { if case .emit(.requeued(held, .withdrawnForShutdown)) = $0 { true } else { false } })
        #expect(Self.starts(given).isEmpty)
        #expect(core.state(of: held) == .queued && core.info(of: held)?.attempts == 0 && core.info(of: held)?.startedAt == nil)
        _ = core.jobFinished(begun, attempt: 1, worker: worker.id, termination: .exit(0), now: .seconds(4))
        #expect(!core.isShutdownComplete)
        let last = core.jobFinished(first, attempt: 1, worker: worker.id, termination: .exit(0), now: .seconds(5))
        #expect(Self.starts(last).isEmpty)
        #expect(core.state(of: first) == .succeeded(attempts: 1) && core.state(of: held) == .queued && core.isShutdownComplete)
    }

    @Test mutating func gracefulShutdownLetsRunningJobsFinishAndStartsNothingNew() {
        _ = core.workerJoined(Self.w1, now: .zero)
        let (running, _) = submit()
        let (queued, _) = submit()
        _ = core.shutdown(.graceful, now: .seconds(1))
        let finished = core.jobFinished(running, attempt: 1, worker: Self.w1.id, termination: .exit(0), now: .seconds(2))
        #expect(Self.starts(finished).isEmpty)
        #expect(core.state(of: queued) == .queued)
        #expect(core.isShutdownComplete)
    }

    @Test mutating func drainRunsEverythingQueuedBeforeItCompletes() {
        _ = core.workerJoined(Self.w1, now: .zero)
        let (first, _) = submit()
        let (second, _) = submit()
        _ = core.shutdown(.drain, now: .zero)
        let next = core.jobFinished(first, attempt: 1, worker: Self.w1.id, termination: .exit(0), now: .seconds(1))
        #expect(Self.starts(next).map(\.0) == [second])
        #expect(!core.isShutdownComplete)
        _ = core.jobFinished(second, attempt: 1, worker: Self.w1.id, termination: .exit(0), now: .seconds(2))
        #expect(core.isShutdownComplete)
    }

    // MARK: the state type itself

    @Test func illegalTransitionsAreRejectedInOnePlace() {
        let w = WorkerID()
        let running = JobState.running(worker: w, attempt: 1, since: .zero, stopping: nil)
        #expect(JobState.queued.canTransition(to: running))
        #expect(!JobState.queued.canTransition(to: .succeeded(attempts: 1)))
        #expect(!JobState.cancelled.canTransition(to: running))
        #expect(!JobState.succeeded(attempts: 1).canTransition(to: .queued))
        #expect(!running.canTransition(to: .running(worker: WorkerID(), attempt: 1, since: .zero, stopping: .cancel)))
        #expect(running.canTransition(to: .running(worker: w, attempt: 1, since: .zero, stopping: .cancel)))
        let timingOut = JobState.running(worker: w, attempt: 1, since: .zero, stopping: .timeout)
        #expect(timingOut.canTransition(to: .running(worker: w, attempt: 1, since: .zero, stopping: .cancel)))
        let cancelling = JobState.running(worker: w, attempt: 1, since: .zero, stopping: .cancel)
        #expect(!cancelling.canTransition(to: timingOut))
        #expect(!JobState.waitingForRetry(until: .zero, failedAttempt: 1, reason: .exitStatus(1)).canTransition(to: running))
    }
}
