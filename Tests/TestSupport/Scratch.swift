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

    /// Writes `text` to `name` inside it, readable by its owner only (a token file others can
    /// read is warned about), and returns the full path.
    @discardableResult
    public func write(_ name: String, _ text: String) throws -> String {
        let file = (path as NSString).appendingPathComponent(name)
        try FileManager.default.createDirectory(
            atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try text.write(toFile: file, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file)
        return file
    }

    /// The full path of `name` inside it.
    public func file(_ name: String) -> String { (path as NSString).appendingPathComponent(name) }

    /// The contents of `name`, or `nil` when it does not exist.
    public func read(_ name: String) -> String? { try? String(contentsOfFile: file(name), encoding: .utf8) }
}
