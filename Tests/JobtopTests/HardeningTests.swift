import Foundation
import JobtopTestSupport
import Testing

/// What a hostile trial broke in the command line, each as a run of the real binary.
@Suite("Hardening: halting, streaming lists, broken stdout", .timeLimit(.minutes(2)))
struct HardeningTests {
    @Test("--halt-on-failure starts nothing after the failure and never logs cancelled for a job that ran to its end")
    func haltStartsNothingAfterTheFailure() async throws {
        // The hostile trial's case, run several times: the failure frees a slot while two jobs
        // wait; before the fix the next job started (40 of 40 runs) and was sometimes logged
        // cancelled although it had run.
        for round in 1...5 {
            let scratch = try Scratch()
            let list = "sleep 0.2; exit 1\nsleep 2\ntouch hm.1\ntouch hm.2\n"
            let run = try await JobtopProcess.run(["-", "-j", "2", "--halt-on-failure"], stdin: list, directory: scratch.path)
            #expect(run.status == 1, "round \(round)")
            #expect(scratch.read("hm.1") == nil && scratch.read("hm.2") == nil, "round \(round): a job started after the failure")
            #expect(Log.events("started", in: run.lines).count == 2, "round \(round)")
            #expect(Log.events("halted", in: run.lines).count == 1, "round \(round)")
            #expect(run.lines.last?.contains("total=4 succeeded=0 failed=1 cancelled=3") == true, "round \(round): \(run.stdout)")
        }
    }

    @Test("A list on a pipe that stays open streams: the first job starts before the list ends")
    func anOpenPipeStreams() async throws {
        let scratch = try Scratch()
        let jobtop = try JobtopProcess(["-j", "2", "--log-format", "json"], directory: scratch.path, stdinPipe: true)
        jobtop.writeStdin("echo first\n")
        // Given only one line so far, the job runs and succeeds while stdin stays open.
        let succeeded = await jobtop.firstLine { $0.contains("\"event\":\"succeeded\"") }
        #expect(succeeded?.contains("echo first") == true)
        jobtop.writeStdin("echo second\ntouch third\n")
        let third = await jobtop.firstLine { $0.contains("\"event\":\"succeeded\"") && $0.contains("touch third") }
        #expect(third != nil)
        #expect(scratch.read("third") != nil)
        // When stdin closes, the run ends.
        jobtop.closeStdin()
        let run = await jobtop.wait()
        #expect(run.status == 0)
        #expect(run.stdout.contains("\"event\":\"summary\",\"total\":3,\"succeeded\":3"))
    }

    @Test("A bad line arriving on a pipe ends the run with status 2 naming the line, the summary says 2, one shutdown; jobs before it may have run")
    func aBadLineOnAPipe() async throws {
        let jobtop = try JobtopProcess(["-j", "1", "--log-format", "json"], stdinPipe: true)
        jobtop.writeStdin("true\n")
        _ = await jobtop.firstLine { $0.contains("succeeded") }
        jobtop.writeStdin("echo a\u{0}b\n")
        let run = await jobtop.wait()
        #expect(run.status == 2)
        #expect(run.stderr.contains("jobtop: standard input:2: the command contains a NUL byte"), "\(run.stderr)")
        jobtop.closeStdin()
        let lines = try Log.json(run.lines)
        #expect(lines.last?["event"] as? String == "summary")
        #expect(lines.last?["exit_status"] as? Int == 2, "the summary says the status the run exits with")
        #expect(lines.filter { $0["event"] as? String == "shutdown" }.count == 1)
    }

    @Test("A -c command whose bytes are not UTF-8 is refused with status 2, not run changed (\\xff became U+FFFD)")
    func anArgumentNotUTF8() async throws {
        let scratch = try Scratch()
        // The bytes reach jobtop through a shell: a Swift string cannot hold them.
        let run = try await JobtopProcess(
            ["-c", "exec \"$0\" run -c \"$(printf 'echo \\377 > out')\" < /dev/null", JobtopProcess.binary],
            directory: scratch.path, executable: "/bin/sh").wait()
        #expect(run.status == 2, "\(run.stderr)")
        #expect(run.stderr == "jobtop: argument 3 is not UTF-8 text (jobtop reads commands, names and paths as UTF-8; put such a command in a script file)\n")
        #expect(!FileManager.default.fileExists(atPath: scratch.file("out")))
    }

    @Test("Standard output or input closed (>&-, <&-): the run goes on as with /dev/null (the log went into jobtop's own epoll descriptor)")
    func closedStandardDescriptors() async throws {
        let closedOut = try await JobtopProcess(
            ["-c", "exec \"$0\" run -c true >&- < /dev/null", JobtopProcess.binary], executable: "/bin/sh").wait()
        #expect(closedOut.status == 0, "\(closedOut.stderr)")
        #expect(closedOut.stderr.isEmpty, "\(closedOut.stderr)")
        let closedIn = try await JobtopProcess(
            ["-c", "exec \"$0\" run -c 'echo hi' --log-format json --log-output <&-", JobtopProcess.binary], executable: "/bin/sh").wait()
        #expect(closedIn.status == 0, "\(closedIn.stderr)")
        #expect(closedIn.stdout.contains("\"text\":\"hi\""), "\(closedIn.stdout)")
    }

