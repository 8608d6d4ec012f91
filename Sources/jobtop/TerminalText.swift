import SchedulerRemote

/// `text` safe to print on one line of a terminal: control and line-separator characters and
/// bidirectional controls (an escape sequence, a newline, a right-to-left override that
/// reorders what is shown) as visible escapes
/// (`\u{1B}`, `\n`), everything else as it is. A job's command and name are the user's, but
/// printed raw by `status` an escape sequence in them acts on the terminal that reads it.
/// Unlike ``PeerText/escaped(_:limit:)`` (a peer's text), a backslash stays as it is (a
/// command's `printf 'a\n'` reads as written) and so does a zero-width joiner (an emoji name).
func printable(_ text: String) -> String {
    guard text.unicodeScalars.contains(where: isUnprintable) else { return text }
    var result = ""
    for scalar in text.unicodeScalars {
        guard isUnprintable(scalar) else {
            result.unicodeScalars.append(scalar)
            continue
        }
        result += PeerText.visible(scalar)
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
