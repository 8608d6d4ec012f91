import Foundation
import Testing
@testable import Scheduler

/// Table tests of groups, dependencies and start times in the pure core: each new transition, the
/// events it says, and the edges (a dependency that ended before, was dropped, or comes back).
@Suite struct WorkflowCoreTests {
    typealias Action = SchedulerCore.Action

    var core = SchedulerCore(configuration: .init(seed: 7))
    var ids = IdentifierGenerator(seed: 1)

    static func worker(_ name: String, slots: Int = 1) -> WorkerDescriptor {
        WorkerDescriptor(id: WorkerID(), name: name, kind: .local, slots: slots)
    }

    static func spec(
        _ name: String, group: String? = nil, after: [JobSpec.Dependency] = [], priority: Int = 0,
        notBefore: JobSpec.StartTime? = nil, retries: Int = 0
    ) -> JobSpec {
        var spec = JobSpec.shell("run \(name)", name: name, priority: priority)
        spec.group = group
        spec.dependencies = after
        spec.notBefore = notBefore
        spec.retry = .retries(retries, backoff: .seconds(1))
        return spec
    }

    /// Submits `specs` in one step; returns their ids and the actions.
    mutating func submit(_ specs: [JobSpec], at now: Duration = .zero) throws(SchedulerError) -> ([JobID], [Action]) {
        let fresh = specs.map { _ in ids.nextJobID() }
        return try core.submit(contentsOf: specs, ids: fresh, now: now)
    }

    static func starts(_ actions: [Action]) -> [JobID] {
        actions.compactMap { if case .start(let id, _, _) = $0 { id } else { nil } }
    }

    static func events(_ actions: [Action]) -> [SchedulerEvent.Kind] {
        actions.compactMap { if case .emit(let kind) = $0 { kind } else { nil } }
    }

    static func names(_ actions: [Action]) -> [String] { events(actions).map(\.name) }

    /// Ends the running attempt of `id` with `termination`.
    mutating func end(_ id: JobID, _ termination: Termination = .exit(0), at now: Duration = .zero) -> [Action] {
        guard case .running(let worker, let attempt, _, _) = core.state(of: id) else {
            Issue.record("job \(id.short) is not running: \(String(describing: core.state(of: id)))")
            return []
        }
        return core.jobFinished(id, attempt: attempt, worker: worker, termination: termination, now: now)
    }

    // MARK: - Dependencies

    @Test mutating func aJobWaitsBlockedUntilEveryDependencySucceededThenIsReleasedAndStarts() throws {
        _ = core.workerJoined(Self.worker("w", slots: 4), now: .zero)
        let (jobs, submitted) = try submit([Self.spec("a"), Self.spec("b"), Self.spec("c", after: [.earlier(0), .earlier(1)])])
        let (a, b, c) = (jobs[0], jobs[1], jobs[2])
        #expect(Self.starts(submitted) == [a, b])
        #expect(core.state(of: c) == .blocked)
        #expect(core.info(of: c)?.dependencies == [a, b])
        // One dependency is not enough.
        let first = end(a)
        #expect(!Self.starts(first).contains(c))
        #expect(core.state(of: c) == .blocked)
        // The last one releases it, in the same step.
        let last = end(b)
        #expect(Self.names(last) == ["succeeded", "released", "started"])
        #expect(Self.starts(last) == [c])
    }

    @Test mutating func aLongListOfDependenciesWithRepeatsKeepsEachOnceInOrderAndWaitsForAll() throws {
        // Over 16 dependencies the repeats are found with a set (a fan-in of thousands was
        // quadratic): the same list, the same outcome as a short one.
        _ = core.workerJoined(Self.worker("w", slots: 1), now: .zero)
        let count = 40
        let after = (0..<count).flatMap { [JobSpec.Dependency.earlier($0), .earlier(count - 1 - $0)] }
        let (jobs, _) = try submit((0..<count).map { Self.spec("d\($0)") } + [Self.spec("sink", after: after)])
        let sink = jobs[count]
        // In the order first named: 0, 39, 1, 38, ...
        let firstNamed = (0..<count / 2).flatMap { [jobs[$0], jobs[count - 1 - $0]] }
        #expect(core.info(of: sink)?.dependencies == firstNamed)
        for job in jobs[0..<count] {
            #expect(core.state(of: sink) == .blocked)
            _ = end(job)
        }
        #expect(core.state(of: sink)?.kind == .running)
    }

