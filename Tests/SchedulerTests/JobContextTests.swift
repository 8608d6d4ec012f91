import Testing
@testable import Scheduler

/// What a closure job reports through its context belongs to its attempt.
@Suite(.timeLimit(.minutes(3)))
struct JobContextTests {
    @Test("A context used after its attempt ended (by a task the job left running) adds no output or progress: none after the job's end, none in its next attempt")
    func aContextThatOutlivesItsAttemptIsInert() async throws {
        let scheduler = Scheduler(configuration: .init(localSlots: 1, seed: 11))
        async let running: Void = scheduler.run()
        var reader = EventReader(await scheduler.events(includeOutput: true))
        // Each attempt leaves a task that reports once the test lets it, then says it has.
        let (gate, open) = AsyncStream.makeStream(of: Void.self)
        let (reported, done) = AsyncStream.makeStream(of: Void.self)
        let leftBehind = Locked<[Task<Void, Never>]>([])
        var spec = JobSpec(work: .closure { context in
            let task = Task.detached {
                for await _ in gate { break }
                context.log("late, from attempt \(context.attempt)")
                context.reportProgress(0.5)
                done.yield()
            }
            leftBehind.withLock { $0.append(task) }
            context.log("attempt \(context.attempt)")
            if context.attempt == 1 { throw CancellationError() }
        })
        spec.retry = .retries(1, backoff: .zero)
        let id = try await scheduler.submit(spec)
        // When the first attempt has failed and the second began
        _ = await reader.next { if case .started(id, 2, _, _) = $0 { true } else { false } }
        // and the first one's task reports
        open.yield()
        var doneIterator = reported.makeAsyncIterator()
        _ = await doneIterator.next()
        // Then nothing of it reaches the second attempt; after the job's end, neither does the second one's.
        #expect(await reader.final(of: id)?.name == "succeeded")
        open.yield()
        _ = await doneIterator.next()
        // (A job submitted after that ends after anything those tasks could have published.)
        let marker = try await scheduler.submit(JobSpec(work: .closure { _ in }))
        _ = await reader.final(of: marker)
        let reportedLate = reader.seen.contains {
            switch $0.kind {
            case .output(id, let line): line.text.hasPrefix("late")
            case .progress(id, _): true
            default: false
            }
        }
        #expect(!reportedLate, "\(reader.seen.map(\.kind))")
        #expect(await scheduler.output(of: id).lines.map(\.text).filter { $0.hasPrefix("late") }.isEmpty)
        open.finish()
        for task in leftBehind.withLock({ $0 }) { await task.value }
        await scheduler.shutdown(.graceful)
        await running
    }
}
