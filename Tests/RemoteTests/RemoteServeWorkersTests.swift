import Foundation
import JobtopTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `jobtop serve --workers HOST:PORT`: the daemon's jobs on remote `jobtop worker` processes,
/// and what a crash of the daemon does to a job running on one. Real processes, real gRPC.
@Suite("serve --workers", .serialized, .timeLimit(.minutes(3)))
struct RemoteServeWorkersTests {
    /// One `jobtop serve -j 0 --workers` (its own socket, state and token): every job runs on a
    /// remote worker.
    struct Serve {
        let process: JobtopProcess
        let workersPort: Int
        let environment: [String: String]
        let scratch: Scratch

        /// Starts it, with its workers' listener on `port` (0: a free one).
        static func start(in scratch: Scratch, port: Int = 0, options: [String] = []) async throws -> Serve {
            let environment = ["XDG_RUNTIME_DIR": scratch.file("run"), "XDG_STATE_HOME": scratch.file("state")]
            let process = try JobtopProcess(
                ["serve", "-j", "0", "--workers", "127.0.0.1:\(port)", "--token-file", scratch.file("token")] + options,
                directory: scratch.path, environment: environment, newSession: true)
            let marker = "accepting workers on 127.0.0.1:"
            guard await eventually(within: .seconds(60), { process.output.contains("listening on") }),
                let line = process.outputLines.first(where: { $0.contains(marker) }),
                let bound = Int(line[line.range(of: marker)!.upperBound...].prefix { $0.isNumber })
            else {
                process.send(SIGKILL)
                throw SpawnError(message: "serve did not say where it accepts workers: \(process.output)")
            }
            return Serve(process: process, workersPort: bound, environment: environment, scratch: scratch)
        }

        /// A client command against it, to its end.
        func run(_ arguments: [String]) async throws -> JobtopProcess.Outcome {
            try await JobtopProcess(arguments, directory: scratch.path, environment: environment).wait()
        }

        /// A `jobtop worker` named `far` with `slots`, once the serve says it joined.
        func joinedWorker(slots: Int) async throws -> JobtopProcess {
            let worker = try JobtopProcess(
                ["worker", "--connect", "127.0.0.1:\(workersPort)", "--token-file", scratch.file("token"), "--slots", "\(slots)", "--name", "far"],
                directory: scratch.path, newSession: true)
            let joined = await eventually(within: .seconds(60)) { joins(of: "far") == 1 }
            if !joined { worker.send(SIGKILL) }
            try #require(joined, "the worker never joined: \(process.output)\n\(worker.output)")
            return worker
        }

        /// How many times serve's log says worker `name` joined.
        func joins(of name: String) -> Int {
            process.outputLines.count { $0.contains("worker '\(name)' joined") }
        }
    }

