import Scheduler

/// A Slurm job's state, as `squeue %T` and `scontrol show job`'s `JobState=` spell it.
public enum SlurmJobState: Sendable, Equatable {
    /// Waiting to be placed.
    case pending
    /// Placed and running (or starting, suspended, being requeued: not over).
    case active(String)
    /// Ended: the base state (`COMPLETED`, `FAILED`, `CANCELLED`, `TIMEOUT`, ...).
    case ended(String)

    /// Reads a state word (`PENDING`, `RUNNING`, `CANCELLED+`, `CANCELLED by 0`).
    public init(_ text: Substring) {
        // `CANCELLED by 0` (sacct) and `CANCELLED+` name the same state.
        let word = text.split(separator: " ").first.map { String($0) } ?? ""
        let base = word.hasSuffix("+") ? String(word.dropLast()) : word
        switch base {
        case "PENDING", "PD": self = .pending
        case "COMPLETED", "CD", "FAILED", "F", "CANCELLED", "CA", "TIMEOUT", "TO", "NODE_FAIL", "NF",
             "OUT_OF_MEMORY", "OOM", "PREEMPTED", "PR", "BOOT_FAIL", "BF", "DEADLINE", "DL", "REVOKED", "RV",
             "SPECIAL_EXIT", "SE":
            self = .ended(Self.longName(base))
        default:
            // RUNNING, COMPLETING, CONFIGURING, SUSPENDED, REQUEUED, RESIZING, STOPPED, SIGNALING...
            self = .active(base)
        }
    }

    private static func longName(_ short: String) -> String {
        switch short {
        case "CD": "COMPLETED"
        case "F": "FAILED"
        case "CA": "CANCELLED"
        case "TO": "TIMEOUT"
        case "NF": "NODE_FAIL"
        case "OOM": "OUT_OF_MEMORY"
        case "PR": "PREEMPTED"
        case "BF": "BOOT_FAIL"
        case "DL": "DEADLINE"
        case "RV": "REVOKED"
        case "SE": "SPECIAL_EXIT"
        default: short
        }
    }

    /// Whether the job has left Slurm's queue for good.
    public var isEnded: Bool {
        if case .ended = self { return true }
        return false
    }
}

/// One line of `squeue -h -o '%i|%T|%r'`.
public struct SlurmQueueEntry: Sendable, Equatable {
    /// The Slurm job id (`1234`, or `1234_5` for an array task).
    public var id: String
    /// Its state.
    public var state: SlurmJobState
    /// Why it waits (`Priority`, `Resources`, `BeginTime`), `None` while it runs.
    public var reason: String
}

/// How an ended Slurm job ended, from `scontrol -o show job`.
public struct SlurmJobRecord: Sendable, Equatable {
    /// The Slurm job id.
    public var id: String
    /// Its state.
    public var state: SlurmJobState
    /// Why it is in that state (`NonZeroExitCode`, `TimeLimit`, `None`).
    public var reason: String
    /// The batch script's exit status (`ExitCode=3:0` → 3).
    public var exitCode: Int32
    /// The signal that ended it (`ExitCode=0:9` → 9), 0 for none.
    public var signal: Int32
}

/// Reading the text Slurm's commands print: the stable formats (`sbatch --parsable`, `squeue -h -o`,
/// `scontrol -o show job`, `sinfo -h -o`), not the JSON whose schema changes between releases.
public enum SlurmText {
    /// The `squeue` format the worker asks for: job id, state, reason.
    public static let queueFormat = "%i|%T|%r"

