import JobtopTestSupport
import Testing
@testable import Scheduler

/// What a program embedding the library may get wrong is refused, not left half-done.
@Suite(.timeLimit(.minutes(1)))
struct LibraryMisuseTests {
    @Test("A submission after a drain has ended is refused (it was taken, shown running for good, and its cancel did nothing)")
    func submitAfterADrainIsRefused() async throws {
        let scheduler = Scheduler(configuration: .init(localSlots: 1))
        let running = Task { await scheduler.run() }
        await scheduler.shutdown(.drain)
        await running.value
        await #expect(throws: SchedulerError(.shuttingDown, "the scheduler has stopped; no new jobs")) {
            try await scheduler.submit(.shell("echo never"))
        }
        #expect(await scheduler.snapshot().total == 0)
    }

    @Test("A timeout of zero or less is refused at submission (every attempt timed out 'after 0ms'), naming the job")
    func aTimeoutOfZeroIsRefused() async throws {
        let scheduler = Scheduler(configuration: .init(localSlots: 0))
        for timeout in [Duration.zero, .seconds(-1)] {
            let spec = JobSpec(work: .shell("true"), timeout: timeout)
            await #expect(throws: SchedulerError(.invalidArgument, "job 2 of the submission has a timeout of \(timeout): it must be more than zero")) {
                try await scheduler.submit(contentsOf: [.shell("true"), spec])
            }
        }
        #expect(await scheduler.snapshot().total == 0, "nothing of a refused submission is taken")
    }

    @Test("A job submitted before run() waits queued until run() begins: it showed as started with no process, and its timeout ran out before it could run")
    func nothingStartsBeforeRun() async throws {
        let clock = ManualClock()
        let scheduler = Scheduler(configuration: .init(localSlots: 1), clock: clock)
        let events = await scheduler.events(includeOutput: false)
        let id = try await scheduler.submit(JobSpec(work: .closure { _ in }, timeout: .seconds(5)))
        #expect(await scheduler.info(of: id)?.state == .queued)
        #expect(await scheduler.snapshot().counts[.running] ?? 0 == 0)
        // Longer than its timeout passes before the host runs the scheduler.
        clock.advance(by: .seconds(10))
        let running = Task { await scheduler.run() }
        var kinds: [String] = []
        for await event in events {
            switch event.kind {
            case .started(let job, _, _, _) where job == id:
                kinds.append("started at \(event.time)")
            case .succeeded(let job, _) where job == id:
                kinds.append("succeeded")
            case .failed(let job, let reason, _) where job == id:
                kinds.append("failed: \(reason)")
            default:
                continue
            }
            if event.kind.isFinal { break }
        }
        #expect(kinds == ["started at \(SchedulerTime.seconds(10))", "succeeded"])
        await scheduler.shutdown(.graceful)
        await running.value
    }

    @Test("RetryPolicy.retries(Int.max) is as many attempts as there can be (it trapped on an overflow)")
    func retriesAtTheLimit() {
        #expect(RetryPolicy.retries(.max).maxAttempts == .max)
        #expect(RetryPolicy.retries(2).maxAttempts == 3)
    }
}
