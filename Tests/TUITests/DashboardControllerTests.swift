import Foundation
import Scheduler
import Testing
@testable import TUI

/// The dashboard's loop end to end without a terminal: an in-process scheduler behind the
/// client interface, a fake terminal (scripted keys and sizes in, frames captured) and a
/// scripted stream of signals. Every step awaits the frame that shows its effect; nothing sleeps.
@Suite("Dashboard controller", .timeLimit(.minutes(1)))
@MainActor
struct DashboardControllerTests {
    /// One dashboard on a fake terminal, steering a running in-process scheduler.
    @MainActor
    final class Harness {
        let scheduler: Scheduler
        let terminal: FakeTerminal
        let signals: AsyncStream<Int32>.Continuation
        private let running: Task<Void, Never>
        private let exit: Task<DashboardExit, Never>

        init(slots: Int, rows: Int = 24, columns: Int = 100, workingDirectory: String? = nil) {
            let scheduler = Scheduler(configuration: .init(localSlots: slots, gracePeriod: .seconds(1)))
            self.scheduler = scheduler
            running = Task { await scheduler.run() }
            terminal = FakeTerminal(rows: rows, columns: columns)
            let (stream, continuation) = AsyncStream<Int32>.makeStream()
            signals = continuation
            let controller = DashboardController(
                client: scheduler, terminal: terminal, signals: stream,
                options: DashboardOptions(title: "test", frameStatsPath: "", workingDirectory: workingDirectory))
            exit = Task { await controller.run() }
        }

        /// Submits `spec` as a client would.
        @discardableResult
        func submit(_ spec: JobSpec) async throws -> JobID {
            guard case .submitted(let ids) = try await scheduler.perform(.submit([spec], batch: nil)) else {
                throw SchedulerError(.invalidArgument, "no ids")
            }
            return ids[0]
        }

        /// How the dashboard ended; the terminal must be given back by then.
        func exited() async -> DashboardExit {
            let result = await exit.value
            #expect(terminal.isClosed)
            return result
        }

        /// Ends the dashboard (if it still runs) and the scheduler.
        func finish() async {
            signals.yield(SIGTERM)
            _ = await exit.value
            await scheduler.shutdown(.cancelRunning)
            await running.value
        }
    }

    /// A closure job that runs until it is cancelled, printing each line the test sends it.
    static func waiting(_ name: String, printing lines: AsyncStream<String> = AsyncStream { $0.finish() }) -> JobSpec {
        JobSpec(name: name, work: .closure { context in
            for await line in lines { context.log(line) }
            // Then it waits to be cancelled: a stream that never ends, finished by the task's cancellation.
            let (never, _) = AsyncStream<Void>.makeStream()
            for await _ in never {}
            try Task.checkCancellation()
        })
    }

    @Test("c then y cancels the selected running job, and the row says so")
    func cancelSelectedJob() async throws {
        // Given a dashboard showing one running job
        let harness = Harness(slots: 1)
        let id = try await harness.submit(Self.waiting("sleeper"))
        await harness.terminal.frame(showing: "sleeper", "running")
        // When c is pressed, the dashboard asks first
        harness.terminal.type("c")
        await harness.terminal.frame(showing: "Cancel job \(id.short)", "y = cancel it")
        // and y confirms
        harness.terminal.type("y")
        // Then the row shows the job cancelled, and the scheduler agrees
        await harness.terminal.frame(showing: "sleeper", "cancelled")
        #expect(await harness.scheduler.currentSnapshot().jobs.first { $0.id == id }?.state == .cancelled)
        await harness.finish()
    }

    @Test("n on a cancel question keeps the job")
    func cancelDeclined() async throws {
        let harness = Harness(slots: 1)
        let id = try await harness.submit(Self.waiting("keeper"))
        await harness.terminal.frame(showing: "keeper", "running")
        harness.terminal.type("c")
        await harness.terminal.frame(showing: "Cancel job \(id.short)")
        harness.terminal.type("n")
        await harness.terminal.frame { lines in !lines.contains { $0.contains("Cancel job") } }
        #expect(await harness.scheduler.currentSnapshot().count(.running) == 1)
        await harness.finish()
    }

