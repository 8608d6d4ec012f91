import Foundation

/// What a job runs and how the scheduler treats it.
public struct JobSpec: Sendable, Codable {
    /// A display name; `nil` shows the command instead.
    public var name: String?
    /// The work itself: a shell command, an argv, or a Swift closure.
    public var work: JobWork
    /// Variables added to (or replacing those of) the scheduler's environment.
    public var environment: [String: String]
    /// The directory the process starts in; `nil` is the scheduler's current directory.
    public var workingDirectory: String?
    /// Higher runs first; equal priorities run in submission order.
    public var priority: Int
    /// How often and how soon a failed attempt is tried again.
    public var retry: RetryPolicy
    /// The longest one attempt may run before it is stopped and counted as failed.
    public var timeout: Duration?
    /// Submitting a spec whose key matches a queued, waiting or running job returns that job.
    public var coalescingKey: String?
    /// How progress is read from output lines; `nil` uses the default trailing `NN%`.
    public var progressPattern: ProgressPattern?
    /// Whether processes the job leaves running in its process group when its main process ends
    /// may go on. By default (`false`) jobtop stops them (SIGTERM, the grace period, SIGKILL)
    /// before the job ends; either way a ``SchedulerEvent/Kind/leftoverProcesses(_:count:stopped:)``
    /// event says how many there were. A cancel or timeout stops them regardless.
    public var keepBackground: Bool
    /// The group it runs in (a group may cap how many of its jobs run at once, and be paused on
    /// its own); `nil` is ``JobSpec/defaultGroup``. A group no one set up is made on first use,
    /// with no limit.
    public var group: String?
    /// Jobs that must succeed before this one starts. If one of them fails for good, is
    /// cancelled or is skipped, this job ends ``JobState/skipped(_:)``.
    public var dependencies: [Dependency]
    /// The earliest it may start; `nil` is as soon as it can.
    public var notBefore: StartTime?

    /// A job that must succeed first.
    public enum Dependency: Sendable, Codable, Hashable {
        /// A job already submitted (it may have ended: a success counts, a failure skips).
        case job(JobID)
        /// The spec at this index of the same submission, which must come before this one (so
        /// a submission cannot hold a cycle).
        case earlier(Int)
    }

    /// When a job may start.
    public enum StartTime: Sendable, Codable, Equatable {
        /// This long after it is submitted.
        case delay(Duration)
        /// At this wall-clock time (a time already past means at once).
        case date(Date)
    }

    /// The group of jobs that name none.
    public static let defaultGroup = "default"

    /// The group it runs in.
    public var groupName: String { group ?? Self.defaultGroup }

    /// Creates a spec.
    public init(
        name: String? = nil,
        work: JobWork,
        environment: [String: String] = [:],
        workingDirectory: String? = nil,
        priority: Int = 0,
        retry: RetryPolicy = .none,
        timeout: Duration? = nil,
        coalescingKey: String? = nil,
        progressPattern: ProgressPattern? = nil,
        keepBackground: Bool = false,
        group: String? = nil,
        dependencies: [Dependency] = [],
        notBefore: StartTime? = nil
    ) {
        self.name = name
        self.work = work
        self.environment = environment
        self.workingDirectory = workingDirectory
        self.priority = priority
        self.retry = retry
        self.timeout = timeout
        self.coalescingKey = coalescingKey
        self.progressPattern = progressPattern
        self.keepBackground = keepBackground
        self.group = group
        self.dependencies = dependencies
        self.notBefore = notBefore
    }

    /// A spec that runs `command` with `/bin/sh -c`.
    public static func shell(_ command: String, name: String? = nil, priority: Int = 0) -> JobSpec {
        JobSpec(name: name, work: .shell(command), priority: priority)
    }

    /// The name to show: the given name, else the command.
    public var displayName: String { name ?? work.description }
}

/// The body of a job.
public enum JobWork: Sendable, CustomStringConvertible {
    /// A command line run by `/bin/sh -c` in a new process group.
    case shell(String)
    /// An executable (searched in `PATH` when it has no slash) and its arguments, no shell.
    case argv([String])
    /// Swift code, for programs that embed the scheduler. Cancel cancels its task.
    case closure(@Sendable (JobContext) async throws -> Void)

    public var description: String {
        switch self {
        case .shell(let command): command
        case .argv(let argv): argv.joined(separator: " ")
        case .closure: "<closure>"
        }
    }

    /// Whether the work is a process (and so can be killed as a process group).
    public var isProcess: Bool {
        if case .closure = self { return false }
        return true
    }
}

/// Retries with exponential backoff and jitter.
public struct RetryPolicy: Sendable, Equatable {
    /// Attempts in all, the first included; 1 means never retried.
    public var maxAttempts: Int
    /// The delay before the second attempt.
    public var initialBackoff: Duration
    /// Each further delay is the previous one times this.
    public var multiplier: Double
    /// No delay is longer than this.
    public var maxBackoff: Duration
    /// The fraction of each delay that is random: 0.2 means the delay is between 80% and 100%.
    public var jitter: Double

    /// Creates a policy.
    public init(
        maxAttempts: Int = 1,
        initialBackoff: Duration = .seconds(1),
        multiplier: Double = 2,
        maxBackoff: Duration = .seconds(60),
        jitter: Double = 0.2
    ) {
        self.maxAttempts = max(1, maxAttempts)
        self.initialBackoff = initialBackoff
        self.multiplier = multiplier
        self.maxBackoff = maxBackoff
        self.jitter = min(max(jitter, 0), 1)
    }

    /// One attempt, no retry.
    public static let none = RetryPolicy(maxAttempts: 1)

