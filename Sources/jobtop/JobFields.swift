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
    /// The group it runs in (checked against the file's `[groups]` when read).
    var group: String?
    /// Names of jobs of the same file that must succeed first.
    var after: [String]?
    /// When it may start: `delay` or `at` (one field, so a job's own wins over a default's).
    var start: JobSpec.StartTime?

    /// The keys a `[[job]]` table may have, in the order the docs list them.
    static let keys = [
        "name", "command", "priority", "retries", "backoff", "timeout", "key", "progress", "cwd", "env", "keep_background",
        "group", "after", "delay", "at",
    ]

    /// The keys `[defaults]` may have: any job field but those that name one job or other jobs.
    static let defaultKeys = keys.filter { !["name", "command", "key", "after"].contains($0) }

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
            keepBackground: keepBackground ?? fallback.keepBackground,
            group: group ?? fallback.group,
            after: after ?? fallback.after,
            start: start ?? fallback.start)
        if env != nil || fallback.env != nil {
            result.env = (fallback.env ?? [:]).merging(env ?? [:]) { _, mine in mine }
        }
        return result
    }

    /// The spec these fields describe; `command` must be set. Its dependencies are the job
    /// file's to set (`after` names jobs; a spec refers to them by index).
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
            keepBackground: keepBackground ?? false,
            group: group,
            notBefore: start)
    }
}
