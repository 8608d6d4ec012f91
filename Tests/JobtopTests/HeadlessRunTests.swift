import Foundation
import JobtopTestSupport
import Testing

/// The built binary, run headless as a user or a script would.
@Suite("Headless runs of the jobtop binary", .timeLimit(.minutes(1)))
struct HeadlessRunTests {
    @Test("A job file of successes exits 0 with a started and a succeeded line per job and a summary")
    func successes() async throws {
        let scratch = try Scratch()
        let file = try scratch.write("jobs.toml", """
            [[job]]
            name = "one"
            command = "echo one"
            [[job]]
            name = "two"
            command = "true"
            [[job]]
            name = "three"
            command = "printf 'x\\n'"
            """)
        let run = try await JobtopProcess.run([file, "-j", "2"])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(Log.events("started", in: run.lines).count == 3)
        let succeeded = Log.events("succeeded", in: run.lines)
        #expect(Set(succeeded.map { $0.split(separator: " ")[3] }) == ["one", "two", "three"])
        let summary = try #require(run.lines.last)
        #expect(summary.contains(" summary ") && summary.contains("total=3 succeeded=3 failed=0 cancelled=0"))
        #expect(summary.contains("exit_status=0"))
        #expect(run.stderr.isEmpty)
    }

    @Test("A job's own slurm table does not send the run to Slurm: without [slurm] or --slurm it runs here (it was refused for a partition only Slurm knows)")
    func ownSlurmTableRunsLocally() async throws {
        let scratch = try Scratch()
        let file = try scratch.write("jobs.toml", """
            [[job]]
            name = "train"
            command = "echo here"
            slurm = { partition = "no-such-partition-here", args = ["--gres=gpu:1"] }
            """)
        let run = try await JobtopProcess.run([file], directory: scratch.path)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.isEmpty, "\(run.stderr)")
        #expect(Log.events("succeeded", in: run.lines).count == 1, "\(run.lines)")
        #expect(!FileManager.default.fileExists(atPath: scratch.file(".jobtop-slurm")))
    }

    @Test("A failing job is retried with retry lines, then fails for good and the run exits 1")
    func retriedFailure() async throws {
        let scratch = try Scratch()
        let file = try scratch.write("jobs.toml", """
            [[job]]
            name = "flaky"
            command = "exit 3"
            retries = 2
            backoff = "10ms"
            [[job]]
            name = "second-try"
            command = "test -f once || { touch once; exit 1; }"
            retries = 1
            backoff = "10ms"
            """)
        let run = try await JobtopProcess.run([file, "-j", "1"], directory: scratch.path)
        #expect(run.status == 1)
        let retries = Log.events("retry", in: run.lines)
        #expect(retries.filter { $0.contains("flaky") }.count == 2)
        #expect(retries.contains { $0.contains("flaky attempt=1/3 reason=\"exit 3\" exit_status=3 next_attempt=2") })
        #expect(Log.events("started", in: run.lines).filter { $0.contains("flaky") }.count == 3)
        #expect(Log.events("failed", in: run.lines).contains { $0.contains("flaky attempts=3") })
        #expect(Log.events("succeeded", in: run.lines).contains { $0.contains("second-try attempts=2") })
        #expect(run.lines.last?.contains("total=2 succeeded=1 failed=1") == true)
        #expect(run.stderr.contains("failed: flaky: exit 3"))
    }

    @Test("A timeout kills the sleep and everything in its process group")
    func timeout() async throws {
        let scratch = try Scratch()
        let run = try await JobtopProcess.run(
            ["-c", "echo $$ > pids; sleep 30 & echo $! >> pids; wait", "--timeout", "2s", "--grace", "1s"],
            directory: scratch.path)
        #expect(run.status == 1)
        #expect(Log.events("stopping", in: run.lines).first?.contains("reason=timeout") == true)
        #expect(Log.events("failed", in: run.lines).first?.contains("reason=\"timed out after 2s\"") == true)
        let started = pids(in: scratch.file("pids"))
        #expect(started.count == 2)
        #expect(started.allSatisfy { !isRunning($0) })
    }

    @Test("With -j 1 jobs run by priority, file order among equals")
    func priorityOrder() async throws {
        let scratch = try Scratch()
        let file = try scratch.write("jobs.toml", """
            [[job]]
            name = "low"
            command = "true"
            priority = -5
            [[job]]
            name = "first-default"
            command = "true"
            [[job]]
            name = "urgent"
            command = "true"
            priority = 100
            [[job]]
            name = "second-default"
            command = "true"
            [[job]]
            name = "high"
            command = "true"
            priority = 10
            """)
        let run = try await JobtopProcess.run([file, "-j", "1"])
        #expect(run.status == 0)
        let order = Log.events("started", in: run.lines).map { String($0.split(separator: " ")[3]) }
        #expect(order == ["urgent", "high", "first-default", "second-default", "low"])
    }

    @Test("--halt-on-failure cancels the rest after the first job that fails for good")
    func haltOnFailure() async throws {
        let scratch = try Scratch()
        let file = try scratch.write("jobs.toml", """
            [[job]]
            name = "breaks"
            command = "exit 4"
            priority = 10
            [[job]]
            name = "slow-1"
            command = "sleep 30"
            [[job]]
            name = "slow-2"
            command = "sleep 30"
            [[job]]
            name = "slow-3"
            command = "sleep 30"
            """)
        let run = try await JobtopProcess.run([file, "-j", "1", "--halt-on-failure"])
        #expect(run.status == 1)
        #expect(Log.events("failed", in: run.lines).count == 1)
        #expect(Log.events("cancelled", in: run.lines).count == 3)
        #expect(Log.events("succeeded", in: run.lines).isEmpty)
        #expect(run.lines.last?.contains("total=4 succeeded=0 failed=1 cancelled=3") == true)
        #expect(run.stderr.contains("--halt-on-failure"))
    }

    @Test("A list on stdin runs with '-' and, with no file, from a pipe")
    func standardInputLists() async throws {
        let list = "echo a\n\n# skipped\necho b\nexit 0\n"
        let dash = try await JobtopProcess.run(["-"], stdin: list)
        #expect(dash.status == 0)
        #expect(Log.events("succeeded", in: dash.lines).count == 3)
        let implicit = try await JobtopProcess.run(["-j", "1"], stdin: list)
        #expect(implicit.status == 0)
        let started = Log.events("started", in: implicit.lines)
        #expect(started.count == 3)
        #expect(started.first?.contains("\"echo a\" attempt=1/1") == true)
        let plainFile = try Scratch()
        let path = try plainFile.write("list.txt", list)
        let fromFile = try await JobtopProcess.run([path, "-c", "echo c"])
        #expect(Log.events("succeeded", in: fromFile.lines).count == 4)
    }

    @Test("Thousands of -c options (parsed apart from the argument parser, whose time grew with their square): every one runs, in order; an empty one is still refused")
    func manyCommandOptions() async throws {
        let scratch = try Scratch()
        let commands = (0..<2_000).flatMap { ["-c", "echo \($0) >> out"] }
        let run = try await JobtopProcess.run(["-j", "1", "--headless"] + commands, directory: scratch.path)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(scratch.read("out") == (0..<2_000).map { "\($0)\n" }.joined())
        let empty = try await JobtopProcess.run(["run", "--headless", "-c", "touch started"] + commands + ["-c", " "], directory: scratch.path)
        #expect(empty.status == 2 && empty.stderr.contains("-c/--command must not be empty"), "\(empty.stderr)")
        #expect(scratch.read("started") == nil)
    }

    @Test("--output-dir holds each job's stdout and stderr, every attempt")
    func outputDirectory() async throws {
        let scratch = try Scratch()
        let file = try scratch.write("jobs.toml", """
            [[job]]
            name = "greet"
            command = "echo hello; echo oops >&2; echo bye"
            [[job]]
            name = "nested/name"
            command = "echo nested"
            [[job]]
            name = "again"
            command = "echo try; test -f marker || { touch marker; exit 1; }"
            retries = 1
            backoff = "10ms"
            [[job]]
            name = ".."
            command = "echo dots"
            """)
        // A symbolic link under a job's file name, to a file outside the directory: replaced,
        // and what it points at untouched.
        try scratch.write("outside", "keep\n")
        try FileManager.default.createDirectory(atPath: scratch.file("out"), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: scratch.file("out/greet.log"), withDestinationPath: scratch.file("outside"))
        let run = try await JobtopProcess.run(
            [file, "-c", "seq 1 2000", "--output-dir", "out"], directory: scratch.path)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(scratch.read("outside") == "keep\n")
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: scratch.file("out/greet.log"))) == nil)
        let greet = try #require(scratch.read("out/greet.log"))
        #expect(greet.split(separator: "\n").sorted() == ["bye", "hello", "oops"])
        #expect(greet.hasPrefix("hello\n") && greet.contains("bye\n"))
        #expect(scratch.read("out/nested_name.log") == "nested\n")
        #expect(scratch.read("out/again.log") == "try\n--- jobtop: attempt 2 ---\ntry\n")
        let files = try FileManager.default.contentsOfDirectory(atPath: scratch.file("out"))
        // The list job and the one whose name leaves nothing safe (`..`) are under their ids (not
        // `-ID`, which a shell takes for an option).
        let byID = files.filter { !["greet.log", "nested_name.log", "again.log"].contains($0) }
        #expect(byID.count == 2 && byID.allSatisfy { $0.count == 36 + 4 && !$0.hasPrefix("-") }, "\(files)")
        let contents = byID.compactMap { scratch.read("out/\($0)") }.sorted()
        #expect(contents == ["dots\n", (1...2000).map(String.init).joined(separator: "\n") + "\n"].sorted())
    }

    @Test("A full disk under --output-dir: one line names the file, the other jobs' files are whole; a full stdout: one line and status 141")
    func fullDisk() async throws {
        let scratch = try Scratch()
        let file = try scratch.write("jobs.toml", """
            [[job]]
            name = "full"
            command = "seq 1 20000"
            [[job]]
            name = "fine"
            command = "seq 1 20000"
            """)
        // /dev/full's device (1, 7: glibc's makedev) fails every write with ENOSPC, as a full disk does: made
        // under the job's file name (a symbolic link to /dev/full is not followed). Making it
        // needs root, which the tests have here and in CI; where they do not, this part is left.
        try FileManager.default.createDirectory(atPath: scratch.file("out"), withIntermediateDirectories: true)
        if mknod(scratch.file("out/full.log"), S_IFCHR | 0o666, dev_t(1 << 8 | 7)) == 0 {
            let run = try await JobtopProcess.run([file, "--output-dir", "out", "--log-output"], directory: scratch.path)
            #expect(run.status == 0, "\(run.stderr)")
            let complaints = run.stderr.split(separator: "\n").filter { $0.contains("full.log") }
            #expect(complaints.count == 1 && complaints[0].hasSuffix("full.log (No space left on device): the rest of this attempt's output there is lost"), "\(run.stderr)")
            #expect(scratch.read("out/fine.log") == (1...20000).map(String.init).joined(separator: "\n") + "\n")
        } else {
            print("fullDisk: cannot make a device node (\(String(cString: strerror(errno)))): the --output-dir part is not run")
        }

        let script = "\(JobtopProcess.binary) \(file) --log-output > /dev/full; echo \"status=$?\" >&2"
        let full = try await JobtopProcess(["-c", script], directory: scratch.path, executable: "/bin/bash").wait()
        let lines = full.stderr.split(separator: "\n").filter { $0.contains("stdout") }
        #expect(lines == ["jobtop: cannot write the log to stdout (No space left on device): the rest of the log is dropped; the jobs go on (Ctrl-C stops them)"], "\(full.stderr)")
        #expect(full.stderr.contains("status=141"), "\(full.stderr)")
    }

    @Test("JSON log lines all parse, seq increases, and the summary closes the log")
    func jsonLog() async throws {
        let scratch = try Scratch()
        let file = try scratch.write("jobs.toml", """
            [[job]]
            name = "progress \\"quoted\\""
            command = "for i in 1 2 3 4; do echo \\"$i/4\\"; done"
            progress = '(\\d+)/(\\d+)'
            [[job]]
            name = "fails"
            command = "exit 2"
            retries = 1
            backoff = "10ms"
            [[job]]
            command = "echo plain"
            """)
        let run = try await JobtopProcess.run([file, "--log-format", "json", "--log-output"])
        #expect(run.status == 1)
        let objects = try Log.json(run.lines)
        let events = objects.dropLast()
        let seqs = events.compactMap { $0["seq"] as? Int }
        #expect(seqs.count == events.count)
        #expect(zip(seqs, seqs.dropFirst()).allSatisfy { $0 < $1 })
        #expect(events.allSatisfy { $0["ts"] is String && $0["event"] is String })
        #expect(events.filter { $0["job"] != nil }.allSatisfy { $0["name"] is String })
        #expect(events.contains { $0["event"] as? String == "progress" && $0["progress"] as? Double == 1 })
        #expect(events.contains { $0["event"] as? String == "output" && $0["text"] as? String == "plain" })
        #expect(events.contains { $0["event"] as? String == "retry" && $0["exit_status"] as? Int == 2 })
        let summary = try #require(objects.last)
        #expect(summary["event"] as? String == "summary")
        #expect(summary["total"] as? Int == 3)
        #expect(summary["succeeded"] as? Int == 2)
        #expect(summary["failed"] as? Int == 1)
        #expect(summary["exit_status"] as? Int == 1)
    }

    @Test("A command that cannot run is a failed job with exit 127, not a usage error")
    func commandNotFound() async throws {
        let run = try await JobtopProcess.run(["-c", "definitely-not-a-command-jobtop"])
        #expect(run.status == 1)
        #expect(Log.events("failed", in: run.lines).first?.contains("exit_status=127") == true)
    }

    @Test("--help and --version exit 0; jobtop --help documents the options")
    func helpAndVersion() async throws {
        let help = try await JobtopProcess.run(["--help"])
        #expect(help.status == 0)
        for option in ["--command", "--jobs", "--retries", "--backoff", "--timeout", "--grace", "--headless",
                       "--log-format", "--output-dir", "--halt-on-failure", "Exit status"] {
            #expect(help.stdout.contains(option), "\(option)")
        }
        let runHelp = try await JobtopProcess.run(["run", "--help"])
        #expect(runHelp.status == 0 && runHelp.stdout.contains("--log-output"))
        let version = try await JobtopProcess.run(["--version"])
        #expect(version.status == 0)
        #expect(version.stdout.hasPrefix("jobtop "))
    }
}
