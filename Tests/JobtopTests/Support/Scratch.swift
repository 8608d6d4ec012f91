import Foundation

/// A fresh directory for one test's files, removed when the test is done with it.
final class Scratch {
    /// Its absolute path.
    let path: String

    init() throws {
        path = NSTemporaryDirectory() + "jobtop-test-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// Writes `text` to `name` inside it and returns the full path.
    @discardableResult
    func write(_ name: String, _ text: String) throws -> String {
        let file = (path as NSString).appendingPathComponent(name)
        try FileManager.default.createDirectory(
            atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try text.write(toFile: file, atomically: true, encoding: .utf8)
        return file
    }

    /// The full path of `name` inside it.
    func file(_ name: String) -> String { (path as NSString).appendingPathComponent(name) }

    /// The contents of `name`, or `nil` when it does not exist.
    func read(_ name: String) -> String? { try? String(contentsOfFile: file(name), encoding: .utf8) }
}

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
