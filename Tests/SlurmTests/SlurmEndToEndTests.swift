import CProcess
import Foundation
import JobtopTestSupport
import SchedulerSlurm
import Testing

/// Whether a Slurm cluster answers here (Scripts/start-slurm.sh starts a one-node one).
enum SlurmCluster {
    static let isCI = ProcessInfo.processInfo.environment["CI"] == "true"

    /// The node's state is one that runs jobs (at the start of the test run).
    static let isUp: Bool = isNodeReady()

    /// Whether the node's state, now, is one that runs jobs.
    static func isNodeReady() -> Bool {
        guard let output = try? run("/bin/sh", ["-c", "sinfo -h -o %T 2>/dev/null"]) else { return false }
        return output.split(whereSeparator: \.isNewline).contains { ["idle", "mixed", "allocated", "completing"].contains(String($0)) }
    }

    static let skipMessage = "no Slurm runs here: start a one-node cluster with Scripts/start-slurm.sh (as root) to run the Slurm suite"

    /// Fails the test (instead of skipping the suite) when Slurm is not up: the suite is only
    /// skipped outside CI.
    static func require() throws {
        try #require(isUp, "Slurm is not running (CI=true: the Slurm suite must run; .ci/run starts it with Scripts/start-slurm.sh)")
    }

    /// Runs a command to its end; its stdout. Spawned like the tests' jobtop processes (the child
    /// closes every descriptor above 2): Foundation's Process would hand it the test process's
    /// sockets, and a child holding another test's connection open disturbs that test.
    static func run(_ path: String, _ arguments: [String]) throws -> String {
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        let environment: [UnsafeMutablePointer<CChar>?] =
            ProcessInfo.processInfo.environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + environment { free(pointer) } }
        var out: [Int32] = [-1, -1]
        guard jt_pipe(&out, 0) == 0 else { throw SpawnError(message: "cannot make a pipe") }
        let devNull = open("/dev/null", O_RDWR | O_CLOEXEC)
        defer { close(devNull) }
        var child: pid_t = 0
        let rc = jt_spawn_io(path, argv, environment, nil, devNull, out[1], devNull, 0, &child, nil)
        close(out[1])
        defer { close(out[0]) }
        guard rc == 0 else { throw SpawnError(message: "cannot run \(path)") }
        var data = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(out[0], &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            data.append(contentsOf: buffer[0..<count])
        }
        var status: Int32 = 0
        while waitpid(child, &status, 0) < 0 && errno == EINTR {}
        return String(decoding: data, as: UTF8.self)
    }

    /// Whether a process whose command line contains `marker` runs (`pgrep -f`).
    static func hasProcess(_ marker: String) -> Bool {
        let output = (try? run("/usr/bin/pgrep", ["-f", marker])) ?? ""
        return !output.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty
    }
}

/// A headless JSON log.
struct JSONLog {
    let objects: [[String: Any]]

    init(_ lines: [String]) {
        objects = lines.compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        }
    }

    func events(_ name: String, job: String? = nil) -> [[String: Any]] {
        objects.filter { ($0["event"] as? String) == name && (job == nil || ($0["name"] as? String) == job) }
    }

    func outputTexts(of job: String) -> [String] {
        events("output", job: job).compactMap { $0["text"] as? String }
    }
}

/// jobtop on a real one-node Slurm: the binary, headless, with `--slurm`. Serialized: the node
/// has two CPUs and Slurm starts about one job a second, so the tests stay small.
@Suite(
    "jobtop run --slurm on a real Slurm", .serialized, .timeLimit(.minutes(3)),
    .enabled(if: SlurmCluster.isUp || SlurmCluster.isCI, Comment(rawValue: SlurmCluster.skipMessage)))
