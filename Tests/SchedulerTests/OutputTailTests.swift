import Foundation
import Testing
@testable import Scheduler

/// A read's lines added to a job's tail at once keep what adding them one by one keeps: the
/// lines a read would only append to drop again are skipped, and counted as dropped all the same.
@Suite(.timeLimit(.minutes(2)))
struct OutputTailTests {
    /// A small seeded generator (xorshift), so a failure reproduces.
    struct Seeded: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return state
        }
    }

    static func randomLine(_ random: inout Seeded, longest: Int) -> OutputLine {
        let endings: [OutputLine.Ending] = [.newline, .newline, .newline, .carriageReturn, .carriageReturnNewline, .none]
        let ending = endings.randomElement(using: &random)!
        let length = Int.random(in: 0...3, using: &random) == 0 ? Int.random(in: 0...longest, using: &random) : Int.random(in: 0...3, using: &random)
        let text = String(repeating: "x", count: length)
        let stream: OutputLine.Stream = Int.random(in: 0...4, using: &random) == 0 ? .stderr : .stdout
        let bytes: [UInt8]? = Int.random(in: 0...20, using: &random) == 0 ? Array(text.utf8) : nil
        return OutputLine(stream: stream, text: text, ending: ending, bytes: bytes)
    }

    @Test(arguments: 0..<40)
    func readsAddedAtOnceKeepWhatLinesAddedOneByOneKeep(seed: UInt64) {
        var random = Seeded(state: 0x9E37_79B9_7F4A_7C15 &+ seed &* 7919)
        let tailLines = [0, 1, 2, 5, 8].randomElement(using: &random)!
        let longest = [4, 40, LineSplitter.maxLineBytes].randomElement(using: &random)!
        let tailBytes = [6, 30, 200, 1 << 20].randomElement(using: &random)!
        let limits = JobOutputStore.Limits(lines: tailLines, bytes: tailBytes, finishedTails: 10)
        let batched = JobOutputStore(limits: limits)
        let single = JobOutputStore(limits: limits)
        let id = JobID(uuid: UUID())
        var sizes: [Int] = []
        for _ in 0..<30 {
            let count = Int.random(in: 0...40, using: &random)
            sizes.append(count)
            let lines = (0..<count).map { _ in Self.randomLine(&random, longest: longest) }
            // As slices too: the reporter hands the lines between two progress values.
            if Bool.random(using: &random), count > 2 {
                batched.append(contentsOf: lines[..<(count / 2)], to: id)
                batched.append(contentsOf: lines[(count / 2)...], to: id)
            } else {
                batched.append(contentsOf: lines, to: id)
            }
            for line in lines { single.append(line, to: id) }
            let (got, want) = (batched.tail(of: id), single.tail(of: id))
            #expect(got.lines == want.lines, "seed \(seed), limits \(limits), reads \(sizes)")
            #expect(got.dropped == want.dropped, "seed \(seed), limits \(limits), reads \(sizes)")
            if got.lines != want.lines || got.dropped != want.dropped { return }
        }
    }

    /// A read of 100,000 short lines keeps the last few, with the rest counted as dropped.
    @Test func aLongReadKeepsItsLastLines() {
        let store = JobOutputStore(limits: .init(lines: 3, bytes: 1 << 20, finishedTails: 10))
        let id = JobID(uuid: UUID())
        store.append(OutputLine(stream: .stdout, text: "before", ending: .none), to: id)
        store.append(contentsOf: (1...100_000).map { OutputLine(stream: .stdout, text: "\($0)") }, to: id)
        let tail = store.tail(of: id)
        #expect(tail.lines.map(\.text) == ["99998", "99999", "100000"])
        // "before1" was one line: 99,997 dropped in all.
        #expect(tail.dropped == 99_997)
    }
}
