import Foundation
import Scheduler

/// A run without a screen: every event becomes one log line on stdout, human messages go to
/// stderr, and the closing summary line says how it went.
struct HeadlessSession {
    let scheduler: Scheduler
    /// Wall-clock seconds since 1970 at which the scheduler's clock read zero.
    let epoch: Double
    let format: LogFormat
    let logsOutput: Bool
    let outputDirectory: String?
    let haltsOnFailure: Bool

    /// Runs `specs` to their end (or to a signal) and returns the exit status.
    func run(_ specs: [JobSpec]) async -> Int32 {
        // A closed stdout (`jobtop | head`) must not kill jobtop before it has cleaned up.
        signal(SIGPIPE, SIG_IGN)
        let started = ContinuousClock.now
        let writer = LogWriter()
        let events = await scheduler.events(
            bufferLimit: Int.max / 2, includeOutput: logsOutput || outputDirectory != nil)
        let scheduler = scheduler
        let running = Task { await scheduler.run() }
        let signals = SignalWatcher { _ in
            Task { await scheduler.shutdown(.cancelRunning) }
        }

        // A signal may already have begun a shutdown: then nothing is submitted.
        let ids = (try? await scheduler.submit(contentsOf: RunOrder.submissionOrder(specs))) ?? []

        var observer = RunObserver(
            scheduler: scheduler, writer: writer,
            formatter: EventLogFormatter(format: format, logsOutput: logsOutput, epoch: epoch),
            outputDirectory: outputDirectory.map(OutputDirectory.init(path:)),
            haltsOnFailure: haltsOnFailure,
            endsAfter: Set(ids))
        let observed = await observer.follow(events)
        await running.value

        let summary = RunSummary(
            snapshot: await scheduler.snapshot(), wall: ContinuousClock.now - started, signal: signals.firstSignal)
        let formatter = EventLogFormatter(format: format, logsOutput: false, epoch: epoch)
        writer.line(formatter.summaryLine(summary, at: Date().timeIntervalSince1970))
        writer.finish()
        signals.stop()
        Self.report(summary, observed)
        return summary.exitStatus
    }

    /// The closing words on stderr when something went wrong.
    static func report(_ summary: RunSummary, _ observed: RunObserver.Result) {
        guard summary.exitStatus != ExitStatus.success else { return }
        var text = "jobtop: \(summary.sentence)\n"
        let shown = observed.failures.prefix(20)
        for failure in shown { text += "  failed: \(failure.name): \(failure.reason)\n" }
        if observed.failures.count > shown.count { text += "  ... and \(observed.failures.count - shown.count) more\n" }
        StandardError.write(text)
    }
}
