import Foundation
import Testing
@testable import Scheduler

/// A retried job's kept output has jobtop's separator line before each later attempt, the
/// line the durable output files write.
@Suite(.timeLimit(.minutes(2)))
struct AttemptSeparatorTests {
    /// The kept tail after pieces handed on while a job was quiet: a `\r` that ends a piece
    /// still marks it redrawn (the dashboard showed `p 1/3p 2/3p 3/3`, and `w` lost the `\r`),
    /// and a separator after output with no newline starts a line of its own (it was glued on).
    @Test func theTailKeepsRedrawsAcrossPiecesAndSeparatorsOnALineOfTheirOwn() {
        let store = JobOutputStore(limits: .init(lines: 100, bytes: 1 << 20, finishedTails: 10))
        let id = JobID(uuid: UUID())
        // `\rp 1/3`, a pause, `\rp 2/3`, a pause, `\rp 3/3\n`, as the reactor hands them on.
        let pieces: [(String, OutputLine.Ending)] = [
            ("", .carriageReturn), ("p 1/3", .none), ("", .carriageReturn), ("p 2/3", .none), ("", .carriageReturn), ("p 3/3", .newline),
        ]
        for (text, ending) in pieces { store.append(OutputLine(stream: .stdout, text: text, ending: ending), to: id) }
        var lines = store.tail(of: id).lines
        #expect(lines.map(\.text) == ["p 1/3", "p 2/3", "p 3/3"])
        #expect(lines.flatMap(\.rawBytes) == Array("p 1/3\rp 2/3\rp 3/3\n".utf8))
        // `printf nonl; exit 1`, then its second attempt.
        store.append(OutputLine(stream: .stdout, text: "nonl", ending: .none), to: id)
        store.attemptStarted(id, attempt: 2, of: 2)
        store.append(OutputLine(stream: .stdout, text: "nonl", ending: .none), to: id)
        store.requeued(id, because: .retriedByUser)
        lines = store.tail(of: id).lines
        #expect(Array(lines.suffix(4).map(\.text)) == ["nonl", "--- jobtop: attempt 2 of 2 ---", "nonl", "--- jobtop: retried by hand ---"])
        #expect(lines.suffix(4).allSatisfy { $0.ending == .newline })
    }

    /// An attempt lost with its worker runs again with its number: the worker-lost line says so
    /// after the output the lost attempt printed, and its header is not written again (nor right
    /// after itself).
    @Test func aLostAttemptRunningAgainGetsNoSecondHeader() {
        let store = JobOutputStore(limits: .init(lines: 100, bytes: 1 << 20, finishedTails: 10))
        let id = JobID(uuid: UUID())
        let lost = RequeueReason.workerLost(.heartbeatMissed(.seconds(3)))
        store.append(OutputLine(stream: .stdout, text: "one"), to: id)
        store.attemptStarted(id, attempt: 2, of: 3)
        store.attemptStarted(id, attempt: 2, of: 3)
        store.append(OutputLine(stream: .stdout, text: "half"), to: id)
        store.requeued(id, because: lost)
        store.attemptStarted(id, attempt: 2, of: 3)
        store.append(OutputLine(stream: .stdout, text: "two"), to: id)
        store.attemptStarted(id, attempt: 3, of: 3)
        #expect(store.tail(of: id).lines.map(\.text) == [
            "one", OutputLine.attemptSeparator(2, of: 3), "half", OutputLine.workerLostSeparator, "two", OutputLine.attemptSeparator(3, of: 3),
        ])
    }

    /// A lost attempt that printed nothing, or never began (its worker held it), leaves no
    /// worker-lost line: it would mark the end of no output (a trial saw it as a held job's
    /// first line).
    @Test func anAttemptLostBeforeItPrintedLeavesNoWorkerLostLine() {
        let store = JobOutputStore(limits: .init(lines: 100, bytes: 1 << 20, finishedTails: 10))
        let (first, later) = (JobID(uuid: UUID()), JobID(uuid: UUID()))
        let lost = RequeueReason.workerLost(.connectionLost("gone"))
        // A first attempt held and lost: no output, only a placement (a Slurm queue)
        store.setPlacement("4711 Priority", of: first)
        store.requeued(first, because: lost)
        store.append(OutputLine(stream: .stdout, text: "ran"), to: first)
        #expect(store.tail(of: first).lines.map(\.text) == ["ran"])
        // A second attempt lost before it printed: its header stands, once
        store.append(OutputLine(stream: .stdout, text: "one"), to: later)
        store.attemptStarted(later, attempt: 2, of: 2)
        store.requeued(later, because: lost)
        store.attemptStarted(later, attempt: 2, of: 2)
        store.append(OutputLine(stream: .stdout, text: "two"), to: later)
        #expect(store.tail(of: later).lines.map(\.text) == ["one", OutputLine.attemptSeparator(2, of: 2), "two"])
    }

    @Test func laterAttemptsAreSetApartInTheTail() async throws {
        try await ShellJobTests.withScheduler { scheduler, reader in
            let marker = ShellJobTests.temporaryFile("tried")
            var spec = JobSpec.shell("if [ -e \(marker) ]; then echo second; else touch \(marker); echo first; exit 1; fi")
            spec.retry = .retries(1, backoff: .milliseconds(10))
            let id = try await scheduler.submit(spec)
            let end = await reader.final(of: id)
            guard case .succeeded(_, 2) = end else {
                Issue.record("expected success on attempt 2, got \(String(describing: end))")
                return
            }
            let tail = await scheduler.output(of: id).lines.map(\.text)
            #expect(tail == ["first", "--- jobtop: attempt 2 of 2 ---", "second"])
        }
    }

    @Test func aRetryByHandIsSetApartInTheTailThoughItsAttemptsCountFromOneAgain() async throws {
        try await ShellJobTests.withScheduler { scheduler, reader in
            let id = try await scheduler.submit(.shell("echo run; exit 1"))
            _ = await reader.final(of: id)
            try await scheduler.retry(id)
            await reader.next { kind in if case .requeued(id, .retriedByUser) = kind { true } else { false } }
            await reader.next { kind in kind.isFinal && kind.jobID == id }
            let tail = await scheduler.output(of: id).lines.map(\.text)
            #expect(tail == ["run", OutputLine.retrySeparator, "run"])
        }
    }

    @Test func environmentAndDirectoryAreInTheJobsDescriptionWithoutJobtopsOwnMarkers() async throws {
        try await ShellJobTests.withScheduler { scheduler, _ in
            var spec = JobSpec.shell("true")
            spec.workingDirectory = "/tmp"
            spec.environment = ["A": "1", "JOBTOP_JOB_ID": "x"]
            let id = try await scheduler.submit(spec)
            let plain = try await scheduler.submit(.shell("true"))
            let jobs = await scheduler.snapshot().jobs
            let info = jobs.first { $0.id == id }
            #expect(info?.workingDirectory == "/tmp")
            #expect(info?.environment == ["A": "1"])
            let other = jobs.first { $0.id == plain }
            #expect(other?.workingDirectory == nil && other?.environment == nil)
        }
    }
}
