import Foundation
import Testing
@testable import Scheduler

/// The ids' own text parser and formatter (a restart reads and writes 100,000 ids) against
/// Foundation's `UUID(uuidString:)` and `uuidString`.
@Suite struct IdentifierTextTests {
    /// Random UUIDs and ones with every byte at its ends (0x00, 0xff, the digit/letter edges).
    static func samples() -> [UUID] {
        var generator = IdentifierGenerator(seed: 12)
        var uuids = (0..<500).map { _ in generator.nextUUID() }
        uuids.append(UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)))
        uuids.append(UUID(uuid: (255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255)))
        uuids.append(UUID(uuid: (0x09, 0x0a, 0x9f, 0xa0, 0xf9, 0xaf, 0x90, 0x0f, 0x19, 0x1a, 0xa9, 0xfa, 0x99, 0xaa, 0x00, 0xff)))
        uuids.append(UUID())
        return uuids
    }

    @Test func formatsAsFoundationDoesInLowercase() {
        for uuid in Self.samples() {
            let id = JobID(uuid: uuid)
            #expect(id.description == uuid.uuidString.lowercased())
            #expect(id.short == String(uuid.uuidString.prefix(8)).lowercased())
            #expect(WorkerID(uuid: uuid).description == uuid.uuidString.lowercased())
        }
    }

    @Test func parsesLowerUpperAndMixedCaseAsFoundationDoes() {
        for (index, uuid) in Self.samples().enumerated() {
            let upper = uuid.uuidString
            var mixed = ""
            for (position, character) in upper.enumerated() {
                mixed += (position + index) % 2 == 0 ? character.lowercased() : String(character)
            }
            for text in [upper, upper.lowercased(), mixed] {
                #expect(UUID(uuidString: text) == uuid, "Foundation reads \(text)")
                #expect(JobID(parsing: text)?.uuid == uuid, "\(text)")
                #expect(JobID(parsing: Substring("," + text + ",").dropFirst().dropLast())?.uuid == uuid, "a substring \(text)")
                #expect(WorkerID(parsing: text)?.uuid == uuid, "\(text)")
            }
        }
    }

    @Test func refusesWhatFoundationRefuses() {
        let valid = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
        var bad = [
            "", "0a1b2c3d", valid + "0", String(valid.dropLast()), "x" + valid.dropFirst(),
            String(valid.dropLast()) + "g", String(valid.dropLast()) + "G", String(valid.dropLast()) + " ",
            valid.replacingOccurrences(of: "-", with: ""), valid.replacingOccurrences(of: "-", with: "_"),
            "0a1b2c3d4-e5f-4a6b-8c7d-9e0f1a2b3c4d", "{0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d}",
            "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4\u{e9}", "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c/d", "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c:d",
            "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c@d", "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c`d",
        ]
        // A digit where a hyphen goes.
        for position in [8, 13, 18, 23] {
            var characters = Array(valid)
            characters[position] = "0"
            bad.append(String(characters))
        }
        #expect(JobID(parsing: valid) != nil)
        for text in bad {
            #expect(UUID(uuidString: text) == nil, "Foundation refuses \(text.debugDescription)")
            #expect(JobID(parsing: text) == nil, "\(text.debugDescription)")
            #expect(WorkerID(parsing: text) == nil, "\(text.debugDescription)")
        }
        // A hyphen anywhere else. (Foundation's `sscanf("%2hhx")` reads some of these, a hyphen
        // first in a pair of digits as a minus sign: "-a" as 0xf6. An id is never written so.)
        for position in [0, 1, 7, 9, 12, 14, 19, 24, 35] {
            var characters = Array(valid)
            characters[position] = "-"
            #expect(JobID(parsing: String(characters)) == nil, "\(String(characters))")
        }
        // Signs and spaces `sscanf` would skip or take.
        for text in ["+a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", " a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", "0a1b2c3d- e5f-4a6b-8c7d-9e0f1a2b3c4d"] {
            #expect(JobID(parsing: text) == nil, "\(text.debugDescription)")
        }
    }

    @Test func ordersAsTheirTextDoes() {
        let ids = Self.samples().map(JobID.init(uuid:))
        let byText = ids.sorted { $0.uuid.uuidString < $1.uuid.uuidString }
        #expect(ids.sorted() == byText)
        for (a, b) in zip(ids, ids.dropFirst()) {
            #expect((a < b) == (a.uuid.uuidString < b.uuid.uuidString))
            #expect(!(a < a))
        }
    }

    @Test func decodesFromJSONAndRefusesANonID() throws {
        let id = JobID(uuid: UUID())
        let data = try JSONEncoder().encode([id])
        #expect(try JSONDecoder().decode([JobID].self, from: data) == [id])
        #expect(throws: DecodingError.self) { try JSONDecoder().decode([JobID].self, from: Data(#"["not-an-id"]"#.utf8)) }
    }
}
