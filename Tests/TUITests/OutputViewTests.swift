import Foundation
import Scheduler
import Testing
@testable import TUI

/// The output view as a power user reads it (issue 13): each test failed before its fix.
@Suite("Output view")
@MainActor
struct OutputViewTests {
    /// Job 1 running, its output view open (without the details panel unless asked).
    func openView(details: Bool = false, state: (inout ModelBuilder) -> Void = { _ in }) -> DashboardModel {
        var builder = ModelBuilder()
        builder.submit(1, "chatty")
        builder.start(1)
        state(&builder)
        var model = builder.prepared()
        _ = model.handle(.enter)
        if !details { _ = model.handle(.char("d")) }
        return model
    }

    func lines(_ range: ClosedRange<Int>) -> [OutputLine] {
        range.map { OutputLine(stream: .stdout, text: "line \($0)") }
    }

    @Test("Scrolled back on a chatty job, the text stays put when the tail drops its oldest lines")
    func scrolledTextStays() {
        // Given a full tail, scrolled to the top
        var model = openView()
        model.setOutput(of: jobID(1), lines: lines(1...100), dropped: 0)
        _ = model.handle(.home)
        for _ in 0..<12 { _ = model.handle(.down) }
        #expect(screen(model).lines[1].hasPrefix("line 13 "))
        // When ten more lines push ten old ones out
        model.setOutput(of: jobID(1), lines: lines(11...110), dropped: 10)
        // Then the same line is still on top
        #expect(screen(model).lines[1].hasPrefix("line 13 "))
    }

    @Test("Back from a job's output the cursor is on that job, though rows above it came and went meanwhile (c then asked to cancel the job that took its row)")
    func backFromTheOutputOnTheSameJob() {
        // Given three running jobs and a fourth queued, the third's output open
        var builder = ModelBuilder(slots: 3)
        for n in 1...4 { builder.submit(n, "sleep \(n)") }
        for n in 1...3 { builder.start(n) }
        var model = builder.prepared()
        _ = model.handle(.down)
        _ = model.handle(.down)
        #expect(model.selectedID == jobID(3))
        _ = model.handle(.enter)
        #expect(model.outputJob == jobID(3))
        // When the first ends and the fourth starts while it is read
        var seq: UInt64 = 100
        for kind: SchedulerEvent.Kind in [.succeeded(jobID(1), attempts: 1), .started(jobID(4), attempt: 1, maxAttempts: 1, worker: localOne.id)] {
            seq += 1
            model.apply(SchedulerEvent(seq: seq, time: .seconds(2), kind: kind))
        }
        // Then Esc comes back to the third, and c asks about it
        _ = model.handle(.escape)
        #expect(model.selectedID == jobID(3))
        _ = model.handle(.char("c"))
        #expect(model.mode == .confirm(.cancel(jobID(3), name: "sleep 3")))
    }

    @Test("A line wider than the screen scrolls sideways with → and ←")
    func sideways() {
        var model = openView()
        let long = String(repeating: "a", count: 90) + "END"
        model.setOutput(of: jobID(1), lines: [OutputLine(stream: .stdout, text: long)], dropped: 0)
        #expect(!screen(model).lines.contains { $0.contains("END") })
        _ = model.handle(.right)
        #expect(screen(model).lines.contains { $0.contains("END") })
        #expect(screen(model).lines[0].contains("→20"))
        _ = model.handle(.left)
        #expect(!screen(model).lines.contains { $0.contains("END") })
        // Not past the longest line (it went on into an empty pane): 93 cells, at most 73 left.
        for _ in 0..<10 { _ = model.handle(.right) }
        guard case .output(let view) = model.mode else { return }
        #expect(view.left == 73)
        #expect(screen(model).lines.contains { $0.contains("END") })
    }

