import Foundation
import Testing
@testable import Scheduler

/// A job held behind a busy slot goes to a worker that has one free: the core asks for it back.
@Suite struct WithdrawCoreTests {
    /// A remote worker that runs one job and holds one more behind it, and gives a held one
    /// back when asked.
    static let holder = WorkerDescriptor(
        id: WorkerID(), name: "holder", kind: .remote, slots: 2, holdsAttempts: true, ownSlots: 1, withdrawsHeld: true)
    static let other = WorkerDescriptor(id: WorkerID(), name: "other", kind: .remote, slots: 1, holdsAttempts: true)

    static func starts(_ actions: [SchedulerCore.Action]) -> [(JobID, Int, WorkerID)] {
        actions.compactMap { if case .start(let id, let attempt, let worker) = $0 { (id, attempt, worker) } else { nil } }
    }

    static func withdrawals(_ actions: [SchedulerCore.Action]) -> [(JobID, Int, WorkerID)] {
        actions.compactMap { if case .withdraw(let id, let attempt, let worker) = $0 { (id, attempt, worker) } else { nil } }
    }

    /// A core where `holder` runs `running` and holds `held`, and nothing is queued.
    static func holding() -> (core: SchedulerCore, running: JobID, held: JobID) {
        var core = SchedulerCore(configuration: .init(seed: 1))
        var ids = IdentifierGenerator(seed: 5)
        _ = core.workerJoined(holder, now: .zero)
        let (running, held) = (ids.nextJobID(), ids.nextJobID())
        let started = starts(try! core.submit(contentsOf: [.shell("long"), .shell("short")], ids: [running, held], now: .zero).actions)
        #expect(started.map(\.2) == [holder.id, holder.id])
        _ = core.attemptBegan(running, attempt: 1, now: .seconds(1))
        return (core, running, held)
    }

    @Test("A worker that joins idle gets the job another holds behind a busy slot: asked back, given back, started there, its attempt not counted")
    func idleWorkerTakesAHeldJob() throws {
        var (core, _, held) = Self.holding()
        // When a second worker joins with a slot free and nothing is queued
        let joined = core.workerJoined(Self.other, now: .seconds(2))
        // Then the held job is asked back from the worker that holds it
        #expect(Self.withdrawals(joined).map(\.0) == [held])
        #expect(Self.withdrawals(joined).map(\.2) == [Self.holder.id])
        // and asked once, however often dispatch runs meanwhile
        #expect(Self.withdrawals(core.timersDue(now: .seconds(3))).isEmpty)

        // When the holder gives it back, then it is requeued (not counted) and starts on the free worker
        let given = core.jobFinished(held, attempt: 1, worker: Self.holder.id, termination: .withdrawn, now: .seconds(4))
        #expect(given.contains { if case .emit(.requeued(held, .withdrawn)) = $0 { true } else { false } })
        let restarted = Self.starts(given)
        #expect(restarted.count == 1)
        #expect(restarted.first?.0 == held && restarted.first?.1 == 1 && restarted.first?.2 == Self.other.id)
        let info = try #require(core.info(of: held))
        #expect(info.attempts == 1)
        // And the holder's freed room is not filled by asking again
        #expect(Self.withdrawals(given).isEmpty)
    }

