import Foundation
import Scheduler

/// The remote worker protocol: its version and how engine values travel.
public enum RemoteProtocol {
    /// The protocol version this build speaks (`Hello.protocol_version`). Bump it on any change
    /// an older peer would misread.
    public static let version: UInt32 = 1
    /// The jobtop version, sent for logs.
    public static let softwareVersion = "0.1.0"
}

typealias WireWorkerMessage = Jobtop_Remote_V1_WorkerMessage
typealias WireCoordinatorMessage = Jobtop_Remote_V1_CoordinatorMessage
typealias WirePool = Jobtop_Remote_V1_WorkerPool

/// An attempt's identity on the wire: the job id as text and the attempt number.
struct AttemptKey: Hashable, Sendable, CustomStringConvertible {
    var jobID: String
    var attempt: UInt32

    init(jobID: String, attempt: UInt32) {
        self.jobID = jobID
        self.attempt = attempt
    }

    init(_ assignment: JobAssignment) {
        jobID = assignment.jobID.description
        attempt = UInt32(clamping: assignment.attempt)
    }

    var description: String { "\(jobID.prefix(8))#\(attempt)" }
}

extension Jobtop_Remote_V1_JobSpec {
    /// The spec as it travels; `nil` for a closure, which cannot.
    init?(_ spec: JobSpec) {
        self.init()
        switch spec.work {
        case .shell(let command): work = .shell(command)
        case .argv(let arguments): work = .argv(.with { $0.arguments = arguments })
        case .closure: return nil
        }
        environment = spec.environment
        workingDirectory = spec.workingDirectory ?? ""
        progressPattern = spec.progressPattern?.pattern ?? ""
        name = spec.name ?? ""
        keepBackground = spec.keepBackground
    }

    /// The spec to run on this machine: no retry, no timeout (the coordinator owns both).
    func jobSpec() throws(RemoteError) -> JobSpec {
        let body: JobWork
        switch work {
        case .shell(let command): body = .shell(command)
        case .argv(let argv) where !argv.arguments.isEmpty: body = .argv(argv.arguments)
        case .argv, nil: throw RemoteError(.refused, "the assignment has no command")
        }
        var pattern: ProgressPattern?
        if !progressPattern.isEmpty {
            do {
                pattern = try ProgressPattern(progressPattern)
            } catch {
                throw RemoteError(.refused, error.description)
            }
        }
        return JobSpec(
            name: name.isEmpty ? nil : name,
            work: body,
            environment: environment,
            workingDirectory: workingDirectory.isEmpty ? nil : workingDirectory,
            progressPattern: pattern,
            keepBackground: keepBackground)
    }
}

extension Jobtop_Remote_V1_Output.Line {
    /// A line as it travels: its text when it is UTF-8, else its exact bytes; and its ending.
    init(_ line: OutputLine) {
        self.init()
        stderr = line.stream == .stderr
        if let bytes = line.bytes {
            raw = Data(bytes)
        } else {
            text = line.text
        }
        ending = switch line.ending {
        case .newline: .newline
        case .carriageReturn: .carriageReturn
        case .carriageReturnNewline: .carriageReturnNewline
        case .none: .none
        }
    }

    /// The line as the engine reports it. A peer's line is cut again as a local job's output is,
    /// so a line end inside it cannot pass two lines off as one, and its text is derived from
    /// its bytes, so the two cannot disagree.
    var engineLines: [OutputLine] {
        let stream: OutputLine.Stream = stderr ? .stderr : .stdout
        let ending: OutputLine.Ending = switch self.ending {
        case .newline: .newline
        case .carriageReturn: .carriageReturn
        case .carriageReturnNewline: .carriageReturnNewline
        case .none: .none
        // A later peer's ending this build does not know: a line end is the safe reading.
        case .UNRECOGNIZED: .newline
        }
        if raw.isEmpty { return OutputLine.lines(of: text.utf8, stream: stream, ending: ending) }
        return OutputLine.lines(of: raw, stream: stream, ending: ending)
    }
}

extension Jobtop_Remote_V1_Finished {
    /// How the attempt ended, as the engine says it.
    var engineTermination: Termination {
        switch termination {
        case .exitStatus(let status): .exit(status)
        case .signal(let signal): .signal(signal)
        // The worker's words: they reach the coordinator's log and screen, so escaped.
        case .error(let message): .error(PeerText.escaped(message, limit: 1000))
        case nil: .error("the worker sent no termination")
        }
    }

    init(_ key: AttemptKey, _ termination: Termination) {
        self.init()
        jobID = key.jobID
        attempt = key.attempt
        switch termination {
        case .exit(let status): self.termination = .exitStatus(status)
        case .signal(let signal): self.termination = .signal(signal)
        case .error(let message): self.termination = .error(message)
        case .workerLost(let why): self.termination = .error("worker lost: \(why)")
        // (A worker's own scheduler withdraws nothing: it has no remote workers.)
        case .withdrawn: self.termination = .error(termination.description)
        }
    }
}

extension Duration {
    /// Whole microseconds, at least 0 (for the wire).
    var wireMicroseconds: UInt64 {
        let (seconds, attoseconds) = components
        return UInt64(clamping: max(0, seconds * 1_000_000 + attoseconds / 1_000_000_000_000))
    }

    /// Whole milliseconds, clamped to `UInt32` (for the wire).
    var wireMilliseconds: UInt32 {
        let (seconds, attoseconds) = components
        let ms = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        return UInt32(clamping: max(0, ms))
    }
}
