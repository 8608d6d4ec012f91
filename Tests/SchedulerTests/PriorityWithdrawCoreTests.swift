import Foundation
import Testing
@testable import Scheduler

/// A queued job of a higher priority than one a worker holds behind a busy slot takes its
/// place there: held, the lower one would start first when the slot frees.
@Suite struct PriorityWithdrawCoreTests {
    typealias Fixture = WithdrawCoreTests

    /// A core whose `deep` worker runs `running` (begun) and holds `held` behind it, each of
    /// priority 0, with room for `depth` held in all.
    static func holding(held count: Int, depth: Int? = nil) -> (core: SchedulerCore, worker: WorkerDescriptor, running: JobID, held: [JobID], ids: IdentifierGenerator) {
        var core = SchedulerCore(configuration: .init(seed: 1))
        var ids = IdentifierGenerator(seed: 5)
        var deep = Fixture.holder
        deep.id = WorkerID()
        deep.slots = 1 + (depth ?? count)
        _ = core.workerJoined(deep, now: .zero)
        let running = ids.nextJobID()
        let held = (0..<count).map { _ in ids.nextJobID() }
        let specs = [JobSpec.shell("long")] + held.map { _ in JobSpec.shell("held") }
        let started = Fixture.starts(try! core.submit(contentsOf: specs, ids: [running] + held, now: .zero).actions)
        #expect(started.count == count + 1)
        _ = core.attemptBegan(running, attempt: 1, now: .seconds(1))
        return (core, deep, running, held, ids)
    }

    @Test("A job submitted with a higher priority than one a worker holds takes its place: that one is asked back once, given back uncounted (saying why), and the better job goes to that worker")
    func higherPriorityTakesTheHeldPlace() throws {
        var (core, worker, _, held, ids) = Self.holding(held: 1)
        let urgent = ids.nextJobID()
        // When a job of a higher priority is submitted while nothing is free
        let submitted = try core.submit(contentsOf: [.shell("urgent", priority: 5)], ids: [urgent], now: .seconds(2)).actions
        // Then the held job is asked back from its worker, once
        #expect(Fixture.withdrawals(submitted).map(\.0) == held)
        #expect(Fixture.withdrawals(submitted).map(\.2) == [worker.id])
        #expect(Fixture.withdrawals(core.timersDue(now: .seconds(3))).isEmpty)
        // When the worker gives it back, then it is queued again uncounted and the urgent job takes its place
        let given = core.jobFinished(held[0], attempt: 1, worker: worker.id, termination: .withdrawn, now: .seconds(4))
        #expect(given.contains { if case .emit(.requeued(held[0], .withdrawnForPriority)) = $0 { true } else { false } })
        #expect(Fixture.starts(given).map(\.0) == [urgent])
        #expect(Fixture.starts(given).map(\.2) == [worker.id])
        #expect(core.info(of: held[0])?.state == .queued && core.info(of: held[0])?.attempts == 0)
        // And nothing more is asked back: the job now queued is the lower one
        #expect(Fixture.withdrawals(given).isEmpty)
        #expect(RequeueReason.withdrawnForPriority.description == "withdrawn unbegun from its worker for a job of higher priority")
    }

    @Test("No job is asked back for a queued one of the same or a lower priority, nor while everything is paused")
    func notForEqualPriority() throws {
        var (core, _, _, _, ids) = Self.holding(held: 1)
        #expect(Fixture.withdrawals(try core.submit(contentsOf: [.shell("same")], ids: [ids.nextJobID()], now: .seconds(2)).actions).isEmpty)
        #expect(Fixture.withdrawals(try core.submit(contentsOf: [.shell("low", priority: -3)], ids: [ids.nextJobID()], now: .seconds(2)).actions).isEmpty)
        _ = core.pause(now: .seconds(3))
        var (paused, _, _, _, more) = Self.holding(held: 1)
        _ = paused.pause(now: .seconds(2))
        #expect(Fixture.withdrawals(try paused.submit(contentsOf: [.shell("urgent", priority: 5)], ids: [more.nextJobID()], now: .seconds(3)).actions).isEmpty)
    }

