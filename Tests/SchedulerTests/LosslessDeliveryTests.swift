import Testing
@testable import Scheduler

/// A lossless subscriber (the headless log) slower than the jobs: every event reaches it, in
/// order, and what waits for it stays bounded because the jobs are slowed down at the source.
@Suite("Lossless delivery", .timeLimit(.minutes(5)))
struct LosslessDeliveryTests {
    @Test("A subscriber that stops reading: the job's output is no longer read, nothing is dropped, unread events stay bounded")
    func outputWaitsForALosslessSubscriber() async throws {
        let scheduler = Scheduler(configuration: .init(localSlots: 1, seed: 3))
        async let running: Void = scheduler.run()
        let limit = 64
        let events = await scheduler.events(bufferLimit: limit, includeOutput: true, delivery: .lossless)
        let lines = 200_000
        let id = try await scheduler.submit(.shell("seq 1 \(lines)"))
        // Nobody reads yet: once the limit is passed, the reactor stops reading the job's pipe
        // (the job blocks writing to it) instead of piling its lines up.
        await ProcessReactor.shared.waitUntil { $0.readingPaused >= 1 }
        // At most one read (64 KiB: at most 32,768 lines of "N\n") past the limit.
        let bound = limit + 32_768 + 16
        #expect(await scheduler.mostUnreadByLosslessSubscribers <= bound)

        var reader = EventReader(events)
        #expect(await reader.final(of: id)?.name == "succeeded")
        let printed = reader.outputTexts(of: id)
        #expect(printed.count == lines)
        #expect(printed == (1...lines).map(String.init), "every line, in order")
        #expect(reader.hasNoGaps, "no event missing")
        #expect(!reader.seen.contains { if case .lagged = $0.kind { true } else { false } })
        #expect(await scheduler.mostUnreadByLosslessSubscribers <= bound)
        await scheduler.shutdown(.graceful)
        await running
    }

    @Test("Long lines are counted by their bytes: 20 MB without a newline wait in the pipe, not in memory, and all arrive")
    func longLinesAreBoundedByBytes() async throws {
        let scheduler = Scheduler(configuration: .init(localSlots: 1, seed: 6))
        async let running: Void = scheduler.run()
        // 1,024 events of 16 KiB pieces would be 16 MiB (the headless log allows 8,192: 128 MiB).
        let events = await scheduler.events(bufferLimit: 1_024, includeOutput: true, delivery: .lossless)
        let bytes = 20_000_000
        let id = try await scheduler.submit(.shell("head -c \(bytes) /dev/zero"))
        await ProcessReactor.shared.waitUntil { $0.readingPaused >= 1 }
        // The byte limit, plus at most one read (64 KiB) past it.
        let bound = EventBus.outputByteLimit + 65_536
        #expect(await scheduler.mostUnreadOutputBytesByLosslessSubscribers <= bound)
        #expect(await scheduler.mostUnreadByLosslessSubscribers < 1_024 / 4)

        var reader = EventReader(events)
        #expect(await reader.final(of: id)?.name == "succeeded")
        #expect(reader.outputTexts(of: id).reduce(0) { $0 + $1.utf8.count } == bytes, "every byte")
        #expect(reader.hasNoGaps, "no event missing")
        #expect(await scheduler.mostUnreadOutputBytesByLosslessSubscribers <= bound)
        await scheduler.shutdown(.graceful)
        await running
    }

    @Test("A subscriber behind holds back new jobs: they start again once it has read, and every event arrives once")
    func newJobsWaitForALosslessSubscriber() async throws {
        let scheduler = Scheduler(configuration: .init(localSlots: 2, seed: 4))
        async let running: Void = scheduler.run()
        let limit = 16
        let events = await scheduler.events(bufferLimit: limit, includeOutput: false, delivery: .lossless)
        let count = 2_000
        let ids = try await scheduler.submit(contentsOf: (0..<count).map { _ in JobSpec(work: .closure { _ in }) })
        // The 2,000 submitted events alone pass the limit: jobs stop being started.
        await scheduler.waitUntilDispatchIsHeld()
        let started = await scheduler.snapshot().jobs.filter { $0.state.kind != .queued }.count
        #expect(started < count / 4, "\(started) of \(count) jobs started while the subscriber was behind")

        var reader = EventReader(events)
        await reader.finals(of: ids)
        let finals = reader.seen.filter(\.kind.isFinal)
        #expect(finals.count == count)
        #expect(Set(finals.compactMap(\.kind.jobID)).count == count, "each job ends exactly once")
        #expect(reader.hasNoGaps, "no event missing")
        // Bounded: the submissions, the limit, and what the running jobs added meanwhile.
        #expect(await scheduler.mostUnreadByLosslessSubscribers <= count + limit + 3 * started + 8)
        await scheduler.shutdown(.graceful)
        await running
    }

    @Test("A closure job that waits for the flow between lines is slowed down like a process: unread events stay bounded")
    func aClosureJobWaitsForTheFlow() async throws {
        let scheduler = Scheduler(configuration: .init(localSlots: 1, seed: 5))
        async let running: Void = scheduler.run()
        let limit = 64
        let events = await scheduler.events(bufferLimit: limit, includeOutput: true, delivery: .lossless)
        let lines = 20_000
        let id = try await scheduler.submit(JobSpec(work: .closure { context in
            for line in 1...lines {
                await context.waitUntilOutputFlows()
                context.log("\(line)")
            }
        }))
        var reader = EventReader(events)
        #expect(await reader.final(of: id)?.name == "succeeded")
        let printed = reader.outputTexts(of: id)
        #expect(printed == (1...lines).map(String.init))
        // One line past the limit at most, plus the job's own start and end.
        #expect(await scheduler.mostUnreadByLosslessSubscribers <= limit + 8)
        await scheduler.shutdown(.graceful)
        await running
    }

    @Test("A closure job that waits for the flow of a log that is behind is stopped by a cancel, a timeout and a shutdown (each waited forever)")
    func aClosureWaitingForTheFlowCanBeStopped() async throws {
        let scheduler = Scheduler(configuration: .init(localSlots: 3, seed: 7))
        async let running: Void = scheduler.run()
        // A log that has fallen behind and never reads on.
        let log = await scheduler.events(bufferLimit: 16, includeOutput: true, delivery: .lossless)
        var reader = EventReader(await scheduler.events(includeOutput: false))
        func chatty(timeout: Duration? = nil) -> JobSpec {
            var spec = JobSpec(work: .closure { context in
                while true {
                    context.log("a line")
                    await context.waitUntilOutputFlows()
                    try Task.checkCancellation()
                }
            })
            spec.timeout = timeout
            return spec
        }
        // (All three start at once: while the log is behind, no new job starts.)
        let ids = try await scheduler.submit(contentsOf: [chatty(), chatty(timeout: .milliseconds(200)), chatty()])
        let (cancelled, timed, stuck) = (ids[0], ids[1], ids[2])
        _ = await reader.next { if case .started(stuck, _, _, _) = $0 { true } else { false } }
        try await scheduler.cancel(cancelled)
        #expect(await reader.final(of: cancelled)?.name == "cancelled")
        #expect(await reader.final(of: timed)?.name == "failed")
        await scheduler.shutdown(.cancelRunning)
        await running
        #expect(await scheduler.info(of: stuck)?.state == .cancelled)
        withExtendedLifetime(log) {}
    }
}