    @Test("An empty list on a pipe: status 2, one line on stderr, nothing on stdout")
    func anEmptyPipe() async throws {
        for arguments in [["--headless"], ["-", "--log-format", "json"]] {
            let jobtop = try JobtopProcess(arguments, stdinPipe: true)
            jobtop.writeStdin(arguments.contains("-") ? "# only a comment\n" : "")
            jobtop.closeStdin()
            let run = await jobtop.wait()
            #expect(run.status == 2)
            #expect(run.stdout.isEmpty, "\(run.stdout)")
            #expect(run.stderr.contains("jobtop: "), "\(run.stderr)")
        }
    }

    @Test("SIGINT while a 100,000-line list streams ends the run at once: every submitted job cancelled, status 130")
    func sigintDuringAHugeList() async throws {
        let scratch = try Scratch()
        // Jobs that never end by themselves: however late the signal comes on a busy machine,
        // none can succeed before it.
        let list = try scratch.write("l.txt", String(repeating: "sleep 1000\n", count: 100_000))
        let jobtop = try JobtopProcess([list, "-j", "2", "--log-format", "json"])
        _ = await jobtop.firstLine { $0.contains("\"event\":\"started\"") }
        jobtop.send(SIGINT)
        let run = await jobtop.wait()
        #expect(run.status == 130)
        let summary = try #require(try Log.json(run.lines).last)
        #expect(summary["event"] as? String == "summary")
        #expect(summary["succeeded"] as? Int == 0)
        #expect((summary["cancelled"] as? Int ?? 0) == (summary["total"] as? Int ?? -1))
        #expect((summary["total"] as? Int ?? 0) <= 10_000 + 1_024, "only the read-ahead window was ever submitted")
    }

    @Test("SIGINT or SIGTERM ends a run whose list's writer keeps the pipe open (tail -f queue | jobtop): summary and status at once")
    func signalWithTheListStillOpen() async throws {
        for signal in [SIGINT, SIGTERM] {
            let jobtop = try JobtopProcess(["--log-format", "json"], stdinPipe: true)
            jobtop.writeStdin("sleep 1000\n")
            _ = await jobtop.firstLine { $0.contains("\"event\":\"started\"") }
            jobtop.send(signal)
            // The pipe stays open: before, the run waited for its end of file.
            let run = await jobtop.wait(atMost: .seconds(60))
            jobtop.closeStdin()
            let outcome = try #require(run, "still running \(signal == SIGINT ? "SIGINT" : "SIGTERM") later, its stdin open")
            #expect(outcome.status == 128 + signal)
            let summary = try #require(try Log.json(outcome.lines).last)
            #expect(summary["event"] as? String == "summary")
            #expect(summary["cancelled"] as? Int == 1)
        }
    }

    @Test("A list file cut short counts the lines it never read: total + not_run is the whole list (the summary said 10,240 jobs of 30,001)")
    func cutShortListCountsTheRest() async throws {
        let scratch = try Scratch()
        let list = try scratch.write("l.txt", "exit 1\n" + String(repeating: "sleep 5\n", count: 30_000))
        let run = try await JobtopProcess.run([list, "-j", "2", "--halt-on-failure", "--log-format", "json"], directory: scratch.path)
        #expect(run.status == 1, "\(run.stderr)")
        let summary = try #require(run.lines.last.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] })
        let total = try #require(summary["total"] as? Int)
        let notRun = try #require(summary["not_run"] as? Int, "\(summary)")
        #expect(total + notRun == 30_001, "\(summary)")
        #expect(total < 30_001)
        #expect(run.stderr.contains("; \(notRun) more of the run never started (cut short before they were read)"), "\(run.stderr)")
    }

    @Test("When stdout's reader goes away the jobs still run; one line on stderr says so and the status is 141")
    func brokenStdout() async throws {
        let scratch = try Scratch()
        let list = try scratch.write("l.txt", (1...300).map { "touch f\($0)" }.joined(separator: "\n") + "\n")
        // `jobtop l.txt | head -1`, with the reader closed after its first line.
        let script = "\(JobtopProcess.binary) \(list) -j 2 | head -1 >/dev/null; echo \"status=${PIPESTATUS[0]}\" >&2"
        let run = try await JobtopProcess(["-c", script], directory: scratch.path, executable: "/bin/bash").wait()
        #expect(run.stderr.contains("stdout is closed"), "\(run.stderr)")
        #expect(run.stderr.contains("status=141"), "\(run.stderr)")
        #expect(scratch.read("f300") != nil, "the jobs went on")
        let messages = run.stderr.split(separator: "\n").filter { $0.contains("stdout is closed") }
        #expect(messages.count == 1)
    }
}