    @Test("+ raises the selected queued job above the other at once; - lowers it back")
    func priorityKeys() async throws {
        // Given no slots, two queued jobs of the same priority: first, then second
        let harness = Harness(slots: 0)
        try await harness.submit(.shell("true # first"))
        let second = try await harness.submit(.shell("true # second"))
        // The table's rows (the event pane below names the jobs too, but never as "queued").
        let order: ([String]) -> [String] = { lines in
            lines.filter { ($0.contains("# first") || $0.contains("# second")) && $0.contains("queued") }
        }
        await harness.terminal.frame { order($0).count == 2 && order($0)[0].contains("first") }
        // When the second is selected and + pressed
        harness.terminal.type(.down)
        harness.terminal.type("+")
        // Then it runs first now: priority 1, above the other
        let raised = await harness.terminal.frame { order($0).first?.contains("second") == true }
        #expect(order(raised)[0].contains(" 1 "))
        #expect(await harness.scheduler.currentSnapshot().jobs.first { $0.id == second }?.priority == 1)
        // When - is pressed (the selection follows the job), it is back at 0, after the first
        harness.terminal.type("-")
        await harness.terminal.frame { order($0).last?.contains("second") == true && order($0).last?.contains(" 0 ") == true }
        // and once more: -1
        harness.terminal.type("-")
        await harness.terminal.frame { order($0).last?.contains("second") == true && order($0).last?.contains("-1") == true }
        #expect(await harness.scheduler.currentSnapshot().jobs.first { $0.id == second }?.priority == -1)
        await harness.finish()
    }

    @Test("p pauses dispatch (PAUSED, nothing starts) and p again resumes")
    func pauseKey() async throws {
        // Given an idle dashboard with one slot
        let harness = Harness(slots: 1)
        await harness.terminal.frame(showing: "test")
        // When p is pressed
        harness.terminal.type("p")
        await harness.terminal.frame(showing: "PAUSED")
        #expect(await harness.scheduler.currentSnapshot().isPaused)
        // Then a job submitted meanwhile stays queued
        try await harness.submit(Self.waiting("held"))
        await harness.terminal.frame(showing: "held", "queued")
        #expect(await harness.scheduler.currentSnapshot().count(.running) == 0)
        // When p is pressed again, it starts
        harness.terminal.type("p")
        await harness.terminal.frame { lines in
            !lines.contains { $0.contains("PAUSED") } && lines.contains { $0.contains("held") && $0.contains("running") }
        }
        await harness.finish()
    }

    @Test("A job typed with n runs in the directory the options give (jobtop attach's own, as submit's jobs do)")
    func newJobRunsInTheGivenDirectory() async throws {
        let harness = Harness(slots: 0, workingDirectory: "/tmp")
        await harness.terminal.frame(showing: "test")
        harness.terminal.type("n")
        harness.terminal.type("pwd")
        harness.terminal.type(.enter)
        await harness.terminal.frame(showing: "pwd", "queued")
        #expect(await harness.scheduler.currentSnapshot().jobs.first?.workingDirectory == "/tmp")
        await harness.finish()
    }

    @Test("n with a priority out of range is refused with a reason and the prompt stays; a good one submits")
    func newJobPrompt() async throws {
        // Given no slots (so the job stays queued where the test can see it)
        let harness = Harness(slots: 0)
        await harness.terminal.frame(showing: "test")
        // When n, a command, Tab and a priority beyond the range, then Enter
        harness.terminal.type("n")
        harness.terminal.type("echo hello")
        harness.terminal.type(.tab, .backspace)
        harness.terminal.type("2000000")
        // Then the problem is said as it is typed
        await harness.terminal.frame(showing: "priority out of range")
        harness.terminal.type(.enter)
        // and on Enter nothing is submitted: the prompt stays open with the reason under it
        await harness.terminal.frame { lines in
            lines.contains { $0.contains("New job:") && $0.contains("echo hello") }
                && lines.contains { $0.contains("not submitted: priority out of range") }
        }
        #expect(await harness.scheduler.currentSnapshot().jobs.isEmpty)
        // When a letter is typed in the priority field, it is refused too
        harness.terminal.type("x")
        await harness.terminal.frame(showing: "priority is a whole number")
        // When the priority is corrected and Enter pressed
        harness.terminal.type(.control("u"))
        harness.terminal.type("7")
        harness.terminal.type(.enter)
        // Then the job is queued with that priority
        await harness.terminal.frame(showing: "echo hello", "queued")
        let jobs = await harness.scheduler.currentSnapshot().jobs
        #expect(jobs.map(\.command) == ["echo hello"])
        #expect(jobs.first?.priority == 7)
        await harness.finish()
    }

