/// The queue of jobs waiting for a slot: highest priority first, first in first out within a
/// priority.
///
/// An indexed binary heap: besides the heap array it keeps each job's position, so changing a
/// queued job's priority or removing it is O(log n) rather than a scan.
public struct JobQueue: Sendable {
    struct Entry: Sendable {
        var id: JobID
        var priority: Int
        var order: UInt64
    }

    private var heap: [Entry] = []
    private var positions: [JobID: Int] = [:]
    private var nextOrder: UInt64 = 0

    /// An empty queue.
    public init() {}

    /// The number of queued jobs.
    public var count: Int { heap.count }

    /// Whether no job is queued.
    public var isEmpty: Bool { heap.isEmpty }

    /// Whether `id` is queued.
    public func contains(_ id: JobID) -> Bool { positions[id] != nil }

    /// The priority `id` is queued at.
    public func priority(of id: JobID) -> Int? { positions[id].map { heap[$0].priority } }

    /// The job that runs next.
    public var first: JobID? { heap.first?.id }

    /// Adds `id` behind every queued job of the same priority.
    public mutating func insert(_ id: JobID, priority: Int) {
        precondition(positions[id] == nil, "job \(id) is already queued")
        heap.append(Entry(id: id, priority: priority, order: nextOrder))
        nextOrder &+= 1
        positions[id] = heap.count - 1
        siftUp(heap.count - 1)
    }

    /// Removes and returns the job that runs next.
    public mutating func popFirst() -> JobID? {
        guard !heap.isEmpty else { return nil }
        let id = heap[0].id
        remove(at: 0)
        return id
    }

    /// Removes `id`; returns whether it was queued.
    @discardableResult
    public mutating func remove(_ id: JobID) -> Bool {
        guard let index = positions[id] else { return false }
        remove(at: index)
        return true
    }

    /// Moves `id` to `priority`. Within its new priority it keeps its submission order.
    /// Returns whether it was queued.
    @discardableResult
    public mutating func updatePriority(_ id: JobID, to priority: Int) -> Bool {
        guard let index = positions[id] else { return false }
        let old = heap[index].priority
        heap[index].priority = priority
        if priority > old { siftUp(index) } else if priority < old { siftDown(index) }
        return true
    }

    /// The queued jobs in the order they would run. O(n log n).
    public func orderedIDs() -> [JobID] {
        heap.sorted(by: Self.runsBefore).map(\.id)
    }

    private static func runsBefore(_ a: Entry, _ b: Entry) -> Bool {
        a.priority != b.priority ? a.priority > b.priority : a.order < b.order
    }

    private mutating func remove(at index: Int) {
        let removed = heap[index].id
        let last = heap.count - 1
        if index != last {
            heap.swapAt(index, last)
            positions[heap[index].id] = index
        }
        heap.removeLast()
        positions[removed] = nil
        if index < heap.count {
            siftDown(index)
            siftUp(index)
        }
    }

    private mutating func siftUp(_ start: Int) {
        var child = start
        let entry = heap[child]
        while child > 0 {
            let parent = (child - 1) / 2
            guard Self.runsBefore(entry, heap[parent]) else { break }
            heap[child] = heap[parent]
            positions[heap[child].id] = child
            child = parent
        }
        heap[child] = entry
        positions[entry.id] = child
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        let entry = heap[parent]
        let count = heap.count
        while true {
            let left = 2 * parent + 1
            guard left < count else { break }
            let right = left + 1
            var best = left
            if right < count && Self.runsBefore(heap[right], heap[left]) { best = right }
            guard Self.runsBefore(heap[best], entry) else { break }
            heap[parent] = heap[best]
            positions[heap[parent].id] = parent
            parent = best
        }
        heap[parent] = entry
        positions[entry.id] = parent
    }
}
