/// Text that came from the other end of a connection, made safe to print.
///
/// A peer's strings (a worker's name, a coordinator's refusal or goodbye, an error a worker
/// reports) reach terminals and logs. Printed raw, a newline forges a log line and an escape
/// sequence rewrites the terminal. ``escaped(_:limit:)`` shows every control, format and
/// line-separator character as a visible escape (`\n`, `\u{1B}`) and cuts absurd lengths, so a
/// peer's text always stays inside the one line that quotes it.
public enum PeerText {
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
                switch scalar {
                case "\n": result += "\\n"
                case "\r": result += "\\r"
                case "\t": result += "\\t"
                default: result += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
                }
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        if dropped > 0 { result += "…(\(dropped) more)" }
        return result
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

/// What a worker may call itself.
///
/// A name is shown on the coordinator's screen and in its log, so it must be one printable
/// line: no control or format characters (see ``PeerText``), at most ``maxBytes`` bytes of
/// UTF-8, not empty. The coordinator refuses a hello that breaks this (refusal
/// `CODE_BAD_NAME`, saying why) and `jobtop worker --name` refuses it before connecting.
public enum WorkerName {
    /// The longest name, in bytes of UTF-8 (a fully qualified host name is at most 253).
    public static let maxBytes = 255

    /// What is wrong with `name`, or `nil` when it is a good name.
    ///
    /// - Returns: A reason for people, like `it contains a control character (\n) at position 5`.
    public static func problem(with name: String) -> String? {
        if name.isEmpty { return "it is empty" }
        let bytes = name.utf8.count
        if bytes > maxBytes { return "it is \(bytes) bytes long; the most is \(maxBytes)" }
        for (offset, scalar) in name.unicodeScalars.enumerated() where PeerText.isUnsafe(scalar) {
            let what: String
            switch scalar.properties.generalCategory {
            case .control: what = "a control character"
            case .format: what = "a format character"
            default: what = "a line separator"
            }
            return "it contains \(what) (\(PeerText.escaped(String(scalar)))) at position \(offset + 1); use printable characters only"
        }
        return nil
    }
}
