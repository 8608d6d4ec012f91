/// Where and how jobs are submitted: a partition and extra `sbatch` arguments.
public struct SlurmOptions: Sendable, Hashable {
    /// `--partition`; `nil` for the cluster's default.
    public var partition: String?
    /// More `sbatch` arguments (`--account=foo`, `--mem=2G`), passed as they are.
    public var extraArguments: [String]

    /// Creates options.
    public init(partition: String? = nil, extraArguments: [String] = []) {
        self.partition = partition
        self.extraArguments = extraArguments
    }

    /// The first of `arguments` that would undo what jobtop sets itself, with why (`nil`: none):
    /// `--output`/`--error` (jobtop reads each job's output from its own files: the job ran and
    /// logged nothing), `--array` (several tasks into one file, one of them reported), `--wrap`
    /// (the command is jobtop's script), `--wait` (sbatch would block until the job ended) and
    /// `--test-only` (nothing submitted).
    public static func reservedArgument(in arguments: [String]) -> (argument: String, why: String)? {
        let reserved: [(long: String, short: String?, why: String)] = [
            ("--output", "-o", "jobtop reads each job's output from a file of its own"),
            ("--error", "-e", "jobtop reads each job's output from a file of its own"),
            ("--array", "-a", "jobtop submits one Slurm job per attempt (an array ran several tasks into one output file, one reported)"),
            ("--wrap", nil, "the command sbatch runs is jobtop's script"),
            ("--wait", "-W", "sbatch would not return until the job ended"),
            ("--test-only", nil, "nothing would be submitted"),
        ]
        for argument in arguments {
            for option in reserved {
                let long = argument == option.long || argument.hasPrefix(option.long + "=")
                let short = option.short.map { argument == $0 || (argument.hasPrefix($0) && !argument.hasPrefix("--")) } ?? false
                if long || short { return (argument, "\(option.why)") }
            }
        }
        return nil
    }

    /// These options with `override`'s on top: its partition replaces this one, its arguments
    /// follow these (so a later `--mem` wins, as on sbatch's command line).
    public func merged(with override: SlurmOptions?) -> SlurmOptions {
        guard let override else { return self }
        return SlurmOptions(
            partition: override.partition ?? partition, extraArguments: extraArguments + override.extraArguments)
    }
}

/// How a ``SlurmWorker`` submits and watches jobs.
public struct SlurmConfiguration: Sendable {
    /// The options of every job.
    public var options: SlurmOptions
    /// Options of single jobs, by job name, on top of ``options``.
    public var overrides: [String: SlurmOptions]
    /// How many jobs jobtop keeps submitted to Slurm at once (the worker's slots).
    public var submitted: Int
    /// How often the one `squeue` call for all jobs runs.
    public var pollInterval: Duration
    /// Between `scancel --signal=TERM` and `scancel` when a job is stopped.
    public var gracePeriod: Duration
    /// Where the scripts and the output files go; it must be on a file system the cluster's
    /// nodes share with this machine.
    public var directory: String

    /// Creates a configuration.
    public init(
        options: SlurmOptions = SlurmOptions(), overrides: [String: SlurmOptions] = [:], submitted: Int,
        pollInterval: Duration = .seconds(1), gracePeriod: Duration = .seconds(5), directory: String
    ) {
        self.options = options
        self.overrides = overrides
        self.submitted = max(1, submitted)
        self.pollInterval = pollInterval
        self.gracePeriod = gracePeriod
        self.directory = directory
    }
}

/// Why the Slurm backend cannot start: Slurm is missing, unreachable, or refuses the options.
public struct SlurmError: Error, Sendable, CustomStringConvertible {
    /// What kind of problem.
    public enum Code: Sendable, Equatable {
        /// `sbatch` (or another command) is not installed.
        case commandMissing
        /// Slurm's controller did not answer.
        case unreachable
        /// The partition does not exist.
        case unknownPartition
        /// `sbatch --test-only` refused the options.
        case refused
        /// The directory for scripts and output cannot be made.
        case directory
    }

    /// What kind of problem.
    public var code: Code
    /// One line for the user.
    public var message: String

    public var description: String { message }
}
