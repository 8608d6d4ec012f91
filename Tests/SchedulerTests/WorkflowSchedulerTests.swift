import JobtopTestSupport
import Testing
@testable import Scheduler

/// The README's workflow example on the real scheduler: real processes, a manual clock for the
/// start time, every step awaited from the event stream.
@Suite(.timeLimit(.minutes(1)))
struct WorkflowSchedulerTests {
    @Test func theReadmeWorkflowRunsEachJobWhenItMayAndNotBefore() async throws {
        let clock = ManualClock()
        let scheduler = Scheduler(configuration: .init(localSlots: 2, seed: 5), clock: clock)
        async let running: Void = scheduler.run()
        let events = await scheduler.events(includeOutput: false)
        var iterator = events.makeAsyncIterator()
        func waitFor(_ match: (SchedulerEvent.Kind) -> Bool) async -> Bool {
            while let event = await iterator.next() { if match(event.kind) { return true } }
            return false
        }

        try await scheduler.setGroupLimit("download", to: 2)
        try await scheduler.pauseGroup("gpu")
        var fetch = JobSpec.shell("true", name: "fetch-a")
        fetch.group = "download"
        var train = JobSpec.shell("true", name: "train")
        train.group = "gpu"
        train.dependencies = [.earlier(0)]
        var report = JobSpec.shell("true", name: "nightly-report")
        report.notBefore = .delay(.seconds(600))
        let ids = try await scheduler.submit(contentsOf: [fetch, train, report])
        #expect(await scheduler.info(of: ids[1])?.state == .blocked)
        #expect(await scheduler.info(of: ids[2])?.state == .scheduled(until: .seconds(600)))

        // fetch-a succeeds: train is released, but its group is paused.
        #expect(await waitFor { if case .released(ids[1]) = $0 { true } else { false } })
        #expect(await scheduler.info(of: ids[1])?.state == .queued)
        #expect(await scheduler.snapshot().groups.first { $0.group.name == "gpu" }?.queued == 1)
        try await scheduler.resumeGroup("gpu")
        #expect(await waitFor { if case .succeeded(ids[1], _) = $0 { true } else { false } })

        // The report waits for its time on the scheduler's clock.
        #expect(await scheduler.info(of: ids[2])?.state == .scheduled(until: .seconds(600)))
        await clock.waitForSleeper(until: .init(offset: .seconds(600)))
        clock.advance(by: .seconds(600))
        #expect(await waitFor { if case .succeeded(ids[2], _) = $0 { true } else { false } })
        #expect(await scheduler.snapshot().isSettled)
        await scheduler.shutdown(.graceful)
        await running
    }
}
