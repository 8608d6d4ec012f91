import Foundation

/// The checks made before a run on Slurm starts anything: the commands are there, the controller
/// answers, the partitions exist, and `sbatch --test-only` accepts the options (an unknown
/// account, a bad `--mem`). Blocking (it runs Slurm's commands): call it before the scheduler
/// starts, from the command line's main task.
public enum SlurmPreflight {
    /// Checks everything a run with `configuration` needs, on a thread of its own (Slurm's
    /// commands block; the cooperative pool must not wait on them).
    ///
    /// - Throws: ``SlurmError`` naming the first problem.
    public static func check(_ configuration: SlurmConfiguration) async throws(SlurmError) {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<SlurmError?, Never>) in
            Thread {
                do throws(SlurmError) {
                    try checkNow(configuration)
                    continuation.resume(returning: nil)
                } catch {
                    continuation.resume(returning: error)
                }
            }.start()
        }
        if let result { throw result }
    }

    /// Checks everything a run with `configuration` needs, blocking the caller.
    ///
    /// - Throws: ``SlurmError`` naming the first problem.
    public static func checkNow(_ configuration: SlurmConfiguration, commands: SystemSlurmCommands = SystemSlurmCommands()) throws(SlurmError) {
        for command in ["sbatch", "squeue", "scontrol", "scancel", "sinfo"] where commands.locate(command) == nil {
            throw SlurmError(
                code: .commandMissing, message: "\(command) not found on PATH: Slurm's client commands are needed for --slurm (Debian: apt-get install slurm-client)")
        }
        let sinfo = commands.run("sinfo", ["-h", "-o", "%R"])
        guard sinfo.status == 0 else {
            throw SlurmError(code: .unreachable, message: "Slurm does not answer (sinfo: \(sinfo.errorLine))")
        }
        let partitions = SlurmText.partitions(sinfo.output)
        var checked: Set<SlurmOptions> = []
        let all = [(nil, configuration.options)] + configuration.overrides.sorted { $0.key < $1.key }.map {
            (Optional($0.key), configuration.options.merged(with: $0.value))
        }
        for (job, options) in all where checked.insert(options).inserted {
            let whose = job.map { " (job '\($0)')" } ?? ""
            if let partition = options.partition, !partitions.contains(partition) {
                let known = partitions.sorted().joined(separator: ", ")
                throw SlurmError(
                    code: .unknownPartition, message: "unknown Slurm partition '\(partition)'\(whose) (partitions: \(known.isEmpty ? "none" : known))")
            }
            var arguments = ["--test-only"]
            if let partition = options.partition { arguments += ["--partition", partition] }
            arguments += options.extraArguments + ["--wrap", "true"]
            let test = commands.run("sbatch", arguments)
            guard test.status == 0 else {
                let given = options.extraArguments.isEmpty ? "" : " with \(options.extraArguments.joined(separator: " "))"
                throw SlurmError(code: .refused, message: "Slurm refuses jobs\(given)\(whose): \(test.errorLine)")
            }
        }
    }
}
