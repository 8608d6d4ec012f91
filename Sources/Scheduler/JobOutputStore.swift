import DequeModule

/// The last lines each job printed and its latest progress, bounded in lines and bytes.
///
/// Workers write here from their own threads; screens read. A job that prints a gigabyte keeps
/// only its tail. Tails of finished jobs are kept for the most recent ones only, and only up to
/// a total in bytes (a thousand jobs that each printed a megabyte kept a gigabyte).
final class JobOutputStore: Sendable {
    struct Limits: Sendable {
        var lines: Int
        var bytes: Int
        var finishedTails: Int
        /// The most bytes the tails of finished jobs keep in all.
        var finishedBytes: Int = 64 << 20
    }

    private struct Tail {
        var lines: Deque<OutputLine> = []
        var bytes = 0
        var dropped = 0
        var progress: Double?
        /// Where its worker placed the running attempt (``JobReporter/placed(_:)``).
        var placement: String?
    }

    private struct State {
        var tails: [JobID: Tail] = [:]
        /// Finished jobs with a tail, oldest first, with its bytes when the job ended.
        var finished: Deque<(id: JobID, bytes: Int)> = []
        /// The sum of `finished`'s bytes.
        var finishedBytes = 0
    }

    let limits: Limits
    private let state = Locked(State())

    init(limits: Limits) {
        self.limits = limits
    }

    func append(_ line: OutputLine, to job: JobID) {
        append(line, to: job, startsLine: false)
    }

    /// ``append(_:to:)`` of each of `lines`, in order, in one step.
    func append(contentsOf lines: some BidirectionalCollection<OutputLine>, to job: JobID) {
        state.withLock { state in
            var tail = state.tails.removeValue(forKey: job) ?? Tail()
            defer { state.tails[job] = tail }
            let kept = skipDropped(lines, from: &tail)
            for line in lines[kept...] { append(line, to: &tail, startsLine: false) }
        }
    }

    /// Where the lines of `lines` that the tail would keep begin: those before it would be
    /// appended only to be dropped again, as would the whole of `tail` (a read of a job that
    /// prints short lines brings thousands, the tail keeps the last few hundred). They are
    /// counted as dropped, as if appended, and `tail` is emptied; nothing else is done for them.
    ///
    /// A line becomes an entry of its own unless it continues an unended one before it (see
    /// ``append(_:to:startsLine:)``): the lines from the returned index on hold at least
    /// `limits.lines` entries counted without any line that might continue another, so every
    /// entry before them would go, and the first of them follows a line that ends an entry, so
    /// it continues none that was skipped.
    private func skipDropped<Lines: BidirectionalCollection<OutputLine>>(_ lines: Lines, from tail: inout Tail) -> Lines.Index {
        guard lines.count > limits.lines else { return lines.startIndex }
        // Backwards, counting the lines sure to be entries of their own: not a lone `\r` of
        // nothing (which adds nothing, unless it ends the line before it), and right after an
        // ended line that is not one; until `limits.lines` of them follow such a line.
        func isNothing(_ line: OutputLine) -> Bool { line.ending == .carriageReturn && line.text.isEmpty }
        var index = lines.endIndex
        var entries = 0
        var found = false
        while !found, index > lines.index(after: lines.startIndex) {
            index = lines.index(before: index)
            let before = lines[lines.index(before: index)]
            guard before.ending != .none, !isNothing(before) else { continue }
            if !isNothing(lines[index]) { entries += 1 }
            found = entries >= limits.lines
        }
        guard found else { return lines.startIndex }
        // Every line before `index` goes: count the entries they would have made, joins included.
        var last = tail.lines.last.map { (stream: $0.stream, hasBytes: $0.bytes != nil, ending: $0.ending, count: $0.text.utf8.count) }
        var made = 0
        for line in lines[..<index] {
            let count = line.text.utf8.count
            if let joined = last, joined.ending == .none, joined.stream == line.stream, !joined.hasBytes, line.bytes == nil,
               joined.count + count <= LineSplitter.maxLineBytes {
                last = (joined.stream, false, line.ending, joined.count + count)
            } else if isNothing(line) {
                continue
            } else {
                made += 1
                last = (line.stream, line.bytes != nil, line.ending, count)
            }
            // An entry bigger than the tail takes is dropped at once: nothing continues it.
            if let entry = last, limits.lines == 0 || entry.count + 1 > limits.bytes { last = nil }
        }
        tail.dropped += tail.lines.count + made
        tail.lines.removeAll()
        tail.bytes = 0
        return index
    }

    /// - Parameter startsLine: A line of jobtop's own (a separator): after a newline of its own
    ///   when the job's output so far ends in the middle of a line, as the output files have it.
    private func append(_ line: OutputLine, to job: JobID, startsLine: Bool) {
        state.withLock { state in
            var tail = state.tails.removeValue(forKey: job) ?? Tail()
            defer { state.tails[job] = tail }
            append(line, to: &tail, startsLine: startsLine)
        }
    }