    @Test("Colors become roles, a bell is dropped, a \\r redraw replaces its line, pieces join")
    func terminalText() {
        var model = openView()
        model.setOutput(of: jobID(1), lines: [
            OutputLine(stream: .stdout, text: "\u{1B}[31mred\u{1B}[0m plain\u{07}"),
            OutputLine(stream: .stdout, text: "10%", ending: .carriageReturn),
            OutputLine(stream: .stdout, text: "50%", ending: .carriageReturn),
            OutputLine(stream: .stdout, text: "100%"),
            OutputLine(stream: .stdout, text: "first half ", ending: .none),
            OutputLine(stream: .stdout, text: "second half"),
        ], dropped: 0)
        let frame = DashboardView.render(model, size: TerminalSize(rows: 24, columns: 80), now: .seconds(1))
        let text = frame.lines.map(\.text)
        #expect(frame.lines[1].segments.first == Segment("red", .failed))
        #expect(text[1].hasPrefix("red plain "))
        #expect(!text.joined().contains("\u{FFFD}"))
        #expect(text[2].hasPrefix("100% "))
        #expect(!text.contains { $0.contains("10%") || $0.contains("50%") })
        #expect(text[3].hasPrefix("first half second half"))
        #expect(text[0].contains("3 lines"))
    }

    @Test("The header says why a job failed, one line is '1 line', and a finished job is not 'following'")
    func header() {
        var model = openView { builder in
            builder.apply(.failed(jobID(1), reason: .exitStatus(3), attempts: 1), at: 2)
        }
        model.setOutput(of: jobID(1), lines: lines(1...1), dropped: 0)
        let top = screen(model).lines[0]
        #expect(top.contains("failed: \(FailureReason.exitStatus(3))"), "\(top)")
        #expect(top.contains("1 line "))
        #expect(!top.contains("following"))
        #expect(top.contains("ended"))
        model.setOutput(of: jobID(1), lines: [], dropped: 0)
        #expect(screen(model).lines[1].contains("(no output)"))
        #expect(!screen(model).lines[1].contains("yet"))
    }

    @Test("Enter shows the job's details above its output: command, group, each attempt with its worker and outcome, why it failed")
    func detailsPanel() {
        let model = openView(details: true) { builder in
            builder.apply(.retryScheduled(jobID(1), failedAttempt: 1, reason: .exitStatus(2), nextAttempt: 2, at: .seconds(5)), at: 3)
            builder.apply(.started(jobID(1), attempt: 2, maxAttempts: 3, worker: localTwo.id), at: 5)
            builder.apply(.failed(jobID(1), reason: .signal(9), attempts: 2), at: 8)
        }
        let lines = screen(model, rows: 30, columns: 100).lines
        #expect(lines[1].contains("command") && lines[1].contains("chatty"))
        #expect(lines.contains { $0.contains("group default") && $0.contains("priority 0") })
        #expect(lines.contains { $0.contains("state") && $0.contains("failed: killed by SIGKILL") })
        #expect(lines.contains { $0.contains("attempt") && $0.contains("1 on local-1 at 00:00, 3s: exit 2") })
        #expect(lines.contains { $0.contains("attempt") && $0.contains("2 on local-2 at 00:05, 3s: killed by SIGKILL") })
        #expect(lines.contains { $0.hasPrefix("────") })
    }
}

extension OutputViewTests {
    @Test("GROUP widens for a long group name on a wide screen (it stayed 10 cells on 250, 'a-very-lo…'), not on a narrow one")
    func groupColumnWidens() {
        var builder = ModelBuilder()
        builder.submit(1, "make all", group: "a-very-long-group")
        builder.submit(2, "make test", group: "日本語グループ")
        let wide = screen(builder.prepared(), rows: 24, columns: 250).lines
        #expect(wide.contains { $0.contains("a-very-long-group") }, "\(wide)")
        #expect(wide.contains { $0.contains("日本語グループ") }, "\(wide)")
        let narrow = screen(builder.prepared(), rows: 24, columns: 100).lines
        #expect(narrow.contains { $0.contains("a-very-lo…") }, "\(narrow)")
    }

