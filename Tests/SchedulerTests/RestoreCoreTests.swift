import Foundation
import Testing
@testable import Scheduler

/// Table tests of the core's restore (what a durable serve puts back after a restart).
@Suite struct RestoreCoreTests {
    typealias Action = SchedulerCore.Action

    var ids = IdentifierGenerator(seed: 3)

    static func worker(slots: Int = 4) -> WorkerDescriptor {
        WorkerDescriptor(id: WorkerID(), name: "w", kind: .local, slots: slots)
    }

    static func spec(_ name: String, after: [JobID] = [], retries: Int = 0, priority: Int = 0) -> JobSpec {
        var spec = JobSpec.shell("run \(name)", name: name, priority: priority)
        spec.dependencies = after.map { .job($0) }
        spec.retry = .retries(retries, backoff: .seconds(1))
        return spec
    }

    static func starts(_ actions: [Action]) -> [JobID] {
        actions.compactMap { if case .start(let id, _, _) = $0 { id } else { nil } }
    }

    @Test("Restored finished jobs keep the order they ended in: the retention drops the one that ended first, not the first submitted")
    mutating func restoredHistoryKeepsTheOrderJobsEnded() {
        // The scheduler's clock started now: the ends an hour ago are before its zero.
        var core = SchedulerCore(configuration: .init(finishedRetention: 2, seed: 1, wallClockEpoch: Date()))
        let (a, b, c) = (ids.nextJobID(), ids.nextJobID(), ids.nextJobID())
        let epoch = Date(timeIntervalSinceNow: -3600)
        let (refused, _) = core.restore([
            RestoredJob(id: a, spec: Self.spec("a"), attempts: 1, ending: .succeeded(attempts: 1), finishedAt: epoch.addingTimeInterval(30)),
            RestoredJob(id: b, spec: Self.spec("b"), attempts: 1, ending: .succeeded(attempts: 1), finishedAt: epoch.addingTimeInterval(10)),
            RestoredJob(id: c, spec: Self.spec("c"), attempts: 1, ending: .succeeded(attempts: 1), finishedAt: epoch.addingTimeInterval(20)),
        ], now: .seconds(5))
        #expect(refused.isEmpty)
        #expect(core.info(of: b) == nil, "b ended first: beyond the retention of 2")
        #expect(core.info(of: a) != nil && core.info(of: c) != nil)
    }

    @Test("A finished job restored keeps its start time: retried (or its skip undone) before that time, it waits for it (it ran at once after a restart)")
    mutating func restoredFinishedJobsKeepTheirStartTime() throws {
        let epoch = Date()
        var core = SchedulerCore(configuration: .init(seed: 1, wallClockEpoch: epoch))
        let worker = Self.worker()
        _ = core.workerJoined(worker, now: .zero)
        let (cancelled, failed, skipped) = (ids.nextJobID(), ids.nextJobID(), ids.nextJobID())
        var later = Self.spec("later")
        later.notBefore = .date(epoch.addingTimeInterval(3600))
        var skippedSpec = Self.spec("skipped", after: [failed])
        skippedSpec.notBefore = .date(epoch.addingTimeInterval(7200))
        let skip = SkipReason(dependency: failed, dependencyName: "failed", outcome: .failed)
        let (refused, _) = core.restore([
            RestoredJob(id: cancelled, spec: later, attempts: 0, ending: .cancelled),
            RestoredJob(id: failed, spec: Self.spec("failed"), attempts: 1, ending: .failed(reason: .exitStatus(1), attempts: 1)),
            RestoredJob(id: skipped, spec: skippedSpec, attempts: 0, ending: .skipped(skip)),
        ], now: .seconds(5))
        #expect(refused.isEmpty)
        // When the cancelled one is retried, it waits for its time
        let retried = try core.retry(cancelled, now: .seconds(6))
        #expect(Self.starts(retried).isEmpty)
        #expect(core.state(of: cancelled) == .scheduled(until: .seconds(3600)))
        // And when the failed dependency is retried and succeeds, the skipped one waits for its own
        _ = try core.retry(failed, now: .seconds(7))
        _ = core.jobFinished(failed, attempt: 1, worker: worker.id, termination: .exit(0), now: .seconds(8))
        #expect(core.state(of: skipped) == .scheduled(until: .seconds(7200)))
    }

