import Foundation
import JobtopTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A second SIGTERM or SIGINT to a coordinator kills its remote workers' jobs now, as it kills
/// its local ones: not after the grace period.
@Suite("A second signal with remote workers", .serialized, .timeLimit(.minutes(2)))
struct RemoteSignalTests {
    @Test("a second SIGTERM: the remote job that ignores SIGTERM, and its background child, are killed at once; the run ends long before its 60 s grace")
    func secondSignalKillsRemoteJobsNow() async throws {
        let scratch = try Scratch()
        let token = try scratch.write("token", "sig-\(UUID().uuidString)\n")
        let pidFile = scratch.file("pids")
        let coordinator = try JobtopProcess(
            ["run", "--listen", "127.0.0.1:0", "--token-file", token, "-j", "0", "--headless", "--grace", "60s", "-c",
             "trap '' TERM; sleep 300 & echo $! >> '\(pidFile)'; echo $$ >> '\(pidFile)'; while :; do sleep 0.05; done"],
            newSession: true)
        defer { coordinator.send(SIGKILL) }
        let prefix = "accepting workers on 127.0.0.1:"
        let listening = await eventually(within: .seconds(60)) { coordinator.output.contains(prefix) }
        let line = try #require(listening ? coordinator.outputLines.first { $0.contains(prefix) } : nil, "\(coordinator.output)")
        let port = String(line[line.range(of: prefix)!.upperBound...].prefix { $0.isNumber })
        let worker = try JobtopProcess(
            ["worker", "--connect", "127.0.0.1:\(port)", "--slots", "1", "--name", "w", "--token-file", token], newSession: true)
        defer { worker.send(SIGKILL) }
        #expect(await eventually(within: .seconds(60)) { pids(in: pidFile).count == 2 }, "\(coordinator.output)")
        let jobPids = pids(in: pidFile)

        coordinator.send(SIGTERM)
        #expect(await eventually { coordinator.output.contains("stopping") || coordinator.output.contains("cancelling") })
        // The job ignores SIGTERM: only the second signal's kill ends it before the grace.
        coordinator.send(SIGTERM)
        let outcome = try #require(await coordinator.wait(atMost: .seconds(30)), "the run waited for the grace: \(coordinator.output)")
        #expect(outcome.status == 143, "\(outcome.stderr)")
        #expect(await eventually(within: .seconds(10)) { jobPids.allSatisfy { !isRunning($0) } }, "the remote job's processes live on")
        worker.send(SIGTERM)
        _ = await worker.wait(atMost: .seconds(30))
    }

    @Test("a second SIGTERM to a worker kills its jobs now (one that ignores SIGTERM too), not after the coordinator's 60 s grace")
    func secondSignalToAWorkerKillsItsJobsNow() async throws {
        let scratch = try Scratch()
        let token = try scratch.write("token", "sig-\(UUID().uuidString)\n")
        let pidFile = scratch.file("pids")
        let coordinator = try JobtopProcess(
            ["run", "--listen", "127.0.0.1:0", "--token-file", token, "-j", "0", "--headless", "--grace", "60s", "-c",
             "trap '' TERM; echo $$ >> '\(pidFile)'; while :; do sleep 0.05; done"],
            newSession: true)
        defer { coordinator.send(SIGKILL) }
        let prefix = "accepting workers on 127.0.0.1:"
        let listening = await eventually(within: .seconds(60)) { coordinator.output.contains(prefix) }
        let line = try #require(listening ? coordinator.outputLines.first { $0.contains(prefix) } : nil, "\(coordinator.output)")
        let port = String(line[line.range(of: prefix)!.upperBound...].prefix { $0.isNumber })
        let worker = try JobtopProcess(
            ["worker", "--connect", "127.0.0.1:\(port)", "--slots", "1", "--name", "w", "--token-file", token], newSession: true)
        defer { worker.send(SIGKILL) }
        #expect(await eventually(within: .seconds(60)) { pids(in: pidFile).count == 1 }, "\(coordinator.output)")
        let job = try #require(pids(in: pidFile).first)

        worker.send(SIGTERM)
        #expect(await eventually { worker.output.contains("draining") })
        worker.send(SIGTERM)
        let outcome = try #require(await worker.wait(atMost: .seconds(30)), "the worker waited for the grace: \(worker.output)")
        #expect(outcome.status == 143, "\(outcome.stderr)")
        #expect(!isRunning(job), "the job lives on")
    }
}
