/// A dense index: a ``JobHandle``, or a group's place in the core.
protocol DenseHandle: Sendable {
    var index: Int32 { get }
}

extension JobHandle: DenseHandle {}

/// The queue of jobs waiting for a slot, by ``JobHandle``: highest priority first, first in first
/// out within a priority.
typealias HandleQueue = IndexedHeap<JobHandle>

/// Handles by priority, highest first, then by order (lowest first), with their own array of
/// positions: a ``SharedPositionHeap`` that shares it with no other. The core's heap of group
/// heads; ``JobQueue`` wraps it for callers that name jobs by id.
struct IndexedHeap<Handle: DenseHandle>: Sendable {
    typealias Entry = SharedPositionHeap<Handle>.Entry

    private var heap = SharedPositionHeap<Handle>()
    /// Heap index of each handle; -1 when it is not queued.
    private var positions: [Int32] = []
    private var nextOrder: UInt64 = 0

    init() {}

    /// The number of queued jobs.
    var count: Int { heap.count }

    /// Whether no job is queued.
    var isEmpty: Bool { heap.isEmpty }

    /// Whether `handle` is queued.
    func contains(_ handle: Handle) -> Bool { heap.position(of: handle, in: positions) != nil }

    /// The priority `handle` is queued at.
    func priority(of handle: Handle) -> Int? { heap.priority(of: handle, in: positions) }

    /// The job that runs next.
    var first: Handle? { heap.first }

    /// The entry that comes first: its handle, priority and order.
    var firstEntry: Entry? { heap.firstEntry }

    /// Adds `handle` behind every queued job of the same priority.
    mutating func insert(_ handle: Handle, priority: Int) {
        insert(handle, priority: priority, order: nextOrder)
        nextOrder &+= 1
    }

    /// Adds `handle` at `priority`, ordered by `order` (lower first) within it: for queues that
    /// share one order across several heaps.
    mutating func insert(_ handle: Handle, priority: Int, order: UInt64) {
        heap.insert(handle, priority: priority, order: order, positions: &positions)
    }

    /// Moves `handle` to `priority` and `order`; returns whether it was queued.
    @discardableResult
    mutating func update(_ handle: Handle, priority: Int, order: UInt64) -> Bool {
        heap.update(handle, priority: priority, order: order, positions: &positions)
    }

    /// Removes and returns the job that runs next.
    mutating func popFirst() -> Handle? { heap.popFirst(positions: &positions) }

    /// Removes `handle`; returns whether it was queued.
    @discardableResult
    mutating func remove(_ handle: Handle) -> Bool { heap.remove(handle, positions: &positions) }

    /// Moves `handle` to `priority`. Within its new priority it keeps its submission order.
    /// Returns whether it was queued.
    @discardableResult
    mutating func updatePriority(_ handle: Handle, to priority: Int) -> Bool {
        heap.updatePriority(handle, to: priority, positions: &positions)
    }

    /// The queued jobs in the order they would run. O(n log n).
    func ordered() -> [Handle] { heap.ordered() }

    /// The entries in the order they would run. O(n log n).
    func orderedEntries() -> [Entry] { heap.orderedEntries() }

    /// Calls `body` with each handle queued above `priority` (as ``SharedPositionHeap/forEach(above:_:)``).
    func forEach(above priority: Int, _ body: (Handle) -> Bool) { heap.forEach(above: priority, body) }

    /// Whether `a` comes before `b`.
    static func runsBefore(_ a: Entry, _ b: Entry) -> Bool { SharedPositionHeap.runsBefore(a, b) }
}

/// Handles by priority, highest first, then by order (lowest first), in one of several heaps
/// that share one array of positions, which the owner keeps and passes in: a handle is in one
/// of them at most.
///
/// An indexed 4-ary heap of handles. A plain array maps each handle to its heap position, so
/// finding a queued job, sifting, changing its priority or removing it never hashes: O(log n)
/// array work. Four children per node halve the depth of a binary heap, and an entry is 16
/// bytes, so a node's children share one cache line: with a million jobs queued, taking the
/// first one touches about ten lines instead of twenty.
///
/// The core's per-group queues share their positions: with an array each, every group's array
/// spans every job's index (ten groups of 100,000 jobs: 4 MB, touched at random as jobs of a
/// DAG become ready); shared, it is one array of 4 bytes a job. ``IndexedHeap`` is one with an
/// array of its own.
struct SharedPositionHeap<Handle: DenseHandle>: Sendable {
    struct Entry: Sendable {
        var handle: Handle
        /// Priorities are validated to ``JobSpec/priorityRange`` long before they get here;
        /// anything beyond 32 bits is clamped.
        var priority: Int32
        var order: UInt64
    }