    @Test mutating func finishedJobsComeBackAsHistoryAndOpenOnesInTheirStateWithTheirAttempts() {
        var core = SchedulerCore(configuration: .init(seed: 1))
        _ = core.workerJoined(Self.worker(), now: .zero)
        let (done, failed, again, waiting, skippedLater) = (ids.nextJobID(), ids.nextJobID(), ids.nextJobID(), ids.nextJobID(), ids.nextJobID())
        let (refused, actions) = core.restore([
            RestoredJob(id: done, spec: Self.spec("done"), attempts: 1, ending: .succeeded(attempts: 1)),
            RestoredJob(id: failed, spec: Self.spec("failed"), attempts: 1, ending: .failed(reason: .exitStatus(2), attempts: 1)),
            RestoredJob(id: again, spec: Self.spec("again", retries: 2), attempts: 2, lastFailure: .error("jobtop stopped")),
            RestoredJob(id: waiting, spec: Self.spec("waiting", after: [again])),
            RestoredJob(id: skippedLater, spec: Self.spec("after failed", after: [failed])),
        ], now: .seconds(5))
        #expect(refused.isEmpty)
        #expect(core.state(of: done) == .succeeded(attempts: 1))
        #expect(core.state(of: failed) == .failed(reason: .exitStatus(2), attempts: 1))
        #expect(core.state(of: waiting) == .blocked)
        #expect(core.state(of: skippedLater)?.kind == .skipped)
        // Nothing started before the last job was in, then one dispatch: `again`, as its third
        // and last attempt.
        #expect(Self.starts(actions) == [again])
        guard case .running(_, let attempt, _, _) = core.state(of: again) else {
            Issue.record("again is \(String(describing: core.state(of: again)))")
            return
        }
        #expect(attempt == 3)
        #expect(core.counts[.succeeded] == 1)
        #expect(core.counts[.failed] == 1)
    }

    @Test("A job skipped before the restart comes back when its dependency is retried after it, as without the restart (it stayed skipped)")
    mutating func retryAfterRestartBringsBackSkippedDependents() throws {
        var core = SchedulerCore(configuration: .init(seed: 1))
        _ = core.workerJoined(Self.worker(), now: .zero)
        let (parent, child, grandchild) = (ids.nextJobID(), ids.nextJobID(), ids.nextJobID())
        let skip = SkipReason(dependency: parent, dependencyName: "parent", outcome: .cancelled)
        let (refused, _) = core.restore([
            RestoredJob(id: parent, spec: Self.spec("parent"), attempts: 1, ending: .cancelled),
            RestoredJob(id: child, spec: Self.spec("child", after: [parent]), attempts: 0, ending: .skipped(skip)),
            RestoredJob(
                id: grandchild, spec: Self.spec("grandchild", after: [child]), attempts: 0,
                ending: .skipped(SkipReason(dependency: child, dependencyName: "child", outcome: .skipped))),
        ], now: .seconds(5))
        #expect(refused.isEmpty)
        // When the parent is retried
        let actions = try core.retry(parent, now: .seconds(6))
        // Then the skipped chain waits for it again, and the parent runs
        #expect(Self.starts(actions) == [parent])
        #expect(core.state(of: child) == .blocked)
        #expect(core.state(of: grandchild) == .blocked)
        // and runs after it, in order.
        guard case .running(let worker, _, _, _) = core.state(of: parent) else {
            Issue.record("parent is \(String(describing: core.state(of: parent)))")
            return
        }
        let next = core.jobFinished(parent, attempt: 1, worker: worker, termination: .exit(0), now: .seconds(7))
        #expect(Self.starts(next) == [child])
    }

    /// After a restart the finished jobs keep their run times and their order, and every job
    /// its submission time: dates before the new clock's zero are negative times (the dashboard
    /// showed blank run times, `submitted 00:00`, and the oldest ended job first).
    @Test mutating func restoredJobsKeepTheirTimesFromBeforeTheRestart() {
        let epoch = Date(timeIntervalSince1970: 1_000_000)
        var core = SchedulerCore(configuration: .init(seed: 1, wallClockEpoch: epoch))
        _ = core.workerJoined(Self.worker(), now: .zero)
        let (early, late, never, queued) = (ids.nextJobID(), ids.nextJobID(), ids.nextJobID(), ids.nextJobID())
        let at = { (seconds: Double) in epoch.addingTimeInterval(seconds) }
        let (refused, _) = core.restore([
            RestoredJob(id: early, spec: Self.spec("early"), attempts: 1, ending: .succeeded(attempts: 1),
                        submittedAt: at(-100), startedAt: at(-90), finishedAt: at(-30)),
            RestoredJob(id: late, spec: Self.spec("late"), attempts: 1, ending: .failed(reason: .exitStatus(1), attempts: 1),
                        submittedAt: at(-80), startedAt: at(-25), finishedAt: at(-20)),
            RestoredJob(id: never, spec: Self.spec("never"), ending: .cancelled, submittedAt: at(-70), finishedAt: at(-60)),
            // A wall clock set back since: a date after now is taken as now.
            RestoredJob(id: queued, spec: Self.spec("queued"), submittedAt: at(3_600)),
        ], now: .seconds(2))
        #expect(refused.isEmpty)
        let jobs = Dictionary(uniqueKeysWithValues: core.snapshot(seq: 0, now: .seconds(2), progress: { _ in nil }).jobs.map { ($0.id, $0) })
        #expect(jobs[early]?.submittedAt == .seconds(-100))
        #expect(jobs[early]?.startedAt == .seconds(-90))
        #expect(jobs[early]?.finishedAt == .seconds(-30))
        #expect(jobs[late]?.startedAt == .seconds(-25))
        #expect(jobs[late]?.finishedAt == .seconds(-20))
        #expect(jobs[never]?.startedAt == nil)
        #expect(jobs[never]?.finishedAt == .seconds(-60))
        #expect(jobs[queued]?.submittedAt == .seconds(2))
    }

