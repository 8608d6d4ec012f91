import JobtopTestSupport
import Testing
@testable import Scheduler

/// The scheduler actor with fake workers held by gates and a manual clock: what runs when, in
/// what order, and what the events say. Nothing here sleeps.
///
/// The limit is for a hang, not a timing: at the start of `swift test` every suite runs at once
/// on two cores, and a test of 500 closure jobs was seen to finish 61 in its first minute there.
@Suite(.timeLimit(.minutes(3)))
struct SchedulerTests {
    /// A scheduler with no local slots, one gated worker and a manual clock, running.
    struct Harness {
        let clock = ManualClock()
        let worker: GatedWorker
        let scheduler: Scheduler
        var starts: AsyncStream<JobAssignment>.Iterator

        init(slots: Int = 1) async {
            worker = GatedWorker(slots: slots)
            scheduler = Scheduler(configuration: .init(localSlots: 0, seed: 42), clock: clock)
            await scheduler.addWorker(worker)
            starts = worker.starts.makeAsyncIterator()
        }

        /// The next attempt the worker was given.
        mutating func nextStart() async -> JobAssignment {
            await starts.next()!
        }
    }

    static func run(_ harness: Harness, _ body: (inout Harness) async throws -> Void) async throws {
        var harness = harness
        let scheduler = harness.scheduler
        async let running: Void = scheduler.run()
        try await body(&harness)
        await harness.scheduler.shutdown(.cancelRunning)
        await running
    }

    @Test func jobsRunByPriorityAndFirstInFirstOutWithinAPriority() async throws {
        let harness = await Harness()
        try await Self.run(harness) { h in
            await h.scheduler.pause()
            let a = try await h.scheduler.submit(.shell("a", priority: 0))
            let b = try await h.scheduler.submit(.shell("b", priority: 5))
            let c = try await h.scheduler.submit(.shell("c", priority: 0))
            let d = try await h.scheduler.submit(.shell("d", priority: 5))
            let e = try await h.scheduler.submit(.shell("e", priority: 9))
            await h.scheduler.resume()
            var order: [JobID] = []
            for _ in 0..<5 {
                let started = await h.nextStart()
                order.append(started.jobID)
                h.worker.release(started.jobID)
            }
            #expect(order == [e, b, d, a, c])
        }
    }

