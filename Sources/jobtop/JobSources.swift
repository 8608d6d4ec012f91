import Foundation
import Scheduler

/// Where one run's jobs come from: a job file's jobs (read whole: they carry priorities), a
/// plain list streamed as it is read (a file or standard input), and `-c` commands, in that order.
struct RunPlan: Sendable {
    /// A plain list read as it comes.
    struct List: Sendable {
        /// The descriptor to read (closed by the reader).
        var fd: Int32
        /// The list in messages: `'list.txt'` or `standard input`.
        var source: String
        /// Whether a list without a single command is an error (a named list is; a stdin that
        /// happens to be piped is not when `-c` gives jobs).
        var mustHaveCommands: Bool
        /// How many commands it has, when it was read through before the run (a regular file).
        var count: Int?

        /// The refusal of this list when it has not a single command.
        var hasNoCommands: JobInputError {
            JobInputError(.noJobs, "\(source) has no commands (only blank lines and # comments)")
        }
    }

    /// The jobs of a `.toml` job file, each after the jobs it waits for.
    var fileJobs: [JobSpec] = []
    /// The groups to set up before any job is submitted: the job file's, with `--group-limit`
    /// applied.
    var groups: [JobGroup] = []
    /// The job file's groups whose table says `paused = false` (``JobFile/Contents/unpausedGroups``).
    var unpausedGroups: Set<String> = []
    /// A plain list, if one is read.
    var list: List?
    /// The `-c` commands.
    var commandJobs: [JobSpec] = []
    /// The job file's Slurm settings, if it has any.
    var slurm: SlurmFileSettings?
    /// The fields the command line gives every list job.
    var overrides = JobFields()

    /// Whether no job can come from anywhere.
    var isEmpty: Bool { fileJobs.isEmpty && list == nil && commandJobs.isEmpty }

    /// How many jobs the run has in all, when that is known before it starts (not for a list
    /// on a pipe): the dashboard's progress counts the ones not submitted yet.
    var knownTotal: Int? {
        guard let list else { return fileJobs.count + commandJobs.count }
        return list.count.map { fileJobs.count + $0 + commandJobs.count }
    }

    /// The spec of a command from the list.
    func spec(forListCommand command: String) -> JobSpec {
        var fields = overrides
        fields.command = command
        return fields.spec()
    }
}

/// Puts together the jobs of one run: a job file or list, standard input, and `-c` commands.
enum JobSources {
    /// Checks every source that can be checked before anything starts and opens the list.
    ///
    /// A list file is read through once here (without keeping it) so that a bad line refuses
    /// the run before any job starts; standard input and pipes can only be checked as they are
    /// read.
    ///
    /// - Parameters:
    ///   - file: A `.toml` job file, a plain list, `-` for a list on stdin, or `nil`.
    ///   - commands: `-c` commands, added after the file's jobs.
    ///   - overrides: Fields the command line sets for jobs that do not set them.
    ///   - readsPipedStandardInput: With no `file`, read a list from stdin when it is a pipe or a file.
    ///   - groupLimits: `--group-limit` values: they replace a group's `parallel`.
    /// - Returns: The plan.
    /// - Throws: ``JobInputError`` for anything that cannot be used.
    static func plan(
        file: String?, commands: [String], overrides: JobFields, readsPipedStandardInput: Bool,
        groupLimits: [GroupLimit] = []
    ) throws(JobInputError) -> RunPlan {
        var plan = RunPlan(overrides: overrides)
        // Checked before a list is opened: a bad limit must not leave a descriptor behind.
        if !(file?.lowercased().hasSuffix(".toml") ?? false) {
            plan.groups = try GroupLimit.apply(groupLimits, to: [])
        }
        switch file {
        case "-"?:
            plan.list = try checked(.init(fd: try duplicateStandardInput(), source: "standard input", mustHaveCommands: true))
        case let path? where path.lowercased().hasSuffix(".toml"):
            let contents = try JobFile.load(path: path, overrides: overrides)
            plan.fileJobs = contents.jobs
            plan.slurm = contents.slurm
            plan.groups = try GroupLimit.apply(groupLimits, to: contents.groups)
            plan.unpausedGroups = contents.unpausedGroups
        case let path?:
            plan.list = try checked(.init(fd: try CommandListReader.open(path: path), source: "'\(path)'", mustHaveCommands: true))
        case nil:
            if readsPipedStandardInput && standardInputIsPiped() {
                plan.list = try checked(.init(fd: try duplicateStandardInput(), source: "standard input", mustHaveCommands: false))
            }
        }
        for command in commands {
            if let problem = CommandLimits.problem(with: command) {
                throw JobInputError(.invalidValue, "-c: the command \(problem)")
            }
            var fields = overrides
            fields.command = command
            plan.commandJobs.append(fields.spec())
        }
        return plan
    }

    /// `list`, read through once first when it is a regular file (a list file, or a file
    /// redirected to stdin), so that a bad line refuses the run before any job starts. A pipe
    /// can only be checked as it is read.
    private static func checked(_ list: RunPlan.List) throws(JobInputError) -> RunPlan.List {
        var info = stat()
        guard fstat(list.fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return list }
        var list = list
        do throws(JobInputError) {
            list.count = try CommandListReader.check(fd: list.fd, source: list.source)
            if list.count == 0 && list.mustHaveCommands {
                throw list.hasNoCommands
            }
        } catch {
            close(list.fd)
            throw error
        }
        return list
    }

    /// Whether stdin is a pipe or a redirected file (not a terminal, /dev/null or a socket), so
    /// reading it to its end cannot hang on a terminal.
    static func standardInputIsPiped() -> Bool {
        var info = stat()
        guard fstat(STDIN_FILENO, &info) == 0 else { return false }
        let type = info.st_mode & S_IFMT
        return type == S_IFIFO || type == S_IFREG
    }

    /// A descriptor of its own for the list on stdin: the dashboard later puts the terminal on
    /// descriptor 0 to read keys, while the list goes on being read from this one.
    private static func duplicateStandardInput() throws(JobInputError) -> Int32 {
        let fd = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3)
        guard fd >= 0 else {
            throw JobInputError(.unreadableFile, "cannot read standard input: \(String(cString: strerror(errno)))")
        }
        return fd
    }
}
