import Testing
@testable import Scheduler

/// Run policy in the engine: batches settle, halt on failure in the same step as the failure, and
/// a stop that comes after the work ended does not rewrite how it ended.
@Suite struct BatchTests {
    static let w1 = WorkerDescriptor(id: WorkerID(), name: "w1", kind: .local, slots: 1)
    static let w2 = WorkerDescriptor(id: WorkerID(), name: "w2", kind: .local, slots: 1)

    var core = SchedulerCore(configuration: .init(seed: 7))
    var ids = IdentifierGenerator(seed: 1)

    mutating func submit(
        _ commands: [String], priorities: [Int]? = nil, batch: BatchID? = nil, retries: Int = 0
    ) throws -> ([JobID], [SchedulerCore.Action]) {
        let specs = commands.enumerated().map { index, command in
            var spec = JobSpec.shell(command, priority: priorities?[index] ?? 0)
            spec.retry = .retries(retries)
            return spec
        }
        let fresh = specs.map { _ in ids.nextJobID() }
        let result = try core.submit(contentsOf: specs, ids: fresh, batch: batch, now: .zero)
        return (result.ids, result.actions)
    }

    static func events(_ actions: [SchedulerCore.Action]) -> [String] {
        actions.compactMap { if case .emit(let kind) = $0 { kind.name } else { nil } }
    }

    static func started(_ actions: [SchedulerCore.Action]) -> [JobID] {
        actions.compactMap { if case .start(let id, _, _) = $0 { id } else { nil } }
    }

    @Test mutating func submittingSeveralJobsQueuesThemAllBeforeDispatchSoTheHighestPriorityStartsFirst() throws {
        // Given one free slot
        _ = core.workerJoined(Self.w1, now: .zero)
        // When a low-priority job comes first in one submission with a high-priority one
        let (jobs, actions) = try submit(["low", "high"], priorities: [0, 9])
        // Then the high-priority one starts, and every submitted event precedes the start
        #expect(Self.started(actions) == [jobs[1]])
        #expect(Self.events(actions) == ["submitted", "submitted", "started"])
    }

