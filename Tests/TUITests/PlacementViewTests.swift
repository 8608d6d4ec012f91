import Foundation
import Scheduler
import Testing
@testable import TUI

/// A worker that says where it placed each job (the Slurm backend: the Slurm job id, and Slurm's
/// reason while it waits).
@MainActor
@Suite("The worker column shows where a worker placed the job")
struct PlacementViewTests {
    static let slurm = WorkerDescriptor(
        id: WorkerID(uuid: UUID(uuidString: "33333333-0000-4000-8000-000000000000")!), name: "slurm:debug", kind: .remote, slots: 3)

    @Test("A placed job shows the placement instead of the worker's name, until its attempt ends")
    func placement() {
        // Given a Slurm worker running two jobs, one placed pending and one running
        var board = ModelBuilder(slots: 1)
        board.apply(.workerJoined(Self.slurm))
        board.submit(1, "sleep 100")
        board.submit(2, "sleep 200")
        board.start(1, on: Self.slurm)
        board.start(2, on: Self.slurm)
        board.apply(.placed(jobID(1), "4711"))
        board.apply(.placed(jobID(2), "4712 Priority"))
        // Then the worker column shows the Slurm job id and the pending reason (cut to the
        // column's 12 cells)
        var lines = screen(board.model, columns: 120).lines
        #expect(lines.contains { $0.contains("00000001") && $0.contains("4711") }, "\(lines)")
        #expect(lines.contains { $0.contains("00000002") && $0.contains("4712 Priori…") }, "\(lines)")
        // And the workers panel shows the worker busy with 2 of its 3
        #expect(lines.contains { $0.contains("slurm:deb") && $0.contains("2/3") }, "\(lines)")
        // When job 2's attempt ends, its placement goes
        board.apply(.succeeded(jobID(2), attempts: 1))
        lines = screen(board.model, columns: 120).lines
        #expect(!lines.contains { $0.contains("4712") }, "\(lines)")
        #expect(lines.contains { $0.contains("4711") })
    }
}
