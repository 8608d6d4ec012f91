import Foundation
import JobtopTestSupport
@testable import Scheduler
import Testing
@testable import TUI

/// The table's order is kept one event at a time (``TableOrder``): after every event it must be
/// exactly what a full sort and filter of the jobs gives, on tables big enough for the chunks
/// to split, merge away and be dropped from.
@Suite("Table order")
struct TableOrderTests {
    /// A generator with a seed (the engine's own): the same run every time.
    struct Seeded: RandomNumberGenerator {
        private var generator: IdentifierGenerator
        init(seed: UInt64) { generator = IdentifierGenerator(seed: seed) }
        mutating func next() -> UInt64 { generator.nextUInt64() }
    }

    /// A random run of 3,000 jobs (starts, finishes, retries, requeues, new priorities, new
    /// jobs, old finished jobs dropped) on a model with `sort` and `filter`.
    static func randomRun(sort: SortKey, filter: String, seed: UInt64, check: (DashboardModel, Int) -> Void) {
        var random = Seeded(seed: seed)
        var model = DashboardModel(title: "t", finishedRetention: 400)
        var seq: UInt64 = 0
        func apply(_ kind: SchedulerEvent.Kind) {
            seq += 1
            model.apply(SchedulerEvent(seq: seq, time: .milliseconds(Int64(seq)), kind: kind))
        }
        apply(.workerJoined(localOne))
        var next = 1
        func submit() {
            let names = ["build", "test", "Deploy", "lint"]
            apply(.submitted(JobInfo(
                id: jobID(next), name: next % 3 == 0 ? "\(names[next % 4]) \(next)" : nil,
                command: "echo \(names[(next / 4) % 4]) \(next)", priority: Int.random(in: -3...3, using: &random),
                submittedAt: .milliseconds(Int64(seq)))))
            next += 1
        }
        for _ in 0..<3_000 { submit() }
        // The sort key and the filter, typed as a user would.
        while model.sort != sort { _ = model.handle(.char("s")) }
        if !filter.isEmpty {
            _ = model.handle(.char("/"))
            for character in filter { _ = model.handle(.char(character)) }
            _ = model.handle(.enter)
        }
        check(model, 0)
        for step in 1...6_000 {
            let id = jobID(Int.random(in: 1..<next, using: &random))
            guard let job = model.board.jobs[id] else {
                submit()
                continue
            }
            switch job.state {
            case .queued:
                if Bool.random(using: &random) {
                    apply(.started(id, attempt: job.attempts + 1, maxAttempts: 3, worker: localOne.id))
                } else {
                    apply(.reprioritized(id, from: job.priority, to: Int.random(in: -5...5, using: &random)))
                }
            case .running(_, let attempt, _, _):
                switch Int.random(in: 0..<4, using: &random) {
                case 0: apply(.succeeded(id, attempts: attempt))
                case 1: apply(.failed(id, reason: .exitStatus(1), attempts: attempt))
                case 2: apply(.retryScheduled(id, failedAttempt: attempt, reason: .exitStatus(2), nextAttempt: attempt + 1,
                                              at: .milliseconds(Int64(seq) + Int64.random(in: 1...500, using: &random))))
                default: apply(.requeued(id, reason: .workerLost(.closedByWorker)))
                }
            case .waitingForRetry:
                apply(.requeued(id, reason: .retryDue))
            default:
                if Bool.random(using: &random) { apply(.requeued(id, reason: .retriedByUser)) } else { submit() }
            }
            check(model, step)
        }
    }

    @Test("Every sort key, with and without filters: the kept order is the full sort's after every event",
          arguments: [(SortKey.state, ""), (.state, "queued"), (.priority, "running"), (.name, "test"), (.newest, "done"), (.name, "")])
    func keptOrderIsTheFullSort(sort: SortKey, filter: String) async {
        // About ten seconds of CPU per case in a debug build: on a thread of its own, so the six
        // cases do not hold the cooperative pool (two threads on a two-core machine) and starve
        // every other test's tasks while they run.
        let (checked, mismatches, wrongCounts) = await offThePool {
            var (checked, mismatches, wrongCounts) = (0, 0, 0)
            Self.randomRun(sort: sort, filter: filter, seed: 13) { model, step in
                // Every event on a small stretch, then every 97th (a full sort per event is slow).
                guard step < 300 || step % 97 == 0 else { return }
                checked += 1
                let expected = DashboardModel.ordered(model.board.jobs.values, sort: sort, filter: filter, ordinals: model.board.ordinals)
                if model.orderedIDs != expected { mismatches += 1 }
                if model.table.count != expected.count { wrongCounts += 1 }
            }
            return (checked, mismatches, wrongCounts)
        }
        #expect(checked > 300)
        #expect(mismatches == 0)
        #expect(wrongCounts == 0)
    }

