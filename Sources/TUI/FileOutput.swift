#if canImport(Glibc)
import Glibc
#endif

/// Plain writes to file descriptors, for messages outside the screen.
enum FileOutput {
    /// Writes `text` to standard error.
    static func standardError(_ text: String) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
            if written <= 0 { return }
            bytes = bytes.dropFirst(written)
        }
    }
}
