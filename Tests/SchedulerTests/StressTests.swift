import Testing
@testable import Scheduler

/// Many jobs with random cancels, reprioritizes and pauses while they run. Only invariants are
/// checked: every job ends exactly once, the counts add up, and every subscriber sees sequence
/// numbers that grow by one with no gap except right after a lag marker.
@Suite(.timeLimit(.minutes(5)))
struct StressTests {
    struct Flaky: Error {}

    @Test func tenThousandJobsWithRandomCommandsEachEndExactlyOnce() async throws {
        let jobCount = 10_000
        let scheduler = Scheduler(configuration: .init(localSlots: 4, subscriberBufferLimit: 1 << 22, seed: 77))
        async let running: Void = scheduler.run()
        let full = await scheduler.events()
        let small = await scheduler.events(bufferLimit: 64)
        // The small-buffer subscriber reads concurrently, more slowly than events come.
        async let smallCheck = Self.checkSequence(small, expectLag: false)

        var random = IdentifierGenerator(seed: 2024)
        var specs: [JobSpec] = []
        for index in 0..<jobCount {
            let roll = random.nextUInt64() % 100
            var spec: JobSpec
            if roll < 2 {
                spec = .shell(roll == 0 ? "true" : "exit 1")
            } else {
                let failsFirst = roll < 20
                let alwaysFails = roll < 25
                spec = JobSpec(work: .closure { context in
                    if alwaysFails || (failsFirst && context.attempt == 1) { throw Flaky() }
                    context.reportProgress(0.5)
                    await Task.yield()
                })
            }
            spec.name = "job-\(index)"
            spec.priority = Int(random.nextUInt64() % 5)
            spec.retry = RetryPolicy(maxAttempts: 2, initialBackoff: .milliseconds(1), jitter: 0.5)
            specs.append(spec)
        }
        var ids: [JobID] = []
        for chunk in stride(from: 0, to: jobCount, by: 500) {
            ids += try await scheduler.submit(contentsOf: Array(specs[chunk..<min(chunk + 500, jobCount)]))
            // Steer while they run.
            for _ in 0..<40 {
                let id = ids[Int(random.nextUInt64() % UInt64(ids.count))]
                switch random.nextUInt64() % 10 {
                case 0...3: try? await scheduler.cancel(id)
                case 4...8: try? await scheduler.reprioritize(id, to: Int(random.nextUInt64() % 10) - 5)
                default:
                    if random.nextUInt64() % 2 == 0 { await scheduler.pause() } else { await scheduler.resume() }
                }
            }
        }
        await scheduler.resume()

        var finals: [JobID: Int] = [:]
        var finalKinds: [String: Int] = [:]
        var lastSeq: UInt64?
        var gaps = 0
        var iterator = full.makeAsyncIterator()
        while finals.count < jobCount, let event = await iterator.next() {
            if case .snapshot = event.kind {
                lastSeq = event.seq
                continue
            }
            if let last = lastSeq, event.seq != last + 1 { gaps += 1 }
            lastSeq = event.seq
            if event.kind.isFinal, let id = event.kind.jobID {
                finals[id, default: 0] += 1
                finalKinds[event.kind.name, default: 0] += 1
            }
        }
        #expect(gaps == 0)
        #expect(finals.count == jobCount)
        #expect(finals.values.allSatisfy { $0 == 1 })
        #expect(Set(ids) == Set(finals.keys))

        let snapshot = await scheduler.snapshot()
        #expect(snapshot.isSettled)
        #expect(snapshot.count(.succeeded) == finalKinds["succeeded", default: 0])
        #expect(snapshot.count(.failed) == finalKinds["failed", default: 0])
        #expect(snapshot.count(.cancelled) == finalKinds["cancelled", default: 0])
        #expect(snapshot.total == jobCount)
        #expect(finalKinds["cancelled", default: 0] > 0 && finalKinds["failed", default: 0] > 0)

        await scheduler.shutdown(.graceful)
        await running
        let smallResult = await smallCheck
        #expect(smallResult.violations == 0)
        #expect(smallResult.events > 0)
    }

    /// Reads a subscription to its end; counts sequence numbers that do not follow the previous
    /// one, except the jump right after a lag marker (which a snapshot follows).
    static func checkSequence(_ stream: EventStream, expectLag: Bool) async -> (events: Int, violations: Int, lags: Int) {
        var last: UInt64?
        var violations = 0
        var lags = 0
        var count = 0
        var afterLag = false
        for await event in stream {
            count += 1
            switch event.kind {
            case .lagged:
                lags += 1
                afterLag = true
                last = nil
                continue
            case .snapshot:
                if let last, event.seq < last { violations += 1 }
                last = event.seq
                afterLag = false
                continue
            default:
                break
            }
            if let previous = last, event.seq != previous + 1, !afterLag { violations += 1 }
            last = event.seq
            if count % 64 == 0 { await Task.yield() }
        }
        return (count, violations, lags)
    }
}
