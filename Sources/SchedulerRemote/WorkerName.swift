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
