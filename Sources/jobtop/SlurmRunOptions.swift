import ArgumentParser
import Foundation
import Scheduler
import SchedulerSlurm

/// `jobtop run`'s and `jobtop serve`'s Slurm flags: run every job as a Slurm batch job.
struct SlurmRunOptions: ParsableArguments {
    @Flag(help: "Run the jobs on Slurm (sbatch); -j is then how many jobtop keeps submitted at once (default 10). For run, a job file's [slurm] table turns it on too.")
    var slurm = false

    @Option(help: ArgumentHelp("Slurm partition (default: the cluster's default; overrides [slurm] partition).", valueName: "name"))
    var partition: String?

    @Option(
        name: .customLong("slurm-arg"), parsing: .unconditionalSingleValue,
        help: ArgumentHelp("One more sbatch argument for every job, e.g. --slurm-arg=--account=foo (repeatable).", valueName: "arg"))
    var slurmArguments: [String] = []

    @Option(
        name: .customLong("slurm-poll"), parsing: .unconditional,
        help: ArgumentHelp("How often jobtop asks Slurm about its jobs: one squeue call for all of them (default 1s).", valueName: "duration"),
        transform: { text in
            guard let duration = try? DurationParser.parse(text), duration >= .milliseconds(100) else {
                throw ValidationError("--slurm-poll must be a duration of at least 100ms, like 1s or 5s, not '\(text)'")
            }
            return duration
        })
    var poll: Duration?

    @Option(
        name: .customLong("slurm-dir"),
        help: ArgumentHelp(
            "Where job scripts and output files go; the cluster's nodes must see it (default: run: .jobtop-slurm in the current directory; serve: slurm/ in the state directory).",
            valueName: "dir"))
    var directory: String?

    func validate() throws {
        if let partition, partition.isEmpty { throw ValidationError("--partition must not be empty") }
    }

    /// The Slurm backend's configuration when the run uses Slurm (the flag or the job file's
    /// `slurm` tables), `nil` otherwise. Flags win over the file's `[slurm]`; its per-job tables
    /// stay on top.
    ///
    /// - Throws: ``JobInputError`` when Slurm flags are given for a run that does not use Slurm
    ///   (checked once the job file is read, since its `[slurm]` table turns Slurm on too).
    /// - Parameter defaultBase: Where a run's directory goes when `--slurm-dir` is not given
    ///   (default: `.jobtop-slurm` in the current directory).
    func configuration(
        file: SlurmFileSettings?, submitted: Int?, grace: Duration, defaultBase: String? = nil
    ) throws(JobInputError) -> SlurmConfiguration? {
        // A `[slurm]` table turns Slurm on; a job's own `slurm` table alone does not: it says how
        // that job runs on Slurm, when the run is there (one file for both; it sent a local
        // run to Slurm, or refused it for a partition only Slurm knows).
        guard slurm || file?.options != nil else {
            if partition != nil || !slurmArguments.isEmpty || poll != nil || directory != nil {
                throw JobInputError(
                    .invalidValue, "--partition, --slurm-arg, --slurm-poll and --slurm-dir need --slurm (or a [slurm] table in the job file)")
            }
            return nil
        }
        var options = file?.options ?? SlurmOptions()
        if let partition { options.partition = partition }
        options.extraArguments += slurmArguments
        // An argument that undoes what jobtop sets itself is refused before anything runs (an
        // --output of its own ran every job and logged nothing of it).
        for (place, arguments) in [("--slurm-arg", slurmArguments), ("the job file's [slurm] args", file?.options?.extraArguments ?? [])]
            + (file?.overrides ?? [:]).sorted(by: { $0.key < $1.key }).map({ ("job '\($0.key)''s slurm args", $0.value.extraArguments) }) {
            if let (argument, why) = SlurmOptions.reservedArgument(in: arguments) {
                throw JobInputError(.invalidValue, "\(place) \(argument): jobtop sets that itself (\(why)); leave it out")
            }
        }
        var base = directory ?? defaultBase ?? FileManager.default.currentDirectoryPath + "/.jobtop-slurm"
        // Absolute: sbatch's --output and --error are taken from a job's --chdir (its `cwd`), so a
        // relative directory sent a job with a cwd to write where nothing was (Slurm failed it
        // with "signal 53").
        if !base.hasPrefix("/") { base = FileManager.default.currentDirectoryPath + "/" + base }
        // One directory per run: two runs in one place never share files.
        let run = "\(base)/run-\(Int(Date().timeIntervalSince1970))-\(getpid())"
        return SlurmConfiguration(
            options: options, overrides: file?.overrides ?? [:], submitted: submitted ?? 10,
            pollInterval: poll ?? .seconds(1), gracePeriod: grace, directory: run)
    }
}