    @Test("A held job its worker began meanwhile stays there: the request lapses, and is not made again")
    func heldJobThatBeganStays() {
        var (core, _, held) = Self.holding()
        // (A retry of it is refused as of a job that waits at its worker, as status shows it.)
        #expect(throws: SchedulerError(.notAllowed, "only a failed, cancelled or skipped job can be retried; job \(held.short) was sent to its worker and waits there to run")) {
            _ = try core.retry(held, now: .seconds(1))
        }
        #expect(Self.withdrawals(core.workerJoined(Self.other, now: .seconds(2))).count == 1)
        // When it begins on the holder after all (the worker started it before the request came)
        _ = core.attemptBegan(held, attempt: 1, now: .seconds(3))
        // Then nothing more is asked back, and it ends there as any job does
        #expect(Self.withdrawals(core.timersDue(now: .seconds(4))).isEmpty)
        let ended = core.jobFinished(held, attempt: 1, worker: Self.holder.id, termination: .exit(0), now: .seconds(5))
        #expect(ended.contains { if case .emit(.succeeded(held, attempts: 1)) = $0 { true } else { false } })
    }

    @Test("A held job cancelled while it is asked back ends cancelled, its attempt not counted")
    func cancelledWhileWithdrawn() throws {
        var (core, _, held) = Self.holding()
        _ = core.workerJoined(Self.other, now: .seconds(2))
        _ = try core.cancel(held, now: .seconds(3))
        let ended = core.jobFinished(held, attempt: 1, worker: Self.holder.id, termination: .withdrawn, stopTookEffect: false, now: .seconds(4))
        #expect(ended.contains { if case .emit(.cancelled(held)) = $0 { true } else { false } })
        #expect(Self.starts(ended).isEmpty)
        let info = try #require(core.info(of: held))
        #expect(info.attempts == 0)
        #expect(info.state == .cancelled)
    }

    @Test("Nothing is asked back from a worker that cannot give it, nor while paused, nor when a queued job takes the free slot")
    func noWithdrawalWhenNotWanted() throws {
        // Given a holder that cannot give back what it holds
        var core = SchedulerCore(configuration: .init(seed: 1))
        var ids = IdentifierGenerator(seed: 5)
        var keeper = Self.holder
        keeper.id = WorkerID()
        keeper.withdrawsHeld = false
        _ = core.workerJoined(keeper, now: .zero)
        let two = [ids.nextJobID(), ids.nextJobID()]
        _ = try core.submit(contentsOf: [.shell("a"), .shell("b")], ids: two, now: .zero)
        #expect(Self.withdrawals(core.workerJoined(Self.other, now: .seconds(1))).isEmpty)

        // Given a paused holder's core
        var (paused, _, _) = Self.holding()
        _ = paused.pause(now: .seconds(1))
        #expect(Self.withdrawals(paused.workerJoined(Self.other, now: .seconds(2))).isEmpty)

        // Given a holder's core with one more job queued
        var (busy, _, _) = Self.holding()
        let third = ids.nextJobID()
        _ = try busy.submit(contentsOf: [.shell("c")], ids: [third], now: .seconds(1))
        let joined = busy.workerJoined(Self.other, now: .seconds(2))
        #expect(Self.withdrawals(joined).isEmpty)
        #expect(Self.starts(joined).map(\.0) == [third])
    }

    @Test("When the job asked back began after all, the next one its worker still holds is asked for the free slot at once")
    func lapsedRequestAsksForTheNext() throws {
        // Given a worker that runs one job and holds two behind it, of priorities 7 and 6
        var core = SchedulerCore(configuration: .init(seed: 1))
        var ids = IdentifierGenerator(seed: 5)
        var deep = Self.holder
        deep.slots = 3
        _ = core.workerJoined(deep, now: .zero)
        let (long, high, low) = (ids.nextJobID(), ids.nextJobID(), ids.nextJobID())
        let specs: [JobSpec] = [.shell("long", priority: 9), .shell("high", priority: 7), .shell("low", priority: 6)]
        _ = try core.submit(contentsOf: specs, ids: [long, high, low], now: .zero)
        _ = core.attemptBegan(long, attempt: 1, now: .seconds(1))
        // When another worker joins idle, the held job of the higher priority is asked back first
        #expect(Self.withdrawals(core.workerJoined(Self.other, now: .seconds(2))).map(\.0) == [high])
        // When its worker had started it already (the long job ended there as the request went)
        _ = core.jobFinished(long, attempt: 1, worker: deep.id, termination: .exit(0), now: .seconds(3))
        let began = core.attemptBegan(high, attempt: 1, now: .seconds(3))
        // Then the other job it holds is asked back for the slot still free
        #expect(Self.withdrawals(began).map(\.0) == [low])
    }

    @Test("A paused group's held job is taken back from its worker (held, it started when the worker's slot freed), waits in the queue while paused, and starts once resumed; it is not asked for a free slot meanwhile")
    func pausedGroupsHeldJobIsTakenBack() throws {
        var core = SchedulerCore(configuration: .init(seed: 1))
        var ids = IdentifierGenerator(seed: 5)
        _ = core.workerJoined(Self.holder, now: .zero)
        let (running, held) = (ids.nextJobID(), ids.nextJobID())
        var grouped = JobSpec.shell("short")
        grouped.group = "g"
        _ = try core.submit(contentsOf: [.shell("long"), grouped], ids: [running, held], now: .zero)
        _ = core.attemptBegan(running, attempt: 1, now: .seconds(1))
        // When its group is paused, then it is asked back
        #expect(Self.withdrawals(try core.pauseGroup("g", now: .seconds(1))).map(\.0) == [held])
        // and not asked again for a worker that joins idle
        #expect(Self.withdrawals(core.workerJoined(Self.other, now: .seconds(2))).isEmpty)
        // When it is given back, then it waits in the queue, uncounted, saying why
        let given = core.jobFinished(held, attempt: 1, worker: Self.holder.id, termination: .withdrawn, now: .seconds(3))
        #expect(given.contains { if case .emit(.requeued(held, .withdrawnForPause)) = $0 { true } else { false } })
        #expect(Self.starts(given).isEmpty)
        #expect(core.info(of: held)?.state == .queued && core.info(of: held)?.attempts == 0)
        // When the group is resumed, then it starts on the free slot
        #expect(Self.starts(try core.resumeGroup("g", now: .seconds(4))).map(\.0) == [held])
    }

    @Test("A pause of everything takes back the held, unbegun jobs from workers that give them back; a begun one runs on")
    func pauseTakesBackHeldJobs() throws {
        var (core, running, held) = Self.holding()
        let paused = core.pause(now: .seconds(2))
        #expect(paused.first.map { if case .emit(.paused) = $0 { true } else { false } } == true)
        #expect(Self.withdrawals(paused).map(\.0) == [held])
        #expect(!Self.withdrawals(paused).contains { $0.0 == running })
        // Given back, it waits; resumed, it goes out again
        #expect(Self.starts(core.jobFinished(held, attempt: 1, worker: Self.holder.id, termination: .withdrawn, now: .seconds(3))).isEmpty)
        #expect(Self.starts(core.resume(now: .seconds(4))).map(\.0) == [held])
    }

    @Test("A new priority of a job its worker holds reaches that worker (it starts what it holds by priority); not for a job that began there, nor for a local one")
    func newPriorityOfAHeldJobReachesItsWorker() throws {
        var (core, running, held) = Self.holding()
        let reprioritized = try core.reprioritize(held, to: 5, now: .seconds(2))
        let told = reprioritized.compactMap {
            if case .reprioritizeHeld(let id, let attempt, let worker, let priority) = $0 { (id, attempt, worker, priority) } else { nil }
        }
        #expect(told.count == 1)
        #expect(told.first?.0 == held && told.first?.1 == 1 && told.first?.2 == Self.holder.id && told.first?.3 == 5)
        let begun = try core.reprioritize(running, to: 5, now: .seconds(2))
        #expect(!begun.contains { if case .reprioritizeHeld = $0 { true } else { false } })

        var local = SchedulerCore(configuration: .init(seed: 1))
        _ = local.workerJoined(WorkerDescriptor(id: WorkerID(), name: "local-1", kind: .local, slots: 1), now: .zero)
        let id = JobID(uuid: UUID())
        _ = try local.submit(.shell("true"), id: id, now: .zero)
        #expect(!(try local.reprioritize(id, to: 5, now: .seconds(1))).contains { if case .reprioritizeHeld = $0 { true } else { false } })
    }
}
