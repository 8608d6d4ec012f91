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
                                  cancel the rest (skip those waiting for it)
              --group-limit NAME=N  at most N of group NAME's jobs at once
                                  (repeatable; overrides the file's parallel)

            Durations: 500ms, 10s, 1.5s, 5m, 1h, 2d, 1m30s.
            Exit status: 0 every job succeeded; 1 some job failed, was
            cancelled or was skipped (a job it waits for did not succeed);
            2 bad usage or bad input (nothing was started);
            128 + a signal when interrupted by it (130 SIGINT,
            143 SIGTERM, 129 SIGHUP); 141 stdout closed (`| head`).
            See 'jobtop run --help' for every option.

            A queue that outlives the terminal: 'jobtop serve', then attach,
            submit, status, cancel, signal, retry, prio, edit, pause,
            resume, limit, wait, log, follow, clean and shutdown talk to
            it ('jobtop help submit', ...).
            """,
        version: "jobtop \(version)",
        subcommands: [
            Run.self, Worker.self, Serve.self, Attach.self, Submit.self, Status.self, Cancel.self, Signal.self, Retry.self,
            Prio.self, Edit.self, Pause.self, Resume.self, Limit.self, Wait.self, Log.self, Follow.self, Clean.self, Shutdown.self,
        ],
        defaultSubcommand: Run.self
    )

    /// Parses the arguments, runs the command and exits.
    ///
    /// Unlike ArgumentParser's own `main`, bad usage exits with status 2 (not 64), like bad
    /// input, so scripts see one status for "nothing was started".
    static func main() async {
        openClosedStandardDescriptors()
        // Swift reads each argument as UTF-8 with any other byte made U+FFFD: a `-c` command
        // with a Latin-1 file name would run another command, and a file name would name another
        // file. Refused instead, as a list line that is not UTF-8 is.
        if let bad = firstArgumentNotUTF8() {
            StandardError.write("jobtop: argument \(bad) is not UTF-8 text (jobtop reads commands, names and paths as UTF-8; put such a command in a script file)\n")
            Foundation.exit(ExitStatus.usage)
        }
        await main(Array(CommandLine.arguments.dropFirst()))
    }

    /// Opens `/dev/null` on standard input, output or error if the caller closed them (`>&-`),
    /// as gnulib's `stdopen` does: else the next descriptor jobtop opens takes the number, and
    /// the log went into its own epoll descriptor, stderr into an eventfd.
    static func openClosedStandardDescriptors() {
        for descriptor in Int32(0)...2 where fcntl(descriptor, F_GETFD) == -1 && errno == EBADF {
            // The lowest free number: this one, the lower ones being open by now.
            let opened = open("/dev/null", descriptor == 0 ? O_RDONLY : O_WRONLY)
            if opened >= 0, opened != descriptor {
                _ = dup2(opened, descriptor)
                close(opened)
            }
        }
    }

    /// The position (from 1) of the first argument whose bytes are not UTF-8, if any.
    static func firstArgumentNotUTF8() -> Int? {
        for index in 1..<Int(CommandLine.argc) {
            guard let pointer = CommandLine.unsafeArgv[index] else { continue }
            let bytes = UnsafeRawBufferPointer(start: pointer, count: strlen(pointer))
            if String(validating: bytes, as: UTF8.self) == nil { return index }
        }
        return nil
    }

    /// Runs `jobtop` with `arguments` (without the program name) and exits.
    static func main(_ arguments: [String]) async -> Never {
        // Before anything can start a job: a crash in any mode (dashboard, headless, worker)
        // still kills the job process groups and gives the terminal back.
        JobProcessGuards.installCrashGuard()
        // A client command's connection is set up while its arguments are parsed.
        EarlyConnection.begin(for: arguments)
        do {
            if try await runNamedSubcommand(arguments) { exit(withError: nil) }
            // `jobtop -c ... -c ...` is a run too: thousands of -c parse apart as well (not a
            // named subcommand that did not parse: its arguments are not a run's).
            if subcommand(named: arguments.first ?? "") == nil, !arguments.contains(where: asksForHelpOrVersion),
               try await parseAndRun(Run.self, arguments, onlyWithManyValues: true)
            {
                exit(withError: nil)
            }
            var command = try parseAsRoot(arguments)
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
            exit(withError: nil)
        } catch let failure as ServeFailure {
            StandardError.write("jobtop: \(printable(failure.error.message))\n")
            Foundation.exit(ExitStatus.noServe)
        } catch let error as JobInputError {
            // One line, whatever it quotes of the user's (an id with an escape sequence or a
            // newline in it, echoed raw, acted on the terminal).
            StandardError.write("jobtop: \(printable(error.message))\n")
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
    /// Each subcommand by its name, and whether it talks to a serve: the same commands as
    /// `configuration.subcommands` (a test keeps the two alike), found by a `switch` so that
    /// naming one touches no other command's type.
    static func subcommand(named name: String) -> (type: any AsyncParsableCommand.Type, isClient: Bool)? {
        switch name {
        case "run": (Run.self, false)
        case "worker": (Worker.self, false)
        case "serve": (Serve.self, false)
        case "attach": (Attach.self, true)
        case "submit": (Submit.self, true)
        case "status": (Status.self, true)
        case "cancel": (Cancel.self, true)
        case "signal": (Signal.self, true)
        case "retry": (Retry.self, true)
        case "prio": (Prio.self, true)
        case "edit": (Edit.self, true)
        case "pause": (Pause.self, true)
        case "resume": (Resume.self, true)
        case "limit": (Limit.self, true)
        case "wait": (Wait.self, true)
        case "log": (Log.self, true)
        case "follow": (Follow.self, true)
        case "clean": (Clean.self, true)
        case "shutdown": (Shutdown.self, true)
        default: nil
        }
    }

    /// Parses and runs the subcommand `arguments` name first, on its own, when they parse
    /// without an error; otherwise returns `false` and runs nothing, and the whole command tree
    /// parses them (which says what is wrong as it always did, with `jobtop`'s usage).
    ///
    /// Parsing from the root reflects every subcommand's options (ArgumentParser looks through
    /// the whole tree for completion-script and passthrough flags): each option's generic type is
    /// made and checked against every protocol conformance of this binary, about 12,000 of them.
    /// That was most of a `jobtop submit`'s CPU before it reached the serve. Help and version
    /// requests go the usual way, so that they show `jobtop`'s own usage.
    static func runNamedSubcommand(_ arguments: [String]) async throws -> Bool {
        guard let name = arguments.first, let subcommand = subcommand(named: name),
              !arguments.contains(where: asksForHelpOrVersion)
        else { return false }
        return try await parseAndRun(subcommand.type, Array(arguments.dropFirst()))
    }

    /// `onlyWithManyValues`: returns `false` at once unless the arguments have values to parse
    /// apart (``ManyValues``).
    private static func parseAndRun<Command: AsyncParsableCommand>(
        _: Command.Type, _ arguments: [String], onlyWithManyValues: Bool = false
    ) async throws -> Bool {
        let (parsed, taken) = ManyValues.split(arguments, for: Command.self)
        if onlyWithManyValues && taken.isEmpty { return false }
        guard var command = (try? Command.parseAsRoot(parsed)) as? Command else { return false }
        if !taken.isEmpty {
            guard let whole = ManyValues.add(taken, to: command) else { return false }
            command = whole
            try command.validate()
        }
        try await command.run()
        return true
    }

    /// The arguments ArgumentParser answers itself (help, version, completion scripts).
    private static func asksForHelpOrVersion(_ argument: String) -> Bool {
        ["-h", "--help", "-help", "--version", "help"].contains(argument) || argument.hasPrefix("--generate-completion-script")
            || argument.hasPrefix("--experimental-")
    }

    /// Starts the lifeline guard (``JobProcessGuards/startLifelineGuard()``) of a command that runs
    /// jobs: a process killed with SIGKILL runs no code, so the guard stops its jobs instead
    /// (one idle process, which nothing wakes until this one is gone). Warns when it cannot.
    static func startLifelineGuard(_ program: String) {
        if !JobProcessGuards.startLifelineGuard() {
            StandardError.write("\(program): warning: cannot start the guard that stops jobs if \(program) is killed\n")
        }
    }
}

/// A command whose array arguments may be given thousands of values: the ids of `cancel`,
/// `signal`, `retry` and `wait`, the `-c` of `run` and `submit`, `submit`'s `--after`.
protocol TakesManyValues {
    /// The ids it names (positional), if it names any.
    static var idList: WritableKeyPath<Self, [String]>? { get }
    /// Each repeatable option's names (`-c`, `--command`) and where its values go.
    static var repeatedOptions: [(names: [String], values: WritableKeyPath<Self, [String]>)] { get }
}

extension TakesManyValues {
    static var idList: WritableKeyPath<Self, [String]>? { nil }
    static var repeatedOptions: [(names: [String], values: WritableKeyPath<Self, [String]>)] { [] }
}

extension Jobtop.Cancel: TakesManyValues { static var idList: WritableKeyPath<Self, [String]>? { \.ids } }
extension Jobtop.Signal: TakesManyValues { static var idList: WritableKeyPath<Self, [String]>? { \.ids } }
extension Jobtop.Retry: TakesManyValues { static var idList: WritableKeyPath<Self, [String]>? { \.ids } }
extension Jobtop.Wait: TakesManyValues { static var idList: WritableKeyPath<Self, [String]>? { \.ids } }
extension Jobtop.Run: TakesManyValues {
    static var repeatedOptions: [(names: [String], values: WritableKeyPath<Self, [String]>)] { [(["-c", "--command"], \.command)] }
}
extension Jobtop.Submit: TakesManyValues {
    static var repeatedOptions: [(names: [String], values: WritableKeyPath<Self, [String]>)] {
        [(["-c", "--command"], \.command), (["--after"], \.after)]
    }
}

/// Array arguments with many values, parsed apart from ArgumentParser.
///
/// ArgumentParser (1.8.2) takes time that grows with the square of an array argument's length
/// (each value it adds unions the places of all before it): `jobtop cancel $(...)` of 10,000
/// ids spent 4 s in the client before it sent anything, of 100,000 eight minutes, and 2,000
/// `--after` took 9 s. So:
/// - of a list of ids, the longest run of plain words (none starts with `-`) is taken apart but
///   its first three (an option's value, `signal`'s signal, one id: what ArgumentParser must see
///   to parse the rest as before);
/// - of repeated options, every `-c VALUE`, `--command VALUE` and `--command=VALUE` but each
///   option's first, once there are more than ``parsedAsUsual`` (their order kept; a value
///   written onto its short option, `-cVALUE`, stays with ArgumentParser and comes first);
/// and the values taken are added to the command once it has parsed, and it is validated again
/// with them.
enum ManyValues {
    /// How many values are parsed as usual.
    static let parsedAsUsual = 64

    /// What is taken apart: the ids, and each repeated option's values (by its place in
    /// ``TakesManyValues/repeatedOptions``).
    struct Taken {
        var ids: [String] = []
        var options: [Int: [String]] = [:]
        var isEmpty: Bool { ids.isEmpty && options.isEmpty }
    }

    /// `arguments` without the values taken apart, and those.
    static func split(_ arguments: [String], for command: Any.Type) -> (arguments: [String], taken: Taken) {
        guard let command = command as? any TakesManyValues.Type else { return (arguments, Taken()) }
        return split(arguments, idList: command.hasIDList, options: command.optionNames)
    }

    static func split(_ arguments: [String], idList: Bool, options: [[String]]) -> (arguments: [String], taken: Taken) {
        var arguments = arguments
        var taken = Taken()
        if idList {
            let (rest, ids) = longestRun(arguments)
            (arguments, taken.ids) = (rest, ids)
        }
        guard !options.isEmpty else { return (arguments, taken) }
        // The options' occurrences (before a `--`): where, which, and the value.
        var found: [(at: Int, width: Int, option: Int, value: String)] = []
        var index = 0
        while index < arguments.count, arguments[index] != "--" {
            let argument = arguments[index]
            if let option = options.firstIndex(where: { $0.contains(argument) }), index + 1 < arguments.count {
                found.append((index, 2, option, arguments[index + 1]))
                index += 2
                continue
            }
            if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "="),
               let option = options.firstIndex(where: { $0.contains(String(argument[..<equals])) })
            {
                found.append((index, 1, option, String(argument[argument.index(after: equals)...])))
            }
            index += 1
        }
        guard found.count > parsedAsUsual else { return (arguments, taken) }
        // Each option's first stays, so that the command parses as one that has it (`submit`
        // with nothing to submit is refused as it parses); the rest is checked once added.
        var seen: Set<Int> = []
        let apart = found.filter { !seen.insert($0.option).inserted }
        for occurrence in apart { taken.options[occurrence.option, default: []].append(occurrence.value) }
        for occurrence in apart.reversed() { arguments.removeSubrange(occurrence.at..<occurrence.at + occurrence.width) }
        return (arguments, taken)
    }

    /// `arguments` without the tail of their longest run of plain words (past its first three),
    /// and that tail, when the run is longer than ``parsedAsUsual``.
    static func longestRun(_ arguments: [String]) -> (arguments: [String], taken: [String]) {
        var best = 0..<0
        var start = 0
        for index in 0...arguments.count {
            let isWord = index < arguments.count && !arguments[index].hasPrefix("-")
            if isWord { continue }
            if index - start > best.count { best = start..<index }
            start = index + 1
        }
        guard best.count > parsedAsUsual else { return (arguments, []) }
        let kept = best.lowerBound + 3
        return (Array(arguments[..<kept] + arguments[best.upperBound...]), Array(arguments[kept..<best.upperBound]))
    }

    /// `command` with the values taken apart added after those it parsed.
    static func add<Command>(_ taken: Taken, to command: Command) -> Command? {
        guard let many = command as? any TakesManyValues else { return nil }
        return many.adding(taken) as? Command
    }
}

extension TakesManyValues {
    static var hasIDList: Bool { idList != nil }
    static var optionNames: [[String]] { repeatedOptions.map(\.names) }

    func adding(_ taken: ManyValues.Taken) -> Self {
        var command = self
        if let ids = Self.idList { command[keyPath: ids] += taken.ids }
        for (option, values) in taken.options { command[keyPath: Self.repeatedOptions[option].values] += values }
        return command
    }
}
