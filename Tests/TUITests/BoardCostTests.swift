import Foundation
import Scheduler
import Testing
@testable import TUI

/// The board's work per event must not grow with the number of jobs. Timings belong in the
/// benchmark (Scripts/bench-dashboard.sh); these count the O(jobs) passes instead.

extension JobBoard {
    /// Finished jobs still in the table.
    var finishedKept: Int { jobs.values.filter(\.state.isFinished).count }
}

@Suite("Board cost per event")
@MainActor
struct BoardCostTests {
    /// Feeds a bare board numbered events, one millisecond apart.
    struct Feeder {
        var board: JobBoard
        var seq: UInt64 = 0

        mutating func apply(_ kind: SchedulerEvent.Kind) {
            seq += 1
            board.apply(SchedulerEvent(seq: seq, time: .milliseconds(Int64(seq)), kind: kind))
        }

        /// Submits, starts and finishes job `n`.
        mutating func run(_ n: Int) {
            apply(.submitted(JobInfo(id: jobID(n), command: "job \(n)", submittedAt: .milliseconds(Int64(seq)))))
            apply(.started(jobID(n), attempt: 1, maxAttempts: 1, worker: localOne.id))
            apply(.succeeded(jobID(n), attempts: 1))
        }
    }

    @Test("Old finished jobs are dropped oldest first without searching the table")
    func retentionWithoutSweeps() {
        // Given a board that keeps 100 finished jobs
        var feeder = Feeder(board: JobBoard(finishedRetention: 100, logLimit: 10))
        feeder.apply(.workerJoined(localOne))
        // When 5,000 jobs finish
        for n in 1...5_000 { feeder.run(n) }
        // Then the counts keep them all, the table exactly the newest 100, what the board keeps
        // per job went with them, and the table was never gone through (an older board
        // searched it on every finish after the first 200: 4,800 times)
        let board = feeder.board
        #expect(board.count(.succeeded) == 5_000)
        #expect(board.finishedKept == 100)
        #expect(Set(board.jobs.keys) == Set((4_901...5_000).map(jobID)))
        #expect(Set(board.ordinals.keys) == Set(board.jobs.keys))
        #expect(board.fullPasses == 0, "gone through \(board.fullPasses) times")
    }

    @Test("A job that finished, ran again and finished again is kept as a new finish, not dropped by its old one")
    func retriedJobKeepsItsPlace() {
        // Given a board that keeps 3 finished jobs, and job 1 finished first
        var feeder = Feeder(board: JobBoard(finishedRetention: 3, logLimit: 10))
        feeder.apply(.workerJoined(localOne))
        feeder.run(1)
        feeder.run(2)
        // When job 1 is retried and finishes again, then two more jobs finish
        feeder.apply(.requeued(jobID(1), reason: .retriedByUser))
        feeder.apply(.started(jobID(1), attempt: 1, maxAttempts: 1, worker: localOne.id))
        feeder.apply(.failed(jobID(1), reason: .exitStatus(1), attempts: 1))
        feeder.run(3)
        feeder.run(4)
        // Then job 2 (the oldest finish) is dropped, job 1 (finished after it) is kept
        #expect(Set(feeder.board.jobs.keys) == [jobID(1), jobID(3), jobID(4)])
        #expect(feeder.board.finishedKept == 3)
        #expect(feeder.board.count(.failed) == 1)
        #expect(feeder.board.count(.succeeded) == 3)
    }

    @Test("A job retried after it finished leaves the finished jobs kept, and a snapshot recounts them")
    func finishedKeptFollowsState() {
        var feeder = Feeder(board: JobBoard(finishedRetention: 100, logLimit: 10))
        feeder.apply(.workerJoined(localOne))
        for n in 1...3 { feeder.run(n) }
        #expect(feeder.board.finishedKept == 3)
        feeder.apply(.requeued(jobID(2), reason: .retriedByUser))
        #expect(feeder.board.finishedKept == 2)
        #expect(feeder.board.count(.queued) == 1)
    }

    @Test("A worker that joins twice is listed once, and its name is found without a search")
    func workerNames() {
        var feeder = Feeder(board: JobBoard())
        feeder.apply(.workerJoined(localOne))
        feeder.apply(.workerJoined(localTwo))
        feeder.apply(.workerJoined(localOne))
        #expect(feeder.board.workers.map(\.id) == [localTwo.id, localOne.id])
        #expect(feeder.board.workerName(localOne.id) == "local-1")
        feeder.apply(.workerLeft(localOne.id, reason: .slotsReduced))
        #expect(feeder.board.workerName(localOne.id) == nil)
        #expect(feeder.board.workers.map(\.id) == [localTwo.id])
    }

    @Test("The worker panel of 2,000 busy workers shows those that fit, then how many more")
    func manyWorkers() {
        // Given 2,000 single-slot workers, each running one job
        var builder = ModelBuilder(slots: 1)
        for n in 1...2_000 {
            let worker = WorkerDescriptor(
                id: WorkerID(uuid: UUID(uuidString: String(format: "%08X-1111-4000-8000-000000000000", n))!),
                name: "w\(n)", kind: .local, slots: 1)
            builder.apply(.workerJoined(worker))
            builder.submit(n, "job \(n)")
            builder.apply(.started(jobID(n), attempt: 1, maxAttempts: 1, worker: worker.id))
        }
        // When the screen is drawn (24 rows: a panel of 4 lines)
        let lines = screen(builder.model).lines
        // Then
        #expect(lines.contains { $0.contains("local-1") && $0.contains("idle") })
        #expect(lines.contains { $0.contains("w1 ") && $0.contains("busy") && $0.contains("job 1") })
        #expect(lines.contains { $0.contains("… 1998 more") })
    }
}
