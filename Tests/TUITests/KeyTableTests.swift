import Scheduler
import Testing
@testable import TUI

@Suite("Key table")
struct KeyTableTests {
    /// Given one running job (1), two queued (2 at priority 0, 3 at 5) and a failed one (4).
    func board() -> DashboardModel {
        var builder = ModelBuilder()
        builder.submit(1, "sleep 100", at: 0)
        builder.submit(2, "queued low", at: 1)
        builder.submit(3, "queued high", priority: 5, at: 2)
        builder.submit(4, "false", at: 3)
        builder.start(1, at: 4)
        builder.start(4, on: localTwo, at: 4)
        builder.apply(.failed(jobID(4), reason: .exitStatus(1), attempts: 1), at: 5)
        return builder.prepared()
    }

    /// Moves the selection to job `n`.
    func select(_ n: Int, in model: inout DashboardModel) {
        _ = model.handle(.home)
        while model.selectedID != jobID(n) {
            let before = model.selectedIndex
            _ = model.handle(.down)
            precondition(model.selectedIndex != before, "job \(n) not in the table")
        }
    }

    @Test("Every key of the table maps to its action, and no key is bound twice")
    func table() {
        for binding in KeyBindings.table {
            for key in binding.keys { #expect(KeyBindings.action(for: key) == binding.action) }
        }
        #expect(KeyBindings.action(for: .char("c")) == .cancel)
        #expect(KeyBindings.action(for: .function(9)) == .cancel)
        #expect(KeyBindings.action(for: .function(7)) == .raisePriority)
        #expect(KeyBindings.action(for: .function(8)) == .lowerPriority)
        #expect(KeyBindings.action(for: .function(10)) == .quit)
        #expect(KeyBindings.action(for: .char("x")) == .signal)
        #expect(KeyBindings.action(for: .char("Z")) == nil)
        let all = KeyBindings.table.flatMap(\.keys)
        #expect(Set(all).count == all.count)
        #expect(Set(KeyBindings.table.map(\.action)) == Set(TableAction.allCases))
    }

    @Test("↓/j and ↑/k move the selection; End and Home jump; it stays on its job when the order changes")
    func movement() {
        var model = board()
        #expect(model.selectedID == jobID(1))
        _ = model.handle(.down)
        #expect(model.selectedID == jobID(3))
        _ = model.handle(.char("j"))
        #expect(model.selectedID == jobID(2))
        _ = model.handle(.char("k"))
        #expect(model.selectedID == jobID(3))
        _ = model.handle(.end)
        #expect(model.selectedID == jobID(4))
        _ = model.handle(.home)
        #expect(model.selectedID == jobID(1))
        // A priority the user gives the selected job moves the cursor with it, once reported.
        select(2, in: &model)
        let at = model.selectedIndex
        for step in 1...6 { #expect(model.handle(.char("+")) == [.reprioritize(jobID(2), to: step)]) }
        for step in 1...6 {
            model.apply(SchedulerEvent(seq: 99 + UInt64(step), time: .seconds(6), kind: .reprioritized(jobID(2), from: step - 1, to: step)))
            // A frame may come between the reports.
            model.prepare(tableRows: 14)
        }
        #expect(model.selectedID == jobID(2))
        #expect(model.selectedIndex == 1 && at != 1)
    }

    @Test("Without F the cursor keeps its row as jobs above it move away (it drifted with its job to the top); with F it follows the job")
    func theCursorKeepsItsRow() {
        var model = board()
        select(2, in: &model)
        let row = model.selectedIndex
        // Another client gives the selected job a higher priority: its row moves, the cursor not.
        model.apply(SchedulerEvent(seq: 110, time: .seconds(6), kind: .reprioritized(jobID(2), from: 0, to: 9)))
        model.prepare(tableRows: 14)
        #expect(model.selectedIndex == row)
        #expect(model.selectedID != jobID(2))
        // Following, the cursor goes where the job goes.
        select(2, in: &model)
        _ = model.handle(.char("F"))
        model.apply(SchedulerEvent(seq: 101, time: .seconds(7), kind: .reprioritized(jobID(2), from: 9, to: -5)))
        model.prepare(tableRows: 14)
        #expect(model.selectedID == jobID(2))
    }

    @Test("c asks to confirm; y cancels the selected job, n keeps it")
    func cancelConfirms() {
        var model = board()
        #expect(model.handle(.char("c")).isEmpty)
        #expect(model.mode == .confirm(.cancel(jobID(1), name: "sleep 100")))
        #expect(model.handle(.char("n")).isEmpty)
        #expect(model.mode == .table)
        _ = model.handle(.function(9))
        #expect(model.handle(.char("y")) == [.cancel([jobID(1)])])
        #expect(model.mode == .table)
    }

    @Test("c on a finished job says so and asks nothing")
    func cancelFinished() {
        var model = board()
        select(4, in: &model)
        #expect(model.handle(.char("c")).isEmpty)
        #expect(model.mode == .table)
        #expect(model.message?.text.contains("already ended") == true)
    }

    @Test("+ and - change the selected job's priority by one; F7 and F8 too")
    func priority() {
        var model = board()
        select(2, in: &model)
        // Each key starts from what the last one asked for (the scheduler has not answered yet).
        #expect(model.handle(.char("+")) == [.reprioritize(jobID(2), to: 1)])
        #expect(model.handle(.function(7)) == [.reprioritize(jobID(2), to: 2)])
        #expect(model.handle(.char("-")) == [.reprioritize(jobID(2), to: 1)])
        #expect(model.handle(.function(8)) == [.reprioritize(jobID(2), to: 0)])
        #expect(model.handle(.function(8)) == [.reprioritize(jobID(2), to: -1)])
        select(4, in: &model)
        #expect(model.handle(.char("+")).isEmpty)
    }

    @Test("r retries a failed job and refuses a running one")
    func retry() {
        var model = board()
        #expect(model.handle(.char("r")).isEmpty)
        #expect(model.message?.role == .error)
        select(4, in: &model)
        #expect(model.handle(.char("r")) == [.retry([jobID(4)])])
    }

    @Test("p pauses, and resumes once paused")
    func pause() {
        var model = board()
        #expect(model.handle(.char("p")) == [.pause])
        model.apply(SchedulerEvent(seq: 100, time: .seconds(6), kind: .paused))
        #expect(model.handle(.char("p")) == [.resume])
    }

    @Test("< and > ask for one slot less or more, never fewer than one, but for none while a remote worker is connected")
    func slots() {
        var model = board()
        #expect(model.handle(.char(">")) == [.setLocalSlots(3)])
        // Counted from what the last key asked for (a burst counts every key).
        #expect(model.handle(.char("<")) == [.setLocalSlots(2)])
        #expect(model.handle(.char("<")) == [.setLocalSlots(1)])
        var single = ModelBuilder(slots: 1).prepared()
        #expect(single.handle(.char("<")).isEmpty)
        #expect(single.message?.role == .error)
        // With a remote worker the local slots may go to none (a serve -j 0 given one back).
        var withRemote = ModelBuilder(slots: 1)
        withRemote.apply(.workerJoined(WorkerDescriptor(id: WorkerID(), name: "far", kind: .remote, slots: 2)))
        var remote = withRemote.prepared()
        #expect(remote.handle(.char("<")) == [.setLocalSlots(0)])
        #expect(remote.handle(.char("<")).isEmpty && remote.message?.role == .error)
    }

    @Test("n opens a prompt: the typed command (and a priority after Tab) is submitted on Enter")
    func enqueue() {
        var model = board()
        _ = model.handle(.char("n"))
        for character in "echo hi" { _ = model.handle(.char(character)) }
        _ = model.handle(.tab)
        _ = model.handle(.backspace)
        _ = model.handle(.char("7"))
        #expect(model.handle(.enter) == [.submit(command: "echo hi", priority: 7)])
        #expect(model.mode == .table)
    }

    @Test("The prompt edits with ←, Backspace and Ctrl-U; Esc aborts; an empty command submits nothing")
    func promptEditing() {
        var model = board()
        _ = model.handle(.char("n"))
        for character in "ech" { _ = model.handle(.char(character)) }
        _ = model.handle(.control("u"))
        for character in "ehco" { _ = model.handle(.char(character)) }
        _ = model.handle(.left)
        _ = model.handle(.left)
        _ = model.handle(.backspace)
        _ = model.handle(.right)
        _ = model.handle(.char("h"))
        guard case .prompt(let prompt) = model.mode else {
            Issue.record("no prompt")
            return
        }
        #expect(prompt.command.text == "echo")
        #expect(model.handle(.escape).isEmpty)
        #expect(model.mode == .table)
        _ = model.handle(.char("n"))
        #expect(model.handle(.enter).isEmpty)
        #expect(model.message?.role == .error)
    }

    @Test("/ filters as you type; Enter keeps the filter, Esc clears it")
    func filter() {
        var model = board()
        _ = model.handle(.char("/"))
        for character in "queued" { _ = model.handle(.char(character)) }
        #expect(model.filter == "queued")
        #expect(Set(model.orderedIDs) == [jobID(2), jobID(3)])
        _ = model.handle(.enter)
        #expect(model.filter == "queued")
        _ = model.handle(.char("/"))
        _ = model.handle(.escape)
        #expect(model.filter == "")
        #expect(model.orderedIDs.count == 4)
    }

    @Test("q quits at once when nothing is active")
    func quitIdle() {
        var model = ModelBuilder().prepared()
        #expect(model.handle(.char("q")) == [.quit])
        var again = ModelBuilder().prepared()
        #expect(again.handle(.control("c")) == [.quit])
    }

    @Test("q with active jobs asks; y quits, n stays")
    func quitActive() {
        var model = board()
        #expect(model.handle(.function(10)).isEmpty)
        #expect(model.mode == .confirm(.quit(active: 3)))
        #expect(model.handle(.char("n")).isEmpty)
        #expect(model.mode == .table)
        _ = model.handle(.char("q"))
        #expect(model.handle(.char("y")) == [.quit])
    }

    @Test("The quit question follows the jobs: its count as they end, and none asked once every job has ended")
    func quitQuestionFollowsTheJobs() {
        var builder = ModelBuilder()
        builder.submit(1, "sleep 100", at: 0)
        builder.submit(2, "sleep 100", at: 0)
        builder.start(1, at: 1)
        builder.start(2, on: localTwo, at: 1)
        builder.model.prepare(tableRows: 14)
        #expect(builder.model.handle(.char("q")).isEmpty)
        #expect(builder.model.mode == .confirm(.quit(active: 2)))
        builder.apply(.succeeded(jobID(1), attempts: 1), at: 2)
        #expect(builder.model.mode == .confirm(.quit(active: 1)))
        builder.apply(.succeeded(jobID(2), attempts: 1), at: 3)
        #expect(builder.model.mode == .table)
        #expect(builder.model.message?.text == "every job has ended: q quits")
        #expect(builder.model.handle(.char("q")) == [.quit])
    }

    @Test("Ctrl-C asks like q; a second Ctrl-C forces")
    func interrupt() {
        var model = board()
        #expect(model.handle(.control("c")).isEmpty)
        #expect(model.handle(.control("c")) == [.forceQuit])
    }

    @Test("Enter opens the selected job's output; Esc returns to the table")
    func output() {
        var model = board()
        #expect(model.handle(.enter) == [.showOutput(jobID(1))])
        #expect(model.outputJob == jobID(1))
        _ = model.handle(.escape)
        #expect(model.mode == .table)
    }

    @Test("? shows help; any key returns")
    func help() {
        var model = board()
        _ = model.handle(.char("?"))
        #expect(model.mode == .help)
        _ = model.handle(.char("x"))
        #expect(model.mode == .table)
        _ = model.handle(.function(1))
        #expect(model.mode == .help)
    }
}
