import Foundation
import Scheduler
import Testing
@testable import TUI

/// `e`: edit a waiting job's command; a failed or cancelled one runs again with it.
@Suite("Edit a command")
@MainActor
struct EditCommandTests {
    /// Job 1 running, 2 queued, 3 failed, 4 succeeded.
    func board() -> ModelBuilder {
        var builder = ModelBuilder(slots: 1)
        builder.submit(1, "sleep 10", at: 0.01)
        builder.submit(2, "make tset", at: 0.02)
        builder.submit(3, "exit 1", at: 0.03)
        builder.submit(4, "true", at: 0.04)
        builder.start(3, at: 0.5)
        builder.apply(.failed(jobID(3), reason: .exitStatus(1), attempts: 1), at: 0.6)
        builder.start(4, at: 0.7)
        builder.apply(.succeeded(jobID(4), attempts: 1), at: 0.8)
        builder.start(1, at: 1)
        return builder
    }

    func select(_ n: Int, in model: inout DashboardModel) {
        _ = model.handle(.home)
        while model.selectedID != jobID(n) {
            let before = model.selectedIndex
            _ = model.handle(.down)
            if model.selectedIndex == before { break }
        }
    }

    @Test("e on a queued job opens its command to mend; Enter sends the new one")
    func editQueued() {
        var model = board().prepared()
        select(2, in: &model)
        #expect(model.handle(.char("e")).isEmpty)
        guard case .prompt(let prompt) = model.mode, prompt.kind == .editCommand(jobID(2)) else {
            Issue.record("no edit prompt: \(model.mode)")
            return
        }
        #expect(prompt.command.text == "make tset")
        let lines = screen(model).lines
        #expect(lines.contains { $0.contains("Command of 00000002: make tset") })
        // Mend the typo at the end: Backspace four times, then "test".
        for _ in 0..<4 { _ = model.handle(.backspace) }
        for character in "test" { _ = model.handle(.char(character)) }
        #expect(model.handle(.enter) == [.edit(jobID(2), command: "make test")])
        #expect(model.mode == .table)
    }

    @Test("e on a failed job: the edit retries it; Esc sends nothing")
    func editFailed() {
        var model = board().prepared()
        select(3, in: &model)
        _ = model.handle(.char("e"))
        #expect(model.handle(.escape).isEmpty)
        _ = model.handle(.char("e"))
        _ = model.handle(.control("u"))
        for character in "exit 0" { _ = model.handle(.char(character)) }
        #expect(model.handle(.enter) == [.edit(jobID(3), command: "exit 0")])
    }

    @Test("e on a running or succeeded job says why not and opens nothing; an empty command is refused inline")
    func refused() {
        var model = board().prepared()
        select(1, in: &model)
        #expect(model.handle(.char("e")).isEmpty)
        #expect(model.mode == .table)
        #expect(model.message?.text.contains("is running") == true)
        // Cancelled, its process not yet ended: said so, not "running: cancel it first".
        var stopping = board()
        stopping.apply(.stopping(jobID(1), .cancel), at: 2)
        var cancelled = stopping.prepared()
        select(1, in: &cancelled)
        #expect(cancelled.handle(.char("e")).isEmpty)
        #expect(cancelled.message?.text == "00000001 is being cancelled (its process has not ended yet): edit it once it has ended")
        select(4, in: &model)
        #expect(model.handle(.char("e")).isEmpty)
        #expect(model.message?.text.contains("has succeeded") == true)
        select(2, in: &model)
        _ = model.handle(.char("e"))
        _ = model.handle(.control("u"))
        #expect(model.handle(.enter).isEmpty)
        if case .prompt = model.mode {} else { Issue.record("the prompt closed on an empty command") }
        #expect(screen(model).lines.contains { $0.contains("not changed: the command is empty") })
    }

    @Test("e on a skipped job says at once why it cannot run, and opens nothing")
    func skippedRefusedAtOnce() {
        var builder = board()
        builder.submit(5, "deploy", at: 0.9)
        builder.apply(.skipped(jobID(5), reason: SkipReason(dependency: jobID(3), dependencyName: "build", outcome: .failed)), at: 0.95)
        var model = builder.prepared()
        select(5, in: &model)
        #expect(model.handle(.char("e")).isEmpty)
        #expect(model.mode == .table)
        #expect(model.message?.text == "00000005 was skipped: dependency 'build' failed; retry 'build' first, then edit this one")
    }

    @Test("The engine's edit shows in the table and the events pane")
    func editedEventShows() {
        var builder = board()
        builder.apply(.edited(jobID(2), command: "make test"), at: 2)
        let model = builder.prepared()
        #expect(model.board.jobs[jobID(2)]?.command == "make test")
        #expect(model.board.log.last?.text == "00000002 command now: make test")
        // A named job is said by its name, as in the other events.
        builder.submit(7, "echo old", name: "named")
        builder.apply(.edited(jobID(7), command: "echo new"), at: 3)
        #expect(builder.prepared().board.log.last?.text == "named command now: echo new")
    }
}
