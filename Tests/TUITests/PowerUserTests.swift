import Foundation
import Scheduler
import Testing
@testable import TUI

/// What a user who lives in htop, k9s and lazygit tried and found broken (issue 13): each test
/// failed before its fix.
@Suite("Power-user bugs")
@MainActor
struct PowerUserTests {
    /// Two running jobs (1, 2) and eighteen queued (3...20), on two slots.
    func busyBoard() -> ModelBuilder {
        var builder = ModelBuilder()
        for n in 1...20 { builder.submit(n, "job \(n)", at: Double(n) / 100) }
        builder.start(1, at: 1)
        builder.start(2, on: localTwo, at: 1)
        return builder
    }

    @Test("A selected job that finishes leaves the cursor on its row: the view is not dragged to the finished jobs")
    func selectionKeepsItsRow() {
        // Given the second running job selected on a 10-row table
        var builder = busyBoard()
        var model = builder.prepared(rows: 10)
        _ = model.handle(.down)
        #expect(model.selectedID == jobID(2))
        #expect(model.selectedIndex == 1)
        // When it finishes (it moves below the 18 queued jobs)
        builder.model = model
        builder.apply(.succeeded(jobID(2), attempts: 1), at: 2)
        model = builder.model
        model.prepare(tableRows: 10)
        // Then the cursor keeps its row and the view its top: the job now there is selected
        #expect(model.selectedIndex == 1)
        #expect(model.top == 0)
        #expect(model.selectedID != jobID(2))
    }

    @Test("F follows the selected job wherever it moves")
    func followMode() {
        // Given the second running job selected, and F pressed
        var builder = busyBoard()
        var model = builder.prepared(rows: 10)
        _ = model.handle(.down)
        _ = model.handle(.char("F"))
        #expect(model.isFollowing)
        // When it finishes
        builder.model = model
        builder.apply(.succeeded(jobID(2), attempts: 1), at: 2)
        model = builder.model
        model.prepare(tableRows: 10)
        // Then the selection went with it, and the view scrolled to show it
        #expect(model.selectedID == jobID(2))
        #expect(model.selectedIndex == 19)
        #expect(model.top == 10)
        #expect(screen(model).lines[1].contains("FOLLOW"))
    }

    @Test("A notice from the run (a refused list line) shows in the status line and stays in the events pane")
    func noticeShows() {
        var model = busyBoard().prepared(rows: 10)
        model.notice("standard input:2: the command contains a NUL byte: the run is cancelled")
        let lines = screen(model, rows: 30, columns: 140).lines
        #expect(lines.contains { $0.contains("│") && $0.contains("standard input:2: the command contains a NUL byte") }, "\(lines.joined(separator: "\n"))")
        #expect(lines.suffix(2).contains { $0.contains("standard input:2: the command contains a NUL byte") })
    }

    @Test("A paste goes into the prompt as text, its line breaks as spaces; outside a prompt it does nothing")
    func pasteGoesIntoThePrompt() {
        var model = busyBoard().prepared(rows: 10)
        let before = model.selectedID
        #expect(model.handle(.paste("cy\nrq")).isEmpty)
        #expect(model.mode == .table && model.selectedID == before)
        _ = model.handle(.char("n"))
        #expect(model.handle(.paste("make\r\ntest\tall\u{07}")).isEmpty)
        guard case .prompt(let prompt) = model.mode else {
            Issue.record("the prompt closed: \(model.mode)")
            return
        }
        #expect(prompt.command.text == "make test all")
        // In a number's field a pasted line break is dropped, not refused as a space.
        _ = model.handle(.tab)
        _ = model.handle(.paste("12\n3"))
        guard case .prompt(let withPriority) = model.mode else { return }
        #expect(withPriority.priority.text == "123" && model.message == nil, "\(String(describing: model.message))")
        #expect(NcursesTerminal.sequenceKey("[1~") == .home && NcursesTerminal.sequenceKey("[4~") == .end)
        #expect(NcursesTerminal.sequenceKey("[200~") == nil)
    }

