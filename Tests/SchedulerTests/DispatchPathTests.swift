import Testing
@testable import Scheduler

/// The invariants the fast dispatch path relies on: reused job handles are checked against ids,
/// a slot's attempts share one task that a stop cancels for its own attempt only, and the event
/// bus delivers every event to every subscriber in order, in place.
@Suite(.timeLimit(.minutes(3)))  // 2,000 jobs take about a second alone; a full CI run starves them past 1 min
struct DispatchPathTests {
    static let worker = WorkerDescriptor(id: WorkerID(), name: "w", kind: .local, slots: 1)

    // MARK: handles

    @Test func aReportForAnEvictedJobWhoseHandleWasReusedChangesNothing() throws {
        // Given a core that keeps no finished job, so an ended job's handle is reused at once.
        var core = SchedulerCore(configuration: .init(finishedRetention: 0, seed: 1))
        var ids = IdentifierGenerator(seed: 2)
        _ = core.workerJoined(Self.worker, now: .zero)
        let first = ids.nextJobID()
        _ = try core.submit(.shell("a"), id: first, now: .zero)
        let firstHandle = try #require(core.handle(of: first))
        var buffer: [SchedulerCore.Action] = []
        var starts: [SchedulerCore.Start] = []
        core.jobFinished(firstHandle, id: first, attempt: 1, worker: Self.worker.id, termination: .exit(0), stopTookEffect: false, now: .zero)
        core.moveActions(into: &buffer, starts: &starts)
        #expect(core.info(of: first) == nil)
        let second = ids.nextJobID()
        let started = try core.submit(.shell("b"), id: second, now: .zero).actions
        #expect(core.handle(of: second) == firstHandle, "the freed index is reused")
        #expect(started.contains { if case .start(second, 1, _) = $0 { true } else { false } })

        // When a late, duplicate report of the first job arrives with the reused handle.
        buffer = []
        starts = []
        core.jobFinished(firstHandle, id: first, attempt: 1, worker: Self.worker.id, termination: .exit(1), stopTookEffect: false, now: .zero)
        core.moveActions(into: &buffer, starts: &starts)

        // Then the job now at that handle is untouched and nothing happens.
        #expect(buffer.isEmpty && starts.isEmpty)
        #expect(core.state(of: second)?.kind == .running)
    }

    @Test func theStartHandlesMatchTheStartActionsInOrder() throws {
        // Given queued jobs and then two slots.
        var core = SchedulerCore(configuration: .init(seed: 1))
        var ids = IdentifierGenerator(seed: 3)
        let jobs = (0..<3).map { _ in ids.nextJobID() }
        _ = try core.submit(contentsOf: jobs.map { _ in .shell("x") }, ids: jobs, now: .zero)
        _ = core.workerJoined(Self.worker, now: .zero)
        let other = WorkerDescriptor(id: WorkerID(), name: "v", kind: .local, slots: 1)
        let firstHandle = try #require(core.handle(of: jobs[0]))

        // When the first job ends and its slot goes to the next one.
        var buffer: [SchedulerCore.Action] = []
        var starts: [SchedulerCore.Start] = []
        _ = core.workerJoined(other, now: .zero)
        core.jobFinished(firstHandle, id: jobs[0], attempt: 1, worker: Self.worker.id, termination: .exit(0), stopTookEffect: false, now: .zero)
        core.moveActions(into: &buffer, starts: &starts)

        // Then every `.start` comes with the handle of the job it names.
        let started = buffer.compactMap { if case .start(let id, _, _) = $0 { id } else { nil } }
        #expect(started == [jobs[2]])
        #expect(starts.map { core.handle(of: jobs[2]) == $0.handle } == [true])
    }

    // MARK: slot task

