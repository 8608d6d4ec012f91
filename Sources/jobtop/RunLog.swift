import Foundation
import Scheduler

/// Follows one run's events to their end: writes the headless log and the output files, says
/// on stderr when the batch was halted, remembers what failed for the closing message, and
/// ends a headless run when its batch has settled.
///
/// A class, so that what it remembers is mutated in place: a value type copied once per event
/// copies every dictionary it holds (that made a 60,000-job run quadratic).
final class RunLog {
    /// A job that failed for good, or was skipped.
    struct Failure: Sendable, Equatable {
        var id: JobID
        var name: String
        var reason: String
        /// `failed` or `skipped`.
        var outcome = "failed"
    }

    /// What the log saw.
    struct Result: Sendable {
        /// The first jobs that failed or were skipped and stayed so (at most ``shownFailures``;
        /// one retried by hand, or brought back by a retry of its dependency, leaves the list):
        /// the closing message names them.
        var failures: [Failure] = []
        /// How many jobs ended failed or skipped (their last outcome).
        var failureCount = 0
        /// Jobs per state at the end (from the mirror of the events).
        var counts: [JobStateKind: Int] = [:]
        /// When the last job ended (scheduler time), if one did: the dashboard may stay open
        /// long after, and the summary's wall time and rate stop here.
        var lastFinish: SchedulerTime?
        /// The `shutdown` line of a run in which no job was ever submitted, held back: the
        /// caller writes it only if it writes a summary (a run refused for bad input before any
        /// job leaves stdout empty).
        var heldLine: String?
    }

    /// Failures remembered by name for the closing message; the rest are counted.
    static let shownFailures = 20

    let writer: LogWriter
    /// The headless log; `nil` under the dashboard.
    let formatter: EventLogFormatter?
    let outputDirectory: OutputDirectory?
    /// The job table the events describe: names for messages, counts for the summary. It keeps
    /// what the engine keeps (unfinished jobs and the last finished ones): bounded memory.
    private var mirror = SchedulerMirror()
    private var result = Result()

    init(writer: LogWriter, formatter: EventLogFormatter?, outputDirectory: OutputDirectory?) {
        self.writer = writer
        self.formatter = formatter
        self.outputDirectory = outputDirectory
    }

    /// Consumes `events` until the scheduler has shut down. With `endsWithBatch`, the
    /// scheduler is shut down gracefully once `batch` has settled.
    func follow(
        _ events: some AsyncSequence<SchedulerEvent, Never>, batch: BatchID, client: some SchedulerClient, endsWithBatch: Bool
    ) async -> Result {
        if let stream = events as? EventStream {
            // The scheduler's own stream: taken in batches, with a pause after a small one while
            // many jobs wait, so that a busy run's events wake this task once per pause rather
            // than once per job's end (each wake-up is CPU the jobs wanted; see README, "Command
            // line"). A line is then at most `batchPause` late. No pause while few jobs wait (a
            // short run, or the end of a long one, must not wait for the log), nor after a large
            // batch (a flood of output: the lossless buffer must not fill while this task waits).
            var iterator = stream.makeAsyncIterator()
            while let events = await iterator.nextBatch() {
                for event in events { await take(event, batch: batch, client: client, endsWithBatch: endsWithBatch) }
                if events.count < Self.largeBatch && mirror.counts[.queued, default: 0] >= Self.queuedForPause {
                    try? await Task.sleep(for: Self.batchPause)
                }
            }
        } else {
            for await event in events { await take(event, batch: batch, client: client, endsWithBatch: endsWithBatch) }
        }
        outputDirectory?.closeAll(writer: writer)
        result.counts = mirror.counts
        result.failureCount = mirror.counts[.failed, default: 0] + mirror.counts[.skipped, default: 0]
        return result
    }

