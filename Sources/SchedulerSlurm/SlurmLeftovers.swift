import Foundation

/// What a `jobtop serve` that died left in Slurm: the Slurm jobs of the attempts it had running.
///
/// A durable scheduler counts an attempt that was running when serve stopped as failed ("jobtop
/// stopped") and runs it again, as it does a local process group it kills. On Slurm the
/// equivalent is to cancel the Slurm job the store recorded for the attempt (its `placed` event);
/// otherwise the old Slurm job and the new attempt would both run. Adopting the old job instead
/// would need the engine to restore a job as running on a worker, which it does not do.
public enum SlurmLeftovers {
    /// What ``cancel(placements:commands:)`` did.
    public struct Outcome: Sendable, Equatable {
        /// The Slurm jobs found still pending or running, and cancelled.
        public var cancelled: [String]
        /// Why some could not be looked up or cancelled (one line), if so.
        public var problem: String?

        /// Creates one.
        public init(cancelled: [String], problem: String? = nil) {
            self.cancelled = cancelled
            self.problem = problem
        }
    }

    /// The Slurm job id in a placement a ``SlurmWorker`` published (`1234`, `1234 Priority`,
    /// `1234_5 Resources`), or `nil` when the placement is not a Slurm job's.
    public static func slurmID(inPlacement placement: String) -> String? {
        guard let first = placement.split(separator: " ").first else { return nil }
        let parts = first.split(separator: "_", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), parts.allSatisfy({ !$0.isEmpty && $0.allSatisfy(\.isASCIIDigit) }) else { return nil }
        return String(first)
    }

    /// Cancels, with one `scancel`, every Slurm job among `placements` that `squeue` still shows
    /// pending or running (one `squeue` call for all). Blocking: call it at start-up.
    ///
    /// - Parameters:
    ///   - placements: Placements as the store recorded them; those that are not a Slurm job's
    ///     are ignored.
    ///   - commands: Slurm's commands.
    /// - Returns: The jobs cancelled, and a problem if Slurm could not be asked or refused.
    public static func cancel(placements: [String], commands: any SlurmCommands = SystemSlurmCommands()) -> Outcome {
        let ids = Array(Set(placements.compactMap(slurmID(inPlacement:)))).sorted()
        guard !ids.isEmpty else { return Outcome(cancelled: []) }
        let queue = commands.run("squeue", ["-h", "-o", SlurmText.queueFormat, "-j", ids.joined(separator: ",")])
        var alive: [String]
        if queue.status == 0 {
            let wanted = Set(ids)
            alive = SlurmText.queue(queue.output).filter { wanted.contains($0.id) && !$0.state.isEnded }.map(\.id)
        } else if queue.error.contains("Invalid job id") {
            // Every one of them has left Slurm's queue.
            alive = []
        } else {
            // Slurm does not answer: cancel them all blindly (a job that ended is refused, harmlessly).
            alive = ids
        }
        alive = Array(Set(alive)).sorted()
        guard !alive.isEmpty else { return Outcome(cancelled: []) }
        let cancel = commands.run("scancel", alive)
        if cancel.status != 0 {
            return Outcome(cancelled: queue.status == 0 ? alive : [], problem: "scancel \(alive.joined(separator: " ")): \(cancel.errorLine)")
        }
        return Outcome(cancelled: alive)
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { asciiValue.map { $0 >= 0x30 && $0 <= 0x39 } ?? false }
}
