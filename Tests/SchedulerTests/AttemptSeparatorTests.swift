import Foundation
import Testing
@testable import Scheduler

/// A retried job's kept output has jobtop's separator line before each later attempt, the
/// line the durable output files write.
@Suite(.timeLimit(.minutes(2)))
struct AttemptSeparatorTests {
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