    @Test("One held job is asked back per queued job that outranks it, the lowest and latest first; a second urgent job asks for one more")
    func onePerOutrankingJob() throws {
        // Given a worker that holds three jobs of priorities 0, -1 and 0
        var core = SchedulerCore(configuration: .init(seed: 1))
        var ids = IdentifierGenerator(seed: 5)
        var deep = Fixture.holder
        deep.slots = 4
        _ = core.workerJoined(deep, now: .zero)
        let running = ids.nextJobID()
        let (a, b, c) = (ids.nextJobID(), ids.nextJobID(), ids.nextJobID())
        let specs: [JobSpec] = [.shell("long", priority: 9), .shell("a"), .shell("b", priority: -1), .shell("c")]
        _ = try core.submit(contentsOf: specs, ids: [running, a, b, c], now: .zero)
        _ = core.attemptBegan(running, attempt: 1, now: .seconds(1))
        // When one urgent job comes, then only the one that would start last is asked back
        #expect(Fixture.withdrawals(try core.submit(contentsOf: [.shell("u1", priority: 5)], ids: [ids.nextJobID()], now: .seconds(2)).actions).map(\.0) == [b])
        // When a second comes, then the later of the two of priority 0
        #expect(Fixture.withdrawals(try core.submit(contentsOf: [.shell("u2", priority: 5)], ids: [ids.nextJobID()], now: .seconds(3)).actions).map(\.0) == [c])
        // When one of priority 0 comes, then nothing more (it does not outrank what is held)
        #expect(Fixture.withdrawals(try core.submit(contentsOf: [.shell("z")], ids: [ids.nextJobID()], now: .seconds(4)).actions).isEmpty)
    }

    @Test("A new priority can make a queued job outrank a held one (raised) or a held one fall below a queued one (lowered): either asks the held one back")
    func reprioritizeAsksBack() throws {
        var (core, _, _, held, ids) = Self.holding(held: 1)
        let queued = ids.nextJobID()
        _ = try core.submit(contentsOf: [.shell("queued")], ids: [queued], now: .seconds(2))
        #expect(Fixture.withdrawals(try core.reprioritize(queued, to: 3, now: .seconds(3))).map(\.0) == held)

        var (other, _, _, otherHeld, more) = Self.holding(held: 1)
        _ = try other.submit(contentsOf: [.shell("queued")], ids: [more.nextJobID()], now: .seconds(2))
        #expect(Fixture.withdrawals(try other.reprioritize(otherHeld[0], to: -2, now: .seconds(3))).map(\.0) == otherHeld)
    }

    @Test("A request that crosses its job's start (the worker's slot freed first): the urgent jobs take the rooms that free up, and no more is asked back than they need")
    func crossedRequest() throws {
        var (core, worker, running, held, ids) = Self.holding(held: 3)
        let urgent = [ids.nextJobID(), ids.nextJobID()]
        let specs = [JobSpec.shell("u1", priority: 5), .shell("u2", priority: 5)]
        // The two held last are asked back
        #expect(Fixture.withdrawals(try core.submit(contentsOf: specs, ids: urgent, now: .seconds(2)).actions).map(\.0) == [held[2], held[1]])
        // When the worker's job ends and it starts the first of them before the request comes
        let ended = core.jobFinished(running, attempt: 1, worker: worker.id, termination: .exit(0), now: .seconds(3))
        #expect(Fixture.starts(ended).map(\.0) == [urgent[0]])
        let began = core.attemptBegan(held[2], attempt: 1, now: .seconds(3))
        // Then nothing more is asked back: the other request makes room for the second urgent job
        #expect(Fixture.withdrawals(began).isEmpty)
        let given = core.jobFinished(held[1], attempt: 1, worker: worker.id, termination: .withdrawn, now: .seconds(4))
        #expect(Fixture.starts(given).map(\.0) == [urgent[1]])
        #expect(Fixture.withdrawals(given).isEmpty)
    }

    @Test("Only queued jobs that may start count: a higher job of a group at its limit asks nothing back")
    func groupAtItsLimitAsksNothing() throws {
        // Given a worker that runs a job of group g (limit 1) and holds one of the default group
        var core = SchedulerCore(configuration: .init(seed: 1))
        var ids = IdentifierGenerator(seed: 5)
        _ = core.workerJoined(Fixture.holder, now: .zero)
        _ = try core.setGroupLimit("g", to: 1, now: .zero)
        var grouped = JobSpec.shell("long")
        grouped.group = "g"
        let (running, held) = (ids.nextJobID(), ids.nextJobID())
        _ = try core.submit(contentsOf: [grouped, .shell("held")], ids: [running, held], now: .zero)
        _ = core.attemptBegan(running, attempt: 1, now: .seconds(1))
        // When a job of g of a higher priority is queued, then nothing is asked back (g is at its limit)
        var urgent = JobSpec.shell("urgent", priority: 5)
        urgent.group = "g"
        #expect(Fixture.withdrawals(try core.submit(contentsOf: [urgent], ids: [ids.nextJobID()], now: .seconds(2)).actions).isEmpty)
        // When one of the default group comes, then it is
        #expect(Fixture.withdrawals(try core.submit(contentsOf: [.shell("other", priority: 5)], ids: [ids.nextJobID()], now: .seconds(3)).actions).map(\.0) == [held])
    }
}