    @Test("Filter 'queued' on 2,500 jobs: a job that starts leaves the view at once, a requeued one comes back")
    @MainActor
    func filteredViewNeverLags() {
        var builder = ModelBuilder()
        for n in 1...2_500 { builder.submit(n, "job \(n)", at: Double(n) / 1000) }
        var model = builder.model
        _ = model.handle(.char("/"))
        for character in "queued" { _ = model.handle(.char(character)) }
        _ = model.handle(.enter)
        model.prepare(tableRows: 20)
        #expect(model.orderedIDs.count == 2_500)
        builder.model = model
        // When the first job (on screen) starts
        builder.start(1, at: 5)
        model = builder.model
        model.prepare(tableRows: 20)
        // Then no row shows it, on the very next frame
        #expect(!model.table.contains(jobID(1)))
        #expect(model.table.ids(0..<20).allSatisfy { model.board.jobs[$0]?.state == .queued })
        #expect(model.table.count == 2_499)
        let lines = screen(model, rows: 30, columns: 100).lines
        #expect(!lines.contains { $0.contains("running") && $0.contains("job 1 ") })
        // and requeued it comes back in its place (first: same priority, submitted first)
        builder.apply(.requeued(jobID(1), reason: .workerLost(.closedByWorker)), at: 6)
        model = builder.model
        model.prepare(tableRows: 20)
        #expect(model.table[0] == jobID(1))
    }

    @Test("Positions and row ranges agree with the order across chunk boundaries")
    func positionsAndRanges() {
        var builder = ModelBuilder()
        for n in 1...5_000 { builder.submit(n, "job \(n)", priority: n % 5, at: Double(n) / 1000) }
        let model = builder.prepared()
        let all = model.orderedIDs
        #expect(all.count == 5_000)
        for index in stride(from: 0, to: 5_000, by: 37) {
            #expect(model.table[index] == all[index])
            #expect(model.table.position(of: all[index]) == index)
        }
        #expect(model.table.ids(1_020..<1_040) == Array(all[1_020..<1_040]))
        #expect(model.table.ids(4_990..<5_010) == Array(all[4_990...]))
        #expect(model.table.position(of: jobID(9_999)) == nil)
    }

    @Test("Before its index is made (after a snapshot, until the frame is out) the table answers as after")
    func answersTheSameBeforeItsIndexIsMade() {
        var builder = ModelBuilder()
        for n in 1...3_000 { builder.submit(n, "job \(n)", priority: n % 7, at: Double(n) / 1000) }
        var jobs = Array(builder.model.board.jobs.values)
        var random = Seeded(seed: 5)
        jobs.shuffle(using: &random)
        var pending = TableOrder()
        pending.rebuild(jobs, ordinals: builder.model.board.ordinals, sort: .state, filter: "")
        #expect(pending.isIndexPending)
        var indexed = pending
        indexed.indexRows()
        #expect(!indexed.isIndexPending)
        #expect(pending.all == indexed.all && pending.count == 3_000)
        let probes = stride(from: 1, through: 3_000, by: 97).map { jobID($0) } + [jobID(9_999)]
        for id in probes {
            #expect(pending.contains(id) == indexed.contains(id))
            #expect(pending.position(of: id) == indexed.position(of: id))
        }
        #expect(pending.inOrder(Set(probes)) == indexed.inOrder(Set(probes)))
        // The first change makes the index, then moves the job as before.
        var moved = builder.model.board.jobs[jobID(10)]!
        moved.priority = 100
        pending.update(jobID(10), job: moved, ordinal: builder.model.board.ordinals[jobID(10)]!)
        indexed.update(jobID(10), job: moved, ordinal: builder.model.board.ordinals[jobID(10)]!)
        #expect(!pending.isIndexPending)
        #expect(pending.all == indexed.all && pending[0] == jobID(10))
    }
}

extension TableOrderTests {
    @Test("A job of one submission that becomes ready later is listed where the scheduler runs it: its submission place, ahead of the jobs after it (the list put it last when seen from a snapshot)")
    func aJobReadyLaterIsListedInItsSubmissionPlace() throws {
        // Given one submission seen by a dashboard from its snapshot (as attach sees it): z0 due
        // in 2 s, then z1 and z2 queued, no slot to run them
        var core = SchedulerCore(configuration: .init(seed: 1))
        let jobs = (0..<3).map { _ in JobID(uuid: UUID()) }
        var z0 = JobSpec.shell("echo z0", name: "z0")
        z0.notBefore = .delay(.seconds(2))
        _ = try core.submit(contentsOf: [z0, .shell("echo z1", name: "z1"), .shell("echo z2", name: "z2")], ids: jobs, now: .zero)
        var model = DashboardModel(title: "jobtop")
        model.apply(SchedulerEvent(seq: 1, time: .seconds(1), kind: .snapshot(core.snapshot(seq: 1, now: .seconds(1), progress: { _ in nil }))))
        // When z0's time comes
        var seq: UInt64 = 1
        for case .emit(let kind) in core.timersDue(now: .seconds(2)) {
            seq += 1
            model.apply(SchedulerEvent(seq: seq, time: .seconds(2), kind: kind))
        }
        // Then it is listed first, as the scheduler queued it
        model.prepare(tableRows: 10)
        #expect(core.queuedInOrder == jobs)
        #expect(model.orderedIDs == jobs)
    }
}
