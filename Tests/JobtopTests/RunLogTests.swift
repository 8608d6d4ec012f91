import Foundation
import JobtopTestSupport
import Scheduler
import Testing
@testable import jobtop

/// What the closing message of a run names: the jobs that ended failed or skipped, by their
/// last outcome.
@Suite(.timeLimit(.minutes(2)))
struct RunLogTests {
    @Test("A failure undone by a retry is not named at the end, nor its dependent's skip; a job that failed again is named once")
    func aRetriedFailureLeavesTheClosingList() async throws {
        let scratch = try Scratch()
        let flag = scratch.file("flag")
        let scheduler = Scheduler(configuration: .init(localSlots: 2, seed: 5))
        async let running: Void = scheduler.run()
        let log = RunLog(writer: LogWriter(), formatter: nil, outputDirectory: nil)
        let batch = await scheduler.openBatch()
        let logged = await scheduler.events(delivery: .lossless)
        async let result = log.follow(logged, batch: batch, client: scheduler, endsWithBatch: true)
        var events = await scheduler.events().makeAsyncIterator()
        /// Waits for the event `matches` picks.
        func wait(_ matches: (SchedulerEvent.Kind) -> Bool) async -> Bool {
            while let event = await events.next() { if matches(event.kind) { return true } }
            return false
        }
        // `a` fails once (its dependent `b` is skipped), then succeeds when retried; `c` fails
        // every time, and is retried once.
        let a = JobSpec.shell("test -e '\(flag)' || { touch '\(flag)'; exit 1; }", name: "a")
        var b = JobSpec.shell("true", name: "b")
        b.dependencies = [.earlier(0)]
        let c = JobSpec.shell("exit 2", name: "c")
        let ids = try await scheduler.submit(contentsOf: [a, b, c], batch: batch)
        var ended: Set<JobID> = []
        #expect(await wait { kind in
            if kind.isFinal, let id = kind.jobID { ended.insert(id) }
            return ended.isSuperset(of: ids)
        })
        _ = try await scheduler.perform(.retry(ids[0]))
        _ = try await scheduler.perform(.retry(ids[2]))
        var again: Set<JobID> = []
        #expect(await wait { kind in
            if kind.isFinal, let id = kind.jobID { again.insert(id) }
            return again.isSuperset(of: ids)
        })
        _ = try await scheduler.perform(.sealBatch(batch))
        let end = await result
        await running
        #expect(end.counts[.succeeded] == 2 && end.counts[.failed] == 1)
        #expect(end.failures.map(\.name) == ["c"])
        #expect(end.failureCount == 1)
    }

    @Test("--output-dir: the marker of a retry by hand starts a line of its own after output that ended without a newline")
    func retriedByHandMarkerStartsALine() async throws {
        let scratch = try Scratch()
        let out = scratch.file("out")
        try OutputDirectory.prepare(out)
        let scheduler = Scheduler(configuration: .init(localSlots: 1, seed: 6))
        async let running: Void = scheduler.run()
        let writer = LogWriter()
        let log = RunLog(writer: writer, formatter: nil, outputDirectory: OutputDirectory(path: out))
        let batch = await scheduler.openBatch()
        let logged = await scheduler.events(delivery: .lossless)
        async let result = log.follow(logged, batch: batch, client: scheduler, endsWithBatch: true)
        var events = await scheduler.events().makeAsyncIterator()
        func failed(_ id: JobID) async -> Bool {
            while let event = await events.next() { if case .failed(id, _, _) = event.kind { return true } }
            return false
        }
        let ids = try await scheduler.submit(contentsOf: [JobSpec.shell("printf nonl; exit 1", name: "glued")], batch: batch)
        #expect(await failed(ids[0]))
        _ = try await scheduler.perform(.retry(ids[0]))
        #expect(await failed(ids[0]))
        _ = try await scheduler.perform(.sealBatch(batch))
        _ = await result
        await running
        writer.finish()
        // It was `nonl--- jobtop: retried by hand ---`.
        #expect(try String(contentsOfFile: out + "/glued.log", encoding: .utf8) == "nonl\n--- jobtop: retried by hand ---\nnonl")
    }

    @Test("--output-dir: an attempt lost before it printed (or began: held at its worker) leaves no worker-lost line, and its header stands once; one that printed gets the line")
    func workerLostLineOnlyAfterOutput() throws {
        let scratch = try Scratch()
        let out = scratch.file("out")
        try OutputDirectory.prepare(out)
        let directory = OutputDirectory(path: out)
        let writer = LogWriter()
        let lost = OutputLine.workerLostSeparator
        let (held, quiet, chatty) = (JobID(uuid: UUID()), JobID(uuid: UUID()), JobID(uuid: UUID()))
        for (id, name) in [(held, "held"), (quiet, "quiet"), (chatty, "chatty")] {
            directory.jobSubmitted(JobInfo(id: id, name: name, command: "x"))
        }
        /// One attempt of `id`: it prints `lines`, then ends, lost with its worker or not.
        func attempt(_ id: JobID, _ number: Int, printing lines: [String], lostAfter: Bool) {
            directory.attemptStarted(id, attempt: number, writer: writer)
            for text in lines { directory.output(id, OutputLine(stream: .stdout, text: text), writer: writer) }
            directory.attemptEnded(id, writer: writer)
            if lostAfter { directory.requeued(id, marker: lost) }
        }
        // Held and lost before it began, then run
        attempt(held, 1, printing: [], lostAfter: true)
        attempt(held, 1, printing: ["ran"], lostAfter: false)
        // A second attempt lost before it printed, then run again
        attempt(quiet, 1, printing: ["one"], lostAfter: false)
        attempt(quiet, 2, printing: [], lostAfter: true)
        attempt(quiet, 2, printing: ["two"], lostAfter: false)
        // Lost after it printed
        attempt(chatty, 1, printing: ["half"], lostAfter: true)
        attempt(chatty, 1, printing: ["whole"], lostAfter: false)
        for id in [held, quiet, chatty] { directory.jobEnded(id, writer: writer) }
        writer.finish()
        let read = { (name: String) in try String(contentsOfFile: "\(out)/\(name).log", encoding: .utf8) }
        #expect(try read("held") == "ran\n")
        #expect(try read("quiet") == "one\n--- jobtop: attempt 2 ---\ntwo\n")
        #expect(try read("chatty") == "half\n\(lost)\nwhole\n")
    }
}