    @Test mutating func aJobKeepsItsSpecAndDependenciesWhileRecordsAroundItAreDroppedAndTheirPlacesReused() throws {
        // Given: records dropped as soon as they finish, so places, specs and dependency links
        // are reused from job to job.
        core = SchedulerCore(configuration: .init(finishedRetention: 0, seed: 7))
        _ = core.workerJoined(Self.worker("w"), now: .zero)
        var earlier: [JobID] = []
        for round in 0..<5 {
            // When: a chain of three, the last waiting for the two before it and for the first
            // job of the round before (dropped by now: its outcome is still known).
            var specs = [Self.spec("a\(round)"), Self.spec("b\(round)", after: [.earlier(0)])]
            specs.append(Self.spec("c\(round)", after: [.earlier(0), .earlier(1)] + earlier.map { .job($0) }))
            let (jobs, _) = try submit(specs)
            // Then: each job's spec names its dependencies by id, as its info does, and the
            // spec is the one it was submitted with.
            #expect(core.info(of: jobs[1])?.dependencies == [jobs[0]])
            #expect(core.spec(of: jobs[1])?.dependencies == [.job(jobs[0])])
            #expect(core.info(of: jobs[2])?.dependencies == [jobs[0], jobs[1]] + earlier)
            #expect(core.spec(of: jobs[2])?.dependencies == ([jobs[0], jobs[1]] + earlier).map { .job($0) })
            #expect(core.spec(of: jobs[2])?.name == "c\(round)")
            let snapshot = core.snapshot(seq: 0, now: .zero) { _ in nil }
            #expect(snapshot.jobs.first { $0.id == jobs[2] }?.dependencies == [jobs[0], jobs[1]] + earlier)
            // And they run in order, each finished record dropped at once.
            for job in jobs {
                #expect(core.state(of: job)?.kind == .running)
                _ = end(job)
            }
            #expect(core.info(of: jobs[2]) == nil)
            // (A dropped job's outcome is kept when a job named it: `a` was.)
            earlier = [jobs[0]]
        }
        #expect(core.counts[.succeeded] == 15)
    }

    @Test mutating func aDependencyThatFailsForGoodSkipsItsDependentsAndTheirsAfterItsOwnFailure() throws {
        _ = core.workerJoined(Self.worker("w"), now: .zero)
        let (jobs, _) = try submit([
            Self.spec("fetch-a"), Self.spec("train", after: [.earlier(0)]), Self.spec("report", after: [.earlier(1)]),
            Self.spec("other"),
        ])
        let actions = end(jobs[0], .exit(3))
        let kinds = Self.events(actions)
        #expect(Self.names(actions) == ["failed", "skipped", "skipped", "started"])
        guard case .skipped(let train, let reason) = kinds[1], case .skipped(let report, let second) = kinds[2] else {
            Issue.record("\(kinds)")
            return
        }
        #expect(train == jobs[1] && report == jobs[2])
        #expect(reason.description == "dependency 'fetch-a' failed")
        #expect(second.description == "dependency 'train' was skipped")
        #expect(core.state(of: jobs[2]) == .skipped(second))
        #expect(core.counts[.skipped] == 2)
        #expect(Self.starts(actions) == [jobs[3]], "the slot goes to the job that does not depend on it")
    }

    @Test mutating func aCancelledDependencySkipsItsDependentsWithThatReason() throws {
        let (jobs, _) = try submit([Self.spec("a"), Self.spec("b", after: [.earlier(0)])])
        let actions = try core.cancel(jobs[0], now: .zero)
        #expect(Self.names(actions) == ["cancelled", "skipped"])
        if case .skipped(let reason)? = core.state(of: jobs[1]) {
            #expect(reason.description == "dependency 'a' was cancelled" && reason.outcome == .cancelled)
        } else {
            Issue.record("\(String(describing: core.state(of: jobs[1])))")
        }
    }

    @Test mutating func retryingAFailedDependencyBringsItsSkippedDependentsBackBlockedAllTheWayDown() throws {
        let worker = Self.worker("w")
        _ = core.workerJoined(worker, now: .zero)
        let (jobs, _) = try submit([
            Self.spec("a"), Self.spec("b", after: [.earlier(0)]), Self.spec("c", after: [.earlier(1)]),
        ])
        _ = end(jobs[0], .exit(1))
        #expect(core.state(of: jobs[2])?.kind == .skipped)
        #expect(core.counts[.skipped] == 2 && core.counts[.failed] == 1)

        let retried = try core.retry(jobs[0], now: .seconds(1))
        #expect(Self.names(retried) == ["requeued", "blocked", "blocked", "started"])
        #expect(core.state(of: jobs[1]) == .blocked && core.state(of: jobs[2]) == .blocked)
        #expect(core.counts[.skipped] == 0 && core.counts[.blocked] == 2 && core.counts[.failed] == 0)
        if case .blocked(let id, let waitingFor) = Self.events(retried)[1] {
            #expect(id == jobs[1] && waitingFor == [jobs[0]])
        }
        // And now the chain runs through.
        #expect(Self.starts(end(jobs[0], at: .seconds(2))) == [jobs[1]])
        #expect(Self.starts(end(jobs[1], at: .seconds(3))) == [jobs[2]])
        _ = end(jobs[2], at: .seconds(4))
        #expect(core.counts[.succeeded] == 3)
    }

