import Foundation
import JobtopTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Signals in headless mode: cancel, summarize, exit 128 + the signal; nothing survives.
@Suite("Signals to a headless jobtop", .timeLimit(.minutes(1)))
struct SignalTests {
    /// A job that records its shell's pid and a background child's pid, says it is ready, and waits.
    static let job = "echo $$ >> pids; sleep 30 & echo $! >> pids; echo ready; wait"

    @Test("SIGINT mid-run cancels everything, prints the summary, exits 130, and leaves no child alive")
    func interrupt() async throws {
        let scratch = try Scratch()
        let process = try JobtopProcess(
            ["-j", "2", "--log-output", "-c", Self.job, "-c", Self.job, "-c", "sleep 30"], directory: scratch.path)
        var ready = 0
        for await line in process.stdoutLines where line.contains(" output ") && line.hasSuffix("text=ready") {
            ready += 1
            if ready == 2 { break }
        }
        try #require(ready == 2)
        process.send(SIGINT)
        let run = await process.wait()

        #expect(run.status == 130)
        #expect(run.stderr.contains("SIGINT: cancelling running jobs"))
        #expect(run.lines.last?.contains("total=3 succeeded=0 failed=0 cancelled=3") == true)
        #expect(run.lines.last?.contains("signal=SIGINT") == true)
        let started = pids(in: scratch.file("pids"))
        #expect(started.count == 4)
        #expect(started.allSatisfy { !isRunning($0) })
    }

    @Test("A second SIGINT ends a run whose stdout nobody reads (`jobtop list | less`, not scrolled): 130, the rest of the log dropped (it stayed until its reader went away)")
    func secondInterruptWithAStdoutNobodyReads() async throws {
        let scratch = try Scratch()
        // A FIFO the test opens for reading and never reads: once it is full, every write of the
        // log blocks (20 MB of output lines keep it so).
        let fifo = scratch.file("stdout")
        try #require(mkfifo(fifo, 0o600) == 0)
        let reader = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        try #require(reader >= 0)
        defer { close(reader) }
        let argv = ["/bin/sh", "-c", "cd '\(scratch.path)' && exec \"$0\" \"$@\" > '\(fifo)' 2> '\(scratch.file("stderr"))'", JobtopProcess.binary,
                    "--log-output", "-c", "yes line | head -c 20000000", "-c", "echo $$ > pid; exec sleep 300"]
        var cArguments: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
        defer { for pointer in cArguments { free(pointer) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        var pid: pid_t = 0
        try #require(posix_spawn(&pid, argv[0], &actions, nil, &cArguments, environ) == 0)
        let child = pid
        defer { kill(child, SIGKILL) }
        func queued() -> Int32 {
            var count: Int32 = 0
            return ioctl(reader, UInt(FIONREAD), &count) == 0 ? count : 0
        }
        // The pipe fills (its 64 KiB hold less when writes end mid-page), and the sleeper runs.
        #expect(await eventually { queued() >= 32_768 && !pids(in: scratch.file("pid")).isEmpty },
                "queued \(queued()), pid file \(scratch.read("pid") ?? "none"), stderr \(scratch.read("stderr") ?? "")")

        kill(child, SIGINT)
        #expect(await eventually { (scratch.read("stderr") ?? "").contains("SIGINT: cancelling running jobs") })
        kill(child, SIGINT)
        // The 30 s are a hang guard, not a measure: the run ended in seconds, or never while unread.
        var raw: Int32 = 0
        let ended = await eventually(within: .seconds(30)) { waitpid(child, &raw, WNOHANG) == child }
        let status = ended ? ((raw & 0x7F) == 0 ? (raw >> 8) & 0xFF : 128 + (raw & 0x7F)) : nil
        #expect(status == 130, "\(scratch.read("stderr") ?? "")")
        let errors = scratch.read("stderr") ?? ""
        #expect(errors.contains("stdout is not being read: the rest of the log is dropped"), "\(errors)")
        #expect(!errors.contains("the jobs go on"), "\(errors)")
        #expect(pids(in: scratch.file("pid")).allSatisfy { !isRunning($0) })
    }

    @Test("SIGTERM exits 143")
    func terminate() async throws {
        let scratch = try Scratch()
        let process = try JobtopProcess(["--log-output", "-c", Self.job], directory: scratch.path)
        _ = await process.firstLine { $0.hasSuffix("text=ready") }
        process.send(SIGTERM)
        let run = await process.wait()
        #expect(run.status == 143)
        #expect(pids(in: scratch.file("pids")).allSatisfy { !isRunning($0) })
    }

    @Test(
        "A second signal kills at once a job that ignores SIGTERM, without waiting for the grace period; it is named as what it is (SIGINT after SIGTERM said 'SIGINT again') and the run exits with the first's status",
        arguments: [(SIGINT, "SIGINT", "SIGINT again"), (SIGTERM, "SIGTERM", "SIGINT after SIGTERM")])
    func secondSignalKills(first: Int32, firstName: String, named: String) async throws {
        let scratch = try Scratch()
        let stubborn = "trap '' TERM; echo $$ >> pids; sleep 30 & echo $! >> pids; echo ready; wait"
        let process = try JobtopProcess(["--grace", "10m", "--log-output", "-c", stubborn], directory: scratch.path)
        var lines = process.stdoutLines.makeAsyncIterator()
        while let line = await lines.next(), !line.hasSuffix("text=ready") {}
        process.send(first)
        while let line = await lines.next(), !line.contains(" stopping ") {}
        process.send(SIGINT)
        let run = await process.wait()
        #expect(run.status == 128 + first)
        #expect(run.stderr.contains("jobtop: \(firstName): cancelling running jobs (another signal kills them at once)"), "\(run.stderr)")
        #expect(run.stderr.contains("jobtop: \(named): killing every running job now"), "\(run.stderr)")
        #expect(run.lines.last?.contains("cancelled=1") == true, "\(run.stdout)")
        #expect(pids(in: scratch.file("pids")).allSatisfy { !isRunning($0) })
    }
}