    @Test("Ctrl-Z suspends from any view, a prompt's included (it did nothing: the terminal is raw)")
    func ctrlZSuspends() {
        var model = busyBoard().prepared(rows: 10)
        #expect(model.handle(.control("z")) == [.suspend])
        _ = model.handle(.char("n"))
        #expect(model.handle(.control("z")) == [.suspend])
        guard case .prompt = model.mode else {
            Issue.record("the prompt closed")
            return
        }
    }

    @Test("Every key of a burst counts: ++++ asks for four steps up, --- then three down")
    func priorityBurst() {
        // Given a queued job selected
        var model = busyBoard().prepared(rows: 10)
        _ = model.handle(.down)
        _ = model.handle(.down)
        let id = model.selectedID!
        // When + comes four times before the scheduler says anything
        var commands: [DashboardCommand] = []
        for _ in 0..<4 { commands += model.handle(.char("+")) }
        // Then each asks for one more than the last
        #expect(commands == (1...4).map { .reprioritize(id, to: $0) })
        // and once the scheduler reports them, - starts from there
        for to in 1...4 {
            model.apply(SchedulerEvent(seq: 100 + UInt64(to), time: .seconds(3), kind: .reprioritized(id, from: to - 1, to: to)))
        }
        #expect(model.handle(.char("-")) == [.reprioritize(id, to: 3)])
    }
}

extension PowerUserTests {
    @Test("The priority field's default is selected: typing replaces it, - starts a negative number", arguments: [
        ("5", 5), ("-3", -3), ("12", 12),
    ])
    func priorityFieldReplacesItsDefault(typed: String, priority: Int) {
        // Given the n prompt with a command, on its priority field
        var model = busyBoard().prepared(rows: 10)
        _ = model.handle(.char("n"))
        for character in "make" { _ = model.handle(.char(character)) }
        _ = model.handle(.tab)
        // When a priority is typed and Enter pressed
        for character in typed { _ = model.handle(.char(character)) }
        // Then it is the priority submitted, not appended to the 0
        #expect(model.handle(.enter) == [.submit(command: "make", priority: priority)])
    }

    @Test("A priority out of range is said under the prompt as it is typed, and Enter keeps the prompt open")
    func priorityOutOfRange() {
        var model = busyBoard().prepared(rows: 10)
        _ = model.handle(.char("n"))
        _ = model.handle(.char("x"))
        _ = model.handle(.tab)
        for _ in 0..<20 { _ = model.handle(.char("9")) }
        #expect(screen(model).lines.contains { $0.contains("priority out of range") })
        #expect(model.handle(.enter) == [])
        #expect(screen(model).lines.contains { $0.contains("not submitted: priority out of range") })
        guard case .prompt = model.mode else { Issue.record("the prompt closed"); return }
    }

    @Test("The PRI column is as wide as the widest priority shown", arguments: [80, 120])
    func priorityColumnWidth(columns: Int) {
        var builder = ModelBuilder()
        builder.submit(1, "big", priority: 10_000)
        builder.submit(2, "very negative", priority: -1_000_000)
        let lines = screen(builder.prepared(), columns: columns).lines
        #expect(lines.contains { $0.contains(" 10000 ") })
        #expect(lines.contains { $0.contains(" -1000000 ") })
    }
}

extension PowerUserTests {
    @Test("A filter that is a state's name lists only jobs in that state, whatever their commands say")
    func stateFilter() {
        // Given a running job whose command says "queued", a queued job and a finished one
        var builder = ModelBuilder()
        builder.submit(1, "echo queued")
        builder.submit(2, "plain")
        builder.submit(3, "echo queued too")
        builder.start(1)
        builder.start(3, on: localTwo)
        builder.apply(.succeeded(jobID(3), attempts: 1), at: 1)
        var model = builder.prepared()
        // When the filter is "queued"
        _ = model.handle(.char("/"))
        for character in "queued" { _ = model.handle(.char(character)) }
        _ = model.handle(.enter)
        model.prepare(tableRows: 14)
        // Then only the queued job is listed
        #expect(model.orderedIDs == [jobID(2)])
        // and "done" is the header's word for succeeded
        _ = model.handle(.char("/"))
        _ = model.handle(.control("u"))
        for character in "done" { _ = model.handle(.char(character)) }
        _ = model.handle(.enter)
        model.prepare(tableRows: 14)
        #expect(model.orderedIDs == [jobID(3)])
    }