    @Test("A remote worker runs serve's jobs; kill -9 of serve stops the worker's running job at once; the restarted serve retries it on the rejoined worker, and it ends once, succeeded")
    func crashWithRemoteJob() async throws {
        let scratch = try Scratch()
        try scratch.write("token", "serve-workers-\(UUID().uuidString)\n")
        // On a port no socket bound to port 0 is handed while serve is down.
        var serve = try await Serve.start(in: scratch, port: try reusablePort())
        defer { serve.process.send(SIGKILL) }
        let worker = try await serve.joinedWorker(slots: 2)
        defer { worker.send(SIGKILL) }

        // Given a job on the worker whose first attempt runs until stopped and whose second
        // succeeds at once (the attempts count their starts in a file).
        let starts = scratch.file("starts")
        try scratch.write(
            "job.toml",
            """
            [[job]]
            name = "long"
            retries = 2
            command = "echo \\"start $$\\" >> '\(starts)'; if [ $(grep -c start '\(starts)') -ge 2 ]; then echo done >> '\(starts)'; exit 0; fi; sleep 600"
            """)
        let submitted = try await serve.run(["submit", "job.toml"])
        try #require(submitted.status == 0, "submit: \(submitted.stderr)")
        let started = await eventually(within: .seconds(60)) { Self.lines(starts).count == 1 }
        try #require(started, "the job never started: \(serve.process.output)")
        let first = Self.lines(starts)[0].split(separator: " ")
        let group = try #require(first.count == 2 ? pid_t(first[1]) : nil, "start line: \(first)")

        // When serve is killed while the worker runs it.
        serve.process.send(SIGKILL)
        _ = await serve.process.wait(atMost: .seconds(60))

        // Then the worker stops the job at once (its connection is gone): no process of it is left.
        let stopped = await eventually(within: .seconds(30)) { kill(-group, 0) != 0 && errno == ESRCH }
        #expect(stopped, "the job's process group \(group) still runs after serve died")
        // The worker says so once its connection's end is handled, which may come a moment after
        // the group is gone (the group dies first, then the session ends and the line is written).
        let said = await eventually(within: .seconds(30)) { worker.output.contains("running jobs were stopped") }
        #expect(said, "\(worker.output)")

        // When serve starts again on the same address.
        serve = try await Serve.start(in: scratch, port: serve.workersPort)
        // Counted as failed once the serve knew it began; a kill that comes before the worker's
        // `Started` is journaled (a loaded machine) finds it still held, and gives it back
        // uncounted. Either way it runs again below.
        let restartLine = serve.process.output
        #expect(
            restartLine.contains("counted as failed ('jobtop stopped')") || restartLine.contains("not begun, went back to the queue"),
            "\(restartLine)")

        // Then the worker rejoins, runs the second attempt, and the job ends once, succeeded.
        let rejoined = await eventually(within: .seconds(60)) { serve.joins(of: "far") == 1 }
        #expect(rejoined, "the worker did not rejoin: \(worker.output)")
        let done = await eventually(within: .seconds(60)) { Self.lines(starts).contains("done") }
        #expect(done, "the second attempt never ran to its end: \(Self.lines(starts))")
        var status = try await serve.run(["status", "--all", "--json"])
        for _ in 0..<100 where !status.stdout.contains("succeeded") {
            status = try await serve.run(["status", "--all", "--json"])
        }
        #expect(status.stdout.contains("\"succeeded\""), "status: \(status.stdout)")
        #expect(Self.lines(starts).filter { $0.hasPrefix("start") }.count == 2, "\(Self.lines(starts))")
        #expect(Self.lines(starts).filter { $0 == "done" }.count == 1, "\(Self.lines(starts))")

