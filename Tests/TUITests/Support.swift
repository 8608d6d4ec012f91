import Foundation
import Testing
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

    /// Submits job `n` with a name, a group and dependencies, in `state` (queued, blocked or
    /// scheduled), as the scheduler reports it.
    mutating func submit(
        _ n: Int, _ command: String, name: String? = nil, group: String = JobSpec.defaultGroup, after: [Int] = [],
        state: JobState = .queued, at seconds: Double = 0
    ) {
        let at = Duration.milliseconds(Int(seconds * 1000))
        apply(.submitted(JobInfo(
            id: jobID(n), name: name, command: command, priority: 0, state: state, maxAttempts: 1, submittedAt: at,
            group: group, dependencies: after.map(jobID))), at: seconds)
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
/// cells, and nothing may run past the right edge. Keys and sizes are scripted; every frame is
/// captured, and a test can await the first frame that shows what it expects.
@MainActor
final class FakeTerminal: Terminal {
    var size: TerminalSize
    private(set) var cells: [[String]]
    var keys: [Key] = []
    /// Rows whose text was wider than the screen.
    private(set) var overflows: [Int] = []
    /// The size the "kernel" reports: ``updateSize()`` takes it (after a resize).
    var kernelSize: TerminalSize
    var isInputClosed = false
    /// Whether the dashboard gave the terminal back.
    private(set) var isClosed = false
    /// Frames drawn so far.
    private(set) var frameCount = 0
    /// Where the last frame put the cursor.
    private(set) var cursor: ScreenPosition?
    private var onInput: (@MainActor @Sendable () -> Void)?
    private var waiters: [Int: (matches: ([String]) -> Bool, continuation: CheckedContinuation<[String], Never>)] = [:]
    private var nextWaiter = 0

    init(rows: Int, columns: Int) {
        size = TerminalSize(rows: rows, columns: columns)
        kernelSize = size
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
        cursor = frame.cursor
        frameCount += 1
        let lines = lines
        for (key, waiter) in waiters where waiter.matches(lines) {
            waiters[key] = nil
            waiter.continuation.resume(returning: lines)
        }
    }

    func readKey() -> Key? { keys.isEmpty ? nil : keys.removeFirst() }

    func updateSize() { size = kernelSize }

    func watchInput(_ onInput: @escaping @MainActor @Sendable () -> Void) { self.onInput = onInput }

    func close() {
        isClosed = true
        onInput = nil
    }

    /// Counts the suspends asked for (a fake terminal has no shell to stop for).
    private(set) var suspendCount = 0

    func suspend() { suspendCount += 1 }

    /// Types `keys`: they wait to be read, and the dashboard is told, as a readable stdin would.
    func type(_ keys: Key...) {
        self.keys.append(contentsOf: keys)
        onInput?()
    }

    /// Types each character of `text`.
    func type(_ text: String) {
        keys.append(contentsOf: text.map(Key.char))
        onInput?()
    }

    /// The first frame, from the present one on, that `matches`; waits for the dashboard to draw
    /// it. A test's time limit is the guard against one that never comes: cancelled, the wait
    /// records an issue with the last screen and returns it.
    @discardableResult
    func frame(
        where matches: @escaping ([String]) -> Bool, sourceLocation: SourceLocation = #_sourceLocation
    ) async -> [String] {
        if frameCount > 0, matches(lines) { return lines }
        let key = nextWaiter
        nextWaiter += 1
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                if Task.isCancelled {
                    continuation.resume(returning: lines)
                } else {
                    waiters[key] = (matches, continuation)
                }
            }
        } onCancel: {
            Task { @MainActor in self.giveUp(key, sourceLocation: sourceLocation) }
        }
    }

    private func giveUp(_ key: Int, sourceLocation: SourceLocation) {
        guard let waiter = waiters.removeValue(forKey: key) else { return }
        Issue.record("no frame as expected came; the last one:\n\(lines.joined(separator: "\n"))", sourceLocation: sourceLocation)
        waiter.continuation.resume(returning: lines)
    }

    /// The first frame with a row that contains every one of `parts`.
    @discardableResult
    func frame(showing parts: String..., sourceLocation: SourceLocation = #_sourceLocation) async -> [String] {
        await frame(where: { lines in lines.contains { line in parts.allSatisfy(line.contains) } }, sourceLocation: sourceLocation)
    }

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
