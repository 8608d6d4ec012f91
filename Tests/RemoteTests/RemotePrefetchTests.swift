import Foundation
import JobtopTestSupport
import Scheduler
import Testing

@testable import SchedulerRemote

#if canImport(Glibc)
import Glibc
#endif

/// A worker holds assignments beyond its free slots, so a slot never waits for a round trip.
@Suite("Remote prefetch", .serialized, .timeLimit(.minutes(2)))
struct RemotePrefetchTests {
    @Test("A one-slot worker holds a second assignment (prefetch 1) and starts it only when its slot frees")
    func oneSlotWorkerHoldsOneMore() async throws {
        // Given a coordinator with prefetch 1 and a worker with one slot.
        let scratch = try Scratch()
        let coordinator = try await Coordinator.start(prefetch: 1)
        let worker = try JobtopProcess.worker(for: coordinator, slots: 1, name: "one-slot")
        _ = await coordinator.joined(1)
        let started = Locked(0)
        let events = await coordinator.scheduler.events(includeOutput: false)
        let watcher = Task {
            for await event in events {
                if case .started = event.kind { started.withLock { $0 += 1 } }
            }
        }
        defer { watcher.cancel() }

        // When two jobs are submitted, each marking its start and waiting for its own go-file.
        let names = ["a", "b"]
        for name in names {
            let mark = scratch.file("started-\(name)")
            let go = scratch.file("go-\(name)")
            _ = try await coordinator.scheduler.submit(.shell("touch '\(mark)'; while [ ! -e '\(go)' ]; do sleep 0.02; done"))
        }

        // Then both are assigned to the worker at once, but only one runs there.
        #expect(await eventually(within: .seconds(60)) { started.withLock { $0 } == 2 })
        let marks = names.map { scratch.file("started-\($0)") }
        #expect(await eventually(within: .seconds(60)) { marks.contains { FileManager.default.fileExists(atPath: $0) } })
        let first = try #require(names.first { FileManager.default.fileExists(atPath: scratch.file("started-\($0)")) })
        let second = names.first { $0 != first }!
        #expect(!FileManager.default.fileExists(atPath: scratch.file("started-\(second)")))

        // And when the first ends, the held one starts on the worker.
        try scratch.write("go-\(first)", "")
        #expect(await eventually(within: .seconds(60)) { FileManager.default.fileExists(atPath: scratch.file("started-\(second)")) })
        try scratch.write("go-\(second)", "")
        worker.send(SIGTERM)
        #expect(await worker.wait(atMost: .seconds(60))?.status == 0)
        await coordinator.stop()
    }
}