    @Test("SIGWINCH relayouts at once to the new size; too small shows a message; back to size shows the table")
    func resize() async throws {
        let harness = Harness(slots: 0, rows: 24, columns: 100)
        try await harness.submit(.shell("true # visible"))
        await harness.terminal.frame(showing: "# visible")
        // When the terminal shrinks below the minimum and the signal comes
        harness.terminal.kernelSize = TerminalSize(rows: 10, columns: 40)
        harness.signals.yield(SIGWINCH)
        // Then the frame fits the new size and says it is too small
        let small = await harness.terminal.frame(showing: "Terminal too small: 40×10")
        #expect(small.count == 10 && small.allSatisfy { $0.count == 40 })
        // When it grows to 30×60 (a resize key this time, as ncurses reports it)
        harness.terminal.kernelSize = TerminalSize(rows: 30, columns: 60)
        harness.terminal.type(.resize)
        // Then the table is back, laid out for 60 columns
        let big = await harness.terminal.frame(showing: "# visible")
        #expect(big.count == 30 && big.allSatisfy { $0.count == 60 })
        #expect(harness.terminal.overflows.isEmpty)
        await harness.finish()
    }

    @Test("Ctrl-L repaints the whole screen, as in htop and less: the terminal is asked afresh (its size read again, the screen cleared before the next frame)")
    func controlLRepaints() async throws {
        let harness = Harness(slots: 0, rows: 24, columns: 100)
        try await harness.submit(.shell("true # visible"))
        await harness.terminal.frame(showing: "# visible")
        // A size the dashboard has not been told of, as after output it never saw.
        harness.terminal.kernelSize = TerminalSize(rows: 30, columns: 60)
        harness.terminal.type(.control("l"))
        let frame = await harness.terminal.frame { lines in lines.count == 30 }
        #expect(frame.allSatisfy { $0.count == 60 } && frame.contains { $0.contains("# visible") })
        await harness.finish()
    }

    @Test("q with active jobs asks first: n stays, y quits")
    func quitConfirmation() async throws {
        let harness = Harness(slots: 1)
        try await harness.submit(Self.waiting("active"))
        await harness.terminal.frame(showing: "active", "running")
        harness.terminal.type("q")
        await harness.terminal.frame(showing: "1 job is still queued or running")
        harness.terminal.type("n")
        await harness.terminal.frame { lines in !lines.contains { $0.contains("still queued or running") } }
        harness.terminal.type("q")
        await harness.terminal.frame(showing: "1 job is still queued or running")
        harness.terminal.type("y")
        #expect(await harness.exited() == .quit)
        await harness.finish()
    }

    @Test("q with nothing active quits at once")
    func quitIdle() async {
        let harness = Harness(slots: 1)
        await harness.terminal.frame(showing: "test")
        harness.terminal.type("q")
        #expect(await harness.exited() == .quit)
        await harness.finish()
    }

    @Test("Ctrl-C asks like q; a second Ctrl-C (typed or SIGINT) quits at once as SIGINT")
    func interruptTwice() async throws {
        let harness = Harness(slots: 1)
        try await harness.submit(Self.waiting("busy"))
        await harness.terminal.frame(showing: "busy", "running")
        harness.signals.yield(SIGINT)
        await harness.terminal.frame(showing: "still queued or running")
        harness.terminal.type(.control("c"))
        #expect(await harness.exited() == .signal(SIGINT))
        await harness.finish()
    }

    @Test("SIGTERM and SIGHUP end the dashboard at once and give the terminal back", arguments: [SIGTERM, SIGHUP])
    func terminatingSignals(signal: Int32) async throws {
        let harness = Harness(slots: 1)
        try await harness.submit(Self.waiting("busy"))
        await harness.terminal.frame(showing: "busy", "running")
        harness.signals.yield(signal)
        #expect(await harness.exited() == .signal(signal))
        await harness.finish()
    }

    @Test("The terminal going away (its input closed) ends the dashboard as a SIGHUP would")
    func inputClosed() async {
        let harness = Harness(slots: 1)
        await harness.terminal.frame(showing: "test")
        harness.terminal.isInputClosed = true
        harness.terminal.type()
        #expect(await harness.exited() == .signal(SIGHUP))
        await harness.finish()
    }

