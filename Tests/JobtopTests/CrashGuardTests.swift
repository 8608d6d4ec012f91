import Foundation
import JobtopTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A crash of jobtop in any mode still kills the job process groups, says so in one line and
/// ends with the signal (the dashboard's case, with the terminal, is in DashboardTmuxTests).
@Suite("Crash guard", .serialized, .timeLimit(.minutes(2)))
struct CrashGuardTests {
    /// A job that records its shell's pid and a background child's pid (same process group),
    /// says it is ready, and waits.
    static let job = "echo $$ >> pids; sleep 300 & echo $! >> pids; echo ready; wait"

    static let names: [Int32: String] = [SIGSEGV: "SIGSEGV", SIGABRT: "SIGABRT", SIGBUS: "SIGBUS", SIGILL: "SIGILL"]

    /// A headless run of two ``job``s, once both said they are ready: the process and the pids
    /// the jobs recorded (each job's shell and its background child).
    static func runTwoJobs(in scratch: Scratch, environment: [String: String] = [:]) async throws -> (JobtopProcess, [pid_t]) {
        let process = try JobtopProcess(
            ["-j", "2", "--log-output", "-c", job, "-c", job], directory: scratch.path, environment: environment)
        var ready = 0
        for await line in process.stdoutLines where line.hasSuffix("text=ready") {
            ready += 1
            if ready == 2 { break }
        }
        try #require(ready == 2)
        return (process, pids(in: scratch.file("pids")))
    }

    @Test("A headless run that crashes kills every process of its jobs and dies of the signal", arguments: [SIGSEGV, SIGABRT, SIGILL])
    func headless(signal: Int32) async throws {
        // Given two running jobs, each with a background child
        let scratch = try Scratch()
        let (process, started) = try await Self.runTwoJobs(in: scratch)
        #expect(started.count == 4)
        // When jobtop gets a fatal signal
        process.send(signal)
        let run = await process.wait()
        // Then
        #expect(run.status == 128 + signal)
        #expect(run.stderr.contains("jobtop: crashed (\(Self.names[signal]!)); job processes killed\n"), "stderr: \(run.stderr)")
        #expect(!run.stderr.contains("terminal restored"))
        try await waitUntilGone(started)
    }

    @Test("A run killed with SIGKILL (no code of its own runs) has its jobs killed by its guard, background children included")
    func killedRun() async throws {
        // Given two running jobs, each with a background child
        let scratch = try Scratch()
        let (process, started) = try await Self.runTwoJobs(in: scratch)
        #expect(started.count == 4)
        // When jobtop is killed
        process.send(SIGKILL)
        let run = await process.wait()
        // Then every process of the jobs goes (without the guard, all four lived on)
        #expect(run.status == 128 + SIGKILL)
        try await waitUntilGone(started)
    }

    /// The clean-up kills the jobs; their ends reach the run, which is then over and exits on
    /// another thread. The crash's signal must still be how jobtop ends (once, in a loaded CI
    /// run, a SIGABRT ended it with status 1). The handler's test pause makes that race certain.
    @Test("A run that ends while its crash is being handled still dies of the signal", arguments: [SIGABRT, SIGSEGV])
    func exitDuringCrash(signal: Int32) async throws {
        // Given two running jobs, and a crash handler that pauses after killing them
        let scratch = try Scratch()
        let (process, started) = try await Self.runTwoJobs(in: scratch, environment: ["JOBTOP_TEST_CRASH_PAUSE_MS": "800"])
        // When jobtop gets a fatal signal (and the run sees its jobs end meanwhile)
        process.send(signal)
        let run = await process.wait()
        // Then it ends with the signal, not with the run's status
        #expect(run.status == 128 + signal, "stderr: \(run.stderr)")
        #expect(run.stderr.contains("jobtop: crashed (\(Self.names[signal]!)); job processes killed\n"))
        try await waitUntilGone(started)
    }

    /// A signal sent to jobtop is taken by whichever thread first runs with it unblocked: on a
    /// loaded machine often the thread spawning a job, the moment posix_spawn restores its mask,
    /// before the job's group is recorded. (Seen in CI: a worker said "no job process was
    /// running" and its job lived on.) The test hook raises the signal right there.
    @Test("A crash on the thread spawning a job, before its group is recorded, still kills that job")
    func crashWhileSpawning() async throws {
        // Given a run whose spawning thread crashes right after its first spawn
        let scratch = try Scratch()
        let process = try JobtopProcess(
            ["-j", "1", "--headless", "-c", "sleep 300"], directory: scratch.path, environment: ["JOBTOP_TEST_CRASH_AFTER_SPAWN": "1"])
        // When it runs
        let run = await process.wait()
        // Then the job it had just spawned is killed too, and it says so
        #expect(run.status == 128 + SIGSEGV)
        #expect(run.stderr.contains("jobtop: crashed (SIGSEGV); job processes killed\n"), "stderr: \(run.stderr)")
        let left = await eventually { processes(workingIn: scratch.path).isEmpty }
        #expect(left, "still running in the scratch directory: \(processes(workingIn: scratch.path))")
        for pid in processes(workingIn: scratch.path) { kill(pid, SIGKILL) }
    }

    @Test("A worker that crashes kills the processes of the jobs it runs")
    func worker() async throws {
        // Given a coordinator with no local slots and one worker running its job
        let scratch = try Scratch()
        let port = try reusablePort()
        // A token of its own: a worker of another test reconnecting to a port it used before must
        // not be the one that gets this job.
        let token = try scratch.write("token", "crash-guard-\(UUID().uuidString)\n")
        let coordinator = try JobtopProcess(
            ["--listen", "127.0.0.1:\(port)", "--token-file", token, "-j", "0", "--headless", "-c", Self.job], directory: scratch.path)
        let worker = try JobtopProcess(
            ["worker", "--connect", "127.0.0.1:\(port)", "--token-file", token, "--slots", "1"], directory: scratch.path)
        let started: [pid_t]
        do {
            started = try await waitForValue("the job's two pids") { () -> [pid_t]? in
                let found = pids(in: scratch.file("pids"))
                return found.count == 2 ? found : nil
            }
        } catch {
            // Not yet reaped, so the pids are still theirs.
            worker.send(SIGKILL)
            coordinator.send(SIGKILL)
            throw error
        }
        // When the worker crashes
        worker.send(SIGSEGV)
        let run = await worker.wait()
        // Then
        #expect(run.status == 128 + SIGSEGV)
        #expect(run.stderr.contains("jobtop: crashed (SIGSEGV); job processes killed\n"), "stderr: \(run.stderr)")
        try await waitUntilGone(started)
        coordinator.send(SIGTERM)
        _ = await coordinator.wait()
    }

    /// Polls until none of `pids` runs (a SIGKILLed process takes a moment to become a zombie).
    private func waitUntilGone(_ pids: [pid_t]) async throws {
        _ = try await waitForValue("every job process gone") { () -> Bool? in
            pids.allSatisfy { !isRunning($0) } ? true : nil
        }
    }

    private func waitForValue<T>(_ what: String, _ value: () -> T?) async throws -> T {
        let deadline = ContinuousClock.now + .seconds(30)
        while true {
            if let found = value() { return found }
            guard ContinuousClock.now < deadline else { throw TmuxError(message: "timed out waiting for \(what)") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}