    /// Adds `line` to `tail` and drops what no longer fits.
    private func append(_ line: OutputLine, to tail: inout Tail, startsLine: Bool) {
        var isJoined = false
        if let last = tail.lines.last, last.ending == .none {
            if startsLine {
                tail.lines[tail.lines.count - 1].ending = .newline
            } else if last.stream == line.stream, last.bytes == nil, line.bytes == nil,
                      last.text.utf8.count + line.text.utf8.count <= LineSplitter.maxLineBytes {
                // The rest of a line whose first part was handed on when the job went quiet
                // in the middle of it: one line again, so that the tail counts lines, not
                // pieces (and a `\r` that ends it still marks it redrawn).
                tail.lines[tail.lines.count - 1].text += line.text
                tail.lines[tail.lines.count - 1].ending = line.ending
                tail.bytes += line.text.utf8.count
                isJoined = true
            }
        }
        if !isJoined {
            // An empty line ended by a lone `\r` shows nothing (a progress counter redrawing
            // from the start of its line); it would only push real lines out of the tail.
            if line.ending == .carriageReturn && line.text.isEmpty { return }
            tail.lines.append(line)
            tail.bytes += line.text.utf8.count + 1
        }
        while tail.lines.count > limits.lines || tail.bytes > limits.bytes, let first = tail.lines.popFirst() {
            tail.bytes -= first.text.utf8.count + 1
            tail.dropped += 1
        }
    }

    /// Records `progress` unless it repeats the job's present progress (to 0.1%); returns
    /// whether it was recorded (and so is worth publishing).
    func setProgressIfChanged(_ progress: Double, of job: JobID) -> Bool {
        state.withLock { state in
            if let last = state.tails[job]?.progress, abs(last - progress) < 0.0005 { return false }
            state.tails[job, default: Tail()].progress = progress
            return true
        }
    }

    func progress(of job: JobID) -> Double? {
        state.withLock { $0.tails[job]?.progress }
    }

    /// A later attempt starts: a separator line in the job's tail, before its output.
    /// Not again right after itself (an attempt held at its worker, never begun, handed back)
    /// or after the worker-lost line (a lost attempt runs again with its number, as that line
    /// says).
    func attemptStarted(_ job: JobID, attempt: Int, of maxAttempts: Int) {
        let header = OutputLine.attemptSeparator(attempt, of: maxAttempts)
        if let last = state.withLock({ $0.tails[job]?.lines.last }), OutputLine.headerRepeats(header, after: last.text) { return }
        append(OutputLine(stream: .stdout, text: header), to: job, startsLine: true)
    }

    /// The job went back to the queue (retried by hand, its worker lost): a separator line after
    /// the output it had, if it had any, where its reason needs one.
    /// The worker-lost line only after output of the lost attempt (see
    /// ``OutputLine/workerLostLineIsEmpty(after:hasOutput:)``).
    func requeued(_ job: JobID, because reason: RequeueReason) {
        guard let separator = OutputLine.requeueSeparator(reason),
              let last = state.withLock({ $0.tails[job].map { $0.lines.last } })
        else { return }
        if case .workerLost = reason, OutputLine.workerLostLineIsEmpty(after: last?.text, hasOutput: last != nil) { return }
        append(OutputLine(stream: .stdout, text: separator), to: job, startsLine: true)
    }

    /// Records where the job's running attempt is placed (a Slurm job id and reason).
    func setPlacement(_ placement: String, of job: JobID) {
        state.withLock { $0.tails[job, default: Tail()].placement = placement }
    }

    /// Where each of `jobs` is placed, for those whose worker said (one lock for all).
    func placements(of jobs: some Sequence<JobID>) -> [JobID: String] {
        state.withLock { state in
            guard !state.tails.isEmpty else { return [:] }
            var found: [JobID: String] = [:]
            for job in jobs { if let placement = state.tails[job]?.placement { found[job] = placement } }
            return found
        }
    }

    /// The job's tail and how many earlier lines were dropped.
    func tail(of job: JobID) -> (lines: [OutputLine], dropped: Int) {
        state.withLock { state in
            guard let tail = state.tails[job] else { return ([], 0) }
            return (Array(tail.lines), tail.dropped)
        }
    }

    /// New attempts start: their progress and placement start over, their output continues the
    /// tail. One lock for all of them.
    func attemptsStarted(_ jobs: [JobID]) {
        guard !jobs.isEmpty else { return }
        state.withLock { state in
            // Most jobs print nothing: no tail, nothing to reset, no lookup.
            guard !state.tails.isEmpty else { return }
            for job in jobs {
                state.tails[job]?.progress = nil
                state.tails[job]?.placement = nil
            }
        }
    }

    /// Jobs ended: keep their tails among the most recent finished ones. One lock for all.
    func jobsEnded(_ jobs: [JobID]) {
        guard !jobs.isEmpty else { return }
        state.withLock { state in
            guard !state.tails.isEmpty else { return }
            for job in jobs {
                guard let bytes = state.tails[job]?.bytes else { continue }
                state.finished.append((job, bytes))
                state.finishedBytes += bytes
                while state.finished.count > limits.finishedTails || state.finishedBytes > limits.finishedBytes,
                      let oldest = state.finished.popFirst() {
                    state.finishedBytes -= oldest.bytes
                    state.tails[oldest.id] = nil
                }
            }
        }
    }

    /// Drops the tails of jobs forgotten (`jobtop clean`): they were kept until more jobs ended.
    func forget(_ jobs: Set<JobID>) {
        guard !jobs.isEmpty else { return }
        state.withLock { state in
            guard !state.tails.isEmpty else { return }
            for job in jobs { state.tails[job] = nil }
            state.finished.removeAll { jobs.contains($0.id) }
            state.finishedBytes = state.finished.reduce(0) { $0 + $1.bytes }
        }
    }

    /// The bytes the finished jobs' tails keep (for tests).
    var finishedBytes: Int { state.withLock { $0.finishedBytes } }
}