    @Test("The 'cancelling …' note gives way to the outcome once the job has ended")
    func staleCancellingMessage() {
        // Given a running job cancelled with c, y
        var builder = ModelBuilder()
        builder.submit(1, "sleep 100")
        builder.start(1)
        var model = builder.prepared()
        _ = model.handle(.char("c"))
        #expect(model.handle(.char("y")) == [.cancel([jobID(1)])])
        #expect(model.message?.text.hasPrefix("cancelling") == true)
        // When the scheduler says it is cancelled
        builder.model = model
        builder.apply(.cancelled(jobID(1)), at: 2)
        // Then the note says so instead
        #expect(builder.model.message?.text == "\(jobID(1).short) cancelled")
    }
}

extension PowerUserTests {
    @Test("A dashboard opened on a run under way starts its event pane with what is going on, by name")
    func eventsFromTheFirstSnapshot() async throws {
        // Given a scheduler with two running jobs and one queued, seen first as a snapshot
        let scheduler = Scheduler(configuration: .init(localSlots: 2, gracePeriod: .seconds(1)))
        let running = Task { await scheduler.run() }
        for name in ["first", "second", "third"] {
            _ = try await scheduler.perform(.submit([DashboardControllerTests.waiting(name)], batch: nil))
        }
        var snapshot = await scheduler.currentSnapshot()
        while snapshot.count(.running) < 2 {
            await Task.yield()
            snapshot = await scheduler.currentSnapshot()
        }
        var model = DashboardModel()
        model.apply(snapshot: snapshot, seq: snapshot.seq)
        // Then the pane says so at once, naming the jobs
        let texts = model.board.log.map(\.text)
        // (the summary last: it is of now, the starts came before it)
        #expect(texts.last == "3 jobs submitted, 1 queued")
        #expect(Set(texts.dropLast()) == ["first started on local-1", "second started on local-2"])
        await scheduler.shutdown(.cancelRunning)
        await running.value
    }

    @Test("The event pane names jobs, and a long line goes on in a second row instead of losing its numbers")
    func eventNamesAndWrapping() {
        var builder = ModelBuilder()
        builder.submit(1, "curl --retry 0 https://example.com/a/long/path", maxAttempts: 3)
        builder.apply(.started(jobID(1), attempt: 1, maxAttempts: 3, worker: localOne.id), at: 1)
        builder.apply(.retryScheduled(jobID(1), failedAttempt: 1, reason: .exitStatus(7), nextAttempt: 2, at: .seconds(93)), at: 1)
        let lines = screen(builder.prepared(), rows: 24, columns: 80).lines
        #expect(!lines.contains { $0.contains("00000001") && $0.contains("started") })
        #expect(lines.contains { $0.contains("curl --retry 0") })
        #expect(lines.contains { $0.contains("started on") }, "\(lines.joined(separator: "\n"))")
        #expect(lines.contains { $0.contains("attempt 2 in 1m32s") }, "\(lines.joined(separator: "\n"))")
    }
}

extension PowerUserTests {
    @Test("Running rows keep their submission order, whichever started first")
    func runningOrder() {
        var builder = ModelBuilder()
        builder.submit(1, "first", at: 0)
        builder.submit(2, "second", at: 0.01)
        builder.start(2, on: localTwo, at: 1)
        builder.start(1, at: 1.001)
        #expect(builder.prepared().orderedIDs == [jobID(1), jobID(2)])
    }

