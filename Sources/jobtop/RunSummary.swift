import Foundation
import Scheduler

/// How a run ended: counts by final state, time, and the exit status they mean.
struct RunSummary: Sendable, Equatable {
    var total: Int
    var succeeded: Int
    var failed: Int
    var cancelled: Int
    /// Jobs that never ran because a job they wait for did not succeed.
    var skipped: Int
    /// Jobs that had not ended: queued, waiting, blocked, scheduled or running (none unless the
    /// run was cut short oddly, or a paused group held them).
    var unfinished: Int
    /// Seconds from the start of the run to its end.
    var wall: Duration
    /// The signal that interrupted the run, if one did.
    var signal: Int32?
    /// Jobs of the run that were never handed to the scheduler (a list file's lines not read
    /// yet when the run was cut short): not in `total`.
    var notRun = 0
    /// A source of jobs turned out bad during the run (a list line on a pipe): the rest was
    /// cancelled, and the run ends with status 2 unless a signal came first.
    var inputRefused = false

    /// Reads the counts from the final snapshot.
    init(snapshot: SchedulerSnapshot, wall: Duration, signal: Int32?) {
        self.init(counts: snapshot.counts, wall: wall, signal: signal)
    }

    /// Sums up `counts` (jobs per state, from a ``SchedulerMirror`` or a snapshot).
    init(counts: [JobStateKind: Int], wall: Duration, signal: Int32?) {
        total = counts.values.reduce(0, +)
        succeeded = counts[.succeeded, default: 0]
        failed = counts[.failed, default: 0]
        cancelled = counts[.cancelled, default: 0]
        skipped = counts[.skipped, default: 0]
        unfinished = counts.filter { !$0.key.isFinished }.values.reduce(0, +)
        self.wall = wall
        self.signal = signal
    }

    /// Jobs that ran to an end (succeeded or failed) per second of wall time: not the cancelled
    /// or skipped, most of which never ran (a run stopped early said 11,092 jobs/s of 10,049
    /// cancelled before they started and 4 that ran).
    var jobsPerSecond: Double {
        let seconds = wall.seconds
        return seconds > 0 ? Double(succeeded + failed) / seconds : 0
    }

    /// 128 + the signal when interrupted; else 2 when a source of jobs was refused; else 0
    /// when every job succeeded, 1 when not (a skipped job counts as not succeeded).
    var exitStatus: Int32 {
        if let signal { return ExitStatus.interrupted(by: signal) }
        if inputRefused { return ExitStatus.usage }
        return failed + cancelled + skipped + unfinished == 0 ? ExitStatus.success : ExitStatus.someFailed
    }

    /// One sentence for stderr.
    var sentence: String {
        var parts = ["\(succeeded) succeeded", "\(failed) failed", "\(cancelled) cancelled"]
        if skipped > 0 { parts.append("\(skipped) skipped") }
        if unfinished > 0 { parts.append("\(unfinished) unfinished") }
        let rate = (jobsPerSecond * 10).rounded() / 10
        var sentence = "\(total) job\(total == 1 ? "" : "s"): \(parts.joined(separator: ", ")) in \(formatDuration(wall)) (\(rate) jobs/s)"
        if notRun > 0 { sentence += "; \(notRun) more of the run never started (cut short before they were read)" }
        return sentence
    }
}
