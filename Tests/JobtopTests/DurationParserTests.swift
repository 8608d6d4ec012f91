import Scheduler
import Testing
@testable import jobtop

@Suite("Durations as the command line and job files write them")
struct DurationParserTests {
    @Test(
        "Each accepted form reads as the right duration",
        arguments: [
            ("500ms", Duration.milliseconds(500)), ("10s", .seconds(10)), ("1.5s", .milliseconds(1500)),
            ("5m", .seconds(300)), ("1h", .seconds(3600)), ("1m30s", .seconds(90)), ("0s", .zero), ("0", .zero), (" 0 ", .zero), (" 2s ", .seconds(2)),
            ("2d", .seconds(172_800)), ("1d12h", .seconds(129_600)), ("1s500ms", .milliseconds(1500)),
        ])
    func accepted(text: String, expected: Duration) throws {
        #expect(try DurationParser.parse(text) == expected)
    }

    @Test(
        "Each bad form is refused with the reason",
        arguments: [
            ("", "empty"), ("10", "needs a unit"), ("00.5", "needs a unit"), ("5x", "unknown unit 'x'"), ("-1s", "negative"),
            ("s", "expected a number"), ("1.2.3s", "expected a number"), ("10 parsecs", "needs a unit"),
            ("0.0001ms", "shorter than 1ms"), ("0.0005s", "shorter than 1ms"),
            ("5s5s", "'s' after 's': give each unit once, the largest first"), ("30s1m", "'m' after 's'"),
            ("20000d", "too long: at most 11574d"),
        ])
    func refused(text: String, reason: String) {
        #expect {
            try DurationParser.parse(text)
        } throws: { error in
            (error as? DurationParser.Failure)?.description.contains(reason) == true
        }
    }

    /// Durations and how they are written.
    static let writtenForms: [(Duration, String)] = [
        (.milliseconds(500), "500ms"), (.seconds(90), "1m30s"), (.seconds(3600), "1h"), (.seconds(3660), "1h1m"),
        (.seconds(86_340), "23h59m"), (.seconds(86_400), "1d"), (.seconds(273_600), "3d4h"), (.seconds(97_675_259), "1130d12h"),
    ]

    @Test("A duration is written as the command line takes it, days from one on, and reads back the same", arguments: writtenForms)
    func written(duration: Duration, text: String) throws {
        #expect(formatDuration(duration) == text)
        // Whole minutes (and whole hours from a day on) read back exactly.
        let wholeUnit: Int64 = duration >= .seconds(86_400) ? 3600 : 60
        if duration.components.seconds % wholeUnit == 0 && duration.components.attoseconds == 0 {
            #expect(try DurationParser.parse(text) == duration)
        }
    }
}
