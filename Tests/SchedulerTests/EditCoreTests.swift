import Testing
@testable import Scheduler

/// `e` in the dashboard: a job that is not running gets a new shell command; a failed or
/// cancelled one is retried with it; running and succeeded jobs are refused.
@Suite struct EditCoreTests {
    static let w1 = WorkerDescriptor(id: WorkerID(), name: "w1", kind: .local, slots: 1)

    var core = SchedulerCore(configuration: .init(seed: 7))
    var ids = IdentifierGenerator(seed: 1)

    mutating func submit(_ command: String) -> JobID {
        try! core.submit(.shell(command), id: ids.nextJobID(), now: .zero).id
    }

    static func events(_ actions: [SchedulerCore.Action]) -> [String] {
        actions.compactMap { if case .emit(let kind) = $0 { kind.name } else { nil } }
    }

    static func started(_ actions: [SchedulerCore.Action], core: SchedulerCore) -> [String] {
        actions.compactMap { action in
            guard case .start(let id, _, _) = action, let spec = core.spec(of: id), case .shell(let text) = spec.work else { return nil }
            return text
        }
    }

    @Test mutating func aQueuedJobKeepsItsPlaceAndRunsTheNewCommand() throws {
        let first = submit("echo one")
        let second = submit("echo two")
        let actions = try core.edit(first, command: "echo ONE", now: .seconds(1))
        #expect(Self.events(actions) == ["edited"])
        #expect(core.info(of: first)?.command == "echo ONE")
        #expect(core.queuedInOrder == [first, second])
        let joined = core.workerJoined(Self.w1, now: .seconds(2))
        #expect(Self.started(joined, core: core) == ["echo ONE"])
    }

    @Test mutating func runningAndSucceededJobsAreRefusedAndKeepTheirCommand() throws {
        _ = core.workerJoined(Self.w1, now: .zero)
        let id = submit("sleep 1")
        #expect(core.state(of: id)?.kind == .running)
        do {
            _ = try core.edit(id, command: "true", now: .seconds(1))
            Issue.record("a running job was edited")
        } catch {
            #expect(error.code == .notAllowed)
            #expect(error.message.contains("running"))
        }
        _ = core.jobFinished(id, attempt: 1, worker: Self.w1.id, termination: .exit(0), now: .seconds(2))
        do {
            _ = try core.edit(id, command: "true", now: .seconds(3))
            Issue.record("a succeeded job was edited")
        } catch {
            #expect(error.code == .notAllowed)
        }
        #expect(core.info(of: id)?.command == "sleep 1")
        // Empty: refused.
        let queued = submit("echo x")
        do {
            _ = try core.edit(queued, command: "  ", now: .seconds(3))
            Issue.record("an empty command was taken")
        } catch {
            #expect(error.code == .invalidArgument)
        }
    }

    @Test mutating func aFailedJobIsRetriedWithTheNewCommand() throws {
        _ = core.workerJoined(Self.w1, now: .zero)
        let id = submit("exit 1")
        _ = core.jobFinished(id, attempt: 1, worker: Self.w1.id, termination: .exit(1), now: .seconds(1))
        #expect(core.state(of: id) == .failed(reason: .exitStatus(1), attempts: 1))
        let actions = try core.edit(id, command: "exit 0", now: .seconds(2))
        #expect(Self.events(actions).prefix(2) == ["edited", "requeued"])
        #expect(Self.started(actions, core: core) == ["exit 0"])
        #expect(core.state(of: id)?.kind == .running)
    }

    @Test mutating func aRefusedRetryLeavesTheCommandAsItWas() throws {
        _ = core.workerJoined(Self.w1, now: .zero)
        // Two jobs with one key: the second (cancelled) cannot come back while the first is active.
        var spec = JobSpec.shell("sleep 5")
        spec.coalescingKey = "k"
        let old = try core.submit(spec, id: ids.nextJobID(), now: .zero).id
        _ = try core.cancel(old, now: .seconds(1))
        _ = core.jobFinished(old, attempt: 1, worker: Self.w1.id, termination: .signal(15), now: .seconds(1))
        #expect(core.state(of: old) == .cancelled)
        let active = try core.submit(spec, id: ids.nextJobID(), now: .seconds(2)).id
        #expect(active != old)
        do {
            _ = try core.edit(old, command: "echo new", now: .seconds(3))
            Issue.record("the retry should be refused")
        } catch {
            #expect(error.code == .notAllowed)
        }
        #expect(core.info(of: old)?.command == "sleep 5")
        #expect(core.spec(of: old).map { "\($0.work)" } == "sleep 5")
        #expect(core.state(of: old) == .cancelled)
        // No "edited" event is left to go out with the next step.
        let next = try core.reprioritize(active, to: 3, now: .seconds(4))
        #expect(!Self.events(next).contains("edited"))
    }
}