    /// Its reason named the one retried ("dependency 'f1' failed" beside f1 running again, in
    /// the dashboard, `status` and the closing summary): it is skipped again, for the other.
    @Test mutating func retryingOneOfTwoFailedDependenciesSkipsTheDependentForTheOther() throws {
        let worker = Self.worker("w")
        _ = core.workerJoined(worker, now: .zero)
        let (jobs, _) = try submit([
            Self.spec("f1"), Self.spec("f2"), Self.spec("c", after: [.earlier(0), .earlier(1)]),
        ])
        _ = end(jobs[0], .exit(1))
        _ = end(jobs[1], .exit(1))
        guard case .skipped(let first)? = core.state(of: jobs[2]) else { Issue.record("c is not skipped"); return }
        #expect(first.dependency == jobs[0])
        let retried = try core.retry(jobs[0], now: .seconds(1))
        #expect(Self.names(retried).contains("blocked") && Self.names(retried).contains("skipped"), "\(Self.names(retried))")
        guard case .skipped(let now)? = core.state(of: jobs[2]) else { Issue.record("c is not skipped"); return }
        #expect(now.dependency == jobs[1] && now.description == "dependency 'f2' failed")
        #expect(core.counts[.skipped] == 1 && core.counts[.blocked] == 0 && core.counts[.failed] == 1)
        // Retrying the other brings it back, and it runs once both succeed.
        _ = try core.retry(jobs[1], now: .seconds(2))
        #expect(core.state(of: jobs[2]) == .blocked)
    }

    @Test mutating func aSkippedJobCannotBeRetriedWhileItsDependencyStillFailed() throws {
        let (jobs, _) = try submit([Self.spec("a"), Self.spec("b", after: [.earlier(0)])])
        _ = try core.cancel(jobs[0], now: .zero)
        #expect(throws: SchedulerError.self) { _ = try core.retry(jobs[1], now: .zero) }
        do {
            _ = try core.retry(jobs[1], now: .zero)
        } catch {
            #expect(error.message.contains("dependency 'a' was cancelled; retry that one first"), "\(error.message)")
        }
        #expect(core.state(of: jobs[1])?.kind == .skipped)
    }

    @Test("Retrying the end of a skipped chain names the job to retry at its root (it named the skipped one between, which was refused too)")
    mutating func aSkippedChainsRefusalNamesItsRoot() throws {
        let (jobs, _) = try submit([Self.spec("a"), Self.spec("b", after: [.earlier(0)]), Self.spec("c", after: [.earlier(1)])])
        _ = try core.cancel(jobs[0], now: .zero)
        #expect(core.state(of: jobs[2])?.kind == .skipped)
        do {
            _ = try core.retry(jobs[2], now: .zero)
            Issue.record("c was retried")
        } catch {
            #expect(error.message.hasSuffix("dependency 'b' was skipped; retry 'a' first"), "\(error.message)")
        }
    }

