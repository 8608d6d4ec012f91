import Foundation
import Testing
@testable import Scheduler

/// The indexed priority queue checked against a naive model on random operation sequences.
@Suite struct JobQueueTests {
    /// The obvious implementation: a list sorted on demand.
    struct NaiveQueue {
        var entries: [(id: JobID, priority: Int, order: Int)] = []
        var nextOrder = 0
        mutating func insert(_ id: JobID, _ priority: Int) {
            entries.append((id, priority, nextOrder))
            nextOrder += 1
        }
        var ordered: [JobID] {
            entries.sorted { $0.priority != $1.priority ? $0.priority > $1.priority : $0.order < $1.order }.map(\.id)
        }
        mutating func popFirst() -> JobID? {
            guard let first = ordered.first else { return nil }
            entries.removeAll { $0.id == first }
            return first
        }
        mutating func remove(_ id: JobID) -> Bool {
            let before = entries.count
            entries.removeAll { $0.id == id }
            return entries.count != before
        }
        mutating func update(_ id: JobID, _ priority: Int) -> Bool {
            guard let index = entries.firstIndex(where: { $0.id == id }) else { return false }
            entries[index].priority = priority
            return true
        }
    }

    @Test(arguments: 1...40)
    func randomOperationSequencesMatchTheNaiveModel(seed: Int) {
        var random = IdentifierGenerator(seed: UInt64(seed))
        var queue = JobQueue()
        var model = NaiveQueue()
        var known: [JobID] = []
        for step in 0..<400 {
            let choice = random.nextUInt64() % 10
            let priority = Int(random.nextUInt64() % 5) - 2
            switch choice {
            case 0...3:
                let id = random.nextJobID()
                known.append(id)
                queue.insert(id, priority: priority)
                model.insert(id, priority)
            case 4, 5:
                #expect(queue.popFirst() == model.popFirst(), "seed \(seed) step \(step): pop")
            case 6, 7:
                guard !known.isEmpty else { continue }
                let id = known[Int(random.nextUInt64() % UInt64(known.count))]
                #expect(queue.updatePriority(id, to: priority) == model.update(id, priority))
            default:
                guard !known.isEmpty else { continue }
                let id = known[Int(random.nextUInt64() % UInt64(known.count))]
                #expect(queue.remove(id) == model.remove(id))
            }
            #expect(queue.count == model.entries.count)
            #expect(queue.first == model.ordered.first, "seed \(seed) step \(step): head")
        }
        #expect(queue.orderedIDs() == model.ordered)
    }

    @Test func reprioritizingAndRemovingInALargeQueueKeepsOrder() {
        var random = IdentifierGenerator(seed: 99)
        var queue = JobQueue()
        var ids: [JobID] = []
        for _ in 0..<100_000 {
            let id = random.nextJobID()
            ids.append(id)
            queue.insert(id, priority: 0)
        }
        queue.updatePriority(ids[99_999], to: 10)
        queue.remove(ids[0])
        #expect(queue.first == ids[99_999])
        _ = queue.popFirst()
        #expect(queue.first == ids[1])
        #expect(queue.count == 99_998)
    }