    @Test("The output view shows a job's lines and follows new ones as they come")
    func outputFollows() async throws {
        // Given a running job that prints what the test sends it
        let harness = Harness(slots: 1)
        let (lines, printer) = AsyncStream<String>.makeStream()
        try await harness.submit(Self.waiting("printer", printing: lines))
        printer.yield("first line")
        await harness.terminal.frame(showing: "printer", "running")
        // When Enter opens its output
        harness.terminal.type(.enter)
        await harness.terminal.frame(showing: "Output of")
        await harness.terminal.frame(showing: "first line")
        // Then a line printed later shows without a key
        printer.yield("second line")
        let shown = await harness.terminal.frame(showing: "second line")
        #expect(shown.contains { $0.contains("following") })
        // And Esc goes back to the table
        harness.terminal.type(.escape)
        await harness.terminal.frame(showing: "printer", "running")
        printer.finish()
        await harness.finish()
    }

    @Test("The output view follows a running job without asking for every output line (a serve sent an attached dashboard each line of a flood, and stalled)")
    func outputFollowsWithoutTheLines() async throws {
        let scheduler = Scheduler(configuration: .init(localSlots: 1))
        let running = Task { await scheduler.run() }
        let terminal = FakeTerminal(rows: 24, columns: 100)
        let (signals, signal) = AsyncStream<Int32>.makeStream()
        let client = PassingClient(scheduler: scheduler)
        let controller = DashboardController(client: client, terminal: terminal, signals: signals, options: DashboardOptions(title: "test", frameStatsPath: ""))
        let exit = Task { await controller.run() }
        let (lines, printer) = AsyncStream<String>.makeStream()
        _ = try await scheduler.perform(.submit([Self.waiting("printer", printing: lines)], batch: nil))
        printer.yield("first line")
        await terminal.frame(showing: "printer", "running")
        terminal.type(.enter)
        await terminal.frame(showing: "first line")
        printer.yield("second line")
        await terminal.frame(showing: "second line")
        #expect(!client.subscriptions.withLock { $0 }.contains(true), "\(client.subscriptions.withLock { $0 })")
        printer.finish()
        signal.yield(SIGTERM)
        #expect(await exit.value == .signal(SIGTERM))
        await scheduler.shutdown(.cancelRunning)
        await running.value
    }

    /// A client that passes everything to a scheduler and notes the subscriptions asked for;
    /// `refusesPause`, it refuses to pause, as a remote one might (the dashboard cannot tell
    /// them apart).
    struct PassingClient: SchedulerClient {
        let scheduler: Scheduler
        var refusesPause = false
        let subscriptions = Locked<[Bool]>([])

        func perform(_ command: SchedulerCommand) async throws(SchedulerError) -> SchedulerReply {
            if refusesPause, case .pause = command { throw SchedulerError(.notAllowed, "pausing is not allowed here") }
            return try await scheduler.perform(command)
        }

        func subscribe(bufferLimit: Int?, includeOutput: Bool, delivery: EventDelivery) async -> EventStream {
            subscriptions.withLock { $0.append(includeOutput) }
            return await scheduler.subscribe(bufferLimit: bufferLimit, includeOutput: includeOutput, delivery: delivery)
        }

        func currentSnapshot() async -> SchedulerSnapshot { await scheduler.currentSnapshot() }

        func outputTail(of id: JobID) async -> (lines: [OutputLine], dropped: Int) { await scheduler.outputTail(of: id) }

        func waitForRoom(in batch: BatchID, below limit: Int) async -> Bool {
            await scheduler.waitForRoom(in: batch, below: limit)
        }
    }

    @Test("A command the client refuses shows its reason on the status line, and nothing changes")
    func refusedCommand() async throws {
        // Given a dashboard on a client that refuses to pause
        let scheduler = Scheduler(configuration: .init(localSlots: 1))
        let running = Task { await scheduler.run() }
        let terminal = FakeTerminal(rows: 24, columns: 100)
        let (signals, signal) = AsyncStream<Int32>.makeStream()
        let controller = DashboardController(
            client: PassingClient(scheduler: scheduler, refusesPause: true), terminal: terminal, signals: signals,
            options: DashboardOptions(title: "test", frameStatsPath: ""))
        let exit = Task { await controller.run() }
        await terminal.frame(showing: "test")
        // When p is pressed
        terminal.type("p")
        // Then the refusal is on screen and dispatch is not paused
        await terminal.frame(showing: "pausing is not allowed here")
        #expect(!terminal.lines.contains { $0.contains("PAUSED") })
        #expect(await scheduler.currentSnapshot().isPaused == false)
        signal.yield(SIGTERM)
        #expect(await exit.value == .signal(SIGTERM))
        await scheduler.shutdown(.cancelRunning)
        await running.value
    }
}
