import ArgumentParser
import Foundation
import Scheduler

/// The `jobtop` command: configuration only; the work is in its subcommands (`run` by default).
@main
struct Jobtop: AsyncParsableCommand {
    /// The version `--version` prints.
    static let version = "0.1.0"

    static let configuration = CommandConfiguration(
        commandName: "jobtop",
        abstract: "htop for jobs: run shell commands on a pool of workers, watch and steer them live.",
        discussion: """
            jobtop [run] [FILE | -] [options]    (run is the default subcommand)

              FILE                a job file (.toml) or a plain list: one shell
                                  command per line; blank and # lines skipped.
                                  "-" reads the list from stdin; with no FILE
                                  and no -c, a piped stdin is read.
              -c, --command CMD   add one job (repeatable; mixes with FILE)
              -j, --jobs N        local worker slots (default: cores; 0 with --listen)
              --retries N         default max retries per job (default 0)
              --backoff DURATION  first retry delay (default 1s; doubles, with
                                  jitter, capped at 60s)
              --timeout DURATION  default per-attempt timeout (default: none)
              --grace DURATION    SIGTERM->SIGKILL grace on cancel/timeout
                                  (default 5s)
              --headless          no screen: log events (automatic when stdout
                                  is not a terminal)
              --log-format F      headless log format: text or json (text)
              --log-output        also log every output line of every job
              --output-dir DIR    also write each job's stdout+stderr to
                                  DIR/<name-or-id>.log
              --halt-on-failure   after the first job that fails for good,
                                  cancel the rest
              --group-limit NAME=N  at most N of group NAME's jobs at once
                                  (repeatable; overrides the file's parallel)

            Durations: 500ms, 10s, 1.5s, 5m, 1h, 1m30s.
            Exit status: 0 every job succeeded; 1 some job failed, was
            cancelled or was skipped (a job it waits for did not succeed);
            2 bad usage or bad input (nothing was started);
            130 interrupted by SIGINT; 143 by SIGTERM.
            See 'jobtop run --help' for every option.

            A queue that outlives the terminal: 'jobtop serve', then attach,
            submit, status, cancel, signal, retry, prio, pause, resume, log,
            follow, clean and shutdown talk to it ('jobtop help submit', ...).
            """,
        version: "jobtop \(version)",
        subcommands: [
            Run.self, Worker.self, Serve.self, Attach.self, Submit.self, Status.self, Cancel.self, Signal.self, Retry.self,
            Prio.self, Pause.self, Resume.self, Log.self, Follow.self, Clean.self, Shutdown.self,
        ],
        defaultSubcommand: Run.self
    )

    /// Parses the arguments, runs the command and exits.
    ///
    /// Unlike ArgumentParser's own `main`, bad usage exits with status 2 (not 64), like bad
    /// input, so scripts see one status for "nothing was started".
    static func main() async {
        await main(Array(CommandLine.arguments.dropFirst()))
    }

    /// Runs `jobtop` with `arguments` (without the program name) and exits.
    static func main(_ arguments: [String]) async -> Never {
        // Before anything can start a job: a crash in any mode (dashboard, headless, worker)
        // still kills the job process groups and gives the terminal back.
        Scheduler.installCrashGuard()
        // A client command's connection is set up while its arguments are parsed.
        EarlyConnection.begin(for: arguments)
        do {
            var command = try parseAsRoot(arguments)
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
            exit(withError: nil)
        } catch let failure as ServeFailure {
            StandardError.write("jobtop: \(failure.error.message)\n")
            Foundation.exit(ExitStatus.noServe)
        } catch let error as JobInputError {
            StandardError.write("jobtop: \(error.message)\n")
            Foundation.exit(ExitStatus.usage)
        } catch {
            if exitCode(for: error) == .validationFailure {
                StandardError.write(fullMessage(for: error) + "\n")
                Foundation.exit(ExitStatus.usage)
            }
            exit(withError: error)
        }
    }
}

extension Jobtop {
    /// Starts the lifeline guard (``Scheduler/startLifelineGuard()``) of a command that runs
    /// jobs: a process killed with SIGKILL runs no code, so the guard stops its jobs instead
    /// (one idle process, which nothing wakes until this one is gone). Warns when it cannot.
    static func startLifelineGuard(_ program: String) {
        if !Scheduler.startLifelineGuard() {
            StandardError.write("\(program): warning: cannot start the guard that stops jobs if \(program) is killed\n")
        }
    }
}
