import Scheduler

/// The job table's rows in display order (sorted and filtered), kept up to date one job at a
/// time: an event moves its job in O(log n + chunk) instead of the whole table being sorted
/// again, so that even 100,000 jobs never wait for a sort and a filtered view never shows a
/// row that no longer matches.
///
/// The rows are kept in sorted chunks of at most ``maxChunk`` entries (a one-level B-tree):
/// finding a place is a binary search over the chunks' last entries and then within one
/// chunk; inserting or removing moves at most one chunk's entries. Reading row `n` walks the
/// chunk sizes (a few hundred at 100,000 rows). A new sort key or filter sorts everything once.
struct TableOrder: Sendable {
    /// A row's place: the lowercased name (sorting by name only; empty otherwise), then the
    /// state/priority/time key.
    struct Entry: Comparable, Sendable {
        var name: String
        var key: DashboardModel.OrderKey

        static func < (l: Entry, r: Entry) -> Bool {
            l.name != r.name ? l.name < r.name : l.key < r.key
        }
    }

    /// What the filter text asks for: a state's name (or `done`) matches that state alone;
    /// other text matches name, command, short id, state prefix or group.
    struct Filter: Sendable {
        let text: String
        private let needle: String
        private let state: String?

        init(_ text: String) {
            self.text = text
            needle = text.lowercased().trimmingCharacters(in: .whitespaces)
            let stateNames: Set<String> = ["queued", "running", "waiting", "succeeded", "failed", "cancelled", "blocked", "scheduled", "skipped"]
            state = needle == "done" ? "succeeded" : (stateNames.contains(needle) ? needle : nil)
        }

        func matches(_ job: JobInfo) -> Bool {
            if let state { return job.state.name == state }
            return needle.isEmpty || job.displayName.lowercased().contains(needle) || job.command.lowercased().contains(needle)
                || job.id.short.hasPrefix(needle) || job.state.name.hasPrefix(needle)
                || (job.group != JobSpec.defaultGroup && job.group.lowercased().contains(needle))
        }
    }

    static let maxChunk = 256

    private(set) var sort: SortKey
    private(set) var filter: Filter
    private var chunks: [[Entry]] = []
    /// Each row's entry, by job: where to find it when the job changes or leaves. A rebuild
    /// leaves it to be made later (``indexRows()``, or the first ``update(_:job:ordinal:)``):
    /// the first frame after a snapshot reads only the chunks, and with 100,000 rows this table
    /// (tens of MB of fresh memory) was a tenth of attach's first frame.
    private var entries: [JobID: Entry] = [:]
    /// Whether ``entries`` is still to be made from the chunks (the readers that need it scan
    /// the chunks meanwhile).
    private(set) var isIndexPending = false
    /// Rows shown.
    private(set) var count = 0

    init(sort: SortKey = .state, filter: String = "") {
        self.sort = sort
        self.filter = Filter(filter)
    }

    var isEmpty: Bool { count == 0 }

    /// The entry job `job` has under this order.
    func entry(for job: JobInfo, ordinal: Int) -> Entry {
        Entry(name: sort == .name ? job.displayName.lowercased() : "", key: DashboardModel.OrderKey(job, sort: sort, ordinal: ordinal))
    }

    /// Sorts every job again (a new sort key or filter, a snapshot). O(n log n).
    mutating func rebuild(_ jobs: some Collection<JobInfo>, ordinals: [JobID: Int], sort: SortKey, filter: String) {
        self.sort = sort
        if filter != self.filter.text { self.filter = Filter(filter) }
        var all: [Entry] = []
        all.reserveCapacity(jobs.count)
        entries = [:]
        isIndexPending = true
        for job in jobs where self.filter.matches(job) {
            all.append(entry(for: job, ordinal: ordinals[job.id] ?? 0))
        }
        all.sort()
        chunks = []
        let half = Self.maxChunk / 2
        var start = 0
        while start < all.count {
            let end = min(all.count, start + half)
            chunks.append(Array(all[start..<end]))
            start = end
        }
        count = all.count
    }

    /// Puts job `id` in its place as it is now: `job` is `nil` for a job that left the board.
    mutating func update(_ id: JobID, job: JobInfo?, ordinal: Int) {
        indexRows()
        let new = job.flatMap { filter.matches($0) ? entry(for: $0, ordinal: ordinal) : nil }
        let old = entries[id]
        guard old != new else { return }
        if let old { remove(old) }
        if let new { insert(new) }
        entries[id] = new
    }