    /// How long ``follow(_:batch:client:endsWithBatch:)`` waits after a small batch of the
    /// scheduler's events before it takes the next. 2,000 shell jobs on 2 slots, against the
    /// floor (alternating, 6-10 rounds): one event at a time 1.29-1.33x; batches with no pause
    /// 1.25-1.26x, a 2 ms pause 1.25-1.27x, a 10 ms pause 1.22-1.23x.
    static let batchPause: Duration = .milliseconds(10)
    /// Events in a batch from which no pause follows.
    static let largeBatch = 256
    /// Queued jobs from which a pause follows a small batch.
    static let queuedForPause = 16

    private var sinceRoomCheck = 0

    private func take(_ event: SchedulerEvent, batch: BatchID, client: some SchedulerClient, endsWithBatch: Bool) async {
        // Bounded: while the writer has a full queue, no more events are taken, so they wait
        // in the scheduler, which then slows the jobs down (lossless delivery). Checked every
        // 256 events, and at each long output line (up to 16 KiB, ~100 KB once escaped).
        sinceRoomCheck += 1
        let isLongLine = if case .output(_, let line) = event.kind { line.text.utf8.count > 1_024 } else { false }
        if sinceRoomCheck >= 256 || isLongLine {
            sinceRoomCheck = 0
            await writer.waitForRoom()
        }
        let name = event.kind.jobID.flatMap { mirror.jobs[$0]?.displayName }
        mirror.apply(event)
        if event.kind.isFinal { result.lastFinish = event.time }
        if !result.failures.isEmpty, let id = event.kind.jobID, let state = mirror.jobs[id]?.state.kind,
           state != .failed && state != .skipped {
            // Retried (by hand, or by a retry of what it waited for): no longer a failure.
            result.failures.removeAll { $0.id == id }
        }
        switch event.kind {
        case .snapshot(let snapshot):
            for info in snapshot.jobs where !info.state.isFinished {
                outputDirectory?.jobSubmitted(info)
            }
        case .submitted(let info):
            outputDirectory?.jobSubmitted(info)
        case .started(let id, let attempt, _, _):
            outputDirectory?.attemptStarted(id, attempt: attempt, writer: writer)
        case .output(let id, let line):
            outputDirectory?.output(id, line, writer: writer)
        case .requeued(let id, let reason):
            outputDirectory?.attemptEnded(id, writer: writer)
            if let marker = OutputLine.requeueSeparator(reason) { outputDirectory?.requeued(id, marker: marker) }
        case .retryScheduled(let id, _, _, _, _):
            outputDirectory?.attemptEnded(id, writer: writer)
        case .succeeded(let id, _), .cancelled(let id):
            outputDirectory?.jobEnded(id, writer: writer)
        case .failed(let id, let reason, _):
            outputDirectory?.jobEnded(id, writer: writer)
            if result.failures.count < Self.shownFailures {
                result.failures.append(Failure(id: id, name: name ?? id.short, reason: reason.description))
            }
        case .skipped(let id, let reason):
            if result.failures.count < Self.shownFailures {
                result.failures.append(Failure(id: id, name: name ?? id.short, reason: reason.description, outcome: "skipped"))
            }
        case .batchHalted(batch, let failed):
            // The failure itself was the event just before this one (the first failure of
            // the batch: it halted it).
            let failure = result.failures.last
            let what = failure.map { "'\($0.name)' failed (\($0.reason))" } ?? "job \(failed.short) failed"
            StandardError.write("jobtop: \(what); --halt-on-failure: cancelling the rest\n")
        case .batchSettled(batch):
            if endsWithBatch { _ = try? await client.perform(.shutdown(.graceful)) }
        default:
            break
        }
        // The event's line is queued after what the event did to --output-dir files (the
        // writer keeps its queue's order): when the log says a job waits for its retry, the
        // attempt's file is already closed.
        // (Two lines when a progress tick the interval held back comes before an attempt's end.)
        guard let formatter else { return }
        let lines = formatter.lines(for: event)
        guard let last = lines.last else { return }
        if case .shuttingDown = event.kind, mirror.jobs.isEmpty, mirror.counts.values.reduce(0, +) == 0 {
            result.heldLine = last
            return
        }
        if let held = result.heldLine {
            result.heldLine = nil
            writer.line(held)
        }
        for line in lines { writer.line(line) }
    }
}