    @Test("A wide table gets a WHY column with the short reason of failed jobs")
    func reasonColumn() {
        var builder = ModelBuilder()
        builder.submit(1, "false")
        builder.start(1)
        builder.apply(.failed(jobID(1), reason: .exitStatus(1), attempts: 1), at: 1)
        let wide = screen(builder.prepared(), rows: 24, columns: 120).lines
        #expect(wide[2].contains("WHY"))
        #expect(wide.contains { $0.contains("false") && $0.contains("failed") && $0.hasSuffix("exit 1        ") })
        #expect(!screen(builder.prepared(), rows: 24, columns: 80).lines[2].contains("WHY"))
        // A longer reason widens the column on a wide screen (it stayed 14 cells, cut to
        // `dependency 'f…` at 200 columns).
        builder.submit(2, "make test")
        builder.apply(.skipped(jobID(2), reason: SkipReason(dependency: jobID(1), dependencyName: "fetch-artifacts", outcome: .failed)), at: 2)
        let wider = screen(builder.prepared(), rows: 24, columns: 200).lines
        #expect(wider.contains { $0.contains("make test") && $0.contains("dependency 'fetch-artifacts' failed") }, "\(wider)")
        // On 120 columns the name keeps its room: the reason is cut.
        let narrow = screen(builder.prepared(), rows: 24, columns: 120).lines.first { $0.contains("make test") }
        #expect(narrow?.contains("dependency 'f") == true && narrow?.contains("'fetch-artifacts' failed") == false, "\(String(describing: narrow))")
    }
}

extension OutputViewTests {
    @Test("/ in the output view searches the kept output; n and N go to the next and previous match")
    func search() {
        var model = openView()
        model.setOutput(of: jobID(1), lines: (1...100).map { OutputLine(stream: .stdout, text: $0 % 25 == 0 ? "ERROR at \($0)" : "ok \($0)") }, dropped: 0)
        _ = model.handle(.home)
        _ = model.handle(.char("/"))
        #expect(screen(model).lines[23].contains("Search:"))
        for character in "error" { _ = model.handle(.char(character)) }
        _ = model.handle(.enter)
        var lines = screen(model).lines
        #expect(lines[1].hasPrefix("ERROR at 25"), "\(lines[1])")
        #expect(lines[23].contains("match 1 of 4"))
        _ = model.handle(.char("n"))
        #expect(screen(model).lines[1].hasPrefix("ERROR at 50"))
        _ = model.handle(.char("N"))
        lines = screen(model).lines
        #expect(lines[1].hasPrefix("ERROR at 25"))
        _ = model.handle(.char("/"))
        for character in "nowhere" { _ = model.handle(.char(character)) }
        _ = model.handle(.enter)
        #expect(screen(model).lines[23].contains("'nowhere' is not in the kept output"))
    }

    @Test("A match beyond the screen's edge is scrolled to sideways, with a little before it in view; one in view leaves the view where it is")
    func searchScrollsSideways() {
        var model = openView()
        model.outputColumns = 80
        let far = String(repeating: "a", count: 150) + "NEEDLE" + String(repeating: "b", count: 50)
        model.setOutput(of: jobID(1), lines: [OutputLine(stream: .stdout, text: "needle near"), OutputLine(stream: .stdout, text: far)], dropped: 0)
        _ = model.handle(.home)
        _ = model.handle(.char("/"))
        for character in "needle" { _ = model.handle(.char(character)) }
        _ = model.handle(.enter)
        #expect(screen(model).lines[1].hasPrefix("needle near"))
        _ = model.handle(.char("n"))
        let lines = screen(model).lines
        // It is at column 150: the view starts 10 before it (both lines are on the screen).
        #expect(lines[2].hasPrefix(String(repeating: "a", count: 10) + "NEEDLE"), "\(lines[2])")
        #expect(lines[0].contains("→140"), "\(lines[0])")
        // Back to the first match, at column 0: the view goes back to the line's start.
        _ = model.handle(.char("n"))
        #expect(screen(model).lines[1].hasPrefix("needle near"))
    }
}