        // And shutting serve down says goodbye to the worker.
        let shutdown = try await serve.run(["shutdown"])
        #expect(shutdown.status == 0, "\(shutdown.stderr)")
        let ended = await serve.process.wait(atMost: .seconds(60))
        #expect(ended?.status == 0, "serve: \(serve.process.output)")
    }

    @Test("Jobs prefetched to a worker and held there, not begun, when serve is killed go back to the queue uncounted: with no retries they still run, once each")
    func heldJobsAreHandedBack() async throws {
        let scratch = try Scratch()
        try scratch.write("token", "serve-workers-\(UUID().uuidString)\n")
        var serve = try await Serve.start(in: scratch, port: try reusablePort(), options: ["--prefetch", "2"])
        defer { serve.process.send(SIGKILL) }
        let worker = try await serve.joinedWorker(slots: 1)
        defer { worker.send(SIGKILL) }

        // Given one slot busy with a job that runs until stopped (the first time), and two jobs
        // with no retries prefetched behind it, held at the worker.
        let ran = scratch.file("ran")
        try scratch.write(
            "job.toml",
            """
            [[job]]
            name = "first"
            retries = 1
            command = "echo first >> '\(ran)'; if [ $(grep -c first '\(ran)') -ge 2 ]; then exit 0; fi; sleep 600"
            [[job]]
            name = "second"
            command = "echo second >> '\(ran)'"
            [[job]]
            name = "third"
            command = "echo third >> '\(ran)'"
            """)
        let submitted = try await serve.run(["submit", "job.toml"])
        try #require(submitted.status == 0, "submit: \(submitted.stderr)")
        let started = await eventually(within: .seconds(60)) { Self.lines(ran) == ["first"] }
        try #require(started, "the first job never started: \(serve.process.output)")
        let held = await eventually(within: .seconds(60)) {
            let status = try? await serve.run(["status", "--json"])
            return status?.stdout.components(separatedBy: "\"state\":\"running\"").count == 4
        }
        try #require(held, "the two others were not handed to the worker")

        // When serve is killed and started again.
        serve.process.send(SIGKILL)
        _ = await serve.process.wait(atMost: .seconds(60))
        serve = try await Serve.start(in: scratch, port: serve.workersPort, options: ["--prefetch", "2"])

        // Then the two held jobs went back to the queue without using their one attempt, and
        // every job runs to success: the held ones once each.
        #expect(serve.process.output.contains("waiting at a worker, not begun, went back to the queue"), "\(serve.process.output)")
        var status = try await serve.run(["status", "--all", "--json"])
        for _ in 0..<300 where status.stdout.components(separatedBy: "\"state\":\"succeeded\"").count < 4 {
            status = try await serve.run(["status", "--all", "--json"])
        }
        #expect(status.stdout.components(separatedBy: "\"state\":\"succeeded\"").count == 4, "status: \(status.stdout)")
        #expect(Self.lines(ran).sorted() == ["first", "first", "second", "third"], "\(Self.lines(ran))")
        let shutdown = try await serve.run(["shutdown"])
        #expect(shutdown.status == 0, "\(shutdown.stderr)")
    }

    @Test("serve's worker flags are checked before anything starts: status 2, naming the flag", arguments: [
        (["-j", "0"], "0 is allowed with --workers"),
        (["--prefetch", "2"], "--prefetch needs --workers"),
        (["--heartbeat", "2s"], "--heartbeat needs --workers"),
        (["--workers", "127.0.0.1:0", "--heartbeat", "10ms"], "--heartbeat must be from 100ms to 60s"),
        (["--workers", "127.0.0.1:0", "--prefetch", "5000"], "--prefetch must be 'auto' or a number from 0 to 1024"),
        (["--workers", "127.0.0.1:0", "--prefetch", "-1"], "--prefetch must be 'auto' or a number from 0 to 1024, not '-1'"),
        (["--workers", "127.0.0.1:0", "--heartbeat", "-1s"], "--heartbeat"),
        (["--workers", "127.0.0.1:0", "--goodbye-grace", "-1s"], "--goodbye-grace"),
        (["--goodbye-grace", "5s"], "--goodbye-grace needs --workers"),
        (["--workers", "127.0.0.1:0", "--goodbye-grace", "11m"], "--goodbye-grace must be at most 10m, not 11m"),
        (["--workers", "127.0.0.1:0", "--goodbye-grace", "soon"], "--goodbye-grace: 'soon' is not a duration"),
        (["--workers", "0.0.0.0:0"], "--workers 0.0.0.0:0: a non-loopback address needs a token"),
        (["--workers", "127.0.0.1:7000", "--listen", "127.0.0.1:7000"], "two different addresses"),
        (["--workers", "nowhere"], "--workers nowhere"),
        (["--grace", "soon"], "--grace"),
        (["--grace", "-1s"], "--grace"),
    ])
    func badFlags(arguments: [String], message: String) async throws {
        let scratch = try Scratch()
        let environment = ["XDG_RUNTIME_DIR": scratch.file("run"), "XDG_STATE_HOME": scratch.file("state")]
        let outcome = try await JobtopProcess(["serve"] + arguments, directory: scratch.path, environment: environment).wait()
        #expect(outcome.status == 2, "status \(outcome.status): \(outcome.stderr)")
        #expect(outcome.stderr.contains(message), "\(outcome.stderr)")
        #expect(!FileManager.default.fileExists(atPath: scratch.file("state")), "serve made its state before refusing")
    }

    static func lines(_ file: String) -> [String] {
        ((try? String(contentsOfFile: file, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }
}
