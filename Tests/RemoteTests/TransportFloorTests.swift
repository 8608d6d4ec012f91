import Testing

import SchedulerRemote

/// The benchmark's transport floor really crosses gRPC: every assignment is answered, in order,
/// over a real loopback connection (its timings are the benchmark's, not checked here).
@Suite("Transport floor")
struct TransportFloorTests {
    // A limit for a hang only: at the start of `swift test` every suite runs at once on two cores.
    @Test("Every assignment of the floor is answered, one round trip each", .timeLimit(.minutes(3)))
    func everyAssignmentIsAnswered() async throws {
        let coordinator = try await TransportFloor.Coordinator(count: 50)
        #expect(coordinator.port > 0)
        let worker = Task { try await TransportFloor.runWorker(port: coordinator.port) }
        let trips = await coordinator.roundTrips()
        #expect(trips.count == 50)
        #expect(trips.allSatisfy { $0 > .zero })
        try await worker.value  // the worker's call ends when the coordinator's stream does
        await coordinator.stop()
    }
}
