import Foundation
import Scheduler

/// Follows one run's events to their end: writes the headless log and the output files, stops
/// the run at the first failure when asked, and remembers what failed for the closing message.
struct RunObserver {
    /// A job that failed for good.
    struct Failure: Sendable, Equatable {
        var name: String
        var reason: String
    }

    /// What the observer saw.
    struct Result: Sendable {
        var failures: [Failure] = []
        var haltedAfter: Failure?
    }

    let scheduler: Scheduler
    let writer: LogWriter
    /// The headless log; `nil` under the dashboard.
    var formatter: EventLogFormatter?
    let outputDirectory: OutputDirectory?
    let haltsOnFailure: Bool
    /// The jobs whose end ends the run (a graceful shutdown once all have ended); `nil` runs
    /// until someone else shuts the scheduler down.
    var endsAfter: Set<JobID>?

    /// Consumes `events` until the scheduler has shut down.
    mutating func follow(_ events: EventStream) async -> Result {
        var result = Result()
        var names: [JobID: String] = [:]
        var remaining = endsAfter
        if remaining?.isEmpty == true { shutDownGracefully() }
        for await event in events {
            if var formatter {
                if let line = formatter.line(for: event) { writer.line(line) }
                self.formatter = formatter
            }
            switch event.kind {
            case .snapshot(let snapshot):
                for info in snapshot.jobs {
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
                let failure = Failure(name: names.removeValue(forKey: id) ?? id.short, reason: reason.description)
                result.failures.append(failure)
                if haltsOnFailure && result.haltedAfter == nil {
                    result.haltedAfter = failure
                    StandardError.write("jobtop: '\(failure.name)' failed (\(failure.reason)); --halt-on-failure: cancelling the rest\n")
                    let scheduler = scheduler
                    Task { await scheduler.shutdown(.cancelRunning) }
                }
            default:
                break
            }
            if event.kind.isFinal, let id = event.kind.jobID, remaining?.remove(id) != nil, remaining?.isEmpty == true {
                shutDownGracefully()
            }
        }
        outputDirectory?.closeAll(writer: writer)
        return result
    }

    private func shutDownGracefully() {
        let scheduler = scheduler
        Task { await scheduler.shutdown(.graceful) }
    }
}
