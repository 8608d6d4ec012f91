import Foundation
import JobtopTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `jobtop run --listen ... --heartbeat DURATION`: the interval both sides use, end to end.
@Suite("jobtop run --heartbeat", .serialized, .timeLimit(.minutes(2)))
struct RemoteHeartbeatFlagTests {
    /// Whether the job's first output line reached the coordinator: the worker reads a job's
    /// pipes only once its spawn has returned and recorded the job's process group for the
    /// guard. A worker stopped before that (its job had already written its start mark, the
    /// spawning thread not yet run again on a loaded machine) left the group unknown to the
    /// guard, which then stopped nothing (a CI failure).
    static func recorded(_ coordinator: CoordinatorProcess) async -> Bool {
        await eventually(within: .seconds(60)) {
            coordinator.process.outputLines.contains { $0.contains("\"event\":\"output\"") && $0.contains("\"text\":\"spawned\"") }
        }
    }

    @Test("--heartbeat 200ms with --grace 1s: a frozen worker is lost after 5 intervals plus the grace (2s), its guard has stopped its job by then, and the job runs again on another")
    func frozenWorkerIsLostOnTheGivenHeartbeat() async throws {
        // Given a headless coordinator with a short heartbeat, and a worker that takes its one job.
        let coordinator = try await CoordinatorProcess.start(
            ["--log-format", "json", "--log-output", "--heartbeat", "200ms", "--grace", "1s"], localSlots: 0
        ) { scratch in
            // Runs until the test says go: the first copy cannot end before the worker is frozen
            // unless it is stopped, which it notes. It prints `spawned` (see `recorded`).
            let marker = scratch.file("ran")
            return "trap 'echo end >> \(marker); exit 1' TERM; echo start >> '\(marker)'; echo spawned; while [ ! -e '\(scratch.file("go"))' ]; do sleep 0.05; done"
        }
        defer { coordinator.process.send(SIGKILL) }
        let marker = coordinator.scratch.file("ran")
        func worker(_ name: String) throws -> JobtopProcess { try coordinator.worker(name: name) }
        let frozen = try worker("frozen")
        defer { frozen.send(SIGKILL) }
        let started = await eventually(within: .seconds(60)) { FileManager.default.fileExists(atPath: marker) }
        try #require(started, "the job never started: \(coordinator.process.output)")
        try #require(await Self.recorded(coordinator), "the job's output never came: \(coordinator.process.output)")

        // When the worker freezes (SIGSTOP: its connection stays open, it says nothing more), and
        // another joins.
        kill(-frozen.pid, SIGSTOP)
        #expect(await eventually { isStopped(frozen.pid) })
        let other = try worker("other")
        defer { other.send(SIGKILL) }

        // Then the coordinator gives it up on the short heartbeat, and the job runs again elsewhere.
        func marks() -> [Substring] { ((try? String(contentsOfFile: marker, encoding: .utf8)) ?? "").split(separator: "\n") }
        let again = await eventually(within: .seconds(90)) { marks().count { $0 == "start" } >= 2 }
        #expect(again, "the job did not start again: \(coordinator.process.output)")
        // Never two copies at once: the frozen worker's guard stopped the first (the worker runs no
        // code while stopped, its job does) before the coordinator requeued it.
        #expect(Array(marks().prefix(3)) == ["start", "end", "start"], "\(marks())")
        // The frozen session is lost by silence. Not necessarily the worker's first `worker-left`:
        // on a loaded machine a 200 ms heartbeat can come more than the worker's own 600 ms late
        // before the freeze, and it then leaves by itself and joins again (and the job's second
        // start may come from that).
        let lost = await eventually(within: .seconds(60)) {
            coordinator.process.outputLines.contains { $0.contains("\"event\":\"worker-left\"") && $0.contains("frozen") && $0.contains("no heartbeat for 2s") }
        }
        #expect(lost, "the frozen worker was not lost by silence: \(coordinator.process.output)")
        try coordinator.go()
        let outcome = try #require(await coordinator.process.wait(atMost: .seconds(90)), "the run did not end")
        #expect(outcome.status == 0, "\(outcome.stderr)")
        kill(-frozen.pid, SIGKILL)
        kill(-frozen.pid, SIGCONT)
        _ = await frozen.wait()
        other.send(SIGTERM)
        _ = await other.wait(atMost: .seconds(60))
    }

    @Test("A worker stopped long enough for its guard to stop its job, and resumed before the coordinator gives it up, does not report that end as the job's: the job runs again and succeeds (it failed, by the guard's SIGTERM)")
    func guardStoppedJobIsNotTheJobsFailure() async throws {
        // Given a coordinator with no retries, and a job whose trap says it was stopped and
        // fails. A 2 s heartbeat: the worker's guard fires after 7 s without a tick, the
        // coordinator gives the worker up after 11 s of silence; the test resumes the worker in
        // between, as soon as the trap has run.
        let coordinator = try await CoordinatorProcess.start(
            ["--log-format", "json", "--log-output", "--heartbeat", "2s", "--grace", "1s", "--retries", "0"], localSlots: 0
        ) { scratch in
            let marker = scratch.file("ran")
            return "trap 'echo end >> \(marker); exit 1' TERM; echo start >> '\(marker)'; echo spawned; while [ ! -e '\(scratch.file("go"))' ]; do sleep 0.05; done"
        }
        defer { coordinator.process.send(SIGKILL) }
        let marker = coordinator.scratch.file("ran")
        func marks() -> [Substring] { ((try? String(contentsOfFile: marker, encoding: .utf8)) ?? "").split(separator: "\n") }
        let worker = try coordinator.worker(name: "sleepy")
        defer {
            kill(-worker.pid, SIGKILL)
            kill(-worker.pid, SIGCONT)
        }
        let started = await eventually(within: .seconds(60)) { marks().first == "start" }
        try #require(started, "the job never started: \(coordinator.process.output)")
        try #require(await Self.recorded(coordinator), "the job's output never came: \(coordinator.process.output)")

        // When the worker is stopped until its guard has stopped the job, then resumed.
        kill(-worker.pid, SIGSTOP)
        let stopped = await eventually(within: .seconds(60)) { marks().contains("end") }
        kill(-worker.pid, SIGCONT)
        try #require(stopped, "the guard did not stop the job: \(coordinator.process.output)")

        // Then the job runs again (on the same worker, once it has joined again) and succeeds.
        let again = await eventually(within: .seconds(60)) { marks().count { $0 == "start" } >= 2 }
        #expect(again, "the job did not start again: \(coordinator.process.output)")
        try coordinator.go()
        let outcome = try #require(await coordinator.process.wait(atMost: .seconds(90)), "the run did not end")
        #expect(outcome.status == 0, "\(outcome.stderr)\n\(outcome.stdout)")
        let lines = coordinator.process.outputLines
        #expect(!lines.contains { $0.contains("\"event\":\"failed\"") }, "\(coordinator.process.output)")
        #expect(lines.contains { $0.contains("\"event\":\"succeeded\"") }, "\(coordinator.process.output)")
        // The worker said why it left.
        #expect(worker.output.contains("so its guard stopped its jobs"), "\(worker.output)")
        worker.send(SIGTERM)
        _ = await worker.wait(atMost: .seconds(60))
    }
}
