/// `text` safe to print on one line of a terminal: control and line-separator characters and
/// bidirectional controls (an escape sequence, a newline, a right-to-left override that
/// reorders what is shown) as visible escapes
/// (`\u{1B}`, `\n`), everything else as it is. A job's command and name are the user's, but
/// printed raw by `status` an escape sequence in them acts on the terminal that reads it.
func printable(_ text: String) -> String {
    guard text.unicodeScalars.contains(where: isUnprintable) else { return text }
    var result = ""
    for scalar in text.unicodeScalars {
        guard isUnprintable(scalar) else {
            result.unicodeScalars.append(scalar)
            continue
        }
        switch scalar {
        case "\n": result += "\\n"
        case "\r": result += "\\r"
        case "\t": result += "\\t"
        default: result += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
        }
    }
    return result
}

/// Whether `scalar` must not reach a terminal raw (see ``printable(_:)``).
/// Other format characters stay: a zero-width joiner holds an emoji sequence together.
func isUnprintable(_ scalar: Unicode.Scalar) -> Bool {
    switch scalar.properties.generalCategory {
    case .control, .lineSeparator, .paragraphSeparator: true
    default: scalar.properties.isBidiControl
    }
}
