import Foundation
import GRPCCore
import Scheduler
@testable import SchedulerService
import Testing

/// The binary submission carries every spec exactly: each field set and unset, odd strings; a
/// damaged frame is an error, never a crash; other commands stay JSON.
@Suite("Spec codec")
struct SpecCodecTests {
    /// Specs that between them set and leave unset every field of `JobSpec`.
    static func specs() throws -> [JobSpec] {
        let other = JobID(uuid: UUID())
        return [
            .shell("true"),
            JobSpec(
                name: "every field ✓ \u{0}", work: .shell("echo 'héllo' \"$X\"\nexit 3"), environment: ["X": "1", "EMPTY": "", "π": "3.14"],
                workingDirectory: "/tmp/a b", priority: -1_000_000, retry: RetryPolicy(maxAttempts: 7, initialBackoff: .milliseconds(1234),
                multiplier: 1.5, maxBackoff: .seconds(3600), jitter: 0.33),
                timeout: .nanoseconds(1_500_000_001), coalescingKey: "key", progressPattern: try ProgressPattern(#"(\d+)/(\d+)"#),
                keepBackground: true, group: "build", dependencies: [.job(other), .earlier(0)], notBefore: .delay(.seconds(90))),
            JobSpec(name: "", work: .argv(["/bin/echo", "", "two words", "ünï"]), priority: Int(Int32.max), notBefore: .date(Date(timeIntervalSinceReferenceDate: 812_345_678.123_456))),
            JobSpec(work: .argv([]), timeout: .zero, group: "", dependencies: [.earlier(1)]),
        ]
    }

    static func json(_ specs: [JobSpec]) throws -> [String] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return try specs.map { String(decoding: try encoder.encode($0), as: UTF8.self) }
    }

    static func roundTrip(_ command: SchedulerCommand) throws -> SchedulerCommand {
        let bytes: [UInt8] = try CommandMessageSerializer().serialize(command)
        return try CommandMessageDeserializer().deserialize(bytes)
    }

    @Test("A submission comes back field for field, with its batch")
    func submissionRoundTrips() throws {
        let specs = try Self.specs()
        for batch in [nil, BatchID(rawValue: 1 << 40)] {
            guard case .submit(let back, let backBatch) = try Self.roundTrip(.submit(specs, batch: batch)) else {
                Issue.record("not a submission")
                return
            }
            #expect(try Self.json(back) == Self.json(specs))
            #expect(backBatch == batch)
        }
        let bytes: [UInt8] = try CommandMessageSerializer().serialize(.submit(specs, batch: nil))
        #expect(bytes.first == SpecCodec.submitTag, "binary, not JSON")
    }

    @Test("Other commands stay JSON; Swift code is refused as JSON refuses it")
    func otherCommandsAreJSON() throws {
        for command: SchedulerCommand in [.pause, .setGroupLimit("g", 3)] {
            let bytes: [UInt8] = try CommandMessageSerializer().serialize(command)
            #expect(bytes.first == UInt8(ascii: "{"))
        }
        #expect(throws: EncodingError.self) {
            let _: [UInt8] = try CommandMessageSerializer().serialize(.submit([.shell("true"), JobSpec(work: .closure { _ in })], batch: nil))
        }
        guard case .setGroupLimit("g", 3) = try Self.roundTrip(.setGroupLimit("g", 3)) else {
            Issue.record("the command came back as another")
            return
        }
    }

    @Test("The ids of a submission come back in binary; other results and refusals as JSON")
    func results() throws {
        let ids = (0..<1_000).map { _ in JobID(uuid: UUID()) }
        let bytes: [UInt8] = try ResultMessageSerializer().serialize(.reply(.submitted(ids)))
        #expect(bytes.count < 16 * ids.count + 8)
        guard case .reply(.submitted(let back)) = try ResultMessageDeserializer().deserialize(bytes) else {
            Issue.record("not the ids")
            return
        }
        #expect(back == ids)
        let refusal: [UInt8] = try ResultMessageSerializer().serialize(.refused(SchedulerError(.notAllowed, "no")))
        guard case .refused(let error) = try ResultMessageDeserializer().deserialize(refusal) else {
            Issue.record("not the refusal")
            return
        }
        #expect(error == SchedulerError(.notAllowed, "no"))
        for length in 1..<min(bytes.count, 200) {
            #expect(throws: (any Error).self) { _ = try ResultMessageDeserializer().deserialize(Array(bytes[..<length])) }
        }
    }

    @Test("A damaged submission is an error, never a crash")
    func damagedFrames() throws {
        let bytes: [UInt8] = try CommandMessageSerializer().serialize(.submit(try Self.specs(), batch: nil))
        for length in 1..<bytes.count {
            #expect(throws: (any Error).self) { _ = try CommandMessageDeserializer().deserialize(Array(bytes[..<length])) }
        }
        var huge = bytes
        huge.replaceSubrange(2..<3, with: [0xFF, 0xFF, 0xFF, 0xFF, 0x0F])
        #expect(throws: (any Error).self) { _ = try CommandMessageDeserializer().deserialize(huge) }
    }
}
