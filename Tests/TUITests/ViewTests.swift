import Scheduler
import Testing
@testable import TUI

@Suite("Dashboard view")
@MainActor
struct ViewTests {
    /// Given three queued jobs, one running, one failed and one that succeeded later.
    func mixedBoard() -> ModelBuilder {
        var builder = ModelBuilder()
        builder.submit(1, "sleep 100", at: 0)
        builder.submit(2, "make low", priority: 0, at: 1)
        builder.submit(3, "make high", priority: 5, at: 2)
        builder.submit(4, "false", at: 3)
        builder.submit(5, "true", at: 3.5)
        builder.submit(6, "make also-low", priority: 0, at: 3.6)
        builder.start(1, at: 4)
        builder.start(4, on: localTwo, at: 4)
        builder.apply(.failed(jobID(4), reason: .exitStatus(1), attempts: 1), at: 5)
        builder.start(5, on: localTwo, at: 5)
        builder.apply(.succeeded(jobID(5), attempts: 1), at: 6)
        return builder
    }

    @Test("Running jobs come first, then queued by priority and submission, then finished newest first")
    func ordering() {
        let model = mixedBoard().prepared()
        #expect(model.orderedIDs == [jobID(1), jobID(3), jobID(2), jobID(6), jobID(5), jobID(4)])
    }

    @Test("Waiting jobs sit between queued and finished ones")
    func waitingOrder() {
        var builder = mixedBoard()
        builder.submit(7, "flaky", at: 7, maxAttempts: 3)
        builder.start(7, on: localTwo, at: 7)
        builder.apply(.retryScheduled(jobID(7), failedAttempt: 1, reason: .exitStatus(1), nextAttempt: 2, at: .seconds(9)), at: 8)
        #expect(builder.prepared().orderedIDs == [jobID(1), jobID(3), jobID(2), jobID(6), jobID(7), jobID(5), jobID(4)])
    }

    @Test("A reprioritized queued job moves in the order at once")
    func reprioritizeReorders() {
        var builder = mixedBoard()
        builder.apply(.reprioritized(jobID(6), from: 0, to: 9), at: 7)
        #expect(builder.prepared().orderedIDs == [jobID(1), jobID(6), jobID(3), jobID(2), jobID(5), jobID(4)])
    }

