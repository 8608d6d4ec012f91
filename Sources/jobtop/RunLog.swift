import Foundation
import Scheduler

/// Follows one run's events to their end: writes the headless log and the output files, says
/// on stderr when the batch was halted, remembers what failed for the closing message, and
/// ends a headless run when its batch has settled.
///
/// A class, so that what it remembers is mutated in place: a value type copied once per event
/// copies every dictionary it holds (that made a 60,000-job run quadratic).
final class RunLog {
    /// A job that failed for good.
    struct Failure: Sendable, Equatable {
        var name: String
        var reason: String
    }

    /// What the log saw.
    struct Result: Sendable {
        var failures: [Failure] = []
    }

    let writer: LogWriter
    /// The headless log; `nil` under the dashboard.
    let formatter: EventLogFormatter?
    let outputDirectory: OutputDirectory?
    /// Names of unfinished jobs, for messages (finished ones are forgotten: bounded memory).
    private var names: [JobID: String] = [:]
    private var result = Result()

    init(writer: LogWriter, formatter: EventLogFormatter?, outputDirectory: OutputDirectory?) {
        self.writer = writer
        self.formatter = formatter
        self.outputDirectory = outputDirectory
    }

    /// Consumes `events` until the scheduler has shut down. With `endsWithBatch`, the
    /// scheduler is shut down gracefully once `batch` has settled.
    func follow(_ events: EventStream, batch: BatchID, scheduler: Scheduler, endsWithBatch: Bool) async -> Result {
        for await event in events {
            if let formatter, let line = formatter.line(for: event) { writer.line(line) }
            switch event.kind {
            case .snapshot(let snapshot):
                for info in snapshot.jobs where !info.state.isFinished {
                    names[info.id] = info.displayName
                    outputDirectory?.jobSubmitted(info)
                }
            case .lagged(let missed):
                outputDirectory?.noteInOpenFiles("the log fell behind; \(missed) events (output lines) were lost here", writer: writer)
            case .submitted(let info):
                names[info.id] = info.displayName
                outputDirectory?.jobSubmitted(info)
            case .started(let id, let attempt, _, _):
                outputDirectory?.attemptStarted(id, attempt: attempt, writer: writer)
            case .output(let id, let line):
                outputDirectory?.output(id, line, writer: writer)
            case .retryScheduled(let id, _, _, _, _), .requeued(let id, _):
                outputDirectory?.attemptEnded(id, writer: writer)
            case .succeeded(let id, _), .cancelled(let id):
                outputDirectory?.jobEnded(id, writer: writer)
                names[id] = nil
            case .failed(let id, let reason, _):
                outputDirectory?.jobEnded(id, writer: writer)
                result.failures.append(Failure(name: names.removeValue(forKey: id) ?? id.short, reason: reason.description))
            case .batchHalted(batch, let failed):
                // The failure itself was the event just before this one.
                let failure = result.failures.last
                let what = failure.map { "'\($0.name)' failed (\($0.reason))" } ?? "job \(failed.short) failed"
                StandardError.write("jobtop: \(what); --halt-on-failure: cancelling the rest\n")
            case .batchSettled(batch):
                if endsWithBatch { Task { await scheduler.shutdown(.graceful) } }
            default:
                break
            }
        }
        outputDirectory?.closeAll(writer: writer)
        return result
    }
}