    /// Children per node.
    private static var arity: Int { 4 }

    private var heap: [Entry] = []

    init() {}

    /// The number of queued handles.
    var count: Int { heap.count }

    /// Whether none is queued.
    var isEmpty: Bool { heap.isEmpty }

    /// The handle that comes first.
    var first: Handle? { heap.first?.handle }

    /// The entry that comes first: its handle, priority and order.
    var firstEntry: Entry? { heap.first }

    /// Adds `handle`, which no heap sharing `positions` holds, at `priority` and `order`.
    mutating func insert(_ handle: Handle, priority: Int, order: UInt64, positions: inout [Int32]) {
        let index = Int(handle.index)
        if index >= positions.count {
            positions.append(contentsOf: repeatElement(-1, count: index - positions.count + 1))
        }
        precondition(positions[index] < 0, "\(handle) is already queued")
        heap.append(Entry(handle: handle, priority: Int32(clamping: priority), order: order))
        positions[index] = Int32(heap.count - 1)
        siftUp(heap.count - 1, positions: &positions)
    }

    /// Moves `handle` to `priority` and `order`; returns whether this heap held it.
    @discardableResult
    mutating func update(_ handle: Handle, priority: Int, order: UInt64, positions: inout [Int32]) -> Bool {
        guard let index = position(of: handle, in: positions) else { return false }
        heap[index].priority = Int32(clamping: priority)
        heap[index].order = order
        siftDown(index, positions: &positions)
        siftUp(index, positions: &positions)
        return true
    }

    /// Removes and returns the handle that comes first.
    mutating func popFirst(positions: inout [Int32]) -> Handle? {
        guard let top = heap.first else { return nil }
        remove(at: 0, positions: &positions)
        return top.handle
    }

    /// Removes `handle`; returns whether this heap held it.
    @discardableResult
    mutating func remove(_ handle: Handle, positions: inout [Int32]) -> Bool {
        guard let index = position(of: handle, in: positions) else { return false }
        remove(at: index, positions: &positions)
        return true
    }

    /// Moves `handle` to `priority`, keeping its order; returns whether this heap held it.
    @discardableResult
    mutating func updatePriority(_ handle: Handle, to priority: Int, positions: inout [Int32]) -> Bool {
        guard let index = position(of: handle, in: positions) else { return false }
        let old = heap[index].priority
        let new = Int32(clamping: priority)
        heap[index].priority = new
        if new > old {
            siftUp(index, positions: &positions)
        } else if new < old {
            siftDown(index, positions: &positions)
        }
        return true
    }

    /// The priority `handle` is queued at in this heap.
    func priority(of handle: Handle, in positions: [Int32]) -> Int? {
        position(of: handle, in: positions).map { Int(heap[$0].priority) }
    }

    /// The queued handles in the order they would run. O(n log n).
    func ordered() -> [Handle] {
        heap.sorted(by: Self.runsBefore).map(\.handle)
    }

    /// The entries in the order they would run. O(n log n).
    func orderedEntries() -> [Entry] {
        heap.sorted(by: Self.runsBefore)
    }

    /// Whether `a` comes before `b`.
    static func runsBefore(_ a: Entry, _ b: Entry) -> Bool {
        a.priority != b.priority ? a.priority > b.priority : a.order < b.order
    }

    /// Calls `body` with each handle whose priority is above `priority`, in no particular order,
    /// until it returns `false`. A walk down from the top that goes no further below an entry not
    /// above it (none under it is): O(what it visits), not O(n).
    func forEach(above priority: Int, _ body: (Handle) -> Bool) {
        guard let top = heap.first, Int(top.priority) > priority else { return }
        var stack = [0]
        while let index = stack.popLast() {
            guard Int(heap[index].priority) > priority else { continue }
            guard body(heap[index].handle) else { return }
            let first = Self.arity * index + 1
            guard first < heap.count else { continue }
            for child in first..<min(first + Self.arity, heap.count) { stack.append(child) }
        }
    }

