/// The queue of jobs waiting for a slot: highest priority first, first in first out within a
/// priority.
///
/// An indexed binary heap. Each queued job gets a dense slot number; the heap holds slots and a
/// plain array maps each slot to its heap position, so sifting moves integers and never hashes.
/// One dictionary lookup per operation finds a job's slot, which makes changing a queued job's
/// priority or removing it O(log n) rather than a scan.
public struct JobQueue: Sendable {
    struct Entry: Sendable {
        var slot: Int32
        var priority: Int
        var order: UInt64
    }

    private var heap: [Entry] = []
    /// Heap index of each slot (meaningless for free slots).
    private var positions: [Int32] = []
    /// The job in each slot.
    private var jobs: [JobID?] = []
    private var freeSlots: [Int32] = []
    private var slots: [JobID: Int32] = [:]
    private var nextOrder: UInt64 = 0

    /// An empty queue.
    public init() {}

    /// The number of queued jobs.
    public var count: Int { heap.count }

    /// Whether no job is queued.
    public var isEmpty: Bool { heap.isEmpty }

    /// Whether `id` is queued.
    public func contains(_ id: JobID) -> Bool { slots[id] != nil }

    /// The priority `id` is queued at.
    public func priority(of id: JobID) -> Int? {
        slots[id].map { heap[Int(positions[Int($0)])].priority }
    }

    /// The job that runs next.
    public var first: JobID? { heap.first.flatMap { jobs[Int($0.slot)] } }

    /// Adds `id` behind every queued job of the same priority.
    public mutating func insert(_ id: JobID, priority: Int) {
        let slot: Int32
        if let free = freeSlots.popLast() {
            slot = free
            jobs[Int(slot)] = id
        } else {
            slot = Int32(jobs.count)
            jobs.append(id)
            positions.append(0)
        }
        let previous = slots.updateValue(slot, forKey: id)
        precondition(previous == nil, "job \(id) is already queued")
        heap.append(Entry(slot: slot, priority: priority, order: nextOrder))
        nextOrder &+= 1
        positions[Int(slot)] = Int32(heap.count - 1)
        siftUp(heap.count - 1)
    }

    /// Removes and returns the job that runs next.
    public mutating func popFirst() -> JobID? {
        guard let top = heap.first, let id = jobs[Int(top.slot)] else { return nil }
        remove(at: 0)
        slots[id] = nil
        return id
    }

    /// Removes `id`; returns whether it was queued.
    @discardableResult
    public mutating func remove(_ id: JobID) -> Bool {
        guard let slot = slots.removeValue(forKey: id) else { return false }
        remove(at: Int(positions[Int(slot)]))
        return true
    }

    /// Moves `id` to `priority`. Within its new priority it keeps its submission order.
    /// Returns whether it was queued.
    @discardableResult
    public mutating func updatePriority(_ id: JobID, to priority: Int) -> Bool {
        guard let slot = slots[id] else { return false }
        let index = Int(positions[Int(slot)])
        let old = heap[index].priority
        heap[index].priority = priority
        if priority > old { siftUp(index) } else if priority < old { siftDown(index) }
        return true
    }

    /// The queued jobs in the order they would run. O(n log n).
    public func orderedIDs() -> [JobID] {
        heap.sorted(by: Self.runsBefore).compactMap { jobs[Int($0.slot)] }
    }

    private static func runsBefore(_ a: Entry, _ b: Entry) -> Bool {
        a.priority != b.priority ? a.priority > b.priority : a.order < b.order
    }

    /// Removes the entry at heap `index` and frees its slot.
    private mutating func remove(at index: Int) {
        let slot = heap[index].slot
        let last = heap.count - 1
        if index != last {
            heap.swapAt(index, last)
            positions[Int(heap[index].slot)] = Int32(index)
        }
        heap.removeLast()
        jobs[Int(slot)] = nil
        freeSlots.append(slot)
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
            positions[Int(heap[child].slot)] = Int32(child)
            child = parent
        }
        heap[child] = entry
        positions[Int(entry.slot)] = Int32(child)
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
            positions[Int(heap[parent].slot)] = Int32(parent)
            parent = best
        }
        heap[parent] = entry
        positions[Int(entry.slot)] = Int32(parent)
    }
}
