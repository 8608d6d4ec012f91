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

    @Test("A second SIGINT kills at once a job that ignores SIGTERM, without waiting for the grace period")
    func secondInterruptKills() async throws {
        let scratch = try Scratch()
        let stubborn = "trap '' TERM; echo $$ >> pids; sleep 30 & echo $! >> pids; echo ready; wait"
        let process = try JobtopProcess(["--grace", "10m", "--log-output", "-c", stubborn], directory: scratch.path)
        var lines = process.stdoutLines.makeAsyncIterator()
        while let line = await lines.next(), !line.hasSuffix("text=ready") {}
        process.send(SIGINT)
        while let line = await lines.next(), !line.contains(" stopping ") {}
        process.send(SIGINT)
        let run = await process.wait()
        #expect(run.status == 130)
        #expect(run.stderr.contains("SIGINT again: killing every running job now"))
        #expect(run.lines.last?.contains("cancelled=1") == true, "\(run.stdout)")
        #expect(pids(in: scratch.file("pids")).allSatisfy { !isRunning($0) })
    }
}