    @Test mutating func aPriorityOutsideTheRangeIsRefusedAndNothingIsSubmitted() {
        var spec = JobSpec.shell("x")
        spec.priority = Int.max
        #expect(throws: SchedulerError.self) {
            try core.submit(contentsOf: [.shell("ok"), spec], ids: [ids.nextJobID(), ids.nextJobID()], now: .zero)
        }
        #expect(core.counts.values.reduce(0, +) == 0)
        let (id, _) = try! core.submit(.shell("y"), id: ids.nextJobID(), now: .zero)
        #expect(throws: SchedulerError.self) { try core.reprioritize(id, to: JobSpec.priorityRange.upperBound + 1, now: .zero) }
        #expect(throws: SchedulerError.self) { try core.reprioritize(id, to: Int.min, now: .zero) }
        #expect(core.info(of: id)?.priority == 0)
    }

    @Test mutating func aSealedBatchSettlesAfterTheFinalEventOfItsLastJob() throws {
        _ = core.workerJoined(Self.w1, now: .zero)
        let batch = core.openBatch(haltsOnFailure: false)
        let (jobs, _) = try submit(["a", "b"], batch: batch)
        #expect(core.sealBatch(batch, now: .zero).isEmpty)
        let first = core.jobFinished(jobs[0], attempt: 1, worker: Self.w1.id, termination: .exit(0), now: .seconds(1))
        #expect(Self.events(first) == ["succeeded", "started"])
        let second = core.jobFinished(jobs[1], attempt: 1, worker: Self.w1.id, termination: .exit(3), now: .seconds(2))
        #expect(Self.events(second) == ["failed", "settled"])
        #expect(core.batch(batch)?.isSettled == true)
        // A sealed batch takes no more jobs.
        #expect(throws: SchedulerError.self) { try submit(["late"], batch: batch) }
    }

    @Test mutating func anEmptyBatchSettlesWhenSealed() {
        let batch = core.openBatch(haltsOnFailure: false)
        #expect(Self.events(core.sealBatch(batch, now: .zero)) == ["settled"])
    }

    @Test mutating func retryingAFailedJobOfASettledBatchUnsettlesItUntilTheJobEndsAgain() throws {
        _ = core.workerJoined(Self.w1, now: .zero)
        let batch = core.openBatch(haltsOnFailure: false)
        let (jobs, _) = try submit(["a"], batch: batch)
        _ = core.sealBatch(batch, now: .zero)
        _ = core.jobFinished(jobs[0], attempt: 1, worker: Self.w1.id, termination: .exit(1), now: .seconds(1))
        let retried = try core.retry(jobs[0], now: .seconds(2))
        #expect(core.batch(batch)?.unfinished == 1)
        #expect(Self.events(retried) == ["requeued", "started"])
        let again = core.jobFinished(jobs[0], attempt: 1, worker: Self.w1.id, termination: .exit(0), now: .seconds(3))
        #expect(Self.events(again) == ["succeeded", "settled"])
    }

    @Test mutating func haltOnFailureCancelsTheRestInTheSameStepAndStartsNothingAfterTheFailure() throws {
        // Given two slots busy with a batch of four that halts on failure
        _ = core.workerJoined(Self.w1, now: .zero)
        _ = core.workerJoined(Self.w2, now: .zero)
        let batch = core.openBatch(haltsOnFailure: true)
        let (jobs, started) = try submit(["sleep 0.2; exit 1", "sleep 2", "touch hm.1", "touch hm.2"], batch: batch)
        #expect(Self.started(started) == [jobs[0], jobs[1]])
        _ = core.sealBatch(batch, now: .zero)
        // When the first fails for good
        let failed = core.jobFinished(jobs[0], attempt: 1, worker: Self.w1.id, termination: .exit(1), now: .seconds(1))
        // Then in the same step: the batch halts, the queued jobs are cancelled, the running one
        // is stopped, and nothing starts on the freed slot
        #expect(Self.started(failed).isEmpty)
        #expect(Self.events(failed) == ["failed", "halted", "stopping", "cancelled", "cancelled"])
        #expect(core.state(of: jobs[2]) == .cancelled && core.state(of: jobs[3]) == .cancelled)
        #expect(core.batch(batch)?.haltedBy == jobs[0])
        // And the running one ends cancelled; then the batch has settled
        let ended = core.jobFinished(jobs[1], attempt: 1, worker: Self.w2.id, termination: .signal(15), now: .seconds(2))
        #expect(Self.events(ended) == ["cancelled", "settled"])
        // A halted batch takes no more jobs.
        #expect(throws: SchedulerError.self) { try submit(["more"], batch: batch) }
    }

    @Test mutating func haltOnFailureSkipsTheFailedJobsDependentsAndCancelsTheRest() throws {
        // Given a batch that halts on failure: a job, one that waits for it, one that waits for
        // that one, and one that waits for nothing
        _ = core.workerJoined(Self.w1, now: .zero)
        let batch = core.openBatch(haltsOnFailure: true)
        var specs = (0..<4).map { JobSpec.shell("step \($0)") }
        specs[1].dependencies = [.earlier(0)]
        specs[2].dependencies = [.earlier(1)]
        let fresh = specs.map { _ in ids.nextJobID() }
        let jobs = try core.submit(contentsOf: specs, ids: fresh, batch: batch, now: .zero).ids
        _ = core.sealBatch(batch, now: .zero)
        // When the first fails for good
        let failed = core.jobFinished(jobs[0], attempt: 1, worker: Self.w1.id, termination: .exit(1), now: .seconds(1))
        // Then its dependents are skipped for it (they were cancelled), the other is cancelled
        #expect(Self.events(failed) == ["failed", "halted", "skipped", "skipped", "cancelled", "settled"])
        guard case .skipped(let reason)? = core.state(of: jobs[1]), case .skipped(let second)? = core.state(of: jobs[2]) else {
            Issue.record("\(String(describing: core.state(of: jobs[1]))), \(String(describing: core.state(of: jobs[2])))")
            return
        }
        #expect(reason.dependency == jobs[0] && reason.outcome == .failed)
        #expect(second.dependency == jobs[1] && second.outcome == .skipped)
        #expect(core.state(of: jobs[3]) == .cancelled)
        #expect(Self.started(failed).isEmpty)
    }

    @Test mutating func forgettingFinishedJobsForgetsThoseBeyondTheRetentionToo() throws {
        // Given five finished jobs, three kept listed
        core = SchedulerCore(configuration: .init(finishedRetention: 3, seed: 7))
        _ = core.workerJoined(Self.w1, now: .zero)
        let (jobs, _) = try submit((0..<5).map { "job \($0)" })
        for (index, id) in jobs.enumerated() {
            _ = core.jobFinished(id, attempt: 1, worker: Self.w1.id, termination: .exit(index == 0 ? 1 : 0), now: .seconds(index))
        }
        #expect(core.counts[.succeeded] == 4 && core.counts[.failed] == 1)
        // When they are forgotten, then all five are, counts included (two stayed counted)
        #expect(core.forgetFinished() == 5)
        #expect(core.counts.values.allSatisfy { $0 == 0 }, "\(core.counts)")
        #expect(core.forgetFinished() == 0)
    }

    @Test mutating func haltingOneBatchLeavesOtherJobsAlone() throws {
        _ = core.workerJoined(Self.w1, now: .zero)
        let batch = core.openBatch(haltsOnFailure: true)
        let (jobs, _) = try submit(["fails"], batch: batch)
        let (other, _) = try submit(["unrelated"])
        let failed = core.jobFinished(jobs[0], attempt: 1, worker: Self.w1.id, termination: .exit(1), now: .seconds(1))
        #expect(Self.started(failed) == [other[0]])
    }

    @Test(arguments: [
        (Termination.exit(0), "succeeded"),
        (Termination.exit(1), "failed"),
    ])
    mutating func aCancelThatArrivesAfterTheWorkEndedKeepsTheJobsOwnOutcome(termination: Termination, outcome: String) throws {
        // Given a running job with retries left
        _ = core.workerJoined(Self.w1, now: .zero)
        let (jobs, _) = try submit(["touch hm.1"], retries: 3)
        // When a cancel is asked for while its result is already on its way
        _ = try core.cancel(jobs[0], now: .seconds(1))
        let ended = core.jobFinished(
            jobs[0], attempt: 1, worker: Self.w1.id, termination: termination, stopTookEffect: false, now: .seconds(1))
        // Then it ends as it really ended (never retried after a cancel), not "cancelled"
        #expect(Self.events(ended) == [outcome])
    }

    @Test mutating func aTimeoutThatArrivesAfterTheWorkEndedLeavesAnOrdinaryResult() throws {
        _ = core.workerJoined(Self.w1, now: .zero)
        var spec = JobSpec.shell("x")
        spec.timeout = .seconds(5)
        spec.retry = .retries(1)
        let (id, _) = try core.submit(spec, id: ids.nextJobID(), now: .zero)
        _ = core.timersDue(now: .seconds(5))
        let ended = core.jobFinished(id, attempt: 1, worker: Self.w1.id, termination: .exit(0), stopTookEffect: false, now: .seconds(5))
        #expect(Self.events(ended) == ["succeeded"])
    }

    @Test func aStopRequestedAfterWorkEndedDoesNotTakeEffect() {
        let early = JobControl()
        early.requestStop(.cancel, grace: .seconds(1))
        early.workEnded()
        #expect(early.stopTookEffect)

        let late = JobControl()
        late.workEnded()
        late.requestStop(.cancel, grace: .seconds(1))
        #expect(!late.stopTookEffect)
        #expect(late.stopRequest != nil)
    }
}
