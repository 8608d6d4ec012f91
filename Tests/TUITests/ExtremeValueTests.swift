import Scheduler
import Testing
@testable import TUI

private let top = JobSpec.priorityRange.upperBound
private let bottom = JobSpec.priorityRange.lowerBound

/// (priority, key, the priority asked for or nil when refused)
private let priorityKeySteps: [(Int, Key, Int?)] = [
    (0, .char("+"), 1),
    (0, .char("-"), -1),
    (top - 1, .char("+"), top),
    (top, .char("+"), nil),
    (top, .char("-"), top - 1),
    (bottom + 1, .char("-"), bottom),
    (bottom, .char("-"), nil),
    (bottom, .char("+"), bottom + 1),
    // Outside the range (the scheduler should never report one): towards the range, never
    // further out, and never an overflow.
    (.max, .char("+"), nil),
    (.max, .char("-"), top),
    (.min, .char("-"), nil),
    (.min, .char("+"), bottom),
    (top + 5, .char("+"), nil),
    (bottom - 5, .char("-"), nil),
]

/// Values at and beyond the ends of their ranges, as a hostile job file or a buggy peer could
/// send them: nothing traps, the table still sorts, and the keys saturate.
@Suite("Extreme values")
@MainActor
struct ExtremeValueTests {
    /// Given queued jobs at Int.max, the range's ends, 0 and Int.min, and one running.
    func extremeBoard() -> ModelBuilder {
        var builder = ModelBuilder()
        builder.submit(1, "running", at: 0)
        builder.start(1, at: 0.5)
        builder.submit(2, "at int max", priority: .max, at: 1)
        builder.submit(3, "at int min", priority: .min, at: 2)
        builder.submit(4, "at the top", priority: top, at: 3)
        builder.submit(5, "at the bottom", priority: bottom, at: 4)
        builder.submit(6, "at zero", at: 5)
        return builder
    }

    @Test("Jobs at Int.max and Int.min priority sort in every order without trapping", arguments: SortKey.allCases)
    func extremePrioritiesSort(sort: SortKey) {
        // Given / When
        let jobs = extremeBoard().model.board.jobs.values
        let order = DashboardModel.ordered(jobs, sort: sort, filter: "")
        // Then
        #expect(order.count == 6)
        switch sort {
        case .state:
            #expect(order == [jobID(1), jobID(2), jobID(4), jobID(6), jobID(5), jobID(3)])
        case .priority:
            #expect(order.first == jobID(2))
            #expect(order.last == jobID(3))
        case .name, .newest:
            break
        }
    }

    @Test("A screen of jobs at extreme priorities draws")
    func extremePrioritiesDraw() {
        let lines = screen(extremeBoard().model, rows: 30, columns: 100).lines
        #expect(lines.contains { $0.contains("at int max") && $0.contains("9223372…") })
        #expect(lines.contains { $0.contains("at int min") })
    }

    @Test("+ and - step by one and stop at the ends of the priority range", arguments: priorityKeySteps)
    func saturatingSteps(priority: Int, key: Key, expected: Int?) {
        // Given one queued job at `priority`, selected
        var builder = ModelBuilder()
        builder.submit(1, "job", priority: priority)
        var model = builder.prepared()
        // When
        let commands = model.handle(key)
        // Then
        if let expected {
            #expect(commands == [.reprioritize(jobID(1), to: expected)])
            #expect(model.message == nil)
        } else {
            #expect(commands.isEmpty)
            #expect(model.message?.role == .error)
            #expect(model.message?.text.contains("already at the") == true)
        }
    }

    /// Opens the `n` prompt, types a command, then `priority` in the priority field.
    func typeNewJob(priority: String, into model: inout DashboardModel) {
        _ = model.handle(.char("n"))
        for character in "echo x" { _ = model.handle(.char(character)) }
        _ = model.handle(.tab)
        _ = model.handle(.backspace)
        for character in priority { _ = model.handle(.char(character)) }
    }

