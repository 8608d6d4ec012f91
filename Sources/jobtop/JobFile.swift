import Foundation
import Scheduler
import TOMLKit

/// Reads a TOML job file: an optional `[defaults]` table and any number of `[[job]]` tables.
///
/// Every problem is a ``JobInputError`` that names the file, and the job (by number from 1, and
/// by name when it has one) or the TOML line and column.
enum JobFile {
    /// Reads the jobs of the file at `path`.
    ///
    /// - Parameters:
    ///   - path: The file, absolute or relative to the current directory.
    ///   - overrides: Fields the command line gives: they win over `[defaults]`, not over a job's own keys.
    /// - Returns: The jobs in file order.
    /// - Throws: ``JobInputError`` for anything that cannot be used.
    static func load(path: String, overrides: JobFields = JobFields()) throws(JobInputError) -> [JobSpec] {
        let text = try TextFile.read(path)
        let directory = URL(fileURLWithPath: path).standardizedFileURL.deletingLastPathComponent().path
        return try parse(text, file: path, directory: directory, overrides: overrides)
    }

    /// Reads jobs from TOML `text`; `file` names it in messages and `directory` anchors `cwd`.
    static func parse(
        _ text: String, file: String, directory: String, overrides: JobFields = JobFields()
    ) throws(JobInputError) -> [JobSpec] {
        try refuseNulEscapes(in: text, file: file)
        let root: TOMLTable
        do {
            root = try TOMLTable(string: text)
        } catch let error as TOMLParseError {
            let at = error.source.begin
            throw JobInputError(.syntax, "\(file):\(at.line):\(at.column): TOML syntax error: \(error.description)")
        } catch {
            throw JobInputError(.syntax, "\(file): TOML syntax error: \(error)")
        }
        let reader = Reader(file: file, directory: directory)

        for key in root.keys.sorted() where key != "defaults" && key != "job" {
            throw JobInputError(
                .unknownKey, "\(file): unknown top-level key '\(key)'\(hint(key, ["defaults", "job"])) (allowed: [defaults], [[job]])")
        }
        var defaults = JobFields()
        if let value = root["defaults"] {
            guard let table = value.table else {
                throw JobInputError(.wrongType, "\(file): 'defaults' must be a table ([defaults]), not \(describe(value.type))")
            }
            defaults = try reader.fields(of: table, allowed: JobFields.defaultKeys, place: "[defaults]")
        }
        guard let jobsValue = root["job"] else {
            throw JobInputError(.noJobs, "\(file): no jobs (add a [[job]] table with a command)")
        }
        guard let jobs = jobsValue.array else {
            throw JobInputError(.wrongType, "\(file): 'job' must be an array of tables: write [[job]], not [job]")
        }
        guard !jobs.isEmpty else { throw JobInputError(.noJobs, "\(file): no jobs (add a [[job]] table with a command)") }

        var specs: [JobSpec] = []
        var names: [String: Int] = [:]
        for index in 0..<jobs.count {
            let number = index + 1
            guard let table = jobs[index].table else {
                throw JobInputError(.wrongType, "\(file): job \(number) must be a table ([[job]]), not \(describe(jobs[index].type))")
            }
            let place = "job \(number)" + (table["name"]?.string.map { " ('\($0)')" } ?? "")
            let own = try reader.fields(of: table, allowed: JobFields.keys, place: place)
            guard let command = own.command else {
                throw JobInputError(.missingCommand, "\(file): \(place): missing 'command'")
            }
            guard !command.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
                throw JobInputError(.missingCommand, "\(file): \(place): 'command' is empty")
            }
            if let problem = CommandLimits.problem(with: command) {
                throw JobInputError(.invalidValue, "\(file): \(place): 'command' \(problem)")
            }
            if let name = own.name {
                if name.isEmpty { throw JobInputError(.invalidValue, "\(file): \(place): 'name' is empty") }
                if let first = names[name] {
                    throw JobInputError(.duplicateName, "\(file): \(place): duplicate name '\(name)' (job \(first) has it too)")
                }
                names[name] = number
            }
            specs.append(own.filled(from: overrides).filled(from: defaults).spec())
        }
        return specs
    }

    /// Refuses a `\u0000` (or `\U00000000`) escape anywhere in the file.
    ///
    /// TOML allows the escape, but the parser hands strings over as C strings, so everything
    /// after it would silently vanish (`"echo a\u0000b"` would run `echo a`). A false alarm is
    /// possible only inside a literal ('single-quoted') string or a comment, which is worth it.
    private static func refuseNulEscapes(in text: String, file: String) throws(JobInputError) {
        var line = 1
        let utf8 = Array(text.utf8)
        var index = 0
        while index < utf8.count {
            let byte = utf8[index]
            if byte == 0x0A { line += 1 }
            if byte == UInt8(ascii: "\\"), index + 1 < utf8.count {
                let next = utf8[index + 1]
                let width = next == UInt8(ascii: "u") ? 4 : next == UInt8(ascii: "U") ? 8 : 0
                if width > 0, index + 1 + width < utf8.count,
                   utf8[(index + 2)...(index + 1 + width)].allSatisfy({ $0 == UInt8(ascii: "0") }) {
                    throw JobInputError(
                        .invalidValue,
                        "\(file):\(line): a NUL character (\\\(Character(UnicodeScalar(next)))\(String(repeating: "0", count: width))): jobtop refuses NUL in a job file (a command would be cut there)")
                }
                index += 2  // an escaped backslash must not start another escape
                continue
            }
            index += 1
        }
    }

    /// Reads the fields of one table, checking keys, types and values.
    private struct Reader {
        let file: String
        let directory: String

        func fields(of table: TOMLTable, allowed: [String], place: String) throws(JobInputError) -> JobFields {
            var fields = JobFields()
            for key in table.keys.sorted() {
                guard allowed.contains(key) else {
                    let why = JobFields.keys.contains(key) ? " ('\(key)' cannot be a default)" : JobFile.hint(key, allowed)
                    throw JobInputError(
                        .unknownKey,
                        "\(file): \(place): unknown key '\(key)'\(why) (allowed: \(allowed.joined(separator: ", ")))")
                }
                guard let value = table[key] else { continue }
                let at = "\(file): \(place): '\(key)'"
                switch key {
                case "name": fields.name = try string(value, at)
                case "command": fields.command = try string(value, at)
                case "key": fields.key = try string(value, at)
                case "priority":
                    let priority = try integer(value, at)
                    guard JobSpec.priorityRange.contains(priority) else {
                        throw JobInputError(
                            .invalidValue,
                            "\(at) must be from \(JobSpec.priorityRange.lowerBound) to \(JobSpec.priorityRange.upperBound), not \(priority)")
                    }
                    fields.priority = priority
                case "retries":
                    let retries = try integer(value, at)
                    guard retries >= 0 else { throw JobInputError(.invalidValue, "\(at) must be 0 or more, not \(retries)") }
                    guard retries <= 1_000 else { throw JobInputError(.invalidValue, "\(at) must be at most 1000, not \(retries)") }
                    fields.retries = retries
                case "backoff": fields.backoff = try duration(value, at)
                case "timeout":
                    let timeout = try duration(value, at)
                    guard timeout > .zero else { throw JobInputError(.invalidValue, "\(at) must be longer than 0") }
                    fields.timeout = timeout
                case "progress":
                    let pattern = try string(value, at)
                    do {
                        fields.progress = try ProgressPattern(pattern)
                    } catch {
                        throw JobInputError(.invalidValue, "\(at): \(error)")
                    }
                case "cwd":
                    let raw = try string(value, at)
                    let path = raw.hasPrefix("/") ? raw : URL(fileURLWithPath: directory).appendingPathComponent(raw).standardizedFileURL.path
                    var isDirectory: ObjCBool = false
                    guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                        throw JobInputError(.missingDirectory, "\(at): directory '\(raw)' does not exist (looked for \(path))")
                    }
                    guard isDirectory.boolValue else {
                        throw JobInputError(.missingDirectory, "\(at): '\(raw)' is not a directory (\(path))")
                    }
                    fields.cwd = path
                case "env":
                    guard let env = value.table else {
                        throw JobInputError(.wrongType, "\(at) must be a table of strings like { FOO = \"bar\" }, not \(JobFile.describe(value.type))")
                    }
                    var variables: [String: String] = [:]
                    for name in env.keys {
                        guard let variable = env[name] else { continue }
                        variables[name] = try string(variable, "\(at): variable '\(name)'")
                    }
                    fields.env = variables
                case "keep_background":
                    guard let keep = value.bool else {
                        throw JobInputError(.wrongType, "\(at) must be true or false, not \(JobFile.describe(value.type))")
                    }
                    fields.keepBackground = keep
                default:
                    break
                }
            }
            return fields
        }

        private func string(_ value: any TOMLValueConvertible, _ at: String) throws(JobInputError) -> String {
            guard let string = value.string else {
                throw JobInputError(.wrongType, "\(at) must be a string, not \(JobFile.describe(value.type))")
            }
            return string
        }

        private func integer(_ value: any TOMLValueConvertible, _ at: String) throws(JobInputError) -> Int {
            guard let integer = value.int else {
                throw JobInputError(.wrongType, "\(at) must be an integer, not \(JobFile.describe(value.type))")
            }
            return integer
        }

        private func duration(_ value: any TOMLValueConvertible, _ at: String) throws(JobInputError) -> Duration {
            guard let text = value.string else {
                throw JobInputError(.wrongType, "\(at) must be a duration string like \"10s\", not \(JobFile.describe(value.type))")
            }
            do {
                return try DurationParser.parse(text)
            } catch {
                throw JobInputError(.invalidValue, "\(at): \(error)")
            }
        }
    }

    fileprivate static func describe(_ type: TOMLType) -> String {
        switch type {
        case .table: "a table"
        case .array: "an array"
        case .string: "a string"
        case .int: "an integer"
        case .double: "a float"
        case .bool: "a boolean"
        case .date: "a date"
        case .time: "a time"
        case .dateTime: "a date-time"
        }
    }

    /// " (did you mean 'x'?)" when a known key is one or two edits away.
    fileprivate static func hint(_ key: String, _ known: [String]) -> String {
        let best = known.map { ($0, editDistance(key.lowercased(), $0)) }.min { $0.1 < $1.1 }
        guard let best, best.1 <= 2 else { return "" }
        return " (did you mean '\(best.0)'?)"
    }

    private static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        guard !a.isEmpty else { return b.count }
        guard !b.isEmpty else { return a.count }
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }
}
