import Foundation
import Scheduler
@testable import TUI

/// A job id whose short form is `n` in eight hex digits.
func jobID(_ n: Int) -> JobID {
    JobID(uuid: UUID(uuidString: String(format: "%08X-0000-4000-8000-000000000000", n))!)
}

let localOne = WorkerDescriptor(id: WorkerID(uuid: UUID(uuidString: "11111111-0000-4000-8000-000000000000")!), name: "local-1", kind: .local, slots: 1)
let localTwo = WorkerDescriptor(id: WorkerID(uuid: UUID(uuidString: "22222222-0000-4000-8000-000000000000")!), name: "local-2", kind: .local, slots: 1)

/// Builds a model from events, numbering them.
struct ModelBuilder {
    var model = DashboardModel(title: "jobtop")
    private var seq: UInt64 = 0

    init(slots: Int = 2) {
        apply(.workerJoined(localOne))
        if slots > 1 { apply(.workerJoined(localTwo)) }
        apply(.slotsChanged(local: slots, total: slots))
    }

    mutating func apply(_ kind: SchedulerEvent.Kind, at seconds: Double = 0) {
        seq += 1
        model.apply(SchedulerEvent(seq: seq, time: .milliseconds(Int(seconds * 1000)), kind: kind))
    }

    /// Submits job `n` (queued).
    mutating func submit(_ n: Int, _ command: String, priority: Int = 0, at seconds: Double = 0, maxAttempts: Int = 1) {
        let at = Duration.milliseconds(Int(seconds * 1000))
        apply(.submitted(JobInfo(id: jobID(n), command: command, priority: priority, maxAttempts: maxAttempts, submittedAt: at)), at: seconds)
    }

    mutating func start(_ n: Int, on worker: WorkerDescriptor = localOne, at seconds: Double = 0) {
        apply(.started(jobID(n), attempt: 1, maxAttempts: 1, worker: worker.id), at: seconds)
    }

    /// Prepares the model for a table of `rows` rows and returns it.
    func prepared(rows: Int = 14) -> DashboardModel {
        var model = model
        model.prepare(tableRows: rows)
        return model
    }
}

/// A grid of cells that draws frames the way a terminal does: a wide character takes two
/// cells, and nothing may run past the right edge.
@MainActor
final class FakeTerminal: Terminal {
    var size: TerminalSize
    private(set) var cells: [[String]]
    var keys: [Key] = []
    /// Rows whose text was wider than the screen.
    private(set) var overflows: [Int] = []

    init(rows: Int, columns: Int) {
        size = TerminalSize(rows: rows, columns: columns)
        cells = Array(repeating: Array(repeating: " ", count: columns), count: rows)
    }

    func draw(_ frame: Frame) {
        cells = Array(repeating: Array(repeating: " ", count: size.columns), count: size.rows)
        overflows = []
        for (row, line) in frame.lines.enumerated() where row < size.rows {
            var column = 0
            for scalar in line.text.unicodeScalars {
                let width = TextWidth.width(of: scalar)
                if width == 0 {
                    if column > 0 { cells[row][column - 1] += String(scalar) }
                    continue
                }
                if column + width > size.columns {
                    overflows.append(row)
                    break
                }
                cells[row][column] = String(scalar)
                if width == 2 { cells[row][column + 1] = "" }
                column += width
            }
        }
    }

    func readKey() -> Key? { keys.isEmpty ? nil : keys.removeFirst() }

    func updateSize() {}

    /// The screen's rows as text.
    var lines: [String] { cells.map { $0.joined() } }

    /// The column (cell) where `needle` starts on `row`, if it is there.
    func column(of needle: String, row: Int) -> Int? {
        // Each cell index is a screen column (a wide character's second cell is empty).
        cells[row].indices.first { cells[row][$0...].joined().hasPrefix(needle) }
    }
}

/// Renders `model` on a fake terminal of the given size.
@MainActor
func screen(_ model: DashboardModel, rows: Int = 24, columns: Int = 80, now: Double = 10) -> FakeTerminal {
    var model = model
    let size = TerminalSize(rows: rows, columns: columns)
    model.prepare(tableRows: DashboardView.Layout(size: size).tableRows)
    let terminal = FakeTerminal(rows: rows, columns: columns)
    terminal.draw(DashboardView.render(model, size: size, now: .milliseconds(Int(now * 1000))))
    return terminal
}
