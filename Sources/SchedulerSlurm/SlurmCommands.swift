import Dispatch
import Foundation
import Scheduler

/// What one Slurm command printed and how it exited.
public struct SlurmCommandResult: Sendable, Equatable {
    /// The exit status; 127 when the command could not be run.
    public var status: Int32
    /// Its stdout.
    public var output: String
    /// Its stderr (or why it could not be run).
    public var error: String

    /// Creates a result.
    public init(status: Int32, output: String, error: String) {
        self.status = status
        self.output = output
        self.error = error
    }

    /// The first line of stderr, for a one-line message.
    public var errorLine: String {
        error.split(whereSeparator: \.isNewline).first.map(String.init) ?? "exit status \(status)"
    }
}

/// Runs Slurm's commands (`sbatch`, `squeue`, `scontrol`, `scancel`, `sinfo`). Blocking: the
/// ``SlurmWorker`` calls it only from its own thread, never from the cooperative pool.
public protocol SlurmCommands: Sendable {
    /// Runs `command` (looked up on `PATH`) with `arguments` and waits for it.
    func run(_ command: String, _ arguments: [String]) -> SlurmCommandResult
}

/// The real commands, found on `PATH` (or in `directory`).
public struct SystemSlurmCommands: SlurmCommands {
    private let directory: String?
    private let timeLimits: [String: Duration]

    /// How long a command may take before it is killed, by command: `scancel` retries on its own
    /// while Slurm answers "try again later" (a suspended job asked for SIGTERM: minutes).
    public static let defaultTimeLimits: [String: Duration] = ["scancel": .seconds(20)]

    /// Runs commands from `directory` when given (a wrapper that counts calls, a test's fakes),
    /// otherwise from `PATH`; a command named in `timeLimits` is killed once it has run that long
    /// (its result: status 124 and why).
    public init(directory: String? = nil, timeLimits: [String: Duration] = Self.defaultTimeLimits) {
        self.directory = directory
        self.timeLimits = timeLimits
    }

    /// Where `command` is, or `nil` when it is not installed.
    public func locate(_ command: String) -> String? {
        if let directory {
            let path = directory + "/" + command
            return FileManager.default.isExecutableFile(atPath: path) ? path : nil
        }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for entry in path.split(separator: ":") where !entry.isEmpty {
            let candidate = "\(entry)/\(command)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    public func run(_ command: String, _ arguments: [String]) -> SlurmCommandResult {
        guard let path = locate(command) else {
            return SlurmCommandResult(status: 127, output: "", error: "\(command): command not found")
        }
        // Foundation's Process is fine here: these commands leave no grandchildren behind (the
        // trap PLATFORM-NOTES describes), and this runs on the worker's own thread.
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        do {
            try process.run()
        } catch {
            return SlurmCommandResult(status: 127, output: "", error: "\(command): \(error.localizedDescription)")
        }
        // Killed (SIGKILL) if it outlives its time limit; the timer is cancelled once it has
        // been waited for, before its pid could be reused.
        let timedOut = Locked(false)
        let pid = process.processIdentifier
        let timer = timeLimits[command].map { limit in
            let item = DispatchWorkItem {
                timedOut.withLock { $0 = true }
                kill(pid, SIGKILL)
            }
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int(limit / .milliseconds(1))), execute: item)
            return item
        }
        // Both pipes are drained at once (stderr on a dispatch thread), so a command that fills
        // one while jobtop reads the other cannot block.
        let errorData = Locked<Data>(Data())
        let group = DispatchGroup()
        DispatchQueue.global().async(group: group) {
            let data = err.fileHandleForReading.readDataToEndOfFile()
            errorData.withLock { $0 = data }
        }
        let outputData = out.fileHandleForReading.readDataToEndOfFile()
        group.wait()
        process.waitUntilExit()
        timer?.cancel()
        if timedOut.withLock({ $0 }), let limit = timeLimits[command] {
            return SlurmCommandResult(
                status: 124, output: String(decoding: outputData, as: UTF8.self),
                error: "\(command) \(arguments.joined(separator: " ")): no answer within \(limit) (killed)")
        }
        let status = process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
        return SlurmCommandResult(
            status: status, output: String(decoding: outputData, as: UTF8.self),
            error: String(decoding: errorData.withLock { $0 }, as: UTF8.self))
    }
}
