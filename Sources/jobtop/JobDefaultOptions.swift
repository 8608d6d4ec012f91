import ArgumentParser
import Scheduler

/// `--retries`, `--backoff` and `--timeout`, for `run` and `submit`: what every job that sets
/// none of its own gets (a job file's `[defaults]` and jobs win).
struct JobDefaultOptions: ParsableArguments {
    @Option(parsing: .unconditional, help: ArgumentHelp("Max retries of each job (default 0).", valueName: "n"))
    var retries: Int?

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("First retry delay (default 1s; doubles, with jitter, up to 60s or the first delay if longer).", valueName: "duration"),
        transform: { try DurationParser.option($0, "--backoff") })
    var backoff: Duration?

    @Option(
        parsing: .unconditional, help: ArgumentHelp("Per-attempt timeout (default: none).", valueName: "duration"),
        transform: { try DurationParser.option($0, "--timeout") })
    var timeout: Duration?

    func validate() throws {
        if let retries, retries < 0 { throw ValidationError("--retries must be 0 or more, not \(retries)") }
        if let retries, retries > 1_000 { throw ValidationError("--retries must be at most 1000, not \(retries)") }
        if let timeout, timeout <= .zero { throw ValidationError("--timeout must be longer than 0") }
    }

    /// The fields these options set.
    var fields: JobFields { JobFields(retries: retries, backoff: backoff, timeout: timeout) }
}
