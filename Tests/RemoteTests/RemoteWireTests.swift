import Foundation
import Scheduler
import SwiftProtobuf
import Testing

@testable import SchedulerRemote

/// How engine values cross the wire, through real protobuf bytes: output lines byte for byte,
/// and what a peer sends cut and checked as local output is.
@Suite("Wire values")
struct RemoteWireTests {
    @Test(
        "An output line crosses the wire unchanged: its ending, and its bytes when they are not UTF-8",
        arguments: [
            OutputLine(stream: .stdout, text: "plain"),
            OutputLine(stream: .stderr, text: "to stderr"),
            OutputLine(stream: .stdout, text: "", ending: .newline),
            OutputLine(stream: .stdout, text: "windows", ending: .carriageReturnNewline),
            OutputLine(stream: .stdout, text: "progress 42%", ending: .carriageReturn),
            OutputLine(stream: .stdout, text: "no newline at the end", ending: .none),
            OutputLine(stream: .stdout, text: "日本語 🚀", ending: .newline),
            OutputLine(stream: .stdout, text: "\u{FFFD} latin-1", ending: .newline, bytes: [0xE9] + Array(" latin-1".utf8)),
            OutputLine(stream: .stderr, text: "\u{FFFD}", ending: .none, bytes: [0xFF]),
        ])
    func outputLineRoundTrip(line: OutputLine) throws {
        let sent = Jobtop_Remote_V1_Output.with { $0.lines = [.init(line)] }
        let received = try Jobtop_Remote_V1_Output(serializedBytes: try sent.serializedBytes() as [UInt8])
        #expect(received.lines.flatMap(\.engineLines) == [line])
    }

    @Test("A peer's line holding line ends is cut where a local job's output would be")
    func peerLinesAreCutAgain() {
        let line = Jobtop_Remote_V1_Output.Line.with {
            $0.text = "one\ntwo\r\nthree\rfour"
            $0.ending = .none
        }
        #expect(line.engineLines == [
            OutputLine(stream: .stdout, text: "one", ending: .newline),
            OutputLine(stream: .stdout, text: "two", ending: .carriageReturnNewline),
            OutputLine(stream: .stdout, text: "three", ending: .carriageReturn),
            OutputLine(stream: .stdout, text: "four", ending: .none),
        ])
    }

    @Test("A peer's raw bytes decide the text: UTF-8 bytes become exact text; raw wins over a text that disagrees")
    func rawBytesDecide() {
        let utf8 = Jobtop_Remote_V1_Output.Line.with { $0.raw = Data("héllo".utf8) }
        #expect(utf8.engineLines == [OutputLine(stream: .stdout, text: "héllo")])
        let forged = Jobtop_Remote_V1_Output.Line.with {
            $0.raw = Data([0xFF])
            $0.text = "something else"
        }
        #expect(forged.engineLines == [OutputLine(stream: .stdout, text: "\u{FFFD}", bytes: [0xFF])])
    }

    @Test("A line from a worker older than endings (no ending field) ends with a newline")
    func olderWorkersLinesEndWithANewline() throws {
        // What version 1 as first shipped sent: stderr and text only.
        let old = Jobtop_Remote_V1_Output.Line.with {
            $0.stderr = true
            $0.text = "old"
        }
        let received = try Jobtop_Remote_V1_Output.Line(serializedBytes: try old.serializedBytes() as [UInt8])
        #expect(received.engineLines == [OutputLine(stream: .stderr, text: "old", ending: .newline)])
    }

    @Test("keep_background travels with the spec; an older coordinator's spec (without it) keeps the default")
    func keepBackgroundTravels() throws {
        var spec = JobSpec.shell("daemon &")
        spec.keepBackground = true
        let wire = try #require(Jobtop_Remote_V1_JobSpec(spec))
        let received = try Jobtop_Remote_V1_JobSpec(serializedBytes: try wire.serializedBytes() as [UInt8])
        #expect(try received.jobSpec().keepBackground)
        #expect(try #require(Jobtop_Remote_V1_JobSpec(.shell("true"))).jobSpec().keepBackground == false)
    }

    @Test("A line's pieces put back together are the bytes and the ending it was made from")
    func linesOfBytesKeepEveryByte() {
        let bytes = Array("a\rb\r\n".utf8) + [0xC3] + [UInt8](repeating: 0x78, count: 40_000)
        for ending in [OutputLine.Ending.newline, .carriageReturn, .carriageReturnNewline, .none] {
            let lines = OutputLine.lines(of: bytes, stream: .stdout, ending: ending)
            #expect(lines.flatMap(\.rawBytes) == bytes + ending.bytes)
            #expect(lines.allSatisfy { ($0.bytes?.count ?? $0.text.utf8.count) <= 16 * 1024 })
        }
        #expect(OutputLine.lines(of: [UInt8](), stream: .stdout, ending: .none).isEmpty)
    }
}
