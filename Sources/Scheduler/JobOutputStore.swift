import DequeModule

/// The last lines each job printed and its latest progress, bounded in lines and bytes.
///
/// Workers write here from their own threads; screens read. A job that prints a gigabyte keeps
/// only its tail. Tails of finished jobs are kept for the most recent ones only.
final class JobOutputStore: Sendable {
    struct Limits: Sendable {
        var lines: Int
        var bytes: Int
        var finishedTails: Int
    }

    private struct Tail {
        var lines: Deque<OutputLine> = []
        var bytes = 0
        var dropped = 0
        var progress: Double?
    }

    private struct State {
        var tails: [JobID: Tail] = [:]
        var finished: Deque<JobID> = []
    }

    let limits: Limits
    private let state = Locked(State())

    init(limits: Limits) {
        self.limits = limits
    }

    func append(_ line: OutputLine, to job: JobID) {
        // An empty line ended by a lone `\r` shows nothing (a progress counter redrawing from the
        // start of its line); it would only push real lines out of the tail.
        if line.ending == .carriageReturn && line.text.isEmpty { return }
        state.withLock { state in
            var tail = state.tails.removeValue(forKey: job) ?? Tail()
            tail.lines.append(line)
            tail.bytes += line.text.utf8.count + 1
            while tail.lines.count > limits.lines || tail.bytes > limits.bytes, let first = tail.lines.popFirst() {
                tail.bytes -= first.text.utf8.count + 1
                tail.dropped += 1
            }
            state.tails[job] = tail
        }
    }

    func setProgress(_ progress: Double?, of job: JobID) {
        state.withLock { $0.tails[job, default: Tail()].progress = progress }
    }

    func progress(of job: JobID) -> Double? {
        state.withLock { $0.tails[job]?.progress }
    }

    /// The job's tail and how many earlier lines were dropped.
    func tail(of job: JobID) -> (lines: [OutputLine], dropped: Int) {
        state.withLock { state in
            guard let tail = state.tails[job] else { return ([], 0) }
            return (Array(tail.lines), tail.dropped)
        }
    }

    /// A new attempt starts: its progress starts over, its output continues the tail.
    func attemptStarted(_ job: JobID) {
        state.withLock { $0.tails[job]?.progress = nil }
    }

    /// The job ended: keep its tail among the most recent finished ones.
    func jobEnded(_ job: JobID) {
        state.withLock { state in
            guard state.tails[job] != nil else { return }
            state.finished.append(job)
            while state.finished.count > limits.finishedTails, let oldest = state.finished.popFirst() {
                state.tails[oldest] = nil
            }
        }
    }
}