    @Test func aWaitForRoomEndsWhenItsTaskIsCancelledAndAnotherWaitsOn() async throws {
        let harness = await Harness()
        try await Self.run(harness) { h in
            // Given a batch with room for one, full
            let batch = await h.scheduler.openBatch()
            let job = try await h.scheduler.submit(contentsOf: [.shell("a")], batch: batch)[0]
            _ = await h.nextStart()
            // When two wait for room and the first's task is cancelled
            let scheduler = h.scheduler
            let cancelled = Task { await scheduler.waitForRoom(in: batch, below: 1) }
            let waiting = Task { await scheduler.waitForRoom(in: batch, below: 1) }
            await scheduler.waitUntilWaitingForRoom(2)
            cancelled.cancel()
            // Then the first returns false (the batch was not closed: its caller stopped) at once
            #expect(await cancelled.value == false)
            #expect(await scheduler.roomWaiterCount == 1)
            // and the second still gets the room when the job ends
            h.worker.release(job)
            #expect(await waiting.value == true)
            // A task cancelled before it asks does not wait at all
            let early = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                return await scheduler.waitForRoom(in: batch, below: 1)
            }
            #expect(await early.value == false)
        }
    }

    @Test func reprioritizingAQueuedJobChangesWhatRunsNext() async throws {
        let harness = await Harness()
        try await Self.run(harness) { h in
            let blocker = try await h.scheduler.submit(.shell("blocker"))
            #expect(await h.nextStart().jobID == blocker)
            let x = try await h.scheduler.submit(.shell("x", priority: 1))
            let y = try await h.scheduler.submit(.shell("y", priority: 0))
            try await h.scheduler.reprioritize(y, to: 2)
            let snapshot = await h.scheduler.snapshot()
            #expect(snapshot.jobs.map(\.id) == [blocker, y, x])
            h.worker.release(blocker)
            #expect(await h.nextStart().jobID == y)
            h.worker.release(y)
            #expect(await h.nextStart().jobID == x)
            h.worker.release(x)
        }
    }

    @Test func pauseHoldsNewStartsAndResumeReleasesThem() async throws {
        let harness = await Harness()
        try await Self.run(harness) { h in
            let events = await h.scheduler.events()
            var reader = EventReader(events)
            let first = try await h.scheduler.submit(.shell("first"))
            #expect(await h.nextStart().jobID == first)
            await h.scheduler.pause()
            let second = try await h.scheduler.submit(.shell("second"))
            h.worker.release(first)
            await reader.final(of: first)
            // The slot is free and `second` is queued, but dispatch is paused.
            let paused = await h.scheduler.snapshot()
            #expect(paused.isPaused)
            #expect(paused.count(.queued) == 1 && paused.count(.running) == 0)
            await h.scheduler.resume()
            #expect(await h.nextStart().jobID == second)
            h.worker.release(second)
            await reader.final(of: second)
            #expect(reader.seen.contains { $0.kind.name == "paused" })
            #expect(reader.seen.contains { $0.kind.name == "resumed" })
        }
    }

    @Test func addingSlotsWhileRunningStartsQueuedJobsAtOnce() async throws {
        let harness = await Harness()
        try await Self.run(harness) { h in
            let a = try await h.scheduler.submit(.shell("a"))
            _ = try await h.scheduler.submit(.shell("b"))
            #expect(await h.nextStart().jobID == a)
            let second = GatedWorker(name: "second", slots: 1)
            var secondStarts = second.starts.makeAsyncIterator()
            await h.scheduler.addWorker(second)
            let started = await secondStarts.next()!
            #expect(started.spec.displayName == "b")
            #expect(await h.scheduler.snapshot().totalSlots == 2)
            second.release(started.jobID)
            h.worker.release(a)
        }
    }

    @Test func localSlotsChangeLiveAndAreAtLeastOneButWithOtherWorkers() async throws {
        let scheduler = Scheduler(configuration: .init(localSlots: 1, seed: 1))
        async let running: Void = scheduler.run()
        try await scheduler.setLocalSlots(3)
        #expect(await scheduler.snapshot().localSlots == 3)
        try await scheduler.setLocalSlots(1)
        #expect(await scheduler.snapshot().localSlots == 1)
        await #expect(throws: SchedulerError.self) { try await scheduler.setLocalSlots(0) }
        // None while another worker is in the pool (a coordinator back to remote workers only).
        await scheduler.addWorker(GatedWorker(name: "far", slots: 2, kind: .remote))
        try await scheduler.setLocalSlots(0)
        #expect(await scheduler.snapshot().localSlots == 0)
        await #expect(throws: SchedulerError.self) { try await scheduler.setLocalSlots(-1) }
        try await scheduler.setLocalSlots(1)
        #expect(await scheduler.snapshot().localSlots == 1)
        await scheduler.shutdown(.graceful)
        await running
    }

    @Test func aSubmissionWithAnActiveKeyIsCoalescedIntoTheExistingJob() async throws {
        let harness = await Harness()
        try await Self.run(harness) { h in
            var spec = JobSpec.shell("make")
            spec.coalescingKey = "build"
            let first = try await h.scheduler.submit(spec)
            #expect(await h.nextStart().jobID == first)
            let again = try await h.scheduler.submit(spec)
            #expect(again == first)
            h.worker.release(first)
            let events = await h.scheduler.events()
            var reader = EventReader(events)
            await reader.final(of: first)
            let later = try await h.scheduler.submit(spec)
            #expect(later != first)
            h.worker.release(later)
        }
    }

    @Test func failedAttemptsAreRetriedAfterTheBackoffOnTheInjectedClock() async throws {
        let harness = await Harness()
        try await Self.run(harness) { h in
            let events = await h.scheduler.events()
            var reader = EventReader(events)
            var spec = JobSpec.shell("flaky")
            spec.retry = RetryPolicy(maxAttempts: 3, initialBackoff: .seconds(2), multiplier: 3, maxBackoff: .seconds(60), jitter: 0)
            let id = try await h.scheduler.submit(spec)
            #expect(await h.nextStart().attempt == 1)
            h.worker.release(id, with: .exit(1))
            guard case .retryScheduled(_, 1, .exitStatus(1), 2, let at)? = await reader.next(where: { $0.name == "retry" })?.kind else {
                Issue.record("no retry event")
                return
            }
            #expect(at == .seconds(2))
            await h.clock.waitForSleepers()
            h.clock.advance(by: .seconds(2))
            #expect(await h.nextStart().attempt == 2)
            h.worker.release(id, with: .signal(9))
            guard case .retryScheduled(_, 2, .signal(9), 3, let at2)? = await reader.next(where: { $0.name == "retry" })?.kind else {
                Issue.record("no second retry event")
                return
            }
            #expect(at2 == .seconds(2 + 6))
            await h.clock.waitForSleepers()
            h.clock.advance(by: .seconds(6))
            #expect(await h.nextStart().attempt == 3)
            h.worker.release(id, with: .exit(0))
            #expect(await reader.final(of: id)?.name == "succeeded")
        }
    }

    @Test func aTimeoutStopsTheAttemptAndCountsAsAFailure() async throws {
        let harness = await Harness()
        try await Self.run(harness) { h in
            let events = await h.scheduler.events()
            var reader = EventReader(events)
            var spec = JobSpec.shell("slow")
            spec.timeout = .seconds(30)
            let id = try await h.scheduler.submit(spec)
            _ = await h.nextStart()
            await h.clock.waitForSleepers()
            h.clock.advance(by: .seconds(30))
            // The gated worker ends the attempt with SIGTERM when asked to stop.
            guard case .failed(_, .timeout(.seconds(30)), 1)? = await reader.final(of: id) else {
                Issue.record("expected a timeout failure: \(reader.seen.map(\.kind.name))")
                return
            }
            #expect(reader.seen.contains { if case .stopping(id, .timeout) = $0.kind { true } else { false } })
        }
    }

    @Test func cancellingQueuedRunningAndWaitingJobsEndsThemCancelled() async throws {
        let harness = await Harness()
        try await Self.run(harness) { h in
            let events = await h.scheduler.events()
            var reader = EventReader(events)
            var flaky = JobSpec.shell("flaky")
            flaky.retry = .retries(5, backoff: .seconds(100))
            let waiting = try await h.scheduler.submit(flaky)
            let queued = try await h.scheduler.submit(.shell("queued"))
            h.worker.release(waiting, with: .exit(1))
            await reader.next { $0.name == "retry" }
            #expect(await h.nextStart().jobID == waiting)
            #expect(await h.nextStart().jobID == queued)
            let running = queued
            let another = try await h.scheduler.submit(.shell("another"))
            try await h.scheduler.cancel(another)
            try await h.scheduler.cancel(waiting)
            try await h.scheduler.cancel(running)
            #expect(await reader.final(of: another)?.name == "cancelled")
            #expect(await reader.final(of: running)?.name == "cancelled")
            let snapshot = await h.scheduler.snapshot()
            #expect(snapshot.count(.cancelled) == 3)
            #expect(snapshot.count(.failed) == 0)
        }
    }

    @Test func aLateSubscriberStartsWithASnapshotOfThePresent() async throws {
        let harness = await Harness()
        try await Self.run(harness) { h in
            let id = try await h.scheduler.submit(.shell("x", name: "named"))
            _ = await h.nextStart()
            var iterator = await h.scheduler.events().makeAsyncIterator()
            guard case .snapshot(let snapshot)? = await iterator.next()?.kind else {
                Issue.record("first event is not a snapshot")
                return
            }
            #expect(snapshot.jobs.map(\.id) == [id])
            #expect(snapshot.jobs.first?.name == "named")
            #expect(snapshot.count(.running) == 1)
            h.worker.release(id)
            guard case .succeeded(id, 1)? = await iterator.next()?.kind else {
                Issue.record("expected succeeded next")
                return
            }
        }
    }

    @Test func aSubscriberThatFallsBehindGetsALagMarkerAndAFreshSnapshotWithoutSlowingTheScheduler() async throws {
        let scheduler = Scheduler(configuration: .init(localSlots: 2, seed: 5))
        async let running: Void = scheduler.run()
        let slow = await scheduler.events(bufferLimit: 16)
        // The reader that waits for the ends is lossless: starved by a busy test run, it must not
        // skip ahead itself.
        var reader = EventReader(await scheduler.events(bufferLimit: nil, includeOutput: true, delivery: .lossless))
        // The slow subscriber reads nothing while 200 jobs (600 events for its 16 places) go
        // through. (500 once: in a full run's first minute, starved with every other suite, the
        // lossless reader let only 61 of them through and the suite's limit ran out.)
        let ids = try await scheduler.submit(contentsOf: (0..<200).map { _ in JobSpec(work: .closure { _ in }) })
        await reader.finals(of: ids)
        var iterator = slow.makeAsyncIterator()
        var kinds: [String] = []
        while let event = await iterator.next() {
            kinds.append(event.kind.name)
            if case .snapshot(let snapshot) = event.kind, kinds.count > 1 {
                #expect(snapshot.count(.succeeded) == 200)
                break
            }
        }
        // What was buffered, the first snapshot included, was dropped for the marker.
        #expect(kinds.first == "lagged")
        #expect(kinds.count == 2)
        await scheduler.shutdown(.graceful)
        await running
    }

    @Test func gracefulShutdownWaitsForRunningJobsAndStartsNoMore() async throws {
        let harness = await Harness()
        var h = harness
        let scheduler = h.scheduler
        async let running: Void = scheduler.run()
        let id = try await scheduler.submit(.shell("a"))
        let queued = try await scheduler.submit(.shell("b"))
        _ = await h.nextStart()
        var reader = EventReader(await scheduler.events())
        async let shutdown: Void = scheduler.shutdown(.graceful)
        // Once the shutdown has begun, nothing new is accepted.
        await reader.next { $0.name == "shutdown" }
        await #expect(throws: SchedulerError.self) { try await scheduler.submit(.shell("late")) }
        h.worker.release(id)
        await shutdown
        await running
        #expect(await scheduler.info(of: id)?.state == .succeeded(attempts: 1))
        #expect(await scheduler.info(of: queued)?.state == .queued)
    }

    @Test func closureJobsReportProgressAndOutputAndCanBeCancelled() async throws {
        let scheduler = Scheduler(configuration: .init(localSlots: 1, seed: 3))
        async let running: Void = scheduler.run()
        var reader = EventReader(await scheduler.events())
        let id = try await scheduler.submit(JobSpec(name: "closure", work: .closure { context in
            context.log("halfway")
            context.reportProgress(0.5)
            // Runs until cancelled.
            while !Task.isCancelled { try await Task.sleep(for: .seconds(3600)) }
        }))
        await reader.next { if case .progress(id, 0.5) = $0 { true } else { false } }
        #expect(await scheduler.output(of: id).lines.map(\.text) == ["halfway"])
        try await scheduler.cancel(id)
        #expect(await reader.final(of: id)?.name == "cancelled")
        await scheduler.shutdown(.graceful)
        await running
    }
}