    @Test(
        "The n prompt refuses a priority outside the range, says so on screen and stays open",
        arguments: ["1000001", "-1000001", "9223372036854775807", "-9223372036854775808", "99999999999999999999999"])
    func promptRefusesOutOfRange(text: String) {
        // Given
        var model = ModelBuilder().prepared()
        typeNewJob(priority: text, into: &model)
        // The problem shows as soon as it is typed
        #expect(model.message?.role == .error)
        #expect(screen(model).lines.contains { $0.contains("priority out of range: must be from -1000000 to 1000000") })
        // When
        let commands = model.handle(.enter)
        // Then nothing is submitted, the prompt stays on the priority field, and the screen says why
        #expect(commands.isEmpty)
        guard case .prompt(let prompt) = model.mode else {
            Issue.record("the prompt closed")
            return
        }
        #expect(prompt.field == .priority)
        #expect(prompt.priority.text == text)
        #expect(model.message?.role == .error)
        let lines = screen(model).lines
        #expect(lines.contains { $0.contains("not submitted: priority out of range: must be from -1000000 to 1000000") })
        #expect(lines.contains { $0.contains("New job:") })
    }

    @Test("The n prompt accepts the ends of the range", arguments: [("1000000", 1_000_000), ("-1000000", -1_000_000), ("", 0)])
    func promptAcceptsEnds(text: String, expected: Int) {
        var model = ModelBuilder().prepared()
        typeNewJob(priority: text, into: &model)
        #expect(model.message == nil)
        #expect(model.handle(.enter) == [.submit(command: "echo x", priority: expected)])
        #expect(model.mode == .table)
    }

    @Test("The n prompt refuses what is not a whole number, and says so on screen")
    func promptRefusesText() {
        var model = ModelBuilder().prepared()
        typeNewJob(priority: "1-", into: &model)
        #expect(model.handle(.enter).isEmpty)
        #expect(screen(model).lines.contains { $0.contains("not submitted: priority '1-' is not a whole number from -1000000 to 1000000") })
        // A letter is refused as it is typed, with a message
        _ = model.handle(.char("x"))
        guard case .prompt(let prompt) = model.mode else {
            Issue.record("the prompt closed")
            return
        }
        #expect(prompt.priority.text == "1-")
        #expect(screen(model).lines.contains { $0.contains("priority is a whole number from -1000000 to 1000000") })
    }

    @Test("> at Int.max local slots asks for nothing instead of overflowing")
    func slotsSaturate() {
        var builder = ModelBuilder()
        builder.apply(.slotsChanged(local: .max, total: .max))
        var model = builder.prepared()
        #expect(model.handle(.char(">")).isEmpty)
        #expect(model.message?.role == .error)
    }

    @Test("Times and rates that cannot be shown as they are show as their nearest end, without trapping")
    func formattingSaturates() {
        #expect(Formatting.compact(seconds: .infinity) == Formatting.compact(seconds: 1e15))
        #expect(Formatting.compact(seconds: .nan) == "0s")
        #expect(Formatting.compact(seconds: -5) == "0s")
        #expect(Formatting.compact(seconds: 1e300).hasSuffix("h"))
        #expect(Formatting.clock(.seconds(Int64.max)).contains(":"))
        // Before the clock's zero (a job a restarted serve kept): a minus, not 00:00.
        #expect(Formatting.clock(.seconds(-90)) == "-01:30")
        #expect(Formatting.clock(.seconds(Int64.min)).hasPrefix("-"))
        #expect(Formatting.compact(.seconds(Int64.max)).hasSuffix("h"))
        #expect(Formatting.rate(.nan) == "0.0")
        #expect(Formatting.rate(.infinity) == Formatting.rate(1e15))
        #expect(Formatting.rate(-2.5) == "-2.5")
        #expect(Formatting.rate(12.25) == "12.3")
        #expect(Formatting.bar(0.5, width: -3) == ("", ""))
        #expect(Int.max.saturatingAdd(1) == .max)
        #expect(Int.min.saturatingAdd(-1) == .min)
        #expect(3.saturatingAdd(4) == 7)
    }

    @Test("A running job far in the past with a tiny progress shows its ETA without trapping")
    func hugeEstimate() {
        var builder = ModelBuilder()
        builder.submit(1, "slow")
        builder.start(1, at: 0)
        builder.apply(.progress(jobID(1), 0.0011), at: 1)
        let job = builder.model.board.jobs[jobID(1)]!
        let text = DashboardView.timeCell(job, now: .seconds(Int64.max / 2))
        #expect(text.contains("~"))
    }
}
