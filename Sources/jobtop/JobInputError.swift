/// Bad input found before anything starts: a job file, a command list or an option value that
/// cannot be used. The command line prints ``message`` and exits with status 2.
struct JobInputError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of problem.
    enum Code: String, Sendable {
        /// A file is missing, unreadable or not UTF-8 text.
        case unreadableFile
        /// The TOML does not parse.
        case syntax
        /// A key jobtop does not know.
        case unknownKey
        /// A value of the wrong TOML type.
        case wrongType
        /// A value of the right type that cannot be used (negative retries, bad duration, bad regex).
        case invalidValue
        /// A job with no command, or an empty one.
        case missingCommand
        /// Two jobs with the same name.
        case duplicateName
        /// An `after` that names no job of the file.
        case unknownDependency
        /// Jobs that wait for each other in a circle.
        case dependencyCycle
        /// A `group` that is not under `[groups]` (and not `default`).
        case unknownGroup
        /// A start time (`at`) that has already passed.
        case timeInPast
        /// A `cwd` that is not a directory.
        case missingDirectory
        /// Nothing to run.
        case noJobs
        /// The output directory cannot be made.
        case outputDirectory
    }

    /// What kind of problem.
    let code: Code
    /// A sentence for a human that names the problem and where it is.
    let message: String

    init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    var description: String { message }
}
