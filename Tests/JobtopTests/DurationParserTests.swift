import Testing
@testable import jobtop

@Suite("Durations as the command line and job files write them")
struct DurationParserTests {
    @Test(
        "Each accepted form reads as the right duration",
        arguments: [
            ("500ms", Duration.milliseconds(500)), ("10s", .seconds(10)), ("1.5s", .milliseconds(1500)),
            ("5m", .seconds(300)), ("1h", .seconds(3600)), ("1m30s", .seconds(90)), ("0s", .zero), (" 2s ", .seconds(2)),
        ])
    func accepted(text: String, expected: Duration) throws {
        #expect(try DurationParser.parse(text) == expected)
    }

    @Test(
        "Each bad form is refused with the reason",
        arguments: [
            ("", "empty"), ("10", "needs a unit"), ("5x", "unknown unit 'x'"), ("-1s", "negative"),
            ("s", "expected a number"), ("1.2.3s", "expected a number"), ("10 parsecs", "needs a unit"),
        ])
    func refused(text: String, reason: String) {
        #expect {
            try DurationParser.parse(text)
        } throws: { error in
            (error as? DurationParser.Failure)?.description.contains(reason) == true
        }
    }
}