    @Test("Sorting by priority, name and newest orders accordingly")
    func sortKeys() {
        var model = mixedBoard().prepared()
        _ = model.handle(.char("s"))
        #expect(model.sort == .priority)
        #expect(model.orderedIDs.first == jobID(3))
        _ = model.handle(.char("s"))
        #expect(model.sort == .name)
        #expect(model.orderedIDs.map { model.board.jobs[$0]!.command }
            == ["false", "make also-low", "make high", "make low", "sleep 100", "true"])
        _ = model.handle(.char("s"))
        #expect(model.sort == .newest)
        #expect(model.orderedIDs == [jobID(6), jobID(5), jobID(4), jobID(3), jobID(2), jobID(1)])
        _ = model.handle(.char("s"))
        #expect(model.sort == .state)
    }

    @Test("A filter keeps only jobs whose name, id or state matches")
    func filtering() {
        let jobs = mixedBoard().model.board.jobs.values
        #expect(Set(DashboardModel.ordered(jobs, sort: .state, filter: "MAKE")) == [jobID(2), jobID(3), jobID(6)])
        #expect(DashboardModel.ordered(jobs, sort: .state, filter: "failed") == [jobID(4)])
        #expect(DashboardModel.ordered(jobs, sort: .state, filter: "00000001") == [jobID(1)])
        #expect(DashboardModel.ordered(jobs, sort: .state, filter: "nothing like it").isEmpty)
    }

    @Test("The counts follow every state change")
    func counts() {
        let board = mixedBoard().model.board
        #expect(board.count(.running) == 1)
        #expect(board.count(.queued) == 3)
        #expect(board.count(.failed) == 1)
        #expect(board.count(.succeeded) == 1)
        #expect(board.activeCount == 4)
    }

    @Test("Every row of an 80×24 and a 100×30 screen is exactly as wide as the screen")
    func rowsFit() {
        var builder = mixedBoard()
        builder.submit(8, "echo 日本語 🚀 and a very long tail that cannot possibly fit in the name column", at: 8)
        for (rows, columns) in [(24, 80), (30, 100), (12, 50)] {
            let terminal = screen(builder.model, rows: rows, columns: columns)
            #expect(terminal.overflows.isEmpty, "\(columns)×\(rows)")
            for line in DashboardView.render(builder.prepared(), size: .init(rows: rows, columns: columns), now: .seconds(10)).lines {
                #expect(TextWidth.width(line.text) == columns)
            }
        }
    }

    @Test("Wide characters in a name keep the columns after it aligned, cut with an ellipsis")
    func wideCharactersAlign() {
        var builder = ModelBuilder()
        builder.submit(1, "echo 日本語 🚀 and a very long tail that cannot possibly fit", at: 0)
        builder.submit(2, "echo plain ascii command that is also long enough to cut", at: 1)
        let terminal = screen(builder.model)
        let rows = terminal.lines.enumerated().filter { $0.element.hasPrefix(" 0000000") }.map(\.offset)
        #expect(rows.count == 2)
        let stateColumns = rows.map { terminal.column(of: "queued", row: $0) }
        #expect(stateColumns[0] != nil)
        #expect(stateColumns[0] == stateColumns[1])
        #expect(terminal.lines[rows[0]].contains("日本語 🚀"))
        #expect(terminal.lines[rows[0]].contains("…"))
    }

    @Test("A running job with progress shows a bar, a percentage, elapsed time and an ETA")
    func progressBar() {
        var builder = ModelBuilder()
        builder.submit(1, "render", at: 0)
        builder.start(1, at: 0)
        builder.apply(.progress(jobID(1), 0.5), at: 5)
        let job = builder.model.board.jobs[jobID(1)]!
        #expect(DashboardView.progressCell(job, width: 11).map(\.text).joined() == "███░░░  50%")
        #expect(DashboardView.timeCell(job, now: .seconds(10)) == "10s ~10s")
        let lines = screen(builder.model, now: 10).lines
        #expect(lines.contains { $0.contains("███░░░  50%") && $0.contains("running") && $0.contains("local-1") })
    }

    @Test("Progress bars measure 0%, a fraction and 100% in whole cells")
    func bars() {
        #expect(Formatting.bar(0, width: 4) == ("", "░░░░"))
        #expect(Formatting.bar(0.26, width: 4) == ("█", "░░░"))
        #expect(Formatting.bar(1, width: 4) == ("████", ""))
        #expect(Formatting.percent(0.999) == "99%")
    }

    @Test("Times are compact")
    func times() {
        #expect(Formatting.compact(.seconds(7)) == "7s")
        #expect(Formatting.compact(.seconds(65)) == "1m05s")
        #expect(Formatting.compact(.seconds(3 * 3600 + 120)) == "3h02m")
    }

    @Test("The header shows counts, slots and a PAUSED badge while paused")
    func header() {
        var builder = mixedBoard()
        #expect(!screen(builder.model).lines[1].contains("PAUSED"))
        builder.apply(.paused, at: 7)
        let lines = screen(builder.model).lines
        #expect(lines[0].contains("1 running · 3 queued · 0 waiting · 1 done · 1 failed · 0 cancelled"))
        #expect(lines[1].contains("slots 1/2"))
        #expect(lines[1].contains("PAUSED"))
    }

    @Test("The worker panel shows each worker busy with its job or idle; the event pane the recent events")
    func panels() {
        let lines = screen(mixedBoard().model).lines
        #expect(lines.contains { $0.contains("local-1") && $0.contains("busy") && $0.contains("sleep 100") })
        #expect(lines.contains { $0.contains("local-2") && $0.contains("idle") })
        #expect(lines.contains { $0.contains("false failed: exit 1") })
        #expect(lines.last!.contains("Help"))
    }

    @Test("An empty dashboard invites the user to press n")
    func empty() {
        let lines = screen(ModelBuilder().model).lines
        #expect(lines.contains { $0.contains("No jobs yet. Press n") })
    }

    @Test("A terminal below the minimum shows a clear message instead of the table")
    func tooSmall() {
        let lines = screen(mixedBoard().model, rows: 10, columns: 40).lines
        #expect(lines.contains { $0.contains("Terminal too small: 40×10") })
        #expect(!lines.contains { $0.contains("sleep 100") })
    }

    @Test("The output view shows the tail and says how much was dropped")
    func outputView() {
        var model = mixedBoard().prepared()
        _ = model.handle(.enter)
        let id = model.outputJob!
        model.setOutput(of: id, lines: (1...30).map { OutputLine(stream: .stdout, text: "line \($0)") }, dropped: 5)
        let lines = screen(model).lines
        #expect(lines[0].contains("30 lines (5 earlier dropped)"))
        #expect(lines[0].contains("following"))
        #expect(lines[22].contains("line 30"))
        #expect(!lines.contains { $0.contains("line 1 ") })
    }
}