    @Test func aStopMeantForAnEndedAttemptDoesNotCancelTheNextOneInTheSameTask() async {
        // Given a slot task whose first attempt has ended and whose second is running.
        let slot = SlotTask()
        let task = Task<Void, Never> {}
        slot.attach(task)
        let first = slot.begin()
        #expect(slot.end() == false)
        let second = slot.begin()

        // When a stop for the first attempt arrives late.
        slot.cancel(first)

        // Then the second attempt ends uncancelled; a stop for the attempt running does cancel.
        #expect(slot.end() == false)
        #expect(second != first)
        let third = slot.begin()
        slot.cancel(third)
        #expect(slot.end() == true)
        await task.value
    }

    @Test func cancellingOneClosureJobLeavesTheNextJobOfItsSlotRunningUncancelled() async throws {
        // Given one local slot running a closure job that waits to be cancelled, and another
        // job queued behind it.
        let scheduler = Scheduler(configuration: .init(localSlots: 1, seed: 5))
        async let running: Void = scheduler.run()
        var reader = EventReader(await scheduler.events())
        let blocker = try await scheduler.submit(JobSpec(name: "blocker", work: .closure { _ in
            await Self.waitUntilCancelled()
            try Task.checkCancellation()
        }))
        let next = try await scheduler.submit(JobSpec(name: "next", work: .closure { _ in
            // Ran in a task that a stop had cancelled, it would throw here.
            try Task.checkCancellation()
            await Task.yield()
            try Task.checkCancellation()
        }))
        await reader.next { $0.isStarted(blocker) }

        // When the running job is cancelled.
        try await scheduler.cancel(blocker)

        // Then it ends cancelled, and the next job of the slot succeeds.
        #expect(await reader.final(of: blocker)?.name == "cancelled")
        #expect(await reader.final(of: next)?.name == "succeeded")
        await scheduler.shutdown(.graceful)
        await running
    }

    @Test func anAttemptEndThatFindsTheLockTakenIsReportedByTheStepHoldingItAndItsSlotRunsTheNextJob() async throws {
        // Given one local slot running a closure job that waits for a gate, and another job
        // queued behind it.
        let scheduler = Scheduler(configuration: .init(localSlots: 1, seed: 8))
        async let running: Void = scheduler.run()
        var reader = EventReader(await scheduler.events())
        let (gate, openGate) = AsyncStream<Void>.makeStream()
        let first = try await scheduler.submit(JobSpec(name: "first", work: .closure { _ in
            for await _ in gate {}
        }))
        let second = try await scheduler.submit(JobSpec(name: "second", work: .closure { _ in }))
        await reader.next { $0.isStarted(first) }

        // When the first job ends while a step holds the scheduler's lock (a thread holds it
        // until the end waits for it).
        let (held, lockIsHeld) = AsyncStream<Void>.makeStream()
        async let holding: Void = scheduler.holdLock(untilEndsWait: 1) { lockIsHeld.finish() }
        for await _ in held {}
        openGate.finish()
        await holding

        // Then that step reported the end, and the slot ran the next job: both succeeded, the
        // second on the same worker, started after the first ended.
        #expect(await reader.final(of: first)?.name == "succeeded")
        #expect(await reader.final(of: second)?.name == "succeeded")
        #expect(await scheduler.endsReportedForOtherSlots == 1)
        let workers = reader.seen.compactMap { event -> WorkerID? in
            if case .started(_, _, _, let worker) = event.kind { return worker }
            return nil
        }
        #expect(workers.count == 2 && workers[0] == workers[1])
        await scheduler.shutdown(.graceful)
        await running
    }

