import Foundation
import Scheduler
import Testing
@testable import TUI

/// The details panel names where a job runs and what it adds to the environment; the output
/// view sets each later attempt apart with jobtop's separator line.
@Suite("Details: cwd, env and attempt separators")
@MainActor
struct DetailsSeparatorTests {
    @Test("The details panel shows the job's cwd and the variables it adds, sorted")
    func cwdAndEnv() {
        var builder = ModelBuilder()
        builder.apply(.submitted(JobInfo(
            id: jobID(1), command: "make", workingDirectory: "/srv/build",
            environment: ["ZED": "last", "CC": "clang"])))
        builder.submit(2, "plain")
        var model = builder.prepared()
        _ = model.handle(.enter)
        model.setOutput(of: jobID(1), lines: [], dropped: 0)
        let lines = screen(model, rows: 30, columns: 100).lines
        #expect(lines.contains { $0.contains("cwd") && $0.contains("/srv/build") })
        #expect(lines.contains { $0.contains("env") && $0.contains("CC=clang ZED=last") })
        // A job with neither shows neither line.
        _ = model.handle(.escape)
        _ = model.handle(.down)
        _ = model.handle(.enter)
        model.setOutput(of: jobID(2), lines: [], dropped: 0)
        let plain = screen(model, rows: 30, columns: 100).lines
        #expect(!plain.contains { $0.hasPrefix(" cwd") || $0.hasPrefix(" env") })
    }

    @Test("jobtop's line between two attempts shows in the output view as it is in the file")
    func separatorShows() {
        var builder = ModelBuilder()
        builder.submit(1, "flaky", maxAttempts: 2)
        var model = builder.prepared()
        _ = model.handle(.enter)
        model.setOutput(of: jobID(1), lines: [
            OutputLine(stream: .stdout, text: "try one"),
            OutputLine(stream: .stdout, text: OutputLine.attemptSeparator(2, of: 2)),
            OutputLine(stream: .stdout, text: "try two"),
        ], dropped: 0)
        let lines = screen(model, rows: 30, columns: 100).lines
        let one = lines.firstIndex { $0.hasPrefix("try one") }
        let separator = lines.firstIndex { $0.hasPrefix("--- jobtop: attempt 2 of 2 ---") }
        let two = lines.firstIndex { $0.hasPrefix("try two") }
        #expect(one != nil && separator != nil && two != nil)
        if let one, let separator, let two { #expect(one < separator && separator < two) }
    }
}