    @Test mutating func aFinishedJobBeyondTheRetentionStillDecidesItsDependents() {
        var core = SchedulerCore(configuration: .init(finishedRetention: 1, seed: 1))
        _ = core.workerJoined(Self.worker(), now: .zero)
        let (failed, other, dependent) = (ids.nextJobID(), ids.nextJobID(), ids.nextJobID())
        let (refused, _) = core.restore([
            RestoredJob(id: failed, spec: Self.spec("failed"), attempts: 1, ending: .failed(reason: .exitStatus(1), attempts: 1)),
            RestoredJob(id: other, spec: Self.spec("other"), attempts: 1, ending: .succeeded(attempts: 1)),
            RestoredJob(id: dependent, spec: Self.spec("dependent", after: [failed])),
        ], now: .zero)
        #expect(refused.isEmpty)
        #expect(core.state(of: failed) == nil)
        guard case .skipped(let reason) = core.state(of: dependent) else {
            Issue.record("dependent is \(String(describing: core.state(of: dependent)))")
            return
        }
        #expect(reason.dependency == failed)
    }

    @Test mutating func aJobRestoredTwiceOrWithAnUnknownDependencyIsRefusedAndTheRestComesBack() {
        var core = SchedulerCore(configuration: .init(seed: 1))
        let (a, b) = (ids.nextJobID(), ids.nextJobID())
        let (refused, _) = core.restore([
            RestoredJob(id: a, spec: Self.spec("a")),
            RestoredJob(id: a, spec: Self.spec("a again")),
            RestoredJob(id: b, spec: Self.spec("b", after: [ids.nextJobID()])),
        ], now: .zero)
        #expect(refused.map(\.id) == [a, b])
        #expect(core.state(of: a) == .queued)
        #expect(core.state(of: b) == nil)
    }

    @Test mutating func restoredJobsQueueInOrderWithTheirAttemptsAndGroupsAndAreNotAnnouncedOneByOne() {
        var core = SchedulerCore(configuration: .init(seed: 1))
        let (a, b, c, d, bad) = (ids.nextJobID(), ids.nextJobID(), ids.nextJobID(), ids.nextJobID(), ids.nextJobID())
        var inGroup = Self.spec("b", retries: 3)
        inGroup.group = "nightly"
        var alsoInGroup = Self.spec("c")
        alsoInGroup.group = "nightly"
        let (refused, actions) = core.restore([
            RestoredJob(id: a, spec: Self.spec("a", retries: 3), attempts: 2, lastFailure: .error("jobtop stopped")),
            RestoredJob(id: b, spec: inGroup, attempts: 1),
            RestoredJob(id: c, spec: alsoInGroup),
            RestoredJob(id: bad, spec: Self.spec("bad", priority: JobSpec.priorityRange.upperBound + 1)),
            RestoredJob(id: d, spec: Self.spec("d", priority: 5)),
        ], now: .seconds(1))
        #expect(refused.map(\.id) == [bad])
        #expect(!actions.contains { if case .emit(.submitted) = $0 { true } else { false } })
        // Nothing runs (no worker): the queue in run order, the higher priority first.
        let snapshot = core.snapshot(seq: 0, now: .seconds(1), progress: { _ in nil })
        #expect(snapshot.jobs.map(\.id) == [d, a, b, c])
        let byID = Dictionary(uniqueKeysWithValues: snapshot.jobs.map { ($0.id, $0) })
        #expect(byID[a]?.attempts == 2 && byID[a]?.lastFailure == .error("jobtop stopped") && byID[a]?.state == .queued)
        #expect(byID[b]?.attempts == 1 && byID[b]?.group == "nightly")
        #expect(byID[c]?.attempts == 0 && byID[c]?.group == "nightly")
        #expect(core.counts[.queued] == 4)
    }
}
