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
        // Then the worker column shows the Slurm job id and the whole pending reason
        var lines = screen(board.model, columns: 120).lines
        #expect(lines.contains { $0.contains("00000001") && $0.contains("4711") }, "\(lines)")
        #expect(lines.contains { $0.contains("00000002") && $0.contains("4712 Priority") }, "\(lines)")
        // And the workers panel shows the worker, partition and all, busy with 2 of its 3
        #expect(lines.contains { $0.contains("slurm:debug") && $0.contains("2/3") }, "\(lines)")
        // When job 2's attempt ends, its placement goes
        board.apply(.succeeded(jobID(2), attempts: 1))
        lines = screen(board.model, columns: 120).lines
        #expect(!lines.contains { $0.contains("4712") }, "\(lines)")
        #expect(lines.contains { $0.contains("4711") })
    }

    @Test(
        "The worker column widens for long Slurm reasons on a wide screen, and cuts them on a narrow one",
        arguments: [
            (120, "12345678 ReqNodeNotAvail", true),
            (120, "12345678 PartitionTimeLimit", true),
            (90, "12345678", false),
        ] as [(Int, String, Bool)])
    func longReasons(columns: Int, shown: String, whole: Bool) {
        // Given a Slurm job pending for a reason longer than the column's usual 12 cells
        var board = ModelBuilder(slots: 1)
        board.apply(.workerJoined(Self.slurm))
        board.submit(1, "sleep 100")
        board.start(1, on: Self.slurm)
        let reason = shown.hasPrefix("12345678 P") ? "PartitionTimeLimit" : "ReqNodeNotAvail"
        board.apply(.placed(jobID(1), "12345678 \(reason)"))
        // When the screen is drawn
        let lines = screen(board.model, columns: columns).lines
        let row = lines.first { $0.contains("00000001") } ?? ""
        // Then the row shows the id and the reason (whole where there is room), and the name
        // column keeps its place
        #expect(row.contains(shown), "\(lines)")
        #expect(row.contains("sleep 100"), "\(lines)")
        #expect(row.contains("12345678 \(reason)") == whole, "\(row)")
    }
}

extension PlacementViewTests {
    @Test("A job sent to a worker that holds it says 'sent' until it begins there, in its row and its details")
    func sentUntilItBegins() {
        // Given a remote worker with one slot and one prefetched: two jobs handed to it
        let far = WorkerDescriptor(
            id: WorkerID(uuid: UUID(uuidString: "44444444-0000-4000-8000-000000000000")!), name: "far", kind: .remote, slots: 2,
            holdsAttempts: true, ownSlots: 1)
        var board = ModelBuilder(slots: 1)
        board.apply(.workerJoined(far))
        board.submit(1, "sleep 100")
        board.submit(2, "sleep 200")
        board.start(1, on: far)
        board.start(2, on: far)
        board.apply(.began(jobID(1), attempt: 1), at: 0.1)
        // Then the one that began runs, the other was sent and waits there
        var lines = screen(board.model, columns: 120).lines
        #expect(lines.contains { $0.contains("00000001") && $0.contains("running") }, "\(lines)")
        #expect(lines.contains { $0.contains("00000002") && $0.contains("sent") && !$0.contains("running") }, "\(lines)")
        // and the workers panel names the one it runs (the held one was handed over first), its
        // one slot busy and one job sent apart (it said 2/2)
        #expect(lines.contains { $0.contains("far") && $0.contains("busy +1 sent sleep 100") }, "\(lines)")
        // The header counts it apart too, and its slot as the one in use (it said 2 running)
        #expect(lines[0].contains("1 running · 1 sent"), "\(lines[0])")
        let details = DashboardView.jobDetails(board.model.board.jobs[jobID(2)]!, board: board.model.board, width: 100, now: .seconds(1), rows: 20)
        #expect(details.contains { $0.text.contains("sent: waiting at its worker for a free slot") }, "\(details.map(\.text))")
        // The events pane says each was sent, and started when it began (it said started on far
        // for both at once)
        #expect(board.model.board.log.map(\.text).suffix(3) == [
            "sleep 100 sent to far", "sleep 200 sent to far", "sleep 100 started on far",
        ], "\(board.model.board.log.map(\.text))")
        // and its output view's title says sent (it said running)
        var model = board.prepared()
        _ = model.handle(.down)
        #expect(model.selectedID == jobID(2))
        _ = model.handle(.enter)
        #expect(screen(model, columns: 120).lines[0].contains("sleep 200 · sent"), "\(screen(model, columns: 120).lines[0])")
        // Its details say where it was sent, and give it no run time
        let held = DashboardView.jobDetails(board.model.board.jobs[jobID(2)]!, board: board.model.board, width: 100, now: .seconds(1), rows: 20)
        #expect(held.contains { $0.text.contains("1 sent to far at 00:00: waiting at its worker for a free slot") }, "\(held.map(\.text))")
        // A dashboard attached now says the held one was sent, not started (it said both started)
        var attached = DashboardModel()
        let mirror = board.model.board.mirror
        var snapshot = SchedulerSnapshot(
            seq: 99, time: .seconds(2), counts: [.running: 2], totalSlots: 2,
            jobs: [jobID(1), jobID(2)].compactMap { mirror.jobs[$0] })
        snapshot.heldAttempts = mirror.heldAttempts
        attached.apply(snapshot: snapshot, seq: 99)
        #expect(attached.board.log.map(\.text).contains { $0.hasPrefix("sleep 200 sent to ") }, "\(attached.board.log.map(\.text))")
        #expect(attached.board.log.map(\.text).contains { $0.hasPrefix("sleep 100 started on ") }, "\(attached.board.log.map(\.text))")
        // When it begins, it runs
        board.apply(.began(jobID(2), attempt: 1), at: 5)
        #expect(board.model.board.log.last?.text == "sleep 200 started on far")
        lines = screen(board.model, columns: 120).lines
        #expect(lines.contains { $0.contains("00000002") && $0.contains("running") }, "\(lines)")
        // and a job on an ordinary worker never says sent
        board.submit(3, "true")
        board.start(3, on: localOne)
        #expect(!screen(board.model, columns: 120).lines.contains { $0.contains("sent") })
    }

    @Test("x on a job that runs on Slurm says signals reach only local jobs, and opens no menu")
    func signalRefusedBeforeTheMenu() {
        var board = ModelBuilder(slots: 1)
        board.apply(.workerJoined(Self.slurm))
        board.submit(1, "sleep 100")
        board.start(1, on: Self.slurm)
        var model = board.prepared()
        #expect(model.selectedID == jobID(1))
        #expect(model.handle(.char("x")).isEmpty)
        #expect(model.mode == .table)
        #expect(model.message?.text == "signals reach only local jobs; job \(jobID(1).short) runs on worker slurm:debug")
    }
}
