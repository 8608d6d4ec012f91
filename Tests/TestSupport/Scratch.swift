import Foundation

/// A fresh directory for one test's files, removed when the test is done with it.
public final class Scratch: Sendable {
    /// Its absolute path.
    public let path: String

    public init() throws {
        path = NSTemporaryDirectory() + "jobtop-test-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// Writes `text` to `name` inside it and returns the full path.
    @discardableResult
    public func write(_ name: String, _ text: String) throws -> String {
        let file = (path as NSString).appendingPathComponent(name)
        try FileManager.default.createDirectory(
            atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try text.write(toFile: file, atomically: true, encoding: .utf8)
        return file
    }

    /// The full path of `name` inside it.
    public func file(_ name: String) -> String { (path as NSString).appendingPathComponent(name) }

    /// The contents of `name`, or `nil` when it does not exist.
    public func read(_ name: String) -> String? { try? String(contentsOfFile: file(name), encoding: .utf8) }
}
