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