    /// The job id `sbatch --parsable` printed (`1234` or `1234;cluster`), or `nil`.
    public static func submittedID(_ output: String) -> String? {
        let line = output.split(whereSeparator: \.isNewline).last.map(String.init) ?? ""
        let id = line.split(separator: ";", maxSplits: 1).first.map(String.init) ?? ""
        guard !id.isEmpty, id.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == "_") }) else { return nil }
        return id
    }

    /// The entries of `squeue -h -o '%i|%T|%r'` output; lines that do not parse are skipped.
    public static func queue(_ output: String) -> [SlurmQueueEntry] {
        output.split(whereSeparator: \.isNewline).compactMap { line in
            let fields = line.split(separator: "|", maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3 else { return nil }
            let id = fields[0].trimmingSpaces
            guard !id.isEmpty else { return nil }
            return SlurmQueueEntry(id: id, state: SlurmJobState(Substring(fields[1].trimmingSpaces)), reason: fields[2].trimmingSpaces)
        }
    }

    /// The record of one job in `scontrol -o show job ID` output (one line per job), or `nil`.
    ///
    /// Fields are found by their ` Key=` so that a job name with spaces (`JobName=my job`) does
    /// not shift them.
    public static func jobRecord(_ output: String, id: String) -> SlurmJobRecord? {
        for line in output.split(whereSeparator: \.isNewline) {
            let text = " " + line
            guard value(of: "JobId", in: text) == id, let state = value(of: "JobState", in: text) else { continue }
            let exit = value(of: "ExitCode", in: text) ?? "0:0"
            let parts = exit.split(separator: ":")
            let code = parts.first.flatMap { Int32($0) } ?? 0
            let signal = parts.count > 1 ? Int32(parts[1]) ?? 0 : 0
            return SlurmJobRecord(
                id: id, state: SlurmJobState(Substring(state)), reason: value(of: "Reason", in: text) ?? "None",
                exitCode: code, signal: signal)
        }
        return nil
    }

    /// The partitions `sinfo -h -o '%R'` printed.
    public static func partitions(_ output: String) -> Set<String> {
        Set(output.split(whereSeparator: \.isNewline).map { $0.trimmingSpaces }.filter { !$0.isEmpty })
    }

    /// Whether a Slurm command's stderr says it could not reach the controller (down,
    /// restarting, failing over, overloaded): a passing state, not a verdict on the job.
    public static func isUnreachable(_ error: String) -> Bool {
        ["Unable to contact slurm controller", "Socket timed out", "Connection refused", "Connection timed out",
         "Transport endpoint is not connected", "Slurm backup controller in standby mode", "Zero Bytes were transmitted or received"]
            .contains { error.contains($0) }
    }

    /// How an attempt ended, from Slurm's record of it.
    ///
    /// - Parameters:
    ///   - record: What `scontrol` said.
    ///   - wasStopped: jobtop asked Slurm to stop it (a cancel or jobtop's timeout): a `CANCELLED`
    ///     is then the stop's doing (the engine settles it as cancelled or timed out).
    public static func termination(_ record: SlurmJobRecord, wasStopped: Bool) -> Termination {
        guard case .ended(let state) = record.state else {
            return .error("Slurm job \(record.id) has not ended (\(record.state))")
        }
        switch state {
        case "COMPLETED":
            return .exit(record.exitCode)
        case "FAILED":
            // A launch that failed (its output file could not be opened, ...) reads as signal 53
            // (`ExitCode=0:53`), which no job sent. A job killed by a signal once it ran (`kill
            // -9 $$`) has the same reason with its signal: that one ran.
            if record.exitCode == 0 && record.signal != 0 && record.signal != 53 { return .signal(record.signal) }
            if record.reason.hasPrefix("JobLaunchFailure") || record.reason.hasPrefix("launch_failed") {
                return .error("Slurm job \(record.id) failed to start (\(record.reason); slurmd's log on the node says why)")
            }
            if record.exitCode == 0 && record.signal != 0 { return .signal(record.signal) }
            if record.exitCode == 0 {
                // Failed before the script ran (a bad --chdir, an unwritable output file).
                return .error("Slurm job \(record.id) failed to start (\(record.reason))")
            }
            return .exit(record.exitCode)
        case "CANCELLED":
            if wasStopped { return .signal(record.signal == 0 ? 15 : record.signal) }
            return .error("Slurm job \(record.id) was cancelled outside jobtop (scancel)")
        case "TIMEOUT":
            return .error("Slurm time limit reached (Slurm job \(record.id), TIMEOUT)")
        case "OUT_OF_MEMORY":
            return .error("out of memory (Slurm job \(record.id), OUT_OF_MEMORY)")
        case "NODE_FAIL":
            return .workerLost(.removed("Slurm node failure (Slurm job \(record.id), NODE_FAIL)"))
        case "PREEMPTED":
            return .workerLost(.removed("preempted by Slurm (Slurm job \(record.id), PREEMPTED)"))
        default:
            return .error("Slurm ended job \(record.id) as \(state) (\(record.reason))")
        }
    }

    /// `--time` for a jobtop timeout: whole minutes, rounded up, plus one, so that jobtop's own
    /// timeout (and its grace period) acts first and Slurm's limit is only a backstop.
    public static func timeLimit(for timeout: Duration, grace: Duration) -> String {
        let seconds = (timeout + grace).components.seconds
        let minutes = (seconds + 59) / 60 + 1
        return "\(minutes)"
    }

    private static func value(of key: String, in line: String) -> String? {
        guard let range = line.range(of: " \(key)=") else { return nil }
        let rest = line[range.upperBound...]
        let end = rest.firstIndex(of: " ") ?? rest.endIndex
        return String(rest[..<end])
    }
}

extension SlurmJobState: CustomStringConvertible {
    public var description: String {
        switch self {
        case .pending: "PENDING"
        case .active(let name), .ended(let name): name
        }
    }
}

extension Substring {
    fileprivate var trimmingSpaces: String {
        String(drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed())
    }
}
