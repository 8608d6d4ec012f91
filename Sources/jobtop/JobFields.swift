import Foundation
import Scheduler

/// The fields of one job as a job file, the command line or both give them; `nil` is "not said".
struct JobFields: Sendable, Equatable {
    var name: String?
    var command: String?
    var priority: Int?
    var retries: Int?
    var backoff: Duration?
    var timeout: Duration?
    var key: String?
    var progress: ProgressPattern?
    /// An absolute path (a job file's `cwd` is resolved against the file's directory when read).
    var cwd: String?
    var env: [String: String]?
    var keepBackground: Bool?

    /// The keys a `[[job]]` table may have, in the order the docs list them.
    static let keys = ["name", "command", "priority", "retries", "backoff", "timeout", "key", "progress", "cwd", "env", "keep_background"]

    /// The keys `[defaults]` may have: any job field but those that name one job.
    static let defaultKeys = keys.filter { !["name", "command", "key"].contains($0) }

    /// These fields, with what they leave unsaid taken from `fallback`. `env` is merged (these
    /// variables win).
    func filled(from fallback: JobFields) -> JobFields {
        var result = JobFields(
            name: name ?? fallback.name,
            command: command ?? fallback.command,
            priority: priority ?? fallback.priority,
            retries: retries ?? fallback.retries,
            backoff: backoff ?? fallback.backoff,
            timeout: timeout ?? fallback.timeout,
            key: key ?? fallback.key,
            progress: progress ?? fallback.progress,
            cwd: cwd ?? fallback.cwd,
            env: nil,
            keepBackground: keepBackground ?? fallback.keepBackground)
        if env != nil || fallback.env != nil {
            result.env = (fallback.env ?? [:]).merging(env ?? [:]) { _, mine in mine }
        }
        return result
    }

    /// The spec these fields describe; `command` must be set.
    func spec() -> JobSpec {
        JobSpec(
            name: name,
            work: .shell(command ?? ""),
            environment: env ?? [:],
            workingDirectory: cwd,
            priority: priority ?? 0,
            retry: .retries(retries ?? 0, backoff: backoff ?? .seconds(1)),
            timeout: timeout,
            coalescingKey: key,
            progressPattern: progress,
            keepBackground: keepBackground ?? false)
    }
}