    /// `retries` further attempts after the first.
    public static func retries(_ retries: Int, backoff: Duration = .seconds(1)) -> RetryPolicy {
        // (`Int.max` retries trapped on the `+ 1`.)
        RetryPolicy(maxAttempts: retries < Int.max ? retries + 1 : Int.max, initialBackoff: backoff)
    }

    /// The delay after failed attempt number `attempt` (1-based), given a random `unit` in 0..<1:
    /// `initialBackoff` times `multiplier` per attempt after the first, capped at `maxBackoff`
    /// or at `initialBackoff` if that is longer, then up to `jitter` of it less.
    public func delay(afterAttempt attempt: Int, unit: Double) -> Duration {
        let exponent = Double(max(0, attempt - 1))
        let base = initialBackoff.seconds * pow(multiplier, exponent)
        // The cap never cuts the first delay asked for: `--backoff 10m` waited 60 s.
        let capped = min(base, max(maxBackoff.seconds, initialBackoff.seconds))
        let jittered = capped * (1 - jitter * unit)
        return .nanoseconds(Int64((jittered * 1e9).rounded()))
    }
}

extension Duration {
    /// The duration in seconds as a `Double`.
    public var seconds: Double {
        let (s, attoseconds) = components
        return Double(s) + Double(attoseconds) * 1e-18
    }
}

/// How progress is read from a job's output lines.
public struct ProgressPattern: Sendable, Equatable {
    /// The regular expression: one capture group is a percentage, two are done and total.
    public let pattern: String
    /// The number of capture groups (1 or 2).
    public let groupCount: Int

    /// Compiles `pattern` to check it.
    ///
    /// - Throws: ``ProgressPatternError`` when it does not compile or has neither one nor two groups.
    public init(_ pattern: String) throws(ProgressPatternError) {
        let regex: NSRegularExpression
        do {
            regex = try NSRegularExpression(pattern: pattern)
        } catch {
            throw ProgressPatternError(pattern: pattern, message: "not a valid regular expression")
        }
        guard regex.numberOfCaptureGroups == 1 || regex.numberOfCaptureGroups == 2 else {
            throw ProgressPatternError(
                pattern: pattern,
                message: "needs one capture group (percent) or two (done, total); it has \(regex.numberOfCaptureGroups)")
        }
        self.pattern = pattern
        self.groupCount = regex.numberOfCaptureGroups
    }
}

/// A progress pattern that cannot be used.
public struct ProgressPatternError: Error, Sendable, CustomStringConvertible {
    /// The pattern as given.
    public let pattern: String
    /// What is wrong with it.
    public let message: String
    public var description: String { "progress pattern '\(pattern)': \(message)" }
}

/// What a closure job can tell the scheduler while it runs.
public struct JobContext: Sendable {
    /// The job being run.
    public let jobID: JobID
    /// Its attempt number, from 1.
    public let attempt: Int
    let reporter: JobReporter

    /// Reports progress as a fraction from 0 to 1.
    public func reportProgress(_ fraction: Double) {
        reporter.progress(fraction)
    }

    /// Adds a line to the job's output, as if it had printed it.
    public func log(_ line: String) {
        reporter.line(line, stream: .stdout)
    }

    /// Waits while a lossless subscriber (a log) is behind the events. A closure that reports a
    /// lot of output calls it between lines, and is then slowed down as a process writing to a
    /// full pipe is; otherwise nothing holds back what it reports. Returns at once when the job
    /// is stopped (its task cancelled: a cancel, a timeout, a shutdown).
    public func waitUntilOutputFlows() async {
        await reporter.waitUntilFlowing()
    }
}

extension JobSpec {
    /// The priorities a job may have, from -1,000,000 to 1,000,000 (higher runs first).
    ///
    /// Priorities come from users (job files, the dashboard, scripts); a bound keeps every sum,
    /// difference and `+1` on them far from `Int`'s limits, so no arithmetic on them can trap.
    public static let priorityRange: ClosedRange<Int> = -1_000_000...1_000_000
}

/// A job read back from durable state after a restart: what ``SchedulerCore/restore(_:now:)``
/// and ``Scheduler/restore(_:)`` put back.
public struct RestoredJob: Sendable {
    /// Its identity, as before.
    public var id: JobID
    /// As submitted: a dependency names a job restored before it or earlier (``JobSpec/Dependency/job(_:)``),
    /// a start time is a date.
    public var spec: JobSpec
    /// Attempts already counted.
    public var attempts: Int
    /// Why the last counted attempt failed, if one did.
    public var lastFailure: FailureReason?
    /// How it ended, for a finished job (succeeded, failed, cancelled or skipped); `nil` for
    /// one still to run.
    public var ending: JobState?
    /// For a job that was waiting for a retry: when that retry is due. It waits again until
    /// then (at once if the date has passed); `nil`: it is queued.
    public var retryAt: Date?
    /// When it was first submitted (`nil`: now). A date before the restart is a negative
    /// ``SchedulerTime`` (before the new clock's zero).
    public var submittedAt: Date?
    /// For a finished job: when its last attempt started, if it ran (`nil`: it never started,
    /// and shows no run time).
    public var startedAt: Date?
    /// For a finished job: when it ended (`nil`: now). Finished jobs keep their order and their
    /// run times across the restart.
    public var finishedAt: Date?

    /// Creates one.
    public init(
        id: JobID, spec: JobSpec, attempts: Int = 0, lastFailure: FailureReason? = nil, ending: JobState? = nil, retryAt: Date? = nil,
        submittedAt: Date? = nil, startedAt: Date? = nil, finishedAt: Date? = nil
    ) {
        self.id = id
        self.spec = spec
        self.attempts = attempts
        self.lastFailure = lastFailure
        self.ending = ending
        self.retryAt = retryAt
        self.submittedAt = submittedAt
        self.startedAt = startedAt
        self.finishedAt = finishedAt
    }
}