struct SlurmEndToEndTests {
    @Test("A retried failure, jobtop's timeout, an exact command with quotes, $ and newlines, and progress")
    func jobFile() async throws {
        try SlurmCluster.require()
        let scratch = try Scratch()
        let file = try scratch.write("jobs.toml", #"""
            [slurm]
            partition = "debug"

            [[job]]
            name = "flaky"
            command = "test -f flag || { touch flag; echo first try fails; exit 3; }"
            retries = 1
            backoff = "10ms"

            [[job]]
            name = "too-slow"
            command = "echo started; sleep 120"
            timeout = "3s"

            [[job]]
            name = "exact"
            command = '''
            printf '%s\n' "it's \"quoted\"" '$HOME stays'
            echo "sum: $((6 * 7))" \
              'continued'
            '''

            [[job]]
            name = "progress"
            command = "for i in 25 50 75 100; do echo \"step $i%\"; sleep 0.5; done"

            [[job]]
            name = "elsewhere"
            cwd = "sub"
            command = "pwd"
            """#)
        try FileManager.default.createDirectory(atPath: scratch.file("sub"), withIntermediateDirectories: true)
        // A relative --slurm-dir: sbatch takes --output from the job's --chdir, so jobtop makes
        // it absolute (the job with a cwd failed to start, "signal 53").
        let run = try await JobtopProcess.run(
            [file, "--slurm", "-j", "3", "--grace", "1s", "--slurm-poll", "500ms", "--log-format", "json", "--log-output",
             "--slurm-dir", "slurm"],
            directory: scratch.path)
        let log = JSONLog(run.lines)
        #expect(run.status == 1, "\(run.stderr)")
        // The failure was retried and the second attempt succeeded.
        #expect(log.events("retry", job: "flaky").count == 1)
        #expect(log.events("succeeded", job: "flaky").first?["attempts"] as? Int == 2)
        #expect(log.outputTexts(of: "flaky").contains("first try fails"))
        // jobtop's own timeout stopped it (before Slurm's --time): failed, timed out.
        #expect(log.events("stopping", job: "too-slow").first?["reason"] as? String == "timeout")
        let failed = try #require(log.events("failed", job: "too-slow").first)
        #expect((failed["reason"] as? String)?.contains("timed out after 3s") == true, "\(failed)")
        // The command ran exactly as written.
        #expect(log.outputTexts(of: "exact") == [#"it's "quoted""#, "$HOME stays", "sum: 42 continued"])
        #expect(log.outputTexts(of: "elsewhere").first?.hasSuffix("/sub") == true, "\(log.events("failed", job: "elsewhere"))")
        #expect(log.events("succeeded", job: "exact").count == 1)
        // Progress came from the output file, as from a local job's output.
        #expect(log.outputTexts(of: "progress") == ["step 25%", "step 50%", "step 75%", "step 100%"])
        let progress = log.events("progress", job: "progress").compactMap { $0["progress"] as? Double }
        #expect(progress.last == 1.0, "\(log.events("progress", job: "progress"))")
        #expect(log.events("succeeded", job: "progress").count == 1)
    }

    @Test("With -j 1 jobs are submitted to Slurm by priority, highest first")
    func priorities() async throws {
        try SlurmCluster.require()
        let scratch = try Scratch()
        let file = try scratch.write("jobs.toml", """
            [[job]]
            name = "low"
            command = "true"
            priority = -5
            [[job]]
            name = "urgent"
            command = "true"
            priority = 100
            [[job]]
            name = "middle"
            command = "true"
            """)
        let run = try await JobtopProcess.run(
            [file, "--slurm", "-j", "1", "--slurm-poll", "300ms", "--log-format", "json", "--slurm-dir", scratch.file("slurm")],
            directory: scratch.path)
        #expect(run.status == 0, "\(run.stderr)")
        let order = JSONLog(run.lines).events("started").compactMap { $0["name"] as? String }
        #expect(order == ["urgent", "middle", "low"])
    }

    /// Starts jobtop on one job whose command ends in a comment with a marker of its own (in a
    /// job file, so that only the job's processes have it in their command line); returns it
    /// once the job runs in Slurm, with the marker.
    static func runningMarkedJob(
        _ command: String, grace: String, scratch: Scratch, logsOutput: Bool = false, ready: String? = nil
    ) async throws -> (jobtop: JobtopProcess, marker: String) {
        let marker = "jobtop-slurm-\(UUID().uuidString.prefix(8))"
        let file = try scratch.write("jobs.toml", """
            [[job]]
            name = "marked"
            command = "\(command) # \(marker)"
            """)
        let jobtop = try JobtopProcess(
            [file, "--slurm", "--grace", grace, "--slurm-poll", "300ms", "--log-format", "json", "--slurm-dir", scratch.file("slurm")]
                + (logsOutput ? ["--log-output"] : []),
            directory: scratch.path)
        if let ready { _ = await jobtop.firstLine { $0.contains("\"text\":\"\(ready)\"") } }
        // Running in Slurm: the job's processes are on the node.
        let running = await eventually(within: .seconds(60)) { await offThePool { SlurmCluster.hasProcess(marker) } }
        try #require(running, "the job never ran in Slurm: \(jobtop.output)")
        return (jobtop, marker)
    }

    @Test("A cancel ends the Slurm job and leaves no process of it running")
    func cancel() async throws {
        try SlurmCluster.require()
        let scratch = try Scratch()
        let (jobtop, marker) = try await Self.runningMarkedJob("sleep 300", grace: "1s", scratch: scratch)
        jobtop.send(SIGINT)
        let outcome = try #require(await jobtop.wait(atMost: .seconds(60)), "jobtop did not end after SIGINT")
        let log = JSONLog(outcome.lines)
        #expect(log.events("cancelled").count == 1, "\(outcome.stdout)\n\(outcome.stderr)")
        let gone = await eventually(within: .seconds(30)) { await offThePool { !SlurmCluster.hasProcess(marker) } }
        #expect(gone, "a process of the cancelled job is still running")
    }

    @Test("A second SIGINT kills a Slurm job that ignores SIGTERM at once, not after the grace period and Slurm's KillWait")
    func secondSignalKillsNow() async throws {
        try SlurmCluster.require()
        let scratch = try Scratch()
        // jobtop has seen it running once its first line is logged: it reads a job's output once
        // Slurm says it runs (a job it still takes for pending is cancelled outright, with no
        // grace period to cut short).
        let (jobtop, marker) = try await Self.runningMarkedJob(
            "trap '' TERM; echo ready; sleep 300", grace: "120s", scratch: scratch, logsOutput: true, ready: "ready")
        jobtop.send(SIGINT)
        // The first one's stop is under way (SIGTERM, ignored; SIGKILL due in 120 s) ...
        _ = await jobtop.firstLine { $0.contains("\"event\":\"stopping\"") }
        jobtop.send(SIGINT)
        // ... the second kills it now: well within the grace period.
        let outcome = try #require(await jobtop.wait(atMost: .seconds(60)), "jobtop did not end after a second SIGINT")
        #expect(JSONLog(outcome.lines).events("cancelled").count == 1, "\(outcome.stdout)\n\(outcome.stderr)")
        let gone = await eventually(within: .seconds(30)) { await offThePool { !SlurmCluster.hasProcess(marker) } }
        #expect(gone, "a process of the killed job is still running")
    }

    @Test("A suspended Slurm job is cancelled at once (it takes no SIGTERM, and scancel's SIGTERM retried it for minutes while every other job waited)")
    func suspendedJobIsCancelled() async throws {
        try SlurmCluster.require()
        let scratch = try Scratch()
        let (jobtop, marker) = try await Self.runningMarkedJob(
            "echo ready; sleep 300", grace: "1s", scratch: scratch, logsOutput: true, ready: "ready")
        let id = try SlurmCluster.run("/bin/sh", ["-c", "squeue -h -n marked -o %i"]).trimmingCharacters(in: .whitespacesAndNewlines)
        try #require(!id.isEmpty)
        _ = try SlurmCluster.run("/bin/sh", ["-c", "scontrol suspend \(id)"])
        #expect(await eventually(within: .seconds(30)) { await offThePool { Self.slurmState(id) == "SUSPENDED" } })
        jobtop.send(SIGINT)
        let outcome = await jobtop.wait(atMost: .seconds(20))
        if outcome == nil { _ = try? SlurmCluster.run("/bin/sh", ["-c", "scontrol resume \(id); scancel \(id)"]) }
        let ended = try #require(outcome, "jobtop did not end within 20 s of SIGINT with its job suspended: \(jobtop.output)")
        #expect(JSONLog(ended.lines).events("cancelled").count == 1, "\(ended.stdout)\n\(ended.stderr)")
        let gone = await eventually(within: .seconds(30)) { await offThePool { !SlurmCluster.hasProcess(marker) } }
        #expect(gone, "a process of the cancelled job is still running")
    }

    @Test("A job killed by a signal on Slurm says so (Slurm records it as JobLaunchFailure), and a % in the Slurm directory is taken literally (sbatch read it as a pattern)")
    func signalsAndPercent() async throws {
        try SlurmCluster.require()
        let scratch = try Scratch()
        let file = try scratch.write("jobs.toml", """
            [[job]]
            name = "killed"
            command = "echo bye; kill -9 $$"
            """)
        let run = try await JobtopProcess.run(
            [file, "--slurm", "--slurm-poll", "300ms", "--log-format", "json", "--log-output", "--slurm-dir", scratch.file("pct%jdir")],
            directory: scratch.path)
        let log = JSONLog(run.lines)
        #expect(log.outputTexts(of: "killed") == ["bye"], "\(run.stdout)\n\(run.stderr)")
        let failed = try #require(log.events("failed", job: "killed").first, "\(run.stdout)\n\(run.stderr)")
        #expect(failed["reason"] as? String == "killed by SIGKILL", "\(failed)")
    }

    @Test("An unknown partition or arguments Slurm refuses: exit 2 before anything is submitted")
    func refusedUpFront() async throws {
        try SlurmCluster.require()
        let scratch = try Scratch()
        let partition = try await JobtopProcess.run(
            ["-c", "true", "--slurm", "--partition", "nope", "--slurm-dir", scratch.file("slurm")], directory: scratch.path)
        #expect(partition.status == 2)
        #expect(partition.stderr.contains("unknown Slurm partition 'nope' (partitions: debug)"), "\(partition.stderr)")
        let argument = try await JobtopProcess.run(
            ["-c", "true", "--slurm", "--slurm-arg=--no-such-option", "--slurm-dir", scratch.file("slurm")], directory: scratch.path)
        #expect(argument.status == 2)
        #expect(argument.stderr.contains("Slurm refuses jobs with --no-such-option"), "\(argument.stderr)")
    }

    @Test("A job whose node fails (NODE_FAIL) is requeued like a lost worker's and its next attempt runs")
    func nodeFailure() async throws {
        try SlurmCluster.require()
        let scratch = try Scratch()
        let marker = "jobtop-slurm-nodefail-\(UUID().uuidString.prefix(8))"
        let file = try scratch.write("jobs.toml", """
            [[job]]
            name = "victim"
            command = "test -f ran && { echo second attempt; exit 0; }; touch ran; sleep 300 # \(marker)"
            """)
        let jobtop = try JobtopProcess(
            [file, "--slurm", "--slurm-poll", "300ms", "--log-format", "json", "--log-output", "--slurm-dir", scratch.file("slurm")],
            directory: scratch.path)
        let running = await eventually(within: .seconds(60)) { await offThePool { SlurmCluster.hasProcess(marker) } }
        try #require(running, "the job never ran in Slurm: \(jobtop.output)")
        // The node goes down under the job; slurmd answers again at once (ReturnToService=2), and
        // a resume is asked for anyway in case this Slurm is configured otherwise.
        _ = try SlurmCluster.run("/bin/sh", ["-c", "scontrol update nodename=localhost state=down reason=jobtop-test"])
        defer { _ = try? SlurmCluster.run("/bin/sh", ["-c", "scontrol update nodename=localhost state=resume 2>/dev/null"]) }
        let outcome = try #require(await jobtop.wait(atMost: .seconds(90)), "jobtop did not end: \(jobtop.output)")
        let log = JSONLog(outcome.lines)
        #expect(outcome.status == 0, "\(outcome.stdout)\n\(outcome.stderr)")
        let requeued = try #require(log.events("requeued", job: "victim").first, "\(outcome.stdout)")
        #expect((requeued["reason"] as? String)?.contains("NODE_FAIL") == true, "\(requeued)")
        #expect(log.outputTexts(of: "victim").contains("second attempt"))
        #expect(log.events("succeeded", job: "victim").first?["attempts"] as? Int == 1)
        let idle = await eventually(within: .seconds(30)) { await offThePool { SlurmCluster.isNodeReady() } }
        #expect(idle, "the node did not come back")
    }
}


/// Bad input that needs no Slurm to be found.
@Suite("jobtop run --slurm without Slurm", .timeLimit(.minutes(1)))
struct SlurmInputTests {
    @Test("Without sbatch on PATH: a clear error and exit 2")
    func missingSbatch() async throws {
        let scratch = try Scratch()
        let run = try await JobtopProcess(
            ["-c", "true", "--slurm", "--slurm-dir", scratch.file("slurm")], directory: scratch.path,
            environment: ["PATH": scratch.path]
        ).wait()
        #expect(run.status == 2)
        #expect(run.stderr.contains("sbatch not found on PATH"), "\(run.stderr)")
    }

    @Test("sbatch arguments that undo what jobtop sets (--output, -e, --array, --wait, ...) are refused before anything runs, from the flag, the [slurm] table or a job's own table", arguments: [
        (["--slurm-arg=--output=/tmp/x.out"], "", "--slurm-arg --output=/tmp/x.out: jobtop sets that itself (jobtop reads each job's output from a file of its own)"),
        (["--slurm-arg=-e", "--slurm-arg=x"], "", "--slurm-arg -e: jobtop sets that itself"),
        (["--slurm-arg=--array=1-3"], "", "--slurm-arg --array=1-3: jobtop sets that itself"),
        ([], "[slurm]\nargs = [\"--wait\"]\n", "the job file's [slurm] args --wait: jobtop sets that itself"),
        ([], "[[job]]\nname = \"j\"\ncommand = \"true\"\nslurm = { args = [\"-oout.txt\"] }\n", "job 'j''s slurm args -oout.txt: jobtop sets that itself"),
    ])
    func reservedArguments(flags: [String], file: String, message: String) async throws {
        let scratch = try Scratch()
        var arguments = ["--slurm", "--slurm-dir", scratch.file("slurm")] + flags
        if file.isEmpty {
            arguments += ["-c", "true"]
        } else {
            arguments = [try scratch.write("jobs.toml", file.contains("[[job]]") ? file : file + "[[job]]\ncommand = \"true\"\n")] + arguments
        }
        let run = try await JobtopProcess(arguments, directory: scratch.path, environment: ["PATH": scratch.path]).wait()
        #expect(run.status == 2)
        #expect(run.stderr.contains(message), "\(run.stderr)")
        #expect(SlurmOptions.reservedArgument(in: ["--account=foo", "--time=10", "--mem=2G", "-p", "debug", "--error-x"]) == nil)
    }
}
