/// One `[[job]]` of a job file as read, before its `after` names are resolved.
struct JobEntry: Sendable {
    /// How messages name it: `job 3 ('train')`.
    var place: String
    /// Its own name, if it has one.
    var name: String?
    /// Its fields, defaults and command-line values filled in.
    var fields: JobFields
}

/// The order a job file's jobs are submitted in: every job after the jobs its `after` names.
///
/// A depth-first walk in file order that places a job's dependencies just before the first job
/// that needs them, so a file already in such an order keeps it, and a job's place moves only
/// when the file names a dependency after it. The walk keeps its own stack: a chain of
/// thousands of jobs must not overflow the thread's.
struct JobOrder: Sendable, Equatable {
    /// File indexes in submission order.
    var sequence: [Int]
    /// Per file index, its position in ``sequence``.
    var position: [Int]
    /// Per file index, the file indexes of the jobs it waits for (as `after` lists them,
    /// without repeats).
    var dependencies: [[Int]]

    /// Resolves every `after` and orders the jobs.
    ///
    /// - Parameters:
    ///   - entries: The jobs in file order.
    ///   - names: Job names and the job number (from 1) that has each; names are unique.
    ///   - file: The file, for messages.
    /// - Throws: ``JobInputError`` `.unknownDependency` for a name no job has,
    ///   `.invalidValue` for a job with the key of a job it waits for, and `.dependencyCycle`
    ///   naming every job of the first cycle found, in order.
    static func resolve(_ entries: [JobEntry], names: [String: Int], file: String) throws(JobInputError) -> JobOrder {
        var dependencies: [[Int]] = []
        dependencies.reserveCapacity(entries.count)
        for entry in entries {
            var indexes: [Int] = []
            for name in entry.fields.after ?? [] {
                guard let number = names[name] else {
                    let known = names.keys.sorted()
                    let list = known.isEmpty
                        ? "no job of the file has a name"
                        : "named jobs: " + known.prefix(10).joined(separator: ", ") + (known.count > 10 ? ", ..." : "")
                    throw JobInputError(
                        .unknownDependency,
                        "\(file): \(entry.place): 'after': no job named '\(name)'\(JobFile.hint(name, known)) (\(list))")
                }
                if !indexes.contains(number - 1) { indexes.append(number - 1) }
            }
            dependencies.append(indexes)
        }

        enum Mark { case unvisited, onPath, placed }
        var marks = Array(repeating: Mark.unvisited, count: entries.count)
        var sequence: [Int] = []
        sequence.reserveCapacity(entries.count)
        // The path being walked: a job and how many of its dependencies are done.
        var path: [(job: Int, next: Int)] = []
        for root in entries.indices where marks[root] == .unvisited {
            marks[root] = .onPath
            path.append((root, 0))
            while let top = path.last {
                let waitsFor = dependencies[top.job]
                if top.next == waitsFor.count {
                    path.removeLast()
                    marks[top.job] = .placed
                    sequence.append(top.job)
                    continue
                }
                path[path.count - 1].next += 1
                let dependency = waitsFor[top.next]
                switch marks[dependency] {
                case .placed:
                    continue
                case .onPath:
                    let start = path.firstIndex { $0.job == dependency }!
                    throw cycleError(path[start...].map(\.job), entries: entries, file: file)
                case .unvisited:
                    marks[dependency] = .onPath
                    path.append((dependency, 0))
                }
            }
        }
        try checkKeys(entries, dependencies: dependencies, sequence: sequence, file: file)
        var position = Array(repeating: 0, count: entries.count)
        for (at, index) in sequence.enumerated() { position[index] = at }
        return JobOrder(sequence: sequence, position: position, dependencies: dependencies)
    }

    /// Refuses a job with the key of a job it waits for, directly or through others: it would
    /// be coalesced into that job (the first with the key) and never run, its `after` void.
    /// Only keys two jobs share are followed, in submission order (each job's dependencies
    /// first): per job, the shared keys among the jobs it waits for and which job has each.
    private static func checkKeys(_ entries: [JobEntry], dependencies: [[Int]], sequence: [Int], file: String) throws(JobInputError) {
        var uses: [String: Int] = [:]
        for entry in entries { if let key = entry.fields.key { uses[key, default: 0] += 1 } }
        guard uses.values.contains(where: { $0 > 1 }) else { return }
        // Per job: shared key → (the job waited for that has it, the direct dependency it is
        // reached through).
        var reached = Array(repeating: [String: (holder: Int, via: Int)](), count: entries.count)
        for job in sequence {
            var keys: [String: (holder: Int, via: Int)] = [:]
            for dependency in dependencies[job] {
                if let key = entries[dependency].fields.key, uses[key]! > 1, keys[key] == nil { keys[key] = (dependency, dependency) }
                for (key, found) in reached[dependency] where keys[key] == nil { keys[key] = (found.holder, dependency) }
            }
            if let key = entries[job].fields.key, let found = keys[key] {
                let how = found.via == found.holder ? "('after')" : "(through \(entries[found.via].place))"
                throw JobInputError(
                    .invalidValue,
                    "\(file): \(entries[job].place): 'key' \"\(key)\" is also the key of \(entries[found.holder].place), which it waits for \(how): it would be coalesced into that job and never run")
            }
            reached[job] = keys
        }
    }

    /// The error for `cycle` (each job waits for the next, the last for the first), told from
    /// the job that comes first in the file.
    private static func cycleError(_ cycle: [Int], entries: [JobEntry], file: String) -> JobInputError {
        let first = cycle.indices.min { cycle[$0] < cycle[$1] }!
        let ordered = Array(cycle[first...] + cycle[..<first])
        let place = entries[ordered[0]].place
        guard ordered.count > 1 else {
            return JobInputError(.dependencyCycle, "\(file): \(place): 'after' names the job itself: it could never start")
        }
        let names = (ordered + [ordered[0]]).map { "'\(entries[$0].name ?? entries[$0].place)'" }
        let story = names[0] + " waits for " + names[1...].joined(separator: ", which waits for ")
        return JobInputError(
            .dependencyCycle,
            "\(file): \(place): 'after' makes a cycle of \(ordered.count) jobs: \(story); none of them could ever start")
    }
}