    @Test mutating func aDependencyThatEndedBeforeCountsAtOnce() throws {
        _ = core.workerJoined(Self.worker("w"), now: .zero)
        let (done, _) = try submit([Self.spec("done")])
        _ = end(done[0])
        let (broken, _) = try submit([Self.spec("broken")])
        _ = end(broken[0], .exit(1))
        // After a success: queued at once, and it starts.
        let (ok, okActions) = try submit([Self.spec("ok", after: [.job(done[0])])])
        #expect(Self.starts(okActions) == ok)
        if case .submitted(let info) = Self.events(okActions)[0] { #expect(info.state == .queued) }
        _ = end(ok[0])
        // After a failure: skipped in the same step as its submission.
        let (doomed, doomedActions) = try submit([Self.spec("doomed", after: [.job(broken[0])])])
        #expect(Self.names(doomedActions) == ["submitted", "skipped"])
        #expect(core.state(of: doomed[0])?.kind == .skipped)
    }

    @Test mutating func anOutcomeOutlivesItsDroppedRecordForJobsThatNameItLater() throws {
        core = SchedulerCore(configuration: .init(finishedRetention: 1, seed: 7))
        _ = core.workerJoined(Self.worker("w"), now: .zero)
        let (first, _) = try submit([Self.spec("first"), Self.spec("needs-first", after: [.earlier(0)])])
        _ = end(first[0])
        _ = end(first[1])
        // Both finished, retention 1: "first" was dropped from the table...
        #expect(core.info(of: first[0]) == nil)
        // ...and a job naming it still sees that it succeeded.
        let (late, actions) = try submit([Self.spec("late", after: [.job(first[0])])])
        #expect(Self.starts(actions) == late)
        // A job never named as a dependency is unknown once dropped.
        _ = end(late[0])
        #expect(core.info(of: first[1]) == nil)
        #expect(throws: SchedulerError.self) { _ = try submit([Self.spec("x", after: [.job(first[1])])]) }
    }

    @Test mutating func aDependentWhoseRecordWasDroppedAndReusedIsNotCountedDownForTheNewJob() throws {
        // Given a running job with a blocked dependent that is cancelled and dropped at once
        // (retention 0), and a new blocked job that takes the dropped record's place in the table
        core = SchedulerCore(configuration: .init(finishedRetention: 0, seed: 7))
        _ = core.workerJoined(Self.worker("w"), now: .zero)
        let (first, _) = try submit([Self.spec("long"), Self.spec("other")])
        let (long, other) = (first[0], first[1])
        let (dependent, _) = try submit([Self.spec("dependent", after: [.job(long)])])
        _ = try core.cancel(dependent[0], now: .zero)
        #expect(core.info(of: dependent[0]) == nil, "dropped at once")
        let (newcomer, _) = try submit([Self.spec("newcomer", after: [.job(other)])])
        #expect(core.state(of: newcomer[0]) == .blocked)
        // When the running job succeeds (its list of dependents still names the dropped record)
        let ended = end(long)
        // Then the newcomer, which waits for another job, is neither counted down nor released
        #expect(Self.names(ended) == ["succeeded", "started"])
        #expect(Self.starts(ended) == [other])
        #expect(core.state(of: newcomer[0]) == .blocked)
        // ...until its own dependency succeeds.
        let released = end(other)
        #expect(Self.names(released) == ["succeeded", "released", "started"])
        #expect(Self.starts(released) == newcomer)
    }

    @Test mutating func aBadDependencyRefusesTheWholeSubmission() throws {
        for bad: JobSpec.Dependency in [.earlier(1), .earlier(-1), .job(ids.nextJobID())] {
            do {
                _ = try submit([Self.spec("a"), Self.spec("b", after: [bad])])
                Issue.record("\(bad) was taken")
            } catch {
                #expect(error.code == .invalidArgument)
                #expect(error.message.contains("job 2 of the submission depends on"), "\(error.message)")
            }
        }
        #expect(core.counts.values.reduce(0, +) == 0, "nothing was submitted")
    }

    @Test mutating func aJobWithTheKeyOfAJobItWaitsForIsRefusedNotCoalescedIntoIt() throws {
        // It would be coalesced into its own dependency and never run: its `after` void.
        func keyed(_ name: String, after: [JobSpec.Dependency] = []) -> JobSpec {
            var spec = Self.spec(name, after: after)
            spec.coalescingKey = "k"
            return spec
        }
        do {
            _ = try submit([keyed("a"), Self.spec("b"), keyed("c", after: [.earlier(1), .earlier(0)])])
            Issue.record("taken")
        } catch {
            #expect(error.code == .invalidArgument)
            #expect(error.message == "job 3 of the submission has the key 'k' of job 1 of the submission, which it waits for: it would be coalesced into its own dependency and never run")
        }
        #expect(core.counts.values.reduce(0, +) == 0, "nothing was submitted")
        // Through another job it waits for, too (a trial's chain: c after b after a)
        do {
            _ = try submit([keyed("a"), Self.spec("b", after: [.earlier(0)]), keyed("c", after: [.earlier(1)])])
            Issue.record("taken")
        } catch {
            #expect(error.message.hasPrefix("job 3 of the submission has the key 'k' of job 1 of the submission, which it waits for"), "\(error.message)")
        }
        #expect(core.counts.values.reduce(0, +) == 0, "nothing was submitted")
        // The active job with the key, named by id.
        let (active, _) = try submit([keyed("a")])
        do {
            _ = try submit([keyed("c", after: [.job(active[0])])])
            Issue.record("taken")
        } catch {
            #expect(error.message.contains("has the key 'k' of \(active[0].short), which it waits for"), "\(error.message)")
        }
        // ...also through a submitted job that waits for it
        let (middle, _) = try submit([Self.spec("m", after: [.job(active[0])])])
        do {
            _ = try submit([keyed("c", after: [.job(middle[0])])])
            Issue.record("taken")
        } catch {
            #expect(error.message.contains("has the key 'k' of \(active[0].short), which it waits for"), "\(error.message)")
        }
        // The same key with no dependency on its holder is coalesced, as before.
        let (again, actions) = try submit([keyed("d")])
        #expect(again == active && Self.names(actions) == ["coalesced"])
    }

    @Test mutating func cancellingABlockedJobEndsItAndSkipsWhatWaitsForIt() throws {
        let (jobs, _) = try submit([Self.spec("a"), Self.spec("b", after: [.earlier(0)]), Self.spec("c", after: [.earlier(1)])])
        let actions = try core.cancel(jobs[1], now: .zero)
        #expect(Self.names(actions) == ["cancelled", "skipped"])
        #expect(core.state(of: jobs[1]) == .cancelled)
        #expect(core.state(of: jobs[2])?.kind == .skipped)
        // Retrying the cancelled one brings it back blocked (a is still queued), and c with it.
        let retried = try core.retry(jobs[1], now: .zero)
        #expect(Self.names(retried) == ["requeued", "blocked", "blocked"])
        #expect(core.state(of: jobs[1]) == .blocked && core.state(of: jobs[2]) == .blocked)
    }

    // MARK: - Start times

    @Test mutating func aDelayedJobIsScheduledThenReleasedWhenItsTimeComes() throws {
        _ = core.workerJoined(Self.worker("w"), now: .zero)
        let (jobs, actions) = try submit([Self.spec("later", notBefore: .delay(.seconds(600)))], at: .seconds(5))
        #expect(Self.starts(actions).isEmpty)
        #expect(core.state(of: jobs[0]) == .scheduled(until: .seconds(605)))
        #expect(core.nextDeadline == .seconds(605))
        #expect(core.timersDue(now: .seconds(604)).isEmpty)
        let due = core.timersDue(now: .seconds(605))
        #expect(Self.names(due) == ["released", "started"])
    }

    @Test mutating func aDateIsReadAgainstTheWallClockAtTimeZero() throws {
        let epoch = Date(timeIntervalSince1970: 1_800_000_000)
        core = SchedulerCore(configuration: .init(seed: 7, wallClockEpoch: epoch))
        let (jobs, _) = try submit([
            Self.spec("at", notBefore: .date(epoch.addingTimeInterval(90))),
            Self.spec("past", notBefore: .date(epoch.addingTimeInterval(-90))),
        ], at: .seconds(10))
        #expect(core.state(of: jobs[0]) == .scheduled(until: .seconds(90)))
        #expect(core.state(of: jobs[1]) == .queued, "a time already past means at once")
    }

    @Test mutating func aScheduledJobWithDependenciesIsBlockedWhenItsTimeComesUnlessTheyAllSucceeded() throws {
        _ = core.workerJoined(Self.worker("w"), now: .zero)
        let (jobs, _) = try submit([Self.spec("a"), Self.spec("b", after: [.earlier(0)], notBefore: .delay(.seconds(10)))])
        let due = core.timersDue(now: .seconds(10))
        #expect(Self.names(due) == ["blocked"])
        #expect(core.state(of: jobs[1]) == .blocked)
        #expect(Self.starts(end(jobs[0], at: .seconds(11))) == [jobs[1]])
    }

    @Test mutating func aDependencyThatSucceedsWhileTheJobIsScheduledLetsItRunAtItsTime() throws {
        _ = core.workerJoined(Self.worker("w"), now: .zero)
        let (jobs, _) = try submit([Self.spec("a"), Self.spec("b", after: [.earlier(0)], notBefore: .delay(.seconds(10)))])
        _ = end(jobs[0], at: .seconds(1))
        #expect(core.state(of: jobs[1]) == .scheduled(until: .seconds(10)))
        #expect(Self.names(core.timersDue(now: .seconds(10))) == ["released", "started"])
    }

    @Test mutating func aDependencyThatFailsWhileTheJobIsScheduledSkipsItAtOnce() throws {
        _ = core.workerJoined(Self.worker("w"), now: .zero)
        let (jobs, _) = try submit([Self.spec("a"), Self.spec("b", after: [.earlier(0)], notBefore: .delay(.seconds(10)))])
        #expect(Self.names(end(jobs[0], .exit(1), at: .seconds(1))) == ["failed", "skipped"])
        #expect(core.timersDue(now: .seconds(10)).isEmpty, "the stale release timer does nothing")
    }

    @Test mutating func cancellingAScheduledJobEndsItAndItsTimerDoesNothing() throws {
        let (jobs, _) = try submit([Self.spec("later", notBefore: .delay(.seconds(10)))])
        #expect(Self.names(try core.cancel(jobs[0], now: .seconds(1))) == ["cancelled"])
        #expect(core.timersDue(now: .seconds(10)).isEmpty)
        // Retried before its time, it is scheduled again for the same time.
        let retried = try core.retry(jobs[0], now: .seconds(2))
        #expect(Self.names(retried) == ["requeued", "scheduled"])
        #expect(core.state(of: jobs[0]) == .scheduled(until: .seconds(10)))
    }

    // MARK: - Groups

    @Test mutating func aGroupAtItsLimitHoldsBackNoOtherGroup() throws {
        _ = core.workerJoined(Self.worker("w", slots: 3), now: .zero)
        _ = try core.setGroupLimit("gpu", to: 1, now: .zero)
        // The gpu jobs come first and have the higher priority: without groups they would take
        // every slot in turn; with the limit, one runs and the others' jobs take the rest.
        let (jobs, actions) = try submit([
            Self.spec("g1", group: "gpu", priority: 5), Self.spec("g2", group: "gpu", priority: 5),
            Self.spec("d1", group: "download"), Self.spec("x"),
        ])
        #expect(Self.starts(actions) == [jobs[0], jobs[2], jobs[3]])
        #expect(core.state(of: jobs[1]) == .queued)
        #expect(core.group("gpu") == GroupStatus(group: JobGroup(name: "gpu", limit: 1), running: 1, queued: 1, held: 0))
        // When g1 ends, g2 takes its place (it is the best of the groups that may start one).
        #expect(Self.starts(end(jobs[0])) == [jobs[1]])
    }

    @Test("A job waiting for its retry counts as held in its group's line (it was in no count), and again after a restart")
    mutating func aJobWaitingForItsRetryIsHeldInItsGroup() throws {
        _ = core.workerJoined(Self.worker("w"), now: .zero)
        let (jobs, _) = try submit([Self.spec("flaky", group: "net", retries: 1)])
        #expect(core.group("net") == GroupStatus(group: JobGroup(name: "net"), running: 1))
        _ = end(jobs[0], .exit(1))
        guard case .waitingForRetry(let due, 1, _) = core.state(of: jobs[0]) else {
            Issue.record("not waiting for its retry: \(String(describing: core.state(of: jobs[0])))")
            return
        }
        #expect(core.group("net") == GroupStatus(group: JobGroup(name: "net"), held: 1))
        _ = core.timersDue(now: due)
        #expect(core.group("net") == GroupStatus(group: JobGroup(name: "net"), running: 1))

        var restarted = SchedulerCore(configuration: .init(seed: 7))
        let spec = Self.spec("flaky", group: "net", retries: 1)
        // (The core's clock starts at the epoch, 1970: a minute after it is a minute ahead.)
        _ = restarted.restore(
            [RestoredJob(id: jobs[0], spec: spec, attempts: 1, lastFailure: .exitStatus(1), retryAt: Date(timeIntervalSince1970: 60))],
            now: .zero)
        #expect(restarted.group("net") == GroupStatus(group: JobGroup(name: "net"), held: 1))
    }

    @Test("clean forgets the groups it leaves with no job and no setting (they were listed for good); the others keep their jobs, counts and limit through the renumbering")
    mutating func forgettingFinishedJobsForgetsEmptyGroups() throws {
        _ = core.workerJoined(Self.worker("w", slots: 2), now: .zero)
        _ = try core.setGroupLimit("b", to: 1, now: .zero)
        _ = try core.setGroupLimit("c", to: 2, now: .zero)
        _ = try core.setGroupLimit("c", to: nil, now: .zero)
        let (first, _) = try submit([Self.spec("long"), Self.spec("a1", group: "a")])
        let (later, _) = try submit([Self.spec("b1", group: "b"), Self.spec("b2", group: "b"), Self.spec("d1", group: "d", after: [.job(first[0])])])
        #expect(Self.starts(end(first[1])) == [later[0]])
        #expect(core.groupStatuses.map(\.group.name) == ["default", "a", "b", "c", "d"])
        #expect(core.forgetFinished() == 1)
        // a and c (its limit lifted) had nothing left; b has a limit and jobs, d a blocked job.
        #expect(core.groupStatuses.map(\.group.name) == ["default", "b", "d"])
        #expect(core.group("a") == nil && core.group("c") == nil)
        #expect(core.group("b") == GroupStatus(group: JobGroup(name: "b", limit: 1), running: 1, queued: 1))
        #expect(core.group("d") == GroupStatus(group: JobGroup(name: "d"), held: 1))
        // b's limit still holds (b2 waits while b1 runs), and d1 is released into its own group.
        let ended = end(first[0])
        #expect(Self.starts(ended) == [later[2]])
        #expect(core.group("d") == GroupStatus(group: JobGroup(name: "d"), running: 1))
        #expect(Self.starts(end(later[0])) == [later[1]])
        // A name used again is a new group.
        let (again, actions) = try submit([Self.spec("a2", group: "a")])
        #expect(Self.events(actions).contains { if case .groupChanged(JobGroup(name: "a")) = $0 { true } else { false } })
        #expect(core.state(of: again[0])?.kind == .queued)
        #expect(core.groupStatuses.map(\.group.name) == ["default", "a", "b", "d"])
    }

    @Test mutating func prioritiesOrderJobsAcrossGroupsAndFirstInFirstOutWithinAPriority() throws {
        let (jobs, _) = try submit([
            Self.spec("a1", group: "a"), Self.spec("b1", group: "b", priority: 2), Self.spec("a2", group: "a", priority: 2),
            Self.spec("d1"), Self.spec("b2", group: "b"),
        ])
        #expect(core.queuedInOrder == [jobs[1], jobs[2], jobs[0], jobs[3], jobs[4]])
        var started: [JobID] = []
        _ = core.workerJoined(Self.worker("w", slots: 1), now: .zero)
        for _ in 0..<5 {
            guard let running = core.snapshot(seq: 0, now: .zero, progress: { _ in nil }).jobs.first(where: { $0.state.kind == .running }) else { break }
            started.append(running.id)
            _ = end(running.id)
        }
        #expect(started == [jobs[1], jobs[2], jobs[0], jobs[3], jobs[4]])
    }

    @Test mutating func aJobThatBecomesReadyTakesItsSubmissionPlaceAheadOfJobsSubmittedAfterIt() throws {
        // Given one slot: a (fails once), b waiting for a, c due in 5 s, then d and e queued
        _ = core.workerJoined(Self.worker("w"), now: .zero)
        let (jobs, started) = try submit([
            Self.spec("a", retries: 1), Self.spec("b", after: [.earlier(0)]), Self.spec("c", notBefore: .delay(.seconds(5))),
            Self.spec("d"), Self.spec("e"),
        ])
        let (a, b, c, d, e) = (jobs[0], jobs[1], jobs[2], jobs[3], jobs[4])
        #expect(Self.starts(started) == [a])
        #expect(core.queuedInOrder == [d, e])
        // When a fails, then d runs while a waits for its retry
        #expect(Self.starts(end(a, .exit(1), at: .seconds(1))) == [d])
        // When a's retry and c's start time come, they queue ahead of e, in submission order
        _ = core.timersDue(now: .seconds(10))
        #expect(core.queuedInOrder == [a, c, e])
        #expect(Self.starts(end(d, at: .seconds(10))) == [a])
        // and b, released by a's success, goes ahead of c and e too (it was submitted before them)
        let released = end(a, at: .seconds(11))
        #expect(Self.names(released) == ["succeeded", "released", "started"])
        #expect(Self.starts(released) == [b])
        #expect(core.queuedInOrder == [c, e])
    }

    @Test mutating func aPausedGroupStartsNothingWhileOthersRunAndResumingStartsIt() throws {
        _ = core.workerJoined(Self.worker("w", slots: 2), now: .zero)
        let paused = try core.pauseGroup("batch", now: .zero)
        #expect(Self.events(paused).map(\.name) == ["group"])
        let (jobs, actions) = try submit([Self.spec("b", group: "batch", priority: 9), Self.spec("x")])
        #expect(Self.starts(actions) == [jobs[1]])
        let resumed = try core.resumeGroup("batch", now: .zero)
        #expect(Self.names(resumed) == ["group", "started"])
        #expect(Self.starts(resumed) == [jobs[0]])
        #expect(throws: SchedulerError.self) { _ = try core.resumeGroup("nope", now: .zero) }
    }

    @Test mutating func raisingALimitStartsWaitingJobsAtOnceAndLoweringItStopsNone() throws {
        _ = core.workerJoined(Self.worker("w", slots: 4), now: .zero)
        _ = try core.setGroupLimit("g", to: 1, now: .zero)
        let (jobs, _) = try submit((1...4).map { Self.spec("g\($0)", group: "g") })
        #expect(core.runningCount == 1)
        let raised = try core.setGroupLimit("g", to: 3, now: .zero)
        #expect(Self.starts(raised) == [jobs[1], jobs[2]])
        let lowered = try core.setGroupLimit("g", to: 1, now: .zero)
        #expect(Self.names(lowered) == ["group"], "nothing is stopped")
        #expect(core.runningCount == 3)
        // Nothing more starts until the group is below its limit again.
        #expect(Self.starts(end(jobs[0])).isEmpty)
        #expect(Self.starts(end(jobs[1])).isEmpty)
        #expect(Self.starts(end(jobs[2])) == [jobs[3]])
        let unlimited = try core.setGroupLimit("g", to: nil, now: .zero)
        #expect(Self.names(unlimited) == ["group"])
        #expect(core.group("g")?.group.limit == nil)
    }

    @Test mutating func groupSettingsAreChecked() throws {
        #expect(throws: SchedulerError.self) { _ = try core.setGroupLimit("g", to: 0, now: .zero) }
        for bad in ["", "a b", "tab\there", "new\nline", String(repeating: "x", count: 65)] {
            #expect(throws: SchedulerError.self, "\(bad.debugDescription)") { _ = try core.pauseGroup(bad, now: .zero) }
            #expect(throws: SchedulerError.self, "\(bad.debugDescription)") { _ = try submit([Self.spec("j", group: bad)]) }
        }
        #expect(core.groupStatuses.map(\.group.name) == [JobSpec.defaultGroup])
    }

    @Test mutating func aGroupNamedForTheFirstTimeIsMadeAndAnnouncedOnce() throws {
        let (_, actions) = try submit([Self.spec("a", group: "new"), Self.spec("b", group: "new")])
        #expect(Self.names(actions) == ["group", "submitted", "submitted"])
        #expect(core.groupStatuses.map(\.group.name) == [JobSpec.defaultGroup, "new"])
        #expect(core.group("new")?.queued == 2)
    }

    // MARK: - Shutdown

    @Test mutating func aDrainWaitsForBlockedAndScheduledJobsAndACancelEndsThemCancelledNotSkipped() throws {
        _ = core.workerJoined(Self.worker("w"), now: .zero)
        let (jobs, _) = try submit([
            Self.spec("a"), Self.spec("b", after: [.earlier(0)]), Self.spec("c", notBefore: .delay(.seconds(5))),
            Self.spec("d", after: [.earlier(2)]),
        ])
        _ = core.shutdown(.drain, now: .zero)
        _ = end(jobs[0])
        _ = end(jobs[1])
        #expect(!core.isShutdownComplete, "c and d are still to come")
        let cancelled = core.shutdown(.cancelRunning, now: .seconds(1))
        let ended = Self.events(cancelled).filter(\.isFinal)
        #expect(ended.allSatisfy { if case .cancelled = $0 { true } else { false } }, "\(ended)")
        #expect(core.counts[.cancelled] == 2 && core.counts[.skipped] == 0)
        #expect(core.isShutdownComplete)
    }

    // MARK: - Commands on the wire

    @Test func workflowCommandsSurviveEncodingAsJSON() throws {
        var spec = JobSpec.shell("make", name: "build")
        spec.group = "gpu"
        spec.dependencies = [.earlier(0), .job(JobID(uuid: UUID(uuidString: "6D0F0E3C-34A4-4C9A-9E3B-2F4A1B7C9D10")!))]
        spec.notBefore = .date(Date(timeIntervalSince1970: 1_800_000_000))
        let commands: [SchedulerCommand] = [.submit([spec], batch: nil), .setGroupLimit("gpu", 2), .setGroupLimit("gpu", nil), .pauseGroup("gpu")]
        let decoded = try JSONDecoder().decode([SchedulerCommand].self, from: JSONEncoder().encode(commands))
        guard case .submit(let specs, nil) = decoded[0], let back = specs.first else {
            Issue.record("\(decoded)")
            return
        }
        #expect(back.group == "gpu" && back.dependencies == spec.dependencies && back.notBefore == spec.notBefore)
        if case .setGroupLimit("gpu", 2) = decoded[1] {} else { Issue.record("\(decoded[1])") }
        if case .setGroupLimit("gpu", nil) = decoded[2] {} else { Issue.record("\(decoded[2])") }
        if case .pauseGroup("gpu") = decoded[3] {} else { Issue.record("\(decoded[3])") }
    }
}