    /// A board with a long title and a job in every common state.
    func fullHeaderModel() -> DashboardModel {
        var builder = busyBoard()
        builder.model.title = "jobtop: examples/a-long-job-file-name.toml"
        builder.apply(.succeeded(jobID(1), attempts: 1), at: 2)
        builder.apply(.cancelled(jobID(3)), at: 2)
        builder.apply(.started(jobID(4), attempt: 1, maxAttempts: 1, worker: localOne.id), at: 2)
        builder.apply(.failed(jobID(4), reason: .exitStatus(1), attempts: 1), at: 3)
        return builder.prepared()
    }

    @Test("At 80×24 the header keeps every count (the title gives way) and the footer every key")
    func eightyByTwentyFour() {
        let lines = screen(fullHeaderModel(), rows: 24, columns: 80).lines
        for count in ["1 running", "16 queued", "1 done", "1 failed", "1 cancelled"] {
            #expect(lines[0].contains(count), "\(lines[0])")
        }
        for key in ["Help", "New", "Cancel", "Prio", "Retry", "Pause", "Slots", "Filter", "Sort", "Output", "Quit"] {
            #expect(lines[23].contains(key), "\(lines[23])")
        }
    }

    @Test("At 60×15 help scrolls to its last line")
    func helpScrolls() {
        var model = fullHeaderModel()
        model.outputRows = 13
        _ = model.handle(.char("?"))
        let first = screen(model, rows: 15, columns: 60).lines
        #expect(first[14].contains("scroll"))
        #expect(!first.contains { $0.contains("Enter submits, Esc aborts.") })
        for _ in 0..<40 { _ = model.handle(.down) }
        #expect(model.mode == .help)
        let last = screen(model, rows: 15, columns: 60).lines
        #expect(last[13].contains("Prompts: ←→ Home End"))
        _ = model.handle(.char("x"))
        #expect(model.mode == .table)
    }

    @Test("At 50 columns the y/n questions show whole")
    func narrowQuestions() {
        var model = fullHeaderModel()
        _ = model.handle(.char("q"))
        #expect(screen(model, rows: 20, columns: 50).lines.contains { $0.contains("and quit? y/n") })
        _ = model.handle(.char("n"))
        _ = model.handle(.home)
        _ = model.handle(.char("c"))
        #expect(screen(model, rows: 20, columns: 50).lines.contains { $0.contains("? y/n") && $0.contains("Cancel ") })
    }

    @Test("On a screen too small to draw, q's question shows")
    func tooSmallShowsTheQuestion() {
        var model = fullHeaderModel()
        _ = model.handle(.char("q"))
        #expect(screen(model, rows: 8, columns: 40).lines.contains { $0.contains("Quit, cancelling 17 jobs? y/n") })
    }

    @Test("On a screen too small to draw, keys do not act unseen: a hidden prompt takes no text and sends nothing, p does not pause; q quits (its question shows), and answered no gives the prompt back with its text")
    func tooSmallKeysDoNotActUnseen() {
        var model = fullHeaderModel()
        _ = model.handle(.char("n"))
        for character in "echo abc" { _ = model.handle(.char(character)) }
        let typed = model.mode
        guard case .prompt(let prompt) = typed, prompt.command.text == "echo abc" else {
            Issue.record("no prompt with the text typed: \(typed)")
            return
        }
        // The screen shrank: q, then Enter (it typed "q" into the prompt and submitted it).
        #expect(model.handleOnTooSmallScreen(.char("q")).isEmpty)
        #expect(model.mode == .confirm(.quit(active: 17)))
        // No: the prompt is back as it was (it was dropped, its text lost).
        #expect(model.handleOnTooSmallScreen(.char("n")).isEmpty)
        #expect(model.mode == typed)
        #expect(model.handleOnTooSmallScreen(.enter).isEmpty)
        #expect(model.handleOnTooSmallScreen(.char("p")).isEmpty)
        #expect(model.handleOnTooSmallScreen(.char(">")).isEmpty)
        #expect(model.mode == typed)
        // Back from the table, a quit answered no leaves the table.
        _ = model.handle(.escape)
        _ = model.handle(.char("q"))
        _ = model.handle(.char("n"))
        #expect(model.mode == .table)
        // Answered yes, it quits.
        _ = model.handleOnTooSmallScreen(.char("q"))
        #expect(model.handleOnTooSmallScreen(.char("y")) == [.quit])
    }
}

