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
            // A job with the key of a job it waits for would be coalesced into it and never run.
            if let key = entry.fields.key, let holder = indexes.first(where: { entries[$0].fields.key == key }) {
                throw JobInputError(
                    .invalidValue,
                    "\(file): \(entry.place): 'key' \"\(key)\" is also the key of \(entries[holder].place), which it waits for ('after'): it would be coalesced into that job and never run")
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
        var position = Array(repeating: 0, count: entries.count)
        for (at, index) in sequence.enumerated() { position[index] = at }
        return JobOrder(sequence: sequence, position: position, dependencies: dependencies)
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
