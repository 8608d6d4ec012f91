import Foundation

/// The shared secret a worker shows the coordinator.
public enum RemoteToken {
    /// The environment variable that may carry the token.
    public static let environmentVariable = "JOBTOP_TOKEN"

    /// The token from `file` if given, else from `JOBTOP_TOKEN`, else `nil`. Surrounding
    /// whitespace (a trailing newline) is dropped.
    ///
    /// - Throws: ``RemoteError`` (`.badToken`) when the file cannot be read or holds no token.
    public static func load(
        file: String?, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(RemoteError) -> String? {
        if let file {
            // Read through a handle, at most 64 KiB: `Data(contentsOf:)` refused a device
            // (/dev/null: "permission denied"), and /dev/zero would never end.
            let data: Data
            do {
                let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: file))
                defer { try? handle.close() }
                data = try handle.read(upToCount: 65_537) ?? Data()
            } catch {
                throw RemoteError(.badToken, "--token-file \(file): cannot read it (\(reason(error)))")
            }
            guard data.count <= 65_536 else { throw RemoteError(.badToken, "--token-file \(file): longer than 64 KiB, not a token") }
            guard let text = String(data: data, encoding: .utf8) else {
                throw RemoteError(.badToken, "--token-file \(file): not UTF-8 text")
            }
            let token = text.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !token.isEmpty else { throw RemoteError(.badToken, "--token-file \(file): the file is empty") }
            return token
        }
        if let value = environment[environmentVariable] {
            let token = value.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !token.isEmpty else { throw RemoteError(.badToken, "\(environmentVariable) is set but empty") }
            return token
        }
        return nil
    }

    /// A warning when the token file can be read by others than its owner (a token written
    /// with `echo … > file` is, under the usual umask): the token lets anyone run commands.
    public static func permissionWarning(file: String?) -> String? {
        guard let file else { return nil }
        var info = stat()
        guard stat(file, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_mode & 0o077 != 0 else { return nil }
        return "warning: --token-file \(file) can be read by other users (mode \(String(info.st_mode & 0o777, radix: 8))): 'chmod 600 \(file)'"
    }

    /// Compares in time that depends only on the lengths, so the comparison leaks nothing
    /// about how much of a guess was right.
    public static func matches(_ given: String, _ expected: String) -> Bool {
        let a = Array(given.utf8)
        let b = Array(expected.utf8)
        var difference = UInt8(a.count == b.count ? 0 : 1)
        for index in 0..<max(a.count, b.count) {
            let x = index < a.count ? a[index] : 0
            let y = index < b.count ? b[index] : 0
            difference |= x ^ y
        }
        return difference == 0
    }

    private static func reason(_ error: any Error) -> String {
        let nsError = error as NSError
        if let underlying = nsError.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain {
            return String(cString: strerror(Int32(underlying.code)))
        }
        if nsError.code == NSFileReadNoSuchFileError { return "no such file" }
        if nsError.code == NSFileReadNoPermissionError { return "permission denied" }
        return nsError.localizedDescription
    }
}