extension PowerUserTests {
    @Test("The header tells the run at a glance: done/total with a bar, ETA from the last minute, a throughput sparkline")
    func headerAtAGlance() {
        // Given 20 jobs, 10 finished over the last 10 seconds (one a second), 2 running
        var builder = busyBoard()
        for n in 3...12 {
            builder.apply(.started(jobID(n), attempt: 1, maxAttempts: 1, worker: localOne.id), at: Double(n))
            builder.apply(.succeeded(jobID(n), attempts: 1), at: Double(n) + 0.5)
        }
        let line = screen(builder.prepared(), rows: 24, columns: 120, now: 12.9).lines[1]
        // Then: 10 of 20 done, a half-full bar; 10 active at 10 a minute (12.9 s window) → ETA 12s
        #expect(line.contains("██████░░░░░░ 10/20 50%"), "\(line)")
        #expect(line.contains("ETA 12s"), "\(line)")
        // one bar per second: nothing 20 s ago, one finish a second for the last ten
        #expect(line.contains("▁▁▁▁▁▁▁▁▁▁████████"), "\(line)")
        #expect(line.contains("slots ██████ 2/2"), "\(line)")

        // A list file of 40 jobs, submitted a window at a time: the 20 to come count too
        var model = builder.prepared()
        model.expectedJobs = 40
        let withList = screen(model, rows: 24, columns: 120, now: 12.9).lines[1]
        #expect(withList.contains("███░░░░░░░░░ 10/40 25%") && withList.contains("ETA 38s"), "\(withList)")
        // until a shutdown says they will not come
        builder.apply(.shuttingDown(.cancelRunning), at: 12.9)
        var stopping = builder.prepared()
        stopping.expectedJobs = 40
        #expect(screen(stopping, rows: 24, columns: 120, now: 12.9).lines[1].contains("10/20"))

        // Queued jobs cancelled in bulk ran nothing: the rate and the ETA stay as they were
        // (they said 2000.0/s and ETA 0s after 10,000 queued jobs were cancelled at once)
        for n in 13...20 { builder.apply(.cancelled(jobID(n)), at: 12.8) }
        let cancelled = screen(builder.prepared(), rows: 24, columns: 120, now: 12.9).lines[1]
        #expect(cancelled.contains("ETA 2s") && cancelled.contains(" 1.0/s"), "\(cancelled)")
    }
}

extension PowerUserTests {
    @Test("Space tags rows (the cursor moves on); c, + and r then act on every tagged job; U untags")
    func tagging() {
        // Given the first three queued jobs tagged
        var builder = busyBoard()
        builder.apply(.failed(jobID(20), reason: .exitStatus(1), attempts: 1), at: 2)
        var model = builder.prepared(rows: 10)
        _ = model.handle(.down)
        _ = model.handle(.down)
        for _ in 0..<3 { _ = model.handle(.char(" ")) }
        #expect(model.tagged == [jobID(3), jobID(4), jobID(5)])
        #expect(screen(model).lines.filter { $0.hasPrefix("*") }.count == 3)
        // + raises each of them
        #expect(model.handle(.char("+")) == [jobID(3), jobID(4), jobID(5)].map { .reprioritize($0, to: 1) })
        // c asks once for all, y cancels all
        #expect(model.handle(.char("c")) == [])
        #expect(model.mode == .confirm(.cancelTagged([jobID(3), jobID(4), jobID(5)])))
        #expect(screen(model).lines.contains { $0.contains("Cancel 3 tagged jobs? y = cancel them") })
        #expect(model.handle(.char("y")) == [.cancel([jobID(3), jobID(4), jobID(5)])])
        #expect(model.tagged.isEmpty)
        // r on tagged finished jobs retries each; U untags
        _ = model.handle(.end)
        _ = model.handle(.char(" "))
        #expect(model.handle(.char("r")) == [.retry([jobID(20)])])
        _ = model.handle(.char("U"))
        #expect(model.tagged.isEmpty)
    }
}