    /// Makes the index of rows by job, if a rebuild left it to be made. O(n).
    mutating func indexRows() {
        guard isIndexPending else { return }
        isIndexPending = false
        entries.reserveCapacity(count)
        for chunk in chunks {
            for entry in chunk { entries[entry.key.id] = entry }
        }
    }

    /// Whether job `id` is a row.
    func contains(_ id: JobID) -> Bool {
        if isIndexPending { return chunks.contains { $0.contains { $0.key.id == id } } }
        return entries[id] != nil
    }

    /// Row `position`'s job. O(chunks).
    subscript(position: Int) -> JobID {
        precondition(position >= 0 && position < count, "row \(position) of \(count)")
        var rest = position
        for chunk in chunks {
            if rest < chunk.count { return chunk[rest].key.id }
            rest -= chunk.count
        }
        preconditionFailure("row \(position) beyond the chunks")
    }

    /// The jobs of rows `range` (clamped to the rows there are), in order.
    func ids(_ range: Range<Int>) -> [JobID] {
        let lower = max(0, range.lowerBound)
        let upper = min(count, range.upperBound)
        guard lower < upper else { return [] }
        var result: [JobID] = []
        result.reserveCapacity(upper - lower)
        var offset = 0
        for chunk in chunks {
            let chunkEnd = offset + chunk.count
            if chunkEnd > lower {
                for index in max(lower, offset)..<min(upper, chunkEnd) { result.append(chunk[index - offset].key.id) }
                if chunkEnd >= upper { break }
            }
            offset = chunkEnd
        }
        return result
    }

    /// Every row's job, in order. O(n).
    var all: [JobID] { chunks.flatMap { $0.map(\.key.id) } }

    /// The row of job `id`, if it is one. O(chunks + log chunk).
    func position(of id: JobID) -> Int? {
        if isIndexPending {
            var offset = 0
            for chunk in chunks {
                if let index = chunk.firstIndex(where: { $0.key.id == id }) { return offset + index }
                offset += chunk.count
            }
            return nil
        }
        guard let entry = entries[id] else { return nil }
        let chunk = chunkIndex(for: entry)
        var offset = 0
        for index in 0..<chunk { offset += chunks[index].count }
        let place = Self.lowerBound(entry, in: chunks[chunk])
        guard place < chunks[chunk].count, chunks[chunk][place] == entry else { return nil }
        return offset + place
    }

    /// `ids` (rows or not) in table order, rows first.
    func inOrder(_ ids: some Sequence<JobID>) -> [JobID] {
        if isIndexPending {
            // The rows in the chunks' order, then the others.
            let wanted = Set(ids)
            var rows: [JobID] = []
            for chunk in chunks {
                for entry in chunk where wanted.contains(entry.key.id) { rows.append(entry.key.id) }
            }
            return rows + wanted.subtracting(rows).sorted()
        }
        var rows: [Entry] = []
        var others: [JobID] = []
        for id in ids {
            if let entry = entries[id] { rows.append(entry) } else { others.append(id) }
        }
        return rows.sorted().map(\.key.id) + others.sorted()
    }

    // MARK: - Internals

    /// The chunk that holds `entry`, or where it goes: the first whose last entry is not
    /// below it (else the last).
    private func chunkIndex(for entry: Entry) -> Int {
        var low = 0
        var high = chunks.count
        while low < high {
            let middle = (low + high) / 2
            if chunks[middle][chunks[middle].count - 1] < entry { low = middle + 1 } else { high = middle }
        }
        return min(low, chunks.count - 1)
    }

    private static func lowerBound(_ entry: Entry, in chunk: [Entry]) -> Int {
        var low = 0
        var high = chunk.count
        while low < high {
            let middle = (low + high) / 2
            if chunk[middle] < entry { low = middle + 1 } else { high = middle }
        }
        return low
    }

    private mutating func insert(_ entry: Entry) {
        count += 1
        guard !chunks.isEmpty else {
            chunks = [[entry]]
            return
        }
        let index = chunkIndex(for: entry)
        let place = Self.lowerBound(entry, in: chunks[index])
        chunks[index].insert(entry, at: place)
        if chunks[index].count > Self.maxChunk {
            let half = chunks[index].count / 2
            let upper = Array(chunks[index][half...])
            chunks[index].removeSubrange(half...)
            chunks.insert(upper, at: index + 1)
        }
    }

    private mutating func remove(_ entry: Entry) {
        guard !chunks.isEmpty else { return }
        let index = chunkIndex(for: entry)
        let place = Self.lowerBound(entry, in: chunks[index])
        guard place < chunks[index].count, chunks[index][place] == entry else { return }
        chunks[index].remove(at: place)
        count -= 1
        if chunks[index].isEmpty { chunks.remove(at: index) }
    }
}