/// Long runs (25,000 real processes; 200 MB through one job): about 30 s and 15 s on a quiet
/// 2-core machine, minutes on a loaded one, so a suite of their own with a longer hang guard.
@Suite("Hardening: long runs", .timeLimit(.minutes(8)))
struct LongRunTests {
    /// The MB of a `VmHWM:   32680 kB` line that a job wrote from /proc/$PPID/status: the peak
    /// resident size of its parent, jobtop.
    static func peakMegabytes(in line: String?) throws -> Int {
        let text = try #require(line, "the job wrote no VmHWM line")
        let kilobytes = try #require(Int(text.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? ""))
        return kilobytes / 1024
    }

    @Test("--log-output of a job printing faster than the log is written: every line in the log, in order, memory bounded")
    func theFullLogIsLosslessAndBounded() async throws {
        // End to end: the formatter is slower than `seq`, so the log falls behind and the job is
        // held back (lossless delivery). That nothing waits without bound is proven where it can
        // be made deterministic (LosslessDeliveryTests, LogWriterTests); here the peak is a guard.
        let scratch = try Scratch()
        let count = 200_000
        let command = "seq 1 \(count); grep VmHWM /proc/$PPID/status > hwm"
        let run = try await JobtopProcess.run(["-c", command, "--log-output", "--log-format", "json"], directory: scratch.path)
        #expect(run.status == 0, "\(run.stderr)")
        var expected = 1
        var inOrder = true
        // A line may come in pieces ("partial": true on all but its last) if `seq` stalls for a
        // moment in the middle of one.
        var piece = ""
        for object in try Log.json(run.lines.filter { $0.contains("\"event\":\"output\"") }) {
            piece += object["text"] as? String ?? "?"
            if object["partial"] as? Bool == true { continue }
            if piece != "\(expected)" { inOrder = false }
            piece = ""
            expected += 1
        }
        #expect(expected - 1 == count, "every line of the job is in the log")
        #expect(inOrder)
        #expect(!run.stdout.contains("\"event\":\"lagged\""))
        let megabytes = try Self.peakMegabytes(in: scratch.read("hwm"))
        #expect(megabytes < 100, "jobtop's peak resident size: \(megabytes) MB")
    }

    @Test("The closing summary on stderr shows a failed command's escape sequence escaped, as the log does (raw, it set the terminal's title)")
    func theSummaryEscapesControlCharacters() async throws {
        let scratch = try Scratch()
        let run = try await JobtopProcess.run(["--headless", "-c", "echo \u{1B}]0;HACKED\u{07}; exit 3"], directory: scratch.path)
        #expect(run.status == 1)
        #expect(!run.stderr.contains("\u{1B}") && !run.stderr.contains("\u{07}"), "\(run.stderr.debugDescription)")
        #expect(run.stderr.contains("failed: echo \\u{1B}]0;HACKED\\u{7}; exit 3: exit 3"), "\(run.stderr)")
    }

    @Test("A job printing 200 MB leaves jobtop's own peak memory bounded")
    func twoHundredMegabytesOfOutputStayBounded() async throws {
        // The job's last command reads the peak resident size (VmHWM) of its parent, the jobtop
        // process, after all 2 million lines went through it. Measured on the binary, not on the
        // test process, which runs other suites in parallel.
        let scratch = try Scratch()
        let line = String(repeating: "x", count: 99)
        let command = "yes '\(line)' | head -n 2000000; grep VmHWM /proc/$PPID/status > hwm"
        let run = try await JobtopProcess.run(["-c", command, "--log-format", "json"], directory: scratch.path)
        #expect(run.status == 0, "\(run.stderr)")
        let megabytes = try Self.peakMegabytes(in: scratch.read("hwm"))
        #expect(megabytes < 100, "jobtop's peak resident size: \(megabytes) MB")
    }

    @Test("A long list runs in a bounded window: the scheduler never holds more than the read-ahead of queued jobs")
    func aLongListStreamsThroughAWindow() async throws {
        let scratch = try Scratch()
        let count = 25_000
        let list = try scratch.write("l.txt", String(repeating: "true\n", count: count))
        let run = try await JobtopProcess.run([list, "-j", "2", "--log-format", "json"])
        #expect(run.status == 0)
        #expect(run.stdout.contains("\"total\":\(count),\"succeeded\":\(count)"))
        // submitted events never run more than the window ahead of the ended ones
        var ahead = 0
        var most = 0
        for line in run.lines {
            if line.contains("\"event\":\"submitted\"") { ahead += 1 }
            if line.contains("\"event\":\"succeeded\"") { ahead -= 1 }
            most = max(most, ahead)
        }
        #expect(most <= 10_000 + 1_024, "\(most) jobs were queued at once")
    }
}