    /// `handle`'s place in this heap: its shared position, checked against this heap (another
    /// heap may hold it).
    func position(of handle: Handle, in positions: [Int32]) -> Int? {
        let index = Int(handle.index)
        guard index < positions.count else { return nil }
        let position = Int(positions[index])
        guard position >= 0, position < heap.count, heap[position].handle.index == handle.index else { return nil }
        return position
    }

    /// Removes the entry at heap `index`.
    private mutating func remove(at index: Int, positions: inout [Int32]) {
        let handle = heap[index].handle
        let last = heap.count - 1
        if index != last {
            heap.swapAt(index, last)
            positions[Int(heap[index].handle.index)] = Int32(index)
        }
        heap.removeLast()
        positions[Int(handle.index)] = -1
        if index < heap.count {
            siftDown(index, positions: &positions)
            siftUp(index, positions: &positions)
        }
    }

    private mutating func siftUp(_ start: Int, positions: inout [Int32]) {
        var child = start
        let entry = heap[child]
        while child > 0 {
            let parent = (child - 1) / Self.arity
            guard Self.runsBefore(entry, heap[parent]) else { break }
            heap[child] = heap[parent]
            positions[Int(heap[child].handle.index)] = Int32(child)
            child = parent
        }
        heap[child] = entry
        positions[Int(entry.handle.index)] = Int32(child)
    }

    private mutating func siftDown(_ start: Int, positions: inout [Int32]) {
        var parent = start
        let entry = heap[parent]
        let count = heap.count
        while true {
            let first = Self.arity * parent + 1
            guard first < count else { break }
            var best = first
            for child in (first + 1)..<min(first + Self.arity, count) where Self.runsBefore(heap[child], heap[best]) {
                best = child
            }
            guard Self.runsBefore(heap[best], entry) else { break }
            heap[parent] = heap[best]
            positions[Int(heap[parent].handle.index)] = Int32(parent)
            parent = best
        }
        heap[parent] = entry
        positions[Int(entry.handle.index)] = Int32(parent)
    }
}

/// The queue of jobs waiting for a slot, by ``JobID``: highest priority first, first in first
/// out within a priority.
///
/// A ``HandleQueue`` behind one dictionary lookup per operation, which finds a job's handle;
/// the heap work itself never hashes, so changing a queued job's priority or removing it is
/// O(log n) rather than a scan. Priorities beyond 32 bits are clamped (jobs' priorities are far
/// inside that: ``JobSpec/priorityRange``).
public struct JobQueue: Sendable {
    private var queue = HandleQueue()
    private var table = JobTable<Void>(placeholder: ())

    /// An empty queue.
    public init() {}

    /// The number of queued jobs.
    public var count: Int { queue.count }

    /// Whether no job is queued.
    public var isEmpty: Bool { queue.isEmpty }

    /// Whether `id` is queued.
    public func contains(_ id: JobID) -> Bool { table.handle(of: id) != nil }

    /// The priority `id` is queued at.
    public func priority(of id: JobID) -> Int? { table.handle(of: id).flatMap { queue.priority(of: $0) } }

    /// The job that runs next.
    public var first: JobID? { queue.first.map { table.id(at: $0) } }

    /// Adds `id` behind every queued job of the same priority.
    public mutating func insert(_ id: JobID, priority: Int) {
        queue.insert(table.insert((), for: id), priority: priority)
    }

    /// Removes and returns the job that runs next.
    public mutating func popFirst() -> JobID? {
        guard let handle = queue.popFirst() else { return nil }
        defer { table.remove(handle) }
        return table.id(at: handle)
    }

    /// Removes `id`; returns whether it was queued.
    @discardableResult
    public mutating func remove(_ id: JobID) -> Bool {
        guard let handle = table.handle(of: id) else { return false }
        queue.remove(handle)
        table.remove(handle)
        return true
    }

    /// Moves `id` to `priority`. Within its new priority it keeps its submission order.
    /// Returns whether it was queued.
    @discardableResult
    public mutating func updatePriority(_ id: JobID, to priority: Int) -> Bool {
        guard let handle = table.handle(of: id) else { return false }
        return queue.updatePriority(handle, to: priority)
    }

    /// The queued jobs in the order they would run. O(n log n).
    public func orderedIDs() -> [JobID] {
        queue.ordered().map { table.id(at: $0) }
    }
}
