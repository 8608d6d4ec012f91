import Foundation
import Scheduler
import Testing
@testable import TUI

/// The mouse: a click selects a row or acts as a footer key; the wheel scrolls.
@Suite("Mouse")
@MainActor
struct MouseTests {
    let size = TerminalSize(rows: 24, columns: 80)

    func board() -> DashboardModel {
        var builder = ModelBuilder()
        for n in 1...40 { builder.submit(n, "job \(n)", at: Double(n) / 100) }
        let layout = DashboardView.Layout(size: size)
        return builder.prepared(rows: layout.tableRows)
    }

    @Test("A click on a table row selects that job (the row on screen, scrolled or not)")
    func clickSelects() {
        var model = board()
        let lines = screen(model, rows: size.rows, columns: size.columns).lines
        // Row 3 is the first job; row 7 the fifth.
        #expect(lines[3].contains("job 1 "))
        #expect(lines[7].contains("job 5 "))
        #expect(model.handleMouse(MouseEvent(kind: .click, row: 7, column: 20), size: size).isEmpty)
        #expect(model.selectedID == jobID(5))
        // The header and column titles select nothing.
        _ = model.handleMouse(MouseEvent(kind: .click, row: 1, column: 20), size: size)
        #expect(model.selectedID == jobID(5))
        // Scrolled by a page: the row under the pointer is what is selected.
        _ = model.handle(.pageDown)
        model.prepare(tableRows: DashboardView.Layout(size: size).tableRows)
        let shown = screen(model, rows: size.rows, columns: size.columns).lines[4]
        _ = model.handleMouse(MouseEvent(kind: .click, row: 4, column: 20), size: size)
        let name = model.selectedJob.map { "job \(jobIDNumber($0.id)) " } ?? "?"
        #expect(shown.contains(name), "clicked row 4 showing '\(shown)', selected \(name)")
    }

    @Test("The wheel moves the selection three rows at a time")
    func wheel() {
        var model = board()
        _ = model.handleMouse(MouseEvent(kind: .wheelDown, row: 10, column: 10), size: size)
        #expect(model.selectedID == jobID(4))
        _ = model.handleMouse(MouseEvent(kind: .wheelUp, row: 10, column: 10), size: size)
        #expect(model.selectedID == jobID(1))
    }

    @Test("A click on a footer entry acts as its key: Help, Filter, Quit")
    func footerClicks() {
        var model = board()
        let footer = screen(model, rows: size.rows, columns: size.columns).lines[size.rows - 1]
        func column(of label: String) -> Int {
            guard let range = footer.range(of: label) else { return -1 }
            return footer.distance(from: footer.startIndex, to: range.lowerBound)
        }
        #expect(column(of: "Help") >= 0)
        _ = model.handleMouse(MouseEvent(kind: .click, row: size.rows - 1, column: column(of: "Help")), size: size)
        #expect(model.mode == .help)
        _ = model.handle(.escape)
        _ = model.handleMouse(MouseEvent(kind: .click, row: size.rows - 1, column: column(of: "Filter")), size: size)
        if case .prompt(let prompt) = model.mode { #expect(prompt.kind == .filter) } else { Issue.record("no filter prompt: \(model.mode)") }
        _ = model.handle(.escape)
        // 40 queued jobs: Quit asks first.
        _ = model.handleMouse(MouseEvent(kind: .click, row: size.rows - 1, column: column(of: "Quit")), size: size)
        #expect(model.mode == .confirm(.quit(active: 40)))
    }

    @Test("Every footer entry's cells map back to it, at every width")
    func footerHitTest() {
        for width in [50, 60, 80, 100, 140] {
            let model = board()
            let footer = screen(model, rows: 24, columns: width).lines[23]
            for binding in KeyBindings.table {
                guard let entry = binding.footer, let range = footer.range(of: entry.label) else { continue }
                let column = footer.distance(from: footer.startIndex, to: range.lowerBound)
                #expect(KeyBindings.footerAction(at: column, width: width - 1) == binding.action, "\(entry.label) at \(width) columns")
            }
        }
    }
}

/// The `n` of ``jobID(_:)``.
func jobIDNumber(_ id: JobID) -> Int { Int(id.short, radix: 16) ?? -1 }
