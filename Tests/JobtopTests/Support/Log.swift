import Foundation

/// Parsed headless log lines.
enum Log {
    /// The JSON objects of a `--log-format json` log, one per line; fails the test on a line that
    /// does not parse.
    static func json(_ lines: [String]) throws -> [[String: Any]] {
        try lines.map { line in
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8))
            guard let dictionary = object as? [String: Any] else { throw LogError(line: line) }
            return dictionary
        }
    }

    /// Text-log lines of `event` (the second field).
    static func events(_ event: String, in lines: [String]) -> [String] {
        lines.filter { line in
            let fields = line.split(separator: " ")
            return fields.count > 1 && fields[1] == event
        }
    }

    struct LogError: Error { let line: String }
}
