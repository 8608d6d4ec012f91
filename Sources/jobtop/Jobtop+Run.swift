import ArgumentParser
import Foundation
import Scheduler
import SchedulerSlurm
import TUI

extension Jobtop {
    /// `jobtop run`: loads jobs, then runs them under the dashboard or headless.
    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "run",
            abstract: "Run jobs from a job file, a list or -c, with the dashboard or headless.",
            discussion: """
                FILE is a job file (.toml: [defaults] and [[job]] tables) or a plain list (one shell \
                command per line; blank lines and # comments are skipped). "-" reads the list from \
                stdin; with no FILE and no -c, a piped stdin is read.

                Without --headless and with stdout on a terminal, the dashboard opens; otherwise \
                each event is logged as one line on stdout and human messages go to stderr. A \
                terminal the dashboard cannot drive (TERM unset, TERM=dumb) runs headless, with one \
                line on stderr saying so.

                A job file may put jobs in groups ([groups.NAME] with parallel = N, paused = true), \
                make a job wait for others (after = ["name", ...]) and delay it (delay = "10m", or \
                at = "2026-11-24T02:00:00Z" or a local "02:00": the next such time). See \
                examples/workflow.toml.

                Durations: 500ms, 10s, 1.5s, 5m, 1h, 2d, 1m30s.

                Exit status: 0 every job succeeded; 1 some job failed, was cancelled or was skipped \
                (a job it waits for did not succeed); 2 bad usage or bad input (nothing was \
                started); 128 + a signal when interrupted by it (130 SIGINT, 143 SIGTERM, 129 \
                SIGHUP); 141 the log could not be written (stdout closed, as by `| head`).
                """
        )

        @Argument(help: ArgumentHelp("A job file (.toml) or a plain list of commands; '-' reads the list from stdin.", valueName: "file"))
        var file: String?

        @Option(name: [.customShort("c"), .long], help: ArgumentHelp("Add one job (repeatable; mixes with FILE).", valueName: "cmd"))
        var command: [String] = []

        // `.unconditional`: "-j -1" must reach validate() as -1 (and be refused with a reason),
        // not be read as an option named "-1".
        @Option(
            name: [.customShort("j", allowingJoined: true), .long], parsing: .unconditional,
            help: ArgumentHelp("Local worker slots (default: number of cores).", valueName: "n"))
        var jobs: Int?

        @OptionGroup var jobDefaults: JobDefaultOptions

        @Option(
            parsing: .unconditional,
            help: ArgumentHelp("SIGTERM to SIGKILL grace on cancel or timeout (default 5s).", valueName: "duration"),
            transform: { try DurationParser.option($0, "--grace") })
        var grace: Duration?

        @Flag(help: "No screen: log events (automatic when stdout is not a terminal).")
        var headless = false

        @Option(help: "Headless log format: text or json (default text).")
        var logFormat: LogFormat = .text

        @Flag(help: "Headless: also log every output line of every job.")
        var logOutput = false

        @Option(help: ArgumentHelp("Also write each job's stdout and stderr to DIR/<name-or-id>.log.", valueName: "dir"))
        var outputDir: String?

        @Flag(help: "Stop dispatching after the first job that fails for good; cancel the rest (the jobs that wait for it are skipped).")
        var haltOnFailure = false

        @Option(
            name: .customLong("group-limit"),
            help: ArgumentHelp(
                "At most N of group NAME's jobs run at once (repeatable; overrides the job file's parallel; 'default' is the group of -c and list jobs).",
                valueName: "name=n"),
            transform: Run.groupLimit)
        var groupLimits: [GroupLimit] = []

        @OptionGroup(title: "Remote workers")
        var remote: RemoteOptions

        @OptionGroup(title: "Slurm")
        var slurm: SlurmRunOptions

        private static func groupLimit(_ text: String) throws -> GroupLimit {
            do {
                return try GroupLimit.parse(text)
            } catch {
                throw ValidationError(error.message)
            }
        }

        func validate() throws {
            if slurm.slurm, let jobs, jobs < 1 {
                throw ValidationError("-j/--jobs must be at least 1 with --slurm (how many jobs jobtop keeps submitted to Slurm), not \(jobs)")
            }
            // -j 0 makes sense only for a coordinator whose remote workers do all the work.
            if let jobs, jobs < (remote.listen == nil ? 1 : 0) {
                throw ValidationError(remote.listen == nil
                    ? "-j/--jobs must be at least 1, not \(jobs) (0 is allowed with --listen: remote workers only)"
                    : "-j/--jobs must be 0 or more, not \(jobs)")
            }
            if command.contains(where: { $0.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty }) {
                throw ValidationError("-c/--command must not be empty")
            }
        }

        /// The fields the command line sets for every job that does not set them itself.
        var jobOverrides: JobFields {
            jobDefaults.fields
        }

        /// The scheduler set up as the options say.
        var schedulerConfiguration: Scheduler.Configuration {
            var configuration = Scheduler.Configuration()
            if let jobs { configuration.localSlots = jobs }
            if let grace { configuration.gracePeriod = grace }
            return configuration
        }

        /// Whether to run without the dashboard.
        var isHeadless: Bool { headless || isatty(STDOUT_FILENO) == 0 }

        mutating func run() async throws {
            // Many slots need many descriptors (3 per running job): take what the hard limit
            // allows, and refuse a -j the limits cannot hold before anything starts.
            Scheduler.raiseOpenFileLimit()
            let plan = try JobSources.plan(
                file: file, commands: command, overrides: jobOverrides, readsPipedStandardInput: command.isEmpty,
                groupLimits: groupLimits)
            var configuration = schedulerConfiguration
            // On Slurm every job runs there: -j is how many are kept submitted, no local slots.
            let slurmConfiguration = try slurm.configuration(file: plan.slurm, submitted: jobs, grace: configuration.gracePeriod)
            if slurmConfiguration != nil { configuration.localSlots = 0 }
            let capacity = Scheduler.localSlotCapacity(extraFilesPerJob: outputDir == nil ? 0 : 1)
            // The default (one slot per core) is what the limits can hold; a -j given is not
            // lowered, it is refused.
            if jobs == nil, slurmConfiguration == nil, capacity.slots > 0 {
                configuration.localSlots = min(configuration.localSlots, capacity.slots)
            }
            if let refusal = capacity.refusal(of: configuration.localSlots, flag: "-j/--jobs", fewer: "a smaller -j") {
                throw JobInputError(.invalidValue, refusal)
            }
            Jobtop.startLifelineGuard("jobtop")
            var slurmWorker: SlurmWorker?
            if let slurmConfiguration {
                // Everything Slurm can refuse up front is refused here, before anything starts.
                do {
                    try await SlurmPreflight.check(slurmConfiguration)
                    slurmWorker = try SlurmWorker(configuration: slurmConfiguration)
                } catch {
                    throw JobInputError(.invalidValue, "--slurm: \(error)")
                }
            }
            var headless = isHeadless
            if !headless, let problem = await Dashboard.terminalProblem() {
                // A terminal the dashboard cannot drive: the run goes on headless, said once.
                StandardError.write("jobtop: no dashboard (\(problem)); running headless\n")
                headless = true
            }
            if headless && plan.isEmpty {
                throw JobInputError(.noJobs, "no jobs: give a job file, a list on stdin or -c COMMAND (see 'jobtop --help')")
            }
            if let outputDir { try OutputDirectory.prepare(outputDir) }
            let scheduler = Scheduler(configuration: configuration)
            if let slurmWorker { await scheduler.addWorker(slurmWorker) }
            let listener = try await remote.startListener(scheduler: scheduler, logs: headless)

            let session = RunSession(
                scheduler: scheduler,
                presenter: headless
                    ? .log(format: logFormat, logsOutput: logOutput)
                    : .screen(title: file.map { "jobtop: \($0)" } ?? "jobtop"),
                outputDirectory: outputDir, haltsOnFailure: haltOnFailure, listener: listener)
            let status = await session.run(plan)
            // Jobs still in Slurm when the run ends (it was killed, not drained) are cancelled
            // there, and the run's scripts and output files go.
            await slurmWorker?.finish()
            if status != ExitStatus.success { throw ExitCode(status) }
        }
    }
}

/// The headless log formats.
enum LogFormat: String, ExpressibleByArgument, CaseIterable, Sendable {
    /// One human-readable line per event: timestamp, event, job, then key=value fields.
    case text
    /// One JSON object per line.
    case json
}
