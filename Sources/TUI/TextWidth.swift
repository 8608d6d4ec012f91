// Only for the C library's wcwidth (declared in the shim); no ncurses call is made here.
import CNcurses
#if canImport(Glibc)
import Glibc
#endif

/// Display widths of text in terminal cells, as the terminal itself measures them (`wcwidth`).
enum TextWidth {
    /// `wcwidth` only knows non-ASCII characters under a UTF-8 `LC_CTYPE`; without one, every
    /// wide character would measure -1. The dashboard sets the locale before anything is drawn;
    /// this makes measuring right on its own too (tests, or a program that never set one).
    private static let isLocaleReady: Bool = {
        if cn_wcwidth(0x65E5) != 2 {
            _ = setlocale(LC_CTYPE, "C.UTF-8")
        }
        return true
    }()

    /// The cells `scalar` takes: 0 for combining marks and controls, 2 for wide characters.
    static func width(of scalar: Unicode.Scalar) -> Int {
        let value = scalar.value
        if value >= 0x20 && value < 0x7F { return 1 }
        _ = isLocaleReady
        let measured = cn_wcwidth(value)
        return max(0, Int(measured))
    }

    /// The cells `text` takes.
    static func width(_ text: some StringProtocol) -> Int {
        var total = 0
        for scalar in text.unicodeScalars { total += width(of: scalar) }
        return total
    }

    /// `text` made exactly `width` cells wide: cut with `…` when longer, padded with spaces
    /// when shorter (on the left when `alignRight`).
    static func fit(_ text: some StringProtocol, to width: Int, alignRight: Bool = false) -> String {
        guard width > 0 else { return "" }
        let full = self.width(text)
        if full <= width {
            let padding = String(repeating: " ", count: width - full)
            return alignRight ? padding + text : text + padding
        }
        // Keep as much as fits in width - 1 cells, then the ellipsis.
        var result = String.UnicodeScalarView()
        var used = 0
        for scalar in text.unicodeScalars {
            let cells = self.width(of: scalar)
            if used + cells > width - 1 { break }
            result.append(scalar)
            used += cells
        }
        var cut = String(result)
        cut += "…"
        used += 1
        if used < width { cut += String(repeating: " ", count: width - used) }
        return cut
    }

    /// `text` cut to at most `width` cells without padding.
    static func truncate(_ text: some StringProtocol, to width: Int) -> String {
        let fitted = fit(text, to: width)
        guard self.width(text) < width else { return fitted }
        return String(text)
    }

    /// `text` made safe to draw: escape sequences removed, tabs expanded to spaces, other
    /// control characters shown as `�` so they can never move the cursor. For a job's output,
    /// whose colors ``ANSIText`` has taken out: what is left of its escapes moved its cursor.
    static func sanitize(_ text: some StringProtocol) -> String {
        safe(text, showingControls: false)
    }

    /// `text` made safe to draw and shown as it is: a control character as a visible escape
    /// (`\u{1B}`, as `jobtop status` prints it), and so a bidirectional control or a line
    /// separator (which would reorder or break what is shown); a line break as a space, a tab
    /// as spaces. For what a user gave — a command, a name, a group — which runs or matches as
    /// it is: `printf '\e[31mred\e[0m'` showed as `printf 'red'`, not the command that runs.
    static func visible(_ text: some StringProtocol) -> String {
        safe(text, showingControls: true)
    }

    /// Whether `scalar` is shown as an escape by ``visible(_:)``.
    private static func isShownEscaped(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x09, 0x0A, 0x0D: false
        case 0..<0x20, 0x7F..<0xA0: true
        case 0..<0x200E: false
        default:
            switch scalar.properties.generalCategory {
            case .lineSeparator, .paragraphSeparator: true
            default: scalar.properties.isBidiControl
            }
        }
    }

    private static func safe(_ text: some StringProtocol, showingControls: Bool) -> String {
        var needsWork = false
        for scalar in text.unicodeScalars
        where scalar.value < 0x20 || (scalar.value >= 0x7F && scalar.value < 0xA0) || (showingControls && isShownEscaped(scalar)) {
            needsWork = true
            break
        }
        guard needsWork else { return String(text) }
        var output = String.UnicodeScalarView()
        // The cells written so far, for tab stops (summed once, not again at every tab: a line
        // of many tabs was quadratic).
        var column = 0
        var scalars = Array(text.unicodeScalars)[...]
        while let scalar = scalars.popFirst() {
            if showingControls && isShownEscaped(scalar) {
                let escape = "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
                output.append(contentsOf: escape.unicodeScalars)
                column += escape.unicodeScalars.count
                continue
            }
            switch scalar.value {
            case 0x1B:
                // CSI: ESC [ parameters final-byte; OSC: ESC ] ... BEL or ESC \; others:
                // intermediate bytes (0x20-0x2F), then one final byte (`ESC ( 0` picks a
                // character set: its `0` was shown).
                if let next = scalars.first, next == "[" {
                    scalars.removeFirst()
                    while let c = scalars.popFirst(), !(0x40...0x7E).contains(c.value) {}
                } else if let next = scalars.first, next == "]" {
                    scalars.removeFirst()
                    while let c = scalars.popFirst() {
                        if c.value == 0x07 { break }
                        if c.value == 0x1B { _ = scalars.popFirst(); break }
                    }
                } else {
                    while let c = scalars.first, (0x20...0x2F).contains(c.value) { scalars.removeFirst() }
                    _ = scalars.popFirst()
                }
            case 0x09:
                let spaces = 8 - column % 8
                output.append(contentsOf: String(repeating: " ", count: spaces).unicodeScalars)
                column += spaces
            case 0x0D, 0x0A:
                output.append(" ")
                column += 1
            case 0..<0x20, 0x7F..<0xA0:
                output.append("\u{FFFD}")
                column += width(of: "\u{FFFD}")
            default:
                output.append(scalar)
                column += width(of: scalar)
            }
        }
        return String(output)
    }
}

/// The cells `text` takes on a terminal (`wcwidth`): for command-line output in aligned columns.
public func terminalWidth(of text: some StringProtocol) -> Int { TextWidth.width(text) }
