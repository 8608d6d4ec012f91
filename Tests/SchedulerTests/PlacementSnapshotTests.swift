import Scheduler
import Testing

extension SchedulerTests {
    @Test("Where a worker placed a running job is in snapshots, so a late subscriber (attach, status) sees it; it goes when the attempt ends")
    func placementsInSnapshots() async throws {
        let harness = await Harness()
        try await Self.run(harness) { h in
            // Given a running job its worker placed (a Slurm id and reason)
            let id = try await h.scheduler.submit(.shell("a"))
            let assignment = await h.nextStart()
            assignment.reporter.placed("4711 Priority")
            // Then the snapshot carries it, and a mirror fed by a new subscription has it from
            // the subscription's first event (the snapshot), with no placed event after it
            #expect(await h.scheduler.snapshot().placements == [id: "4711 Priority"])
            let events = await h.scheduler.events()
            var iterator = events.makeAsyncIterator()
            var mirror = SchedulerMirror()
            let first = try #require(await iterator.next())
            mirror.apply(first)
            #expect(mirror.placements == [id: "4711 Priority"])
            // When the attempt ends, the next snapshot has no placement for it
            h.worker.release(id)
            while let event = await iterator.next() {
                mirror.apply(event)
                if case .succeeded(id, _) = event.kind { break }
            }
            #expect(mirror.placements.isEmpty)
            #expect(await h.scheduler.snapshot().placements.isEmpty)
        }
    }
}
