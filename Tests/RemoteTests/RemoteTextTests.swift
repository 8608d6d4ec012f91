import Testing

@testable import Scheduler
@testable import SchedulerRemote

/// The pure parts: what a peer's text looks like when printed, which names are refused, and the
/// delays between reconnects.
@Suite("Peer text, worker names, backoff")
struct RemoteTextTests {
    @Test(
        "A peer's text is printed on one line, with every control and format character escaped",
        arguments: [
            ("build-box-1", "build-box-1"),
            ("büro 7 ✓", "büro 7 ✓"),
            ("evil\njobtop: worker 'x' joined", "evil\\njobtop: worker 'x' joined"),
            ("\u{1B}[2J\u{1B}]0;pwned\u{07}", "\\u{1B}[2J\\u{1B}]0;pwned\\u{7}"),
            ("cr\rtab\t", "cr\\rtab\\t"),
            ("c1 \u{9B}31m del \u{7F}", "c1 \\u{9B}31m del \\u{7F}"),
            ("rtl \u{202E}txt.exe zero\u{200B}width", "rtl \\u{202E}txt.exe zero\\u{200B}width"),
            ("line\u{2028}para\u{2029}", "line\\u{2028}para\\u{2029}"),
            ("back\\n slash", "back\\\\n slash"),
        ])
    func escapesPeerText(given: String, shown: String) {
        #expect(PeerText.escaped(given) == shown)
    }

    @Test("A peer's text is cut to the limit, saying how much was left out")
    func cutsLongText() {
        #expect(PeerText.escaped(String(repeating: "a", count: 10), limit: 4) == "aaaa…(6 more)")
        #expect(PeerText.escaped("abcd", limit: 4) == "abcd")
    }

    @Test(
        "Worker names: printable and at most 255 bytes, or refused saying why",
        arguments: [
            ("build-box-1", nil),
            ("büro 7 ✓", nil),
            (String(repeating: "a", count: 255), nil),
            ("", "it is empty"),
            (String(repeating: "a", count: 256), "it is 256 bytes long; the most is 255"),
            (String(repeating: "ü", count: 128), "it is 256 bytes long; the most is 255"),
            ("evil\njobtop: worker 'x' joined", "it contains a control character (\\n) at position 5; use printable characters only"),
            ("a\u{1B}[31m", "it contains a control character (\\u{1B}) at position 2; use printable characters only"),
            ("\u{9B}", "it contains a control character (\\u{9B}) at position 1; use printable characters only"),
            ("rtl\u{202E}", "it contains a format character (\\u{202E}) at position 4; use printable characters only"),
            ("x\u{2028}", "it contains a line separator (\\u{2028}) at position 2; use printable characters only"),
        ] as [(String, String?)])
    func checksNames(name: String, problem: String?) {
        #expect(WorkerName.problem(with: name) == problem)
    }

    @Test("Backoff doubles from the first delay to the cap, jitter only shortens it, and a reset starts over")
    func backoffDoublesUpToTheCap() {
        var backoff = Backoff(initial: .milliseconds(100), maximum: .seconds(5))
        var random = SeededGenerator(seed: 42)
        let bases: [Duration] = [100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000, 5000].map { .milliseconds($0) }
        var delays: [Duration] = []
        for base in bases {
            let delay = backoff.next(using: &random)
            #expect(delay >= base / 2 && delay <= base, "delay \(delay) for base \(base)")
            delays.append(delay)
        }
        // The jitter does vary the delays at the cap (workers do not knock in step).
        #expect(Set(delays.suffix(4)).count > 1)
        backoff.reset()
        let afterReset = backoff.next(using: &random)
        #expect(afterReset >= .milliseconds(50) && afterReset <= .milliseconds(100))
    }

    @Test("Without jitter the delays are exactly the doubling steps")
    func backoffWithoutJitter() {
        var backoff = Backoff(initial: .milliseconds(100), maximum: .milliseconds(500), jitter: 0)
        var random = SeededGenerator(seed: 1)
        let delays = (0..<5).map { _ in backoff.next(using: &random) }
        #expect(delays == [100, 200, 400, 500, 500].map { .milliseconds($0) })
    }
}

/// The engine's seeded generator as a `RandomNumberGenerator`: the same numbers for the same seed.
struct SeededGenerator: RandomNumberGenerator {
    private var generator: IdentifierGenerator

    init(seed: UInt64) { generator = IdentifierGenerator(seed: seed) }

    mutating func next() -> UInt64 { generator.nextUInt64() }
}