extension PowerUserTests {
    @Test("Cancelling one tagged job: its end says how it went (the status line stayed on 'cancelling 1 tagged job…')")
    func cancellingOneTaggedJob() {
        var builder = busyBoard()
        var model = builder.prepared(rows: 10)
        _ = model.handle(.down)
        _ = model.handle(.down)
        _ = model.handle(.char(" "))
        _ = model.handle(.char("c"))
        #expect(model.handle(.char("y")) == [.cancel([jobID(3)])])
        #expect(model.message?.text == "cancelling 1 tagged job…")
        builder.model = model
        builder.apply(.cancelled(jobID(3)), at: 3)
        #expect(builder.model.message?.text == "\(jobID(3).short) cancelled")
    }

    @Test("= on tagged jobs says what it set; + on tagged jobs that are all at the highest priority says why nothing moved (it said '0 tagged jobs raised')")
    func taggedPriorityMessages() {
        var builder = busyBoard()
        builder.apply(.reprioritized(jobID(3), from: 0, to: JobSpec.priorityRange.upperBound), at: 2)
        builder.apply(.reprioritized(jobID(4), from: 0, to: JobSpec.priorityRange.upperBound), at: 2)
        var model = builder.prepared(rows: 10)
        for target in [3, 4] {
            _ = model.handle(.home)
            for _ in 0..<30 where model.selectedID != jobID(target) { _ = model.handle(.down) }
            _ = model.handle(.char(" "))
        }
        #expect(model.tagged == [jobID(3), jobID(4)])
        #expect(model.handle(.char("+")).isEmpty)
        #expect(model.message?.text.contains("is already at the highest priority (1000000)") == true, "\(String(describing: model.message))")
        _ = model.handle(.char("="))
        for character in "7" { _ = model.handle(.char(character)) }
        #expect(model.handle(.enter) == [.reprioritize(jobID(3), to: 7), .reprioritize(jobID(4), to: 7)])
        #expect(model.message?.text == "priority of 2 tagged jobs: 7")
    }

    @Test("= sets a priority directly: the current one is selected and typing replaces it")
    func setPriorityDirectly() {
        var model = busyBoard().prepared(rows: 10)
        _ = model.handle(.down)
        _ = model.handle(.down)
        _ = model.handle(.char("="))
        #expect(screen(model).lines.contains { $0.contains("Priority of \(jobID(3).short): 0") })
        for character in "-250" { _ = model.handle(.char(character)) }
        #expect(model.handle(.enter) == [.reprioritize(jobID(3), to: -250)])
        #expect(model.message?.text == "priority of \(jobID(3).short): -250")
        // Out of range: refused, the prompt stays
        _ = model.handle(.char("="))
        for character in "5000000" { _ = model.handle(.char(character)) }
        #expect(model.handle(.enter) == [])
        #expect(screen(model).lines.contains { $0.contains("priority not changed: priority out of range") })
    }

    @Test("E shows every event full screen, scrollable, with job names; Esc returns")
    func eventsView() {
        var builder = busyBoard()
        for _ in 0..<2 { for n in 3...20 { builder.apply(.reprioritized(jobID(n), from: 0, to: 1), at: 2) } }
        var model = builder.prepared(rows: 10)
        model.outputRows = 22
        _ = model.handle(.char("E"))
        var lines = screen(model).lines
        #expect(lines[0].contains("Events") && lines[0].contains("following"))
        #expect(lines[22].contains("job 20 priority 0 → 1"))
        _ = model.handle(.home)
        lines = screen(model).lines
        #expect(lines[0].contains("scrolled"))
        #expect(lines[1].contains("slots: 2 local"))
        _ = model.handle(.escape)
        #expect(model.mode == .table)
    }
}

