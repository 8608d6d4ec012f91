import Foundation
import Scheduler
import TOMLKit

/// Reads a TOML job file: an optional `[defaults]` table, optional `[groups.NAME]` tables and any
/// number of `[[job]]` tables.
///
/// Every problem is a ``JobInputError`` that names the file, and the job (by number from 1, and
/// by name when it has one) or the TOML line and column.
enum JobFile {
    /// What a job file holds.
    struct Contents: Sendable {
        /// The jobs, in an order where each comes after the jobs it waits for (file order when
        /// that already is one); their dependencies are ``JobSpec/Dependency/earlier(_:)``.
        var jobs: [JobSpec]
        /// The groups of `[groups]`, by name, as the file sets them up.
        var groups: [JobGroup]
        /// The groups whose table says `paused = false` in so many words: `submit` resumes them
        /// in a serve that has them paused (a table that does not say leaves the pause as it is).
        var unpausedGroups: Set<String> = []
        /// The `[slurm]` table and the jobs' own `slurm` tables; `nil` when the file has none.
        var slurm: SlurmFileSettings? = nil
    }

    /// The keys a `[groups.NAME]` table may have.
    static let groupKeys = ["parallel", "paused"]

    /// Reads the jobs of the file at `path`.
    ///
    /// - Parameters:
    ///   - path: The file, absolute or relative to the current directory.
    ///   - overrides: Fields the command line gives: they win over `[defaults]`, not over a job's own keys.
    /// - Returns: The jobs (each after those it waits for) and the groups.
    /// - Throws: ``JobInputError`` for anything that cannot be used.
    static func load(path: String, overrides: JobFields = JobFields()) throws(JobInputError) -> Contents {
        let text = try TextFile.read(path)
        // Relative to the directory as the user's shell names it (through a symbolic link, that
        // path): a job's `cwd` is then what the user typed it from, and so is its `pwd`.
        let absolute = path.hasPrefix("/") ? path : (logicalCurrentDirectory() as NSString).appendingPathComponent(path)
        let directory = URL(fileURLWithPath: absolute).standardizedFileURL.deletingLastPathComponent().path
        return try parse(text, file: path, directory: directory, overrides: overrides)
    }

    /// The longest name, in UTF-8 bytes.
    static let maxNameBytes = 256

    /// What is wrong with a job's name, if anything: one of blanks only cannot be told apart in
    /// the table or given to `--after`, and a line break or another control character would
    /// break a log line in two. A right-to-left override would make it show as another name.
    static func nameProblem(_ name: String) -> String? {
        if name.allSatisfy(\.isWhitespace) { return "is blank" }
        // A name is something to type and read in a column (a 100,000-character one was taken).
        if name.utf8.count > maxNameBytes { return "is \(name.utf8.count) bytes long; the most is \(maxNameBytes)" }
        if let bad = name.unicodeScalars.first(where: isUnprintable) {
            let what = bad.properties.isBidiControl ? "a bidirectional control character" : "a control character"
            return "has \(what) (\(printable(String(bad))))"
        }
        return nil
    }

