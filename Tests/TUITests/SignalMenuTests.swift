import Foundation
import Scheduler
import Testing
@testable import TUI

/// `x`: a menu of signals (htop's F9) sent to the selected, or tagged, running jobs.
@Suite("Signal menu")
@MainActor
struct SignalMenuTests {
    /// Jobs 1 and 2 running, 3 queued.
    func board() -> ModelBuilder {
        var builder = ModelBuilder()
        for n in 1...3 { builder.submit(n, "job \(n)", at: Double(n) / 100) }
        builder.start(1, at: 1)
        builder.start(2, on: localTwo, at: 1)
        return builder
    }

    @Test("At the smallest size (50×12) every signal shows, in columns, and the one chosen is marked (8 and 9 were off screen)")
    func everySignalShowsInASmallWindow() {
        var model = board().prepared()
        _ = model.handle(.char("x"))
        for _ in 0..<8 { _ = model.handle(.down) }
        let terminal = screen(model, rows: DashboardView.minimumSize.rows, columns: DashboardView.minimumSize.columns)
        for name in ["SIGTERM", "SIGKILL", "SIGINT", "SIGHUP", "SIGSTOP", "SIGCONT", "SIGUSR1", "SIGUSR2", "SIGQUIT"] {
            #expect(terminal.lines.contains { $0.contains(name) }, "\(name) is on screen:\n\(terminal.lines.joined(separator: "\n"))")
        }
    }

    @Test("x on a running job shows the signals; ↓ Enter sends the one chosen to that job")
    func menuSendsTheChosenSignal() {
        var model = board().prepared()
        #expect(model.selectedID == jobID(1))
        #expect(model.handle(.char("x")).isEmpty)
        guard case .signalMenu(let menu) = model.mode else {
            Issue.record("no menu: \(model.mode)")
            return
        }
        #expect(menu.targets == [jobID(1)])
        let lines = screen(model).lines
        #expect(lines.contains { $0.contains("Send a signal to 00000001 (job 1)") }, "its command, not its id again")
        for name in ["SIGTERM", "SIGKILL", "SIGINT", "SIGHUP", "SIGSTOP", "SIGCONT", "SIGUSR1", "SIGUSR2", "SIGQUIT"] {
            #expect(lines.contains { $0.contains(name) }, "\(name) is in the menu")
        }
        #expect(lines.contains { $0.contains("Enter sends") })
        _ = model.handle(.down)
        #expect(model.handle(.enter) == [.signal([jobID(1)], SIGKILL)])
        #expect(model.mode == .table)
        #expect(model.message?.text.contains("SIGKILL") == true)
    }

    @Test("A digit chooses its line and Enter sends it; Esc after a digit sends nothing; the tagged running jobs are the targets")
    func digitsEscapeAndTags() {
        var model = board().prepared()
        _ = model.handle(.char("x"))
        #expect(model.handle(.escape).isEmpty)
        #expect(model.mode == .table)
        // Tag all three (one is queued): only the running ones get it.
        _ = model.handle(.char(" "))
        _ = model.handle(.char(" "))
        _ = model.handle(.char(" "))
        _ = model.handle(.char("x"))
        // A mistyped digit (2: SIGKILL) is only chosen: Esc takes it back.
        #expect(model.handle(.char("2")).isEmpty)
        #expect(model.handle(.escape).isEmpty)
        _ = model.handle(.char("x"))
        #expect(model.handle(.char("5")).isEmpty)
        #expect(model.handle(.enter) == [.signal([jobID(1), jobID(2)], SIGSTOP)])
    }

    @Test("x on a queued job says only running jobs take signals, and opens nothing")
    func queuedJobIsRefused() {
        var model = board().prepared()
        _ = model.handle(.end)
        #expect(model.selectedID == jobID(3))
        #expect(model.handle(.char("x")).isEmpty)
        #expect(model.mode == .table)
        #expect(model.message?.text == "only a running job can be sent a signal")
    }

    @Test("A job that ended while the menu was open is not signalled")
    func endedWhileOpen() {
        var builder = board()
        var model = builder.prepared()
        _ = model.handle(.char("x"))
        builder.model = model
        builder.apply(.succeeded(jobID(1), attempts: 1), at: 2)
        model = builder.model
        #expect(model.handle(.enter).isEmpty)
        #expect(model.message?.role == .error)
    }
}
