import Testing
@testable import TUI

@Suite("Text width")
struct TextWidthTests {
    @Test("ASCII takes one cell, CJK and emoji two, combining marks none")
    func widths() {
        #expect(TextWidth.width("echo") == 4)
        #expect(TextWidth.width("日本語") == 6)
        #expect(TextWidth.width("🚀") == 2)
        #expect(TextWidth.width("e\u{301}") == 1)
    }

    @Test("Short text is padded to the width, on the right side when aligned right")
    func padding() {
        #expect(TextWidth.fit("ab", to: 5) == "ab   ")
        #expect(TextWidth.fit("ab", to: 5, alignRight: true) == "   ab")
    }

    @Test("Long text is cut with an ellipsis to exactly the width")
    func truncation() {
        #expect(TextWidth.fit("abcdefgh", to: 5) == "abcd…")
        #expect(TextWidth.width(TextWidth.fit("abcdefgh", to: 5)) == 5)
    }

    @Test("A wide character that would straddle the edge is left out and the gap padded")
    func wideCut() {
        let cut = TextWidth.fit("日本語", to: 4)
        #expect(cut == "日… ")
        #expect(TextWidth.width(cut) == 4)
        #expect(TextWidth.width(TextWidth.fit("echo 日本語 🚀 done", to: 11)) == 11)
    }

    @Test("Escape sequences and control characters never reach the screen")
    func sanitizing() {
        #expect(TextWidth.sanitize("\u{1B}[31mred\u{1B}[0m") == "red")
        #expect(TextWidth.sanitize("a\tb") == "a       b")
        #expect(TextWidth.sanitize("bell\u{07}") == "bell\u{FFFD}")
        #expect(TextWidth.sanitize("plain 日本") == "plain 日本")
        // What a user gave shows its controls as escapes (as `jobtop status` prints them), and
        // its bidirectional overrides; line breaks and tabs as spaces
        #expect(TextWidth.visible("echo \u{1B}[31mred\u{1B}[0m") == #"echo \u{1B}[31mred\u{1B}[0m"#)
        #expect(TextWidth.visible("a\u{07}b\u{7F}c\u{9B}") == #"a\u{7}b\u{7F}c\u{9B}"#)
        #expect(TextWidth.visible("abc\u{202E}def\u{2028}") == #"abc\u{202E}def\u{2028}"#)
        #expect(TextWidth.visible("one\ntwo\tx") == "one two x")
        #expect(TextWidth.visible("plain 日本 👩‍💻") == "plain 日本 👩‍💻")
        #expect(TextWidth.width(TextWidth.visible("\u{1B}x")) == 7)
        // Tab stops count the cells before them, wide ones and escapes left out included.
        #expect(TextWidth.sanitize("日本\tx\u{1B}[1m\ty") == "日本    x       y")
    }

    @Test("An output line keeps what follows a title sequence, whichever way the sequence ends")
    func titleSequences() {
        func text(_ line: String) -> String { ANSIText.segments(line, base: .normal).map(\.text).joined() }
        #expect(text("G \u{1B}]0;TITLE\u{07} after-bel") == "G  after-bel")
        #expect(text("H \u{1B}]0;TITLE\u{1B}\\ after-st") == "H  after-st")
        #expect(text("\u{1B}[31mred\u{07}\u{1B}]8;;http://x\u{07}link\u{1B}]8;;\u{07}") == "redlink")
        #expect(ANSIText.segments("\u{1B}]0;t\u{07}\u{1B}[31mred", base: .normal).last?.role == .failed)
    }

    @Test("A character-set escape (ESC ( 0, ESC ) B, ESC # 8) goes whole: its last byte was shown")
    func characterSetEscapes() {
        func text(_ line: String) -> String { ANSIText.segments(line, base: .normal).map(\.text).joined() }
        #expect(text("e\u{1B}(0qqqq\u{1B}(Bf") == "eqqqqf")
        #expect(text("a\u{1B})Bb\u{1B}#8c\u{1B}7d\u{1B}=e") == "abcde")
    }

    @Test("A 256-color or true color shows as the basic color nearest it (it was left plain)")
    func manyColors() {
        func role(_ line: String) -> Role? { ANSIText.segments(line, base: .normal).last?.role }
        #expect(role("\u{1B}[38;5;208mx") == .waiting)  // orange: red and green
        #expect(role("\u{1B}[38;5;196mx") == .failed)  // red
        #expect(role("\u{1B}[38;5;46mx") == .succeeded)  // green
        #expect(role("\u{1B}[38;5;240mx") == .dim)  // a dark gray
        #expect(role("\u{1B}[38;2;255;0;0mx") == .failed)
        #expect(role("\u{1B}[38;2;10;200;30mx") == .succeeded)
        #expect(role("\u{1B}[1;38;5;9mx") == .failed)
    }
}
