/// Text that came from the other end of a connection, made safe to print.
///
/// A peer's strings (a worker's name, a coordinator's refusal or goodbye, an error a worker
/// reports) reach terminals and logs. Printed raw, a newline forges a log line and an escape
/// sequence rewrites the terminal. ``escaped(_:limit:)`` shows every control, format and
/// line-separator character as a visible escape (`\n`, `\u{1B}`) and cuts absurd lengths, so a
/// peer's text always stays inside the one line that quotes it.
public enum PeerText {
    /// A library's message quoted inside one of ours, in parentheses: no final period, and a
    /// lowercase start unless the first word is an acronym ("The server accepted…" → "the
    /// server accepted…"; "HTTP/2 …" stays).
    public static func clause(_ message: String) -> String {
        var text = message.hasSuffix(".") ? String(message.dropLast()) : message
        if let first = text.first, first.isUppercase, let second = text.dropFirst().first, second.isLowercase {
            text = first.lowercased() + text.dropFirst()
        }
        return text
    }

    /// The text with every character that could act on a terminal or split a line escaped,
    /// cut to `limit` characters (the rest is counted, not shown).
    ///
    /// - Parameters:
    ///   - text: What the peer sent.
    ///   - limit: The most characters kept.
    /// - Returns: Printable text on one line.
    public static func escaped(_ text: String, limit: Int = 200) -> String {
        var result = ""
        var kept = 0
        var dropped = 0
        for scalar in text.unicodeScalars {
            if kept >= limit {
                dropped += 1
                continue
            }
            kept += 1
            if scalar == "\\" {
                // Escaped too, so an escape the peer wrote cannot pass for one made here.
                result += "\\\\"
            } else if isUnsafe(scalar) {
                result += visible(scalar)
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        if dropped > 0 { result += "…(\(dropped) more)" }
        return result
    }

    /// `scalar` as a visible escape: `\n`, `\r`, `\t`, else `\u{1B}`.
    public static func visible(_ scalar: Unicode.Scalar) -> String {
        switch scalar {
        case "\n": "\\n"
        case "\r": "\\r"
        case "\t": "\\t"
        default: "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
        }
    }

    /// Whether `scalar` must never reach a terminal raw: C0 and C1 controls and DEL (newlines,
    /// escape sequences, the 8-bit CSI), format characters (bidirectional overrides that reorder
    /// what is shown, zero-width characters) and the Unicode line and paragraph separators.
    static func isUnsafe(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator:
            return true
        default:
            return false
        }
    }
}
