import Foundation
import JobtopTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A second SIGTERM or SIGINT kills remote jobs now, whether it goes to the coordinator or to
/// the worker: not after the grace period.
@Suite("A second signal with remote workers", .serialized, .timeLimit(.minutes(2)))
struct RemoteSignalTests {
    /// A coordinator with a 60 s grace whose one job ignores SIGTERM and writes the pids of its
    /// shell (and of a background child, with `child`) to `pids`; a worker that runs it.
    private static func started(child: Bool) async throws -> (CoordinatorProcess, JobtopProcess, [pid_t]) {
        let coordinator = try await CoordinatorProcess.start(["--grace", "60s"], localSlots: 0) { scratch in
            let pids = scratch.file("pids")
            return "trap '' TERM; \(child ? "sleep 300 & echo $! >> '\(pids)'; " : "")echo $$ >> '\(pids)'; while :; do sleep 0.05; done"
        }
        let worker = try coordinator.worker(name: "w")
        let pids = coordinator.scratch.file("pids")
        let count = child ? 2 : 1
        #expect(await eventually(within: .seconds(60)) { JobtopTestSupport.pids(in: pids).count == count }, "\(coordinator.process.output)")
        return (coordinator, worker, JobtopTestSupport.pids(in: pids))
    }

    @Test("a second SIGTERM: the remote job that ignores SIGTERM, and its background child, are killed at once; the run ends long before its 60 s grace")
    func secondSignalKillsRemoteJobsNow() async throws {
        let (coordinator, worker, jobPids) = try await Self.started(child: true)
        defer { coordinator.process.send(SIGKILL); worker.send(SIGKILL) }
        coordinator.process.send(SIGTERM)
        #expect(await eventually { coordinator.process.output.contains("cancelling") })
        // The job ignores SIGTERM: only the second signal's kill ends it before the grace.
        coordinator.process.send(SIGTERM)
        let outcome = try #require(await coordinator.process.wait(atMost: .seconds(30)), "the run waited for the grace: \(coordinator.process.output)")
        #expect(outcome.status == 143, "\(outcome.stderr)")
        #expect(await eventually(within: .seconds(10)) { jobPids.allSatisfy { !isRunning($0) } }, "the remote job's processes live on")
        worker.send(SIGTERM)
        _ = await worker.wait(atMost: .seconds(30))
    }

    @Test("a second SIGTERM to a worker kills its jobs now (one that ignores SIGTERM too), not after the coordinator's 60 s grace")
    func secondSignalToAWorkerKillsItsJobsNow() async throws {
        let (coordinator, worker, jobPids) = try await Self.started(child: false)
        defer { coordinator.process.send(SIGKILL); worker.send(SIGKILL) }
        worker.send(SIGTERM)
        #expect(await eventually { worker.output.contains("draining") })
        worker.send(SIGTERM)
        let outcome = try #require(await worker.wait(atMost: .seconds(30)), "the worker waited for the grace: \(worker.output)")
        #expect(outcome.status == 143, "\(outcome.stderr)")
        #expect(!jobPids.contains(where: isRunning), "the job lives on")
    }
}
