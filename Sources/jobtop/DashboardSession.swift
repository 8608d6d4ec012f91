import Foundation
import Scheduler
import TUI

/// A run under the full-screen dashboard. The dashboard owns the terminal and the signals; this
/// starts the scheduler, hands it the jobs, and cleans up when the dashboard ends.
struct DashboardSession {
    let scheduler: Scheduler
    let outputDirectory: String?
    let haltsOnFailure: Bool
    let title: String

    /// Runs the dashboard until the user quits or a signal ends it; returns the exit status.
    func run(_ specs: [JobSpec]) async -> Int32 {
        guard Self.keysComeFromTheTerminal() else {
            StandardError.write(
                "jobtop: the dashboard reads keys from a terminal, but stdin is not one and /dev/tty cannot be opened; use --headless\n")
            return ExitStatus.usage
        }
        let started = ContinuousClock.now
        let writer = LogWriter()
        let scheduler = scheduler
        let events = await scheduler.events(bufferLimit: Int.max / 2, includeOutput: outputDirectory != nil)
        let running = Task { await scheduler.run() }
        let outputDirectory = outputDirectory
        let haltsOnFailure = haltsOnFailure
        let observing = Task {
            var observer = RunObserver(
                scheduler: scheduler, writer: writer, formatter: nil,
                outputDirectory: outputDirectory.map(OutputDirectory.init(path:)), haltsOnFailure: haltsOnFailure,
                endsAfter: nil)
            return await observer.follow(events)
        }
        _ = try? await scheduler.submit(contentsOf: RunOrder.submissionOrder(specs))

        let exit = await Dashboard.run(scheduler: scheduler, options: DashboardOptions(title: title))

        await scheduler.shutdown(.cancelRunning)
        await running.value
        let observed = await observing.value
        writer.finish()
        var signal: Int32?
        if case .signal(let number) = exit { signal = number }
        let summary = RunSummary(snapshot: await scheduler.snapshot(), wall: ContinuousClock.now - started, signal: signal)
        StandardError.write("jobtop: \(summary.sentence)\n")
        if summary.exitStatus != ExitStatus.success {
            for failure in observed.failures.prefix(20) { StandardError.write("  failed: \(failure.name): \(failure.reason)\n") }
        }
        return summary.exitStatus
    }

    /// The dashboard reads keys from stdin. When the job list came in on a pipe
    /// (`cat list | jobtop`), stdin is at its end: read keys from the controlling terminal instead.
    private static func keysComeFromTheTerminal() -> Bool {
        guard isatty(STDIN_FILENO) == 0 else { return true }
        let terminal = open("/dev/tty", O_RDWR | O_CLOEXEC)
        guard terminal >= 0 else { return false }
        defer { close(terminal) }
        return dup2(terminal, STDIN_FILENO) >= 0
    }
}
