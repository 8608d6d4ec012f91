import SchedulerSlurm
import TOMLKit

/// A job file's Slurm settings: the `[slurm]` table (`partition`, `args`) and the `slurm`
/// table of single jobs (`slurm = { partition = "gpu", args = ["--gres=gpu:1"] }`), which
/// needs the job to have a name. A `[slurm]` table runs the file on Slurm without `--slurm`.
struct SlurmFileSettings: Sendable, Equatable {
    /// The keys a `slurm` table may have.
    static let keys = ["partition", "args"]

    /// `[slurm]`; `nil` when the file has none.
    var options: SlurmOptions?
    /// The jobs' own `slurm` tables, by job name.
    var overrides: [String: SlurmOptions] = [:]

    /// Reads the settings, or `nil` when the file has no `slurm` table anywhere.
    static func read(root: TOMLTable, jobs: TOMLArray, file: String) throws(JobInputError) -> SlurmFileSettings? {
        var settings = SlurmFileSettings()
        if let value = root["slurm"] {
            guard let table = value.table else {
                throw JobInputError(.wrongType, "\(file): 'slurm' must be a table ([slurm] with partition and args)")
            }
            settings.options = try options(table, place: "\(file): [slurm]")
        }
        for index in 0..<jobs.count {
            guard let table = jobs[index].table, let value = table["slurm"] else { continue }
            let name = table["name"]?.string
            let place = "\(file): job \(index + 1)" + (name.map { " ('\($0)')" } ?? "") + ": 'slurm'"
            guard let name else {
                throw JobInputError(.invalidValue, "\(place): a job with its own Slurm settings needs a 'name'")
            }
            guard let own = value.table else {
                throw JobInputError(.wrongType, "\(place) must be a table like slurm = { partition = \"gpu\" }")
            }
            settings.overrides[name] = try options(own, place: place)
        }
        if settings.options == nil && settings.overrides.isEmpty { return nil }
        return settings
    }

    private static func options(_ table: TOMLTable, place: String) throws(JobInputError) -> SlurmOptions {
        var options = SlurmOptions()
        for key in table.keys.sorted() {
            guard keys.contains(key), let value = table[key] else {
                throw JobInputError(
                    .unknownKey, "\(place): unknown key '\(key)'\(JobFile.hint(key, keys)) (allowed: \(keys.joined(separator: ", ")))")
            }
            switch key {
            case "partition":
                guard let partition = value.string, !partition.isEmpty else {
                    throw JobInputError(.wrongType, "\(place): 'partition' must be a non-empty string")
                }
                options.partition = partition
            default:
                guard let array = value.array else {
                    throw JobInputError(.wrongType, "\(place): 'args' must be an array of strings, like [\"--account=foo\"]")
                }
                var arguments: [String] = []
                for item in array {
                    guard let text = item.string else {
                        throw JobInputError(.wrongType, "\(place): 'args' must hold strings only")
                    }
                    arguments.append(text)
                }
                options.extraArguments = arguments
            }
        }
        return options
    }
}
