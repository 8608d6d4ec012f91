import Foundation
import Scheduler

/// Puts together the jobs of one run: a job file or list, standard input, and `-c` commands.
enum JobSources {
    /// Loads every job, or throws before anything starts.
    ///
    /// - Parameters:
    ///   - file: A `.toml` job file, a plain list, `-` for a list on stdin, or `nil`.
    ///   - commands: `-c` commands, added after the file's jobs.
    ///   - overrides: Fields the command line sets for jobs that do not set them.
    ///   - readsPipedStandardInput: With no `file`, read a list from stdin when it is a pipe or a file.
    /// - Returns: The specs in order.
    /// - Throws: ``JobInputError`` for anything that cannot be used.
    static func load(
        file: String?, commands: [String], overrides: JobFields, readsPipedStandardInput: Bool,
        standardInput: () throws(JobInputError) -> String = { () throws(JobInputError) in try TextFile.readStandardInput() }
    ) throws(JobInputError) -> [JobSpec] {
        var specs: [JobSpec] = []
        switch file {
        case "-"?:
            specs += try list(standardInput(), source: "standard input", overrides: overrides, mustHaveCommands: true)
        case let path? where path.lowercased().hasSuffix(".toml"):
            specs += try JobFile.load(path: path, overrides: overrides)
        case let path?:
            specs += try list(TextFile.read(path), source: "'\(path)'", overrides: overrides, mustHaveCommands: true)
        case nil:
            if readsPipedStandardInput && standardInputIsPiped() {
                specs += try list(standardInput(), source: "standard input", overrides: overrides, mustHaveCommands: false)
            }
        }
        for command in commands {
            var fields = overrides
            fields.command = command
            specs.append(fields.spec())
        }
        return specs
    }

    private static func list(
        _ text: String, source: String, overrides: JobFields, mustHaveCommands: Bool
    ) throws(JobInputError) -> [JobSpec] {
        let commands = CommandList.commands(in: text)
        if commands.isEmpty && mustHaveCommands {
            throw JobInputError(.noJobs, "\(source) has no commands (only blank lines and # comments)")
        }
        return commands.map { command in
            var fields = overrides
            fields.command = command
            return fields.spec()
        }
    }

    /// Whether stdin is a pipe or a redirected file (not a terminal, /dev/null or a socket), so
    /// reading it to its end cannot hang on a terminal.
    static func standardInputIsPiped() -> Bool {
        var info = stat()
        guard fstat(STDIN_FILENO, &info) == 0 else { return false }
        let type = info.st_mode & S_IFMT
        return type == S_IFIFO || type == S_IFREG
    }
}