    /// Reads jobs from TOML `text`; `file` names it in messages and `directory` anchors `cwd`.
    ///
    /// - Parameters:
    ///   - now: The time an `at` is checked against (a moment must not be past; a time of day
    ///     means its next occurrence after it).
    ///   - timeZone: The zone of an `at` that is a time of day.
    static func parse(
        _ text: String, file: String, directory: String, overrides: JobFields = JobFields(),
        now: Date = Date(), timeZone: TimeZone = .current
    ) throws(JobInputError) -> Contents {
        try refuseNulEscapes(in: text, file: file)
        try refuseDeepKeys(in: text, file: file)
        let root: TOMLTable
        do {
            root = try TOMLTable(string: text)
        } catch let error as TOMLParseError {
            let at = error.source.begin
            // toml++ 3 checks a time's hour against 23 but says 59 (`at = 25:00`).
            let description = error.description.replacingOccurrences(of: "hour between 0 to 59", with: "hour between 0 and 23")
            throw JobInputError(.syntax, "\(file):\(at.line):\(at.column): TOML syntax error: \(description)")
        } catch {
            throw JobInputError(.syntax, "\(file): TOML syntax error: \(error)")
        }
        let reader = Reader(file: file, directory: directory, now: now, timeZone: timeZone)

        let topLevel = ["defaults", "groups", "job", "slurm"]
        for key in root.keys.sorted() where !topLevel.contains(key) {
            throw JobInputError(
                .unknownKey, "\(file): unknown top-level key '\(key)'\(hint(key, topLevel)) (allowed: [defaults], [groups.NAME], [[job]], [slurm])")
        }
        var defaults = JobFields()
        if let value = root["defaults"] {
            guard let table = value.table else {
                throw JobInputError(.wrongType, "\(file): 'defaults' must be a table ([defaults]), not \(describe(value.type))")
            }
            defaults = try reader.fields(of: table, allowed: JobFields.defaultKeys, place: "[defaults]")
        }
        let (groups, unpausedGroups) = try reader.groups(root["groups"])
        try checkGroup(defaults.group, known: groups, place: "[defaults]", file: file)
        guard let jobsValue = root["job"] else {
            throw JobInputError(.noJobs, "\(file): no jobs (add a [[job]] table with a command)")
        }
        guard let jobs = jobsValue.array else {
            throw JobInputError(.wrongType, "\(file): 'job' must be an array of tables: write [[job]], not [job]")
        }
        guard !jobs.isEmpty else { throw JobInputError(.noJobs, "\(file): no jobs (add a [[job]] table with a command)") }

        var entries: [JobEntry] = []
        var names: [String: Int] = [:]
        for index in 0..<jobs.count {
            let number = index + 1
            guard let table = jobs[index].table else {
                throw JobInputError(.wrongType, "\(file): job \(number) must be a table ([[job]]), not \(describe(jobs[index].type))")
            }
            // (A name too long to be one is shown by its start.)
            let place = "job \(number)" + (table["name"]?.string.map {
                " ('\(printable($0.utf8.count > Self.maxNameBytes ? String($0.prefix(40)) + "…" : $0))')"
            } ?? "")
            let own = try reader.fields(of: table, allowed: JobFields.keys + ["slurm"], place: place)
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
                if let problem = Self.nameProblem(name) { throw JobInputError(.invalidValue, "\(file): \(place): 'name' \(problem)") }
                if let first = names[name] {
                    throw JobInputError(.duplicateName, "\(file): \(place): duplicate name '\(name)' (job \(first) has it too)")
                }
                names[name] = number
            }
            try checkGroup(own.group, known: groups, place: place, file: file)
            entries.append(JobEntry(place: place, name: own.name, fields: own.filled(from: overrides).filled(from: defaults)))
        }
        let slurm = try SlurmFileSettings.read(root: root, jobs: jobs, file: file)
        let order = try JobOrder.resolve(entries, names: names, file: file)
        var specs: [JobSpec] = []
        specs.reserveCapacity(entries.count)
        for (position, index) in order.sequence.enumerated() {
            var spec = entries[index].fields.spec()
            spec.dependencies = order.dependencies[index].map { .earlier(order.position[$0]) }
            assert(spec.dependencies.allSatisfy { if case .earlier(let other) = $0 { other < position } else { false } })
            specs.append(spec)
        }
        return Contents(jobs: specs, groups: groups, unpausedGroups: unpausedGroups, slurm: slurm)
    }

    /// Refuses a `group` that is neither `default` nor under `[groups]`.
    private static func checkGroup(_ group: String?, known groups: [JobGroup], place: String, file: String) throws(JobInputError) {
        guard let group, group != JobSpec.defaultGroup, !groups.contains(where: { $0.name == group }) else { return }
        let known = [JobSpec.defaultGroup] + groups.map(\.name).filter { $0 != JobSpec.defaultGroup }
        throw JobInputError(
            .unknownGroup,
            "\(file): \(place): 'group': no group '\(group)'\(hint(group, known)); add a [groups.\(group)] table, or use one of: \(known.joined(separator: ", "))")
    }

    /// Refuses a NUL byte anywhere in the file, and a `\u0000` (or `\U00000000`) escape.
    ///
    /// TOML allows the escape, but the parser hands strings over as C strings, so everything
    /// after it would silently vanish (`"echo a\u0000b"` would run `echo a`). A false alarm is
    /// possible only inside a literal ('single-quoted') string or a comment, which is worth it.
    /// A raw NUL byte is not TOML at all, and the parser reads the whole text as a C string: it
    /// stopped there, and every job after it was dropped without a word (the run exited 0).
    private static func refuseNulEscapes(in text: String, file: String) throws(JobInputError) {
        var line = 1
        var lineStart = 0
        let utf8 = Array(text.utf8)
        var index = 0
        while index < utf8.count {
            let byte = utf8[index]
            if byte == 0x0A {
                line += 1
                lineStart = index + 1
            }
            if byte == 0 {
                let column = String(decoding: utf8[lineStart..<index], as: UTF8.self).count + 1
                throw JobInputError(
                    .syntax,
                    "\(file):\(line):\(column): a NUL byte: a job file is text, and jobtop refuses NUL in it (the parser would stop there, dropping the rest)")
            }
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

    /// Dots outside strings and comments that one line may have.
    static let maximumDotsPerLine = 1_000

    /// Refuses a line with more than ``maximumDotsPerLine`` dots outside strings and comments:
    /// the parser (toml++, under TOMLKit) nests a call per part of a dotted key or table header
    /// and runs out of stack near 30,000 parts, a crash rather than an error. No job file needs a
    /// key a thousand parts deep; a float or a date has one dot or none.
    private static func refuseDeepKeys(in text: String, file: String) throws(JobInputError) {
        enum Quote { case none, basic, literal, multilineBasic, multilineLiteral }
        let utf8 = Array(text.utf8)
        let (newline, hash, dot, backslash) = (UInt8(0x0A), UInt8(ascii: "#"), UInt8(ascii: "."), UInt8(ascii: "\\"))
        let (double, single) = (UInt8(ascii: "\""), UInt8(ascii: "'"))
        func triple(_ index: Int, _ byte: UInt8) -> Bool {
            index + 2 < utf8.count && utf8[index] == byte && utf8[index + 1] == byte && utf8[index + 2] == byte
        }
        var quote = Quote.none
        var line = 1
        var dots = 0
        var index = 0
        while index < utf8.count {
            let byte = utf8[index]
            if byte == newline {
                line += 1
                dots = 0
                if quote == .basic || quote == .literal { quote = .none }  // (a syntax error the parser names)
                index += 1
                continue
            }
            switch quote {
            case .none:
                if byte == hash {
                    while index < utf8.count && utf8[index] != newline { index += 1 }
                    continue
                } else if byte == double || byte == single {
                    let isTriple = triple(index, byte)
                    quote = byte == double ? (isTriple ? .multilineBasic : .basic) : (isTriple ? .multilineLiteral : .literal)
                    index += isTriple ? 3 : 1
                    continue
                } else if byte == dot {
                    dots += 1
                    if dots > maximumDotsPerLine {
                        throw JobInputError(
                            .syntax,
                            "\(file):\(line): more than \(maximumDotsPerLine.formatted()) dots in one line outside strings: a key or table name nested that deep is refused")
                    }
                }
            case .basic, .multilineBasic:
                if byte == backslash {
                    if index + 1 < utf8.count && utf8[index + 1] == newline { line += 1 }
                    index += 2
                    continue
                }
                if quote == .basic && byte == double {
                    quote = .none
                } else if quote == .multilineBasic && triple(index, double) {
                    quote = .none
                    index += 3
                    continue
                }
            case .literal:
                if byte == single { quote = .none }
            case .multilineLiteral:
                if triple(index, single) {
                    quote = .none
                    index += 3
                    continue
                }
            }
            index += 1
        }
    }

    /// Reads the fields of one table, checking keys, types and values.
    private struct Reader {
        let file: String
        let directory: String
        let now: Date
        let timeZone: TimeZone

        /// The groups of a `[groups]` table (`nil`: none), sorted by name, and those that say
        /// `paused = false`.
        func groups(_ value: (any TOMLValueConvertible)?) throws(JobInputError) -> (groups: [JobGroup], unpaused: Set<String>) {
            guard let value else { return ([], []) }
            guard let table = value.table else {
                throw JobInputError(.wrongType, "\(file): 'groups' must be a table of groups like [groups.download], not \(JobFile.describe(value.type))")
            }
            var groups: [JobGroup] = []
            var unpaused: Set<String> = []
            for name in table.keys.sorted() {
                guard let groupValue = table[name] else { continue }
                let place = "[groups.\(name)]"
                do {
                    try SchedulerCore.validateGroupName(name)
                } catch {
                    throw JobInputError(.invalidValue, "\(file): \(place): \(error.message)")
                }
                guard let settings = groupValue.table else {
                    throw JobInputError(
                        .wrongType, "\(file): 'groups.\(name)' must be a table like [groups.\(name)] with parallel = 2, not \(JobFile.describe(groupValue.type))")
                }
                var group = JobGroup(name: name)
                for key in settings.keys.sorted() {
                    guard JobFile.groupKeys.contains(key) else {
                        throw JobInputError(
                            .unknownKey,
                            "\(file): \(place): unknown key '\(key)'\(JobFile.hint(key, JobFile.groupKeys)) (allowed: \(JobFile.groupKeys.joined(separator: ", ")))")
                    }
                    guard let setting = settings[key] else { continue }
                    let at = "\(file): \(place): '\(key)'"
                    switch key {
                    case "parallel":
                        let limit = try integer(setting, at)
                        guard limit >= 1 else {
                            throw JobInputError(.invalidValue, "\(at) must be at least 1, not \(limit) (leave it out for no limit; paused = true holds the group)")
                        }
                        group.limit = limit
                    case "paused":
                        guard let paused = setting.bool else {
                            throw JobInputError(.wrongType, "\(at) must be true or false, not \(JobFile.describe(setting.type))")
                        }
                        group.isPaused = paused
                        if !paused { unpaused.insert(name) }
                    default:
                        break
                    }
                }
                groups.append(group)
            }
            return (groups, unpaused)
        }

        func fields(of table: TOMLTable, allowed: [String], place: String) throws(JobInputError) -> JobFields {
            var fields = JobFields()
            if table["delay"] != nil && table["at"] != nil && allowed.contains("delay") {
                throw JobInputError(.invalidValue, "\(file): \(place): 'delay' and 'at' together: give one of them")
            }
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
                case "key":
                    // An empty key would make every job given one the same job (coalesced).
                    let key = try string(value, at)
                    guard !key.allSatisfy(\.isWhitespace) else {
                        throw JobInputError(.invalidValue, "\(at) must not be empty (leave it out for a job with no key)")
                    }
                    fields.key = key
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
                    do {
                        try SchedulerCore.validateEnvironment(variables)
                    } catch {
                        throw JobInputError(.invalidValue, "\(at): \(error.message)")
                    }
                    fields.env = variables
                case "group":
                    let group = try string(value, at)
                    do {
                        try SchedulerCore.validateGroupName(group)
                    } catch {
                        throw JobInputError(.invalidValue, "\(at): \(error.message)")
                    }
                    fields.group = group
                case "after":
                    let names: [String]
                    if let single = value.string {
                        names = [single]
                    } else if let array = value.array {
                        var list: [String] = []
                        for item in 0..<array.count {
                            guard let name = array[item].string else {
                                throw JobInputError(.wrongType, "\(at) must list job names (strings), but item \(item + 1) is \(JobFile.describe(array[item].type))")
                            }
                            list.append(name)
                        }
                        names = list
                    } else {
                        throw JobInputError(.wrongType, "\(at) must be a list of job names like [\"fetch\"], not \(JobFile.describe(value.type))")
                    }
                    if names.contains("") { throw JobInputError(.invalidValue, "\(at) has an empty name") }
                    fields.after = names
                case "delay":
                    fields.start = .delay(try duration(value, at))
                case "at":
                    fields.start = .date(try startTime(value, at))
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

        /// The moment an `at` stands for: an RFC 3339 time (a string or a TOML offset date-time),
        /// which must not be past, or a local time of day (a string or a TOML local time), whose
        /// next occurrence it is.
        private func startTime(_ value: any TOMLValueConvertible, _ at: String) throws(JobInputError) -> Date {
            guard value.string != nil || value.time != nil || value.dateTime != nil else {
                throw JobInputError(
                    .wrongType, "\(at) must be a time like \"2026-11-24T02:00:00Z\" or \"02:00\", not \(JobFile.describe(value.type))")
            }
            let start: StartTimeParser.StartTime
            do throws(StartTimeParser.Failure) {
                if let text = value.string {
                    start = try StartTimeParser.parse(text, now: now, timeZone: timeZone)
                } else if let time = value.time {
                    start = .timeOfDay(try StartTimeParser.nextTimeOfDay(
                        hour: time.hour, minute: time.minute, second: time.second,
                        text: time.debugDescription, now: now, timeZone: timeZone))
                } else {
                    let dateTime = value.dateTime!
                    guard let offset = dateTime.offset else {
                        // As written (TOMLKit's own text of a local date-time ends with a Z).
                        let (date, time) = (dateTime.date, dateTime.time)
                        let written = String(
                            format: "%04d-%02d-%02dT%02d:%02d:%02d", Int(date.year), Int(date.month), Int(date.day),
                            Int(time.hour), Int(time.minute), Int(time.second))
                        throw StartTimeParser.Failure(text: written, reason: "it has no offset: end it with Z (UTC) or +HH:MM")
                    }
                    start = .moment(try StartTimeParser.moment(
                        year: dateTime.date.year, month: dateTime.date.month, day: dateTime.date.day,
                        hour: dateTime.time.hour, minute: dateTime.time.minute, second: dateTime.time.second,
                        fraction: Double(dateTime.time.nanoSecond) / 1e9, offsetMinutes: offset.offset,
                        text: dateTime.debugDescription))
                }
            } catch {
                throw JobInputError(.invalidValue, "\(at): \(error)")
            }
            if let past = start.unusableReason(now: now) { throw JobInputError(.timeInPast, "\(at): \(past)") }
            return start.date
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

    /// " (did you mean 'x'?)" when a known key is one or two edits away, and fewer than half
    /// its characters. Only names of about
    /// the key's length are compared (two edits change the length by two at most), and a key of
    /// over 256 characters gets no hint: the comparison costs the product of the lengths, and a
    /// job name has no limit.
    static func hint(_ key: String, _ known: [String]) -> String {
        let lowered = key.lowercased()
        let length = lowered.count
        guard length <= 256 else { return "" }
        let best = known.lazy.filter { abs($0.count - length) <= 2 }.map { ($0, editDistance(lowered, $0)) }.min { $0.1 < $1.1 }
        // And only when most of the name stays: `zz` is two edits from `a`, but nothing like it.
        guard let best, best.1 <= 2, best.1 * 2 < max(best.0.count, length) else { return "" }
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
