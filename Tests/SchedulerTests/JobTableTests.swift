import Foundation
import Testing
@testable import Scheduler

/// The core's record table: a retired id stays known under its mark and nothing else.
@Suite struct JobTableTests {
    @Test func aRetiredIdKeepsItsMarkButNoRecordAndItsIndexIsReused() {
        // Given a table with two records
        var ids = IdentifierGenerator(seed: 3)
        var table = JobTable<String>(placeholder: "")
        let (a, b) = (ids.nextJobID(), ids.nextJobID())
        let handleA = table.insert("a", for: a)
        _ = table.insert("b", for: b)
        // When one is retired with a mark
        table.retire(handleA, mark: 1)
        // Then it has no record, is not counted, and its mark is read back; the other is untouched
        #expect(table.handle(of: a) == nil)
        #expect(table[a] == nil)
        #expect(table.mark(of: a) == 1)
        #expect(table.mark(of: b) == nil)
        #expect(table.count == 1)
        #expect(!table.handle(handleA, matches: a))
        // A new record takes the freed index; the retired id may come back as a live record.
        let c = ids.nextJobID()
        #expect(table.insert("c", for: c) == handleA)
        let again = table.insert("a again", for: a)
        #expect(table.handle(of: a) == again)
        #expect(table.mark(of: a) == nil)
        #expect(table.count == 3)
        // Removing (not retiring) forgets the id entirely.
        table.remove(again)
        #expect(table.handle(of: a) == nil && table.mark(of: a) == nil)
        #expect(table.count == 2)
    }
}
