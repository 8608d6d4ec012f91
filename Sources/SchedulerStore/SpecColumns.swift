import Foundation
import GRDB
import Scheduler

/// A job's spec as columns of the `job` table rather than one JSON document: a submission of
/// 100,000 jobs binds plain values (Foundation's JSON coders took about 40 µs a spec here, most
/// of a big submission's time). Durations are nanoseconds, a start time is Unix seconds,
/// dependencies are ids separated by commas, an environment and an argv are NUL-separated, as
/// blobs: SQLite's text ends at a NUL (an environment of three variables came back as its first).
enum SpecColumns {
    /// The columns, in the order ``values(of:)`` gives them.
    static let names = [
        "work_kind", "command", "name", "cwd", "env", "priority", "retry_max", "retry_initial", "retry_multiplier",
        "retry_max_backoff", "retry_jitter", "timeout", "coalescing_key", "progress_pattern", "keep_background",
        "grp", "dependencies", "not_before",
    ]

    /// Their definitions, for the table.
    static let definitions = """
        work_kind INTEGER NOT NULL,
        command TEXT NOT NULL,
        name TEXT,
        cwd TEXT,
        env TEXT,
        priority INTEGER NOT NULL,
        retry_max INTEGER NOT NULL,
        retry_initial INTEGER NOT NULL,
        retry_multiplier REAL NOT NULL,
        retry_max_backoff INTEGER NOT NULL,
        retry_jitter REAL NOT NULL,
        timeout INTEGER,
        coalescing_key TEXT,
        progress_pattern TEXT,
        keep_background INTEGER NOT NULL,
        grp TEXT,
        dependencies TEXT,
        not_before REAL
        """

    static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        let (high, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        return high.addingReportingOverflow(attoseconds / 1_000_000_000).overflow ? .max : high + attoseconds / 1_000_000_000
    }

    /// The values of a spec in durable form (dependencies as ids, a start time as a date).
    ///
    /// - Throws: ``StoreError`` for a closure job (it cannot be saved) or a dependency that is
    ///   not an id.
    static func values(of spec: JobSpec) throws(StoreError) -> [(any DatabaseValueConvertible)?] {
        let kind: Int
        let command: any DatabaseValueConvertible
        switch spec.work {
        case .shell(let text):
            kind = 0
            command = text
        case .argv(let arguments):
            kind = 1
            command = Data(arguments.joined(separator: "\u{0}").utf8)
        case .closure:
            throw StoreError("job \(spec.displayName.prefix(40)) is Swift code, which cannot be saved")
        }
        let environment = spec.environment.isEmpty
            ? nil : Data(spec.environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "\u{0}").utf8)
        var dependencies: [String] = []
        for dependency in spec.dependencies {
            guard case .job(let id) = dependency else {
                throw StoreError("job \(spec.displayName.prefix(40)) names a dependency that is not an id")
            }
            dependencies.append(id.description)
        }
        let notBefore: Double? = switch spec.notBefore {
        case .date(let date): date.timeIntervalSince1970
        case .delay(let delay): Date().timeIntervalSince1970 + Double(nanoseconds(delay)) / 1e9
        case nil: nil
        }
        return [
            kind, command, spec.name, spec.workingDirectory, environment, spec.priority, spec.retry.maxAttempts,
            nanoseconds(spec.retry.initialBackoff), spec.retry.multiplier, nanoseconds(spec.retry.maxBackoff),
            spec.retry.jitter, spec.timeout.map(nanoseconds), spec.coalescingKey, spec.progressPattern?.pattern,
            spec.keepBackground, spec.group, dependencies.isEmpty ? nil : dependencies.joined(separator: ","), notBefore,
        ]
    }

    /// The columns a reader selects (``names``, comma-separated), in the order
    /// ``spec(from:at:)`` reads them.
    static let selection = names.joined(separator: ", ")

    /// The spec a row holds, its columns ``selection`` from column `first` on. Read by index,
    /// not by name: finding a column by its name (a dictionary of names per row) was most of a
    /// restart's reading of 100,000 rows.
    static func spec(from row: Row, at first: Int) throws -> JobSpec {
        let command = text(row[first + 1]) ?? ""
        let kind: Int = row[first]
        let work: JobWork = kind == 1 ? .argv(command.split(separator: "\u{0}", omittingEmptySubsequences: false).map(String.init)) : .shell(command)
        var environment: [String: String] = [:]
        if let text = text(row[first + 4]) {
            for pair in text.split(separator: "\u{0}") {
                guard let equals = pair.firstIndex(of: "=") else { continue }
                environment[String(pair[..<equals])] = String(pair[pair.index(after: equals)...])
            }
        }
        let retry = RetryPolicy(
            maxAttempts: row[first + 6], initialBackoff: .nanoseconds(row[first + 7] as Int64),
            multiplier: row[first + 8], maxBackoff: .nanoseconds(row[first + 9] as Int64),
            jitter: row[first + 10])
        let timeout: Int64? = row[first + 11]
        let pattern: String? = row[first + 13]
        let dependencies: String? = row[first + 16]
        let notBefore: Double? = row[first + 17]
        return JobSpec(
            name: row[first + 2], work: work, environment: environment, workingDirectory: row[first + 3], priority: row[first + 5],
            retry: retry, timeout: timeout.map { .nanoseconds($0) }, coalescingKey: row[first + 12],
            progressPattern: try pattern.map { try ProgressPattern($0) }, keepBackground: row[first + 14],
            group: row[first + 15],
            dependencies: dependencies.map { text in
                text.split(separator: ",").compactMap { JobID(parsing: $0).map { .job($0) } }
            } ?? [],
            notBefore: notBefore.map { .date(Date(timeIntervalSince1970: $0)) })
    }

    /// A column's text, written as a blob (NUL-separated lists) or as text (a shell command; the
    /// lists of a database written before they were blobs).
    private static func text(_ value: DatabaseValue) -> String? {
        switch value.storage {
        case .string(let text): text
        case .blob(let data): String(decoding: data, as: UTF8.self)
        default: nil
        }
    }
}