extension PowerUserTests {
    @Test("t shows a timeline: one lane per worker, jobs as bars colored by outcome over the last minutes")
    func timeline() {
        // Given local-1 ran a job from 0:10 to 1:10 that succeeded, local-2 one from 1:00 that still runs
        var builder = busyBoard()
        builder.model = ModelBuilder().model
        builder.submit(1, "long")
        builder.submit(2, "still")
        builder.start(1, at: 10)
        builder.apply(.succeeded(jobID(1), attempts: 1), at: 70)
        builder.start(2, on: localTwo, at: 60)
        var model = builder.prepared()
        _ = model.handle(.char("t"))
        let frame = DashboardView.render(model, size: TerminalSize(rows: 24, columns: 80), now: .seconds(120))
        let text = frame.lines.map(\.text)
        #expect(text[0].contains("Timeline") && text[0].contains("last 2 min"))
        // 120 s over 66 cells: 1.8 s a cell (it said 1s, the seconds cut off)
        #expect(text[0].contains("1.8s a cell"), "\(text[0])")
        // Lanes of 66 cells for 120 s: local-1 busy from cell 5 to 38, local-2 from 33 to the end
        let one = try! #require(frame.lines.first { $0.text.hasPrefix(" local-1") })
        let two = try! #require(frame.lines.first { $0.text.hasPrefix(" local-2") })
        #expect(one.segments.contains { $0.role == .succeeded && $0.text.count >= 30 })
        #expect(two.segments.last { $0.text.contains("█") }?.role == .running)
        #expect(two.text.trimmingCharacters(in: .whitespaces).hasSuffix("█"))
        _ = model.handle(.char("q"))
        #expect(model.mode == .table)
    }
}

extension PowerUserTests {
    @Test("The timeline keeps the lane of a slot taken away, with what ran on it")
    func timelineKeepsALeftWorker() {
        // Given local-2 ran a job from 1:00 to 1:30, then its slot was taken away
        var builder = busyBoard()
        builder.model = ModelBuilder().model
        builder.submit(1, "here")
        builder.submit(2, "gone")
        builder.start(1, at: 10)
        builder.start(2, on: localTwo, at: 60)
        builder.apply(.succeeded(jobID(2), attempts: 1), at: 90)
        builder.apply(.workerLeft(localTwo.id, reason: .slotsReduced), at: 95)
        var model = builder.prepared()
        _ = model.handle(.char("t"))
        let frame = DashboardView.render(model, size: TerminalSize(rows: 24, columns: 80), now: .seconds(120))
        // Then its lane is still there, below the workers that stay, named as gone, with its bar
        #expect(!frame.lines.contains { $0.text.hasPrefix(" local-2 ") && !$0.text.hasPrefix(" local-2 left") })
        let gone = try! #require(frame.lines.first { $0.text.hasPrefix(" local-2 left") }, "\(frame.lines.map(\.text))")
        #expect(gone.segments.contains { $0.role == .succeeded && $0.text.contains("█") })
        let one = try! #require(frame.lines.firstIndex { $0.text.hasPrefix(" local-1") })
        #expect(frame.lines.firstIndex { $0.text.hasPrefix(" local-2 left") }! > one)
    }

    @Test("An idle dashboard's up shows whole minutes (it ticks once a minute); a busy one seconds")
    func idleUp() {
        let idle = ModelBuilder().prepared()
        #expect(screen(idle, now: 30).lines[1].contains("up <1m"))
        #expect(screen(idle, now: 61).lines[1].contains("up 1m"))
        #expect(screen(idle, now: 3_700).lines[1].contains("up 1h01m"))
        #expect(screen(busyBoard().prepared(), now: 61).lines[1].contains("up 1m01s"))
    }
}
