@testable import Scheduler

/// Reads one subscription in order and remembers what it saw.
struct EventReader {
    private var iterator: EventStream.Iterator
    private(set) var seen: [SchedulerEvent] = []

    init(_ stream: EventStream) {
        iterator = stream.makeAsyncIterator()
    }

    /// Reads events until one satisfies `predicate` and returns it; `nil` when the stream ended.
    @discardableResult
    mutating func next(where predicate: (SchedulerEvent.Kind) -> Bool) async -> SchedulerEvent? {
        while let event = await iterator.next() {
            seen.append(event)
            if predicate(event.kind) { return event }
        }
        return nil
    }

    /// Reads until the stream ends.
    mutating func drain() async {
        while let event = await iterator.next() { seen.append(event) }
    }

    /// Returns the final event of `id`, reading on until it comes if it was not seen yet.
    @discardableResult
    mutating func final(of id: JobID) async -> SchedulerEvent.Kind? {
        if let seen = seen.first(where: { $0.kind.isFinal && $0.kind.jobID == id }) { return seen.kind }
        return await next { $0.isFinal && $0.jobID == id }?.kind
    }

    /// Reads until every job in `ids` has ended.
    mutating func finals(of ids: [JobID]) async {
        var open = Set(ids)
        for event in seen where event.kind.isFinal { if let id = event.kind.jobID { open.remove(id) } }
        while !open.isEmpty, let event = await next(where: { $0.isFinal }) {
            if let id = event.kind.jobID { open.remove(id) }
        }
    }

    /// The text of every line `id` printed, in order.
    /// The job's output lines as it wrote them: a piece handed on without its line end (a job
    /// that stalled for a moment in the middle of a line, a line over 16 KiB) joined with the
    /// rest of its line.
    func outputTexts(of id: JobID) -> [String] {
        var texts: [String] = []
        var open: [OutputLine.Stream: Int] = [:]
        for event in seen {
            guard case .output(id, let line) = event.kind else { continue }
            if let index = open[line.stream] { texts[index] += line.text } else { texts.append(line.text) }
            open[line.stream] = line.ending == .none ? (open[line.stream] ?? texts.count - 1) : nil
        }
        return texts
    }

    /// Whether every event after the first (the snapshot) is numbered one more than the one
    /// before it: none was missed (for a subscription that includes output).
    var hasNoGaps: Bool {
        let seqs = seen.dropFirst().map(\.seq)
        return zip(seqs, seqs.dropFirst()).allSatisfy { $1 == $0 + 1 }
    }

    /// The jobs whose attempts started, in order.
    var startedJobs: [JobID] {
        seen.compactMap { if case .started(let id, _, _, _) = $0.kind { id } else { nil } }
    }
}

extension SchedulerEvent.Kind {
    func isStarted(_ id: JobID) -> Bool {
        if case .started(id, _, _, _) = self { return true }
        return false
    }
}