    /// Long in-order stretches of one priority (a list of commands) mixed with removals from
    /// the middle, new priorities, and jobs out of order (requeued to their place), against a
    /// model kept sorted.
    @Test(arguments: 1...4)
    func longInOrderStretchesWithRemovalsMatchASortedModel(seed: Int) {
        var random = IdentifierGenerator(seed: UInt64(seed) &+ 1_000)
        var queue = IndexedHeap<JobHandle>()
        // (priority, order, handle index), in the order they run.
        var model: [(priority: Int, order: UInt64, index: Int32)] = []
        func runsBefore(_ a: (priority: Int, order: UInt64, index: Int32), _ b: (priority: Int, order: UInt64, index: Int32)) -> Bool {
            a.priority != b.priority ? a.priority > b.priority : a.order < b.order
        }
        func modelInsert(_ entry: (priority: Int, order: UInt64, index: Int32)) {
            let at = model.firstIndex { runsBefore(entry, $0) } ?? model.count
            model.insert(entry, at: at)
        }
        var nextIndex: Int32 = 0
        var nextOrder: UInt64 = 0
        for round in 0..<6 {
            // A stretch of one priority, in order.
            let priority = Int(random.nextUInt64() % 3)
            for _ in 0..<1_500 {
                queue.insert(JobHandle(index: nextIndex), priority: priority, order: nextOrder)
                modelInsert((priority, nextOrder, nextIndex))
                nextIndex += 1
                nextOrder += 1
            }
            // Some out of order (an earlier order: a job requeued to its place).
            for _ in 0..<50 {
                let order = random.nextUInt64() % max(1, nextOrder)
                let entry = (priority: Int(random.nextUInt64() % 3), order: order, index: nextIndex)
                if model.contains(where: { $0.order == order }) { continue }
                queue.insert(JobHandle(index: nextIndex), priority: entry.priority, order: order)
                modelInsert(entry)
                nextIndex += 1
            }
            // Removals and new priorities from anywhere.
            for _ in 0..<200 where !model.isEmpty {
                let victim = model[Int(random.nextUInt64() % UInt64(model.count))]
                if random.nextUInt64() % 2 == 0 {
                    let removed = queue.remove(JobHandle(index: victim.index))
                    #expect(removed)
                    model.removeAll { $0.index == victim.index }
                } else {
                    let priority = Int(random.nextUInt64() % 3)
                    let moved = queue.updatePriority(JobHandle(index: victim.index), to: priority)
                    #expect(moved)
                    model.removeAll { $0.index == victim.index }
                    modelInsert((priority, victim.order, victim.index))
                }
                let strayRemoved = queue.remove(JobHandle(index: nextIndex + 1))
                #expect(!strayRemoved, "a handle never queued is not found")
            }
            // Takes most of them.
            for step in 0..<(model.count * 3 / 4) {
                let expected = model.removeFirst()
                #expect(queue.first?.index == expected.index, "seed \(seed) round \(round) step \(step): first")
                let popped = queue.popFirst()
                #expect(popped?.index == expected.index, "seed \(seed) round \(round) step \(step): pop")
                #expect(!queue.contains(JobHandle(index: expected.index)))
            }
            #expect(queue.count == model.count)
            #expect(queue.ordered().map(\.index) == model.map(\.index), "seed \(seed) round \(round): order")
            for entry in model.prefix(20) { #expect(queue.priority(of: JobHandle(index: entry.index)) == entry.priority) }
        }
        while let expected = model.first {
            model.removeFirst()
            let popped = queue.popFirst()
            #expect(popped?.index == expected.index)
        }
        let last = queue.popFirst()
        #expect(queue.isEmpty && last == nil)
    }
}

@Suite struct HeapWalkTests {
    @Test("A walk over the entries above a priority visits each of them once and no other, and stops when told", arguments: 1...20)
    func walkAbovePriorityMatchesAFilter(seed: Int) {
        var random = IdentifierGenerator(seed: UInt64(seed) &+ 500)
        var heap = IndexedHeap<JobHandle>()
        var priorities: [Int32: Int] = [:]
        for index in 0..<Int32(random.nextUInt64() % 300) {
            let priority = Int(random.nextUInt64() % 11) - 5
            heap.insert(JobHandle(index: index), priority: priority)
            priorities[index] = priority
        }
        // Some removed and some moved, so the heap is not in insertion shape
        for index in priorities.keys.sorted() where random.nextUInt64() % 4 == 0 {
            if random.nextUInt64() % 2 == 0 {
                heap.remove(JobHandle(index: index))
                priorities[index] = nil
            } else {
                let priority = Int(random.nextUInt64() % 11) - 5
                heap.updatePriority(JobHandle(index: index), to: priority)
                priorities[index] = priority
            }
        }
        for threshold in -6...6 {
            var seen: [Int32] = []
            heap.forEach(above: threshold) { seen.append($0.index); return true }
            #expect(seen.sorted() == priorities.filter { $0.value > threshold }.keys.sorted())
            var stopped = 0
            heap.forEach(above: threshold) { _ in stopped += 1; return stopped < 3 }
            #expect(stopped == min(3, seen.count))
        }
    }
}

@Suite struct IdentifierTests {
    @Test("Ids compare and hash as their two words, through the witnesses dictionaries use")
    func idsHashAsTwoWords() {
        let uuid = UUID()
        let words = withUnsafeBytes(of: uuid.uuid) {
            ($0.loadUnaligned(as: UInt64.self), $0.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
        }
        func expected() -> Int {
            var hasher = Hasher()
            hasher.combine(words.0)
            hasher.combine(words.1)
            return hasher.finalize()
        }
        func hashed(_ value: some Hashable) -> Int {
            var hasher = Hasher()
            hasher.combine(value)
            return hasher.finalize()
        }
        #expect(hashed(JobID(uuid: uuid)) == expected())
        #expect(hashed(WorkerID(uuid: uuid)) == expected())
        #expect(JobID(uuid: uuid) == JobID(uuid: uuid) && JobID(uuid: uuid) != JobID(uuid: UUID()))
        #expect(Set([JobID(uuid: uuid), JobID(uuid: uuid)]).count == 1)
        #expect(JobID(uuid: uuid).short == String(uuid.uuidString.prefix(8)).lowercased())
    }
}
