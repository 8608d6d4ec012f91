import Foundation

/// The exit statuses jobtop documents.
enum ExitStatus {
    /// Every job succeeded.
    static let success: Int32 = 0
    /// Some job failed or was cancelled.
    static let someFailed: Int32 = 1
    /// Bad usage or bad input: nothing was started.
    static let usage: Int32 = 2
    /// A client command found no `jobtop serve` (or lost it, or was refused by it).
    static let noServe: Int32 = 3
    /// Every job succeeded, but stdout closed early (`jobtop ... | head -1`): the log was cut
    /// short. 128 + SIGPIPE, what a shell shows for a pipeline's writer that lost its reader.
    static let logLost: Int32 = 141

    /// The status for being ended by `signal`: 128 + its number (130 for SIGINT, 143 for SIGTERM).
    static func interrupted(by signal: Int32) -> Int32 { 128 + signal }
}

/// Human messages: standard error, unbuffered.
enum StandardError {
    static func write(_ text: String) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeMutableBytes { Glibc.write(2, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0 {
                if errno == EINTR { continue }
                return
            }
            offset += written
        }
    }
}