    @Test func manyClosureJobsOnOneSlotWithCancelsEachEndExactlyOnceInOrder() async throws {
        // Given 2,000 closure jobs on one slot, every tenth cancelled while queued or running.
        let scheduler = Scheduler(configuration: .init(localSlots: 1, seed: 6))
        async let running: Void = scheduler.run()
        // Lossless: a reader starved by the rest of a busy test run slows the jobs down instead
        // of skipping ahead past the events this test counts.
        var reader = EventReader(await scheduler.events(bufferLimit: nil, includeOutput: true, delivery: .lossless))
        let ids = try await scheduler.submit(contentsOf: (0..<2_000).map { _ in JobSpec(work: .closure { _ in await Task.yield() }) })
        for id in stride(from: 0, to: ids.count, by: 10).map({ ids[$0] }) { try? await scheduler.cancel(id) }

        // When they have all ended.
        await reader.finals(of: ids)

        // Then each ended exactly once, its started before its end, with no gap in the numbers.
        var ended: [JobID: Int] = [:]
        var startedAt: [JobID: UInt64] = [:]
        var last: UInt64?
        var gaps = 0
        for event in reader.seen {
            if case .snapshot = event.kind { last = event.seq; continue }
            if let last, event.seq != last + 1 { gaps += 1 }
            last = event.seq
            if case .started(let id, _, _, _) = event.kind { startedAt[id] = event.seq }
            if event.kind.isFinal, let id = event.kind.jobID {
                ended[id, default: 0] += 1
                if let start = startedAt[id] { #expect(start < event.seq) }
            }
        }
        #expect(gaps == 0)
        #expect(ended.count == ids.count && ended.values.allSatisfy { $0 == 1 })
        await scheduler.shutdown(.graceful)
        await running
    }

    // MARK: event bus

    @Test func everySubscriberGetsEveryEventInOrderAndABatchTakenIsNeverChangedAfterwards() async {
        // Given a bus with two subscribers, one of which drops output.
        let bus = EventBus()
        let all = bus.subscribe(limit: 1 << 20, includeOutput: true, time: .zero) { Self.emptySnapshot(seq: $0) }
        let quiet = bus.subscribe(limit: 1 << 20, includeOutput: false, time: .zero) { Self.emptySnapshot(seq: $0) }
        let id = JobID(uuid: .init())
        guard case .events(let snapshot) = await bus.pull(all) else { Issue.record("no snapshot"); return }
        #expect(snapshot.count == 1)

        // When events are published in steps, one batch is taken midway, and more follow.
        bus.publish([.paused, .output(id, OutputLine(stream: .stdout, text: "a"))], time: .zero)
        guard case .events(let taken) = await bus.pull(all) else { Issue.record("no events"); return }
        for step in 0..<100 {
            bus.publish([.resumed, .output(id, OutputLine(stream: .stdout, text: "\(step)")), .paused], time: .zero)
        }

        // Then the batch taken is as it was, and each subscriber sees every number it should, in order.
        #expect(taken.map(\.seq) == [1, 2])
        guard case .events(let rest) = await bus.pull(all) else { Issue.record("no events"); return }
        #expect(rest.map(\.seq) == Array(3...302))
        guard case .events(let quietEvents) = await bus.pull(quiet) else { Issue.record("no events"); return }
        let numbers = quietEvents.filter { if case .snapshot = $0.kind { false } else { true } }.map(\.seq)
        // Output lines are 2, then the middle event of every step: 4, 7, ..., 301.
        let isOutput = { (seq: Int) in seq == 2 || (seq >= 4 && seq % 3 == 1) }
        #expect(numbers == (1...302).filter { !isOutput($0) }.map(UInt64.init))
        bus.unsubscribe(all)
        bus.unsubscribe(quiet)
    }

    // MARK: helpers

    static func emptySnapshot(seq: UInt64) -> SchedulerSnapshot {
        SchedulerCore().snapshot(seq: seq, now: .zero) { _ in nil }
    }

    /// Returns once the current task is cancelled (no polling, no sleep).
    static func waitUntilCancelled() async {
        let gate = Gate()
        await withTaskCancellationHandler {
            await gate.wait()
        } onCancel: {
            gate.open()
        }
    }

    /// Opens once; waiters resume then (or at once if it is open).
    final class Gate: Sendable {
        private let state = Locked<(isOpen: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))
        func wait() async {
            await withCheckedContinuation { continuation in
                let resume = state.withLock { state -> Bool in
                    if state.isOpen { return true }
                    state.waiters.append(continuation)
                    return false
                }
                if resume { continuation.resume() }
            }
        }
        func open() {
            let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
                state.isOpen = true
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume() }
        }
    }
}
