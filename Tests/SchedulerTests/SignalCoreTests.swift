import Foundation
import JobtopTestSupport
import Testing
@testable import Scheduler

/// `x` in the dashboard and `jobtop signal`: the core decides who may be signalled; a local
/// worker delivers the signal to the job's process group.
@Suite(.timeLimit(.minutes(2)))
struct SignalCoreTests {
    static let w1 = WorkerDescriptor(id: WorkerID(), name: "w1", kind: .local, slots: 1)

    @Test func onlyARunningProcessJobMayBeSignalledAndOnlyWithARealSignal() throws {
        var core = SchedulerCore(configuration: .init(seed: 7))
        var ids = IdentifierGenerator(seed: 1)
        let queued = try core.submit(.shell("sleep 1"), id: ids.nextJobID(), now: .zero).id
        // Queued: refused.
        #expect(throws: SchedulerError(.notAllowed, "only a running job can be signalled; job \(queued.short) is queued")) {
            try core.signalTarget(queued, signal: SIGTERM)
        }
        _ = core.workerJoined(Self.w1, now: .zero)
        // Running: the worker it runs on.
        #expect(try core.signalTarget(queued, signal: SIGTERM) == Self.w1.id)
        #expect(try core.signalTarget(queued, signal: 64) == Self.w1.id)
        // Not a signal: refused as a bad argument.
        for bad: Int32 in [0, -1, 65] {
            #expect(throws: SchedulerError.self) { try core.signalTarget(queued, signal: bad) }
            do { _ = try core.signalTarget(queued, signal: bad) } catch { #expect(error.code == .invalidArgument) }
        }
        // Unknown and finished: refused.
        do { _ = try core.signalTarget(ids.nextJobID(), signal: SIGTERM) } catch { #expect(error.code == .unknownJob) }
        _ = core.jobFinished(queued, attempt: 1, worker: Self.w1.id, termination: .exit(0), now: .seconds(1))
        do {
            _ = try core.signalTarget(queued, signal: SIGTERM)
            Issue.record("a finished job was signalled")
        } catch {
            #expect(error.code == .notAllowed)
        }
        // Signalling changes nothing in the core: no action, no event.
        #expect(core.state(of: queued) == .succeeded(attempts: 1))
    }

    @Test func aSwiftCodeJobHasNoProcessToSignal() throws {
        var core = SchedulerCore(configuration: .init(seed: 7))
        var ids = IdentifierGenerator(seed: 1)
        _ = core.workerJoined(Self.w1, now: .zero)
        let id = try core.submit(JobSpec(work: .closure { _ in }), id: ids.nextJobID(), now: .zero).id
        #expect(core.state(of: id)?.kind == .running)
        do {
            _ = try core.signalTarget(id, signal: SIGTERM)
            Issue.record("a closure job was signalled")
        } catch {
            #expect(error.code == .notAllowed)
            #expect(error.message.contains("no process"))
        }
    }

    @Test func aLocalJobGetsTheSignalInItsProcessGroupAndGoesOn() async throws {
        try await ShellJobTests.withScheduler { scheduler, reader in
            // A job (and a child in its group) that says which signals reach it, then ends on TERM.
            let id = try await scheduler.submit(.shell("""
                trap 'echo got USR1' USR1
                trap 'echo got TERM; exit 7' TERM
                sh -c 'trap "echo child got USR1" USR1; echo child ready; while :; do sleep 0.05; done' &
                echo ready
                while :; do sleep 0.05; done
                """))
            var sawReady = false
            var sawChild = false
            await reader.next { kind in
                if case .output(id, let line) = kind {
                    if line.text == "ready" { sawReady = true }
                    if line.text == "child ready" { sawChild = true }
                }
                return (sawReady && sawChild) || (kind.isFinal && kind.jobID == id)
            }
            #expect(sawReady && sawChild)
            _ = try await scheduler.perform(.signal(id, SIGUSR1))
            var lines: Set<String> = []
            await reader.next { kind in
                if case .output(id, let line) = kind { lines.insert(line.text) }
                return lines.isSuperset(of: ["got USR1", "child got USR1"]) || (kind.isFinal && kind.jobID == id)
            }
            #expect(lines.isSuperset(of: ["got USR1", "child got USR1"]), "both processes of the group got USR1: \(lines)")
            // It is still running: a signal is not a cancel.
            #expect(await scheduler.snapshot().jobs.first { $0.id == id }?.state.kind == .running)
            _ = try await scheduler.perform(.signal(id, SIGTERM))
            await reader.next { kind in kind.isFinal && kind.jobID == id }
            #expect(await scheduler.snapshot().jobs.first { $0.id == id }?.state == .failed(reason: .exitStatus(7), attempts: 1))
            // Ended: refused.
            do {
                _ = try await scheduler.perform(.signal(id, SIGTERM))
                Issue.record("an ended job was signalled")
            } catch let error as SchedulerError {
                #expect(error.code == .notAllowed)
            }
        }
    }
}
