import Scheduler

/// What the `n` prompt's line asks for: a shell command, optionally preceded by `@GROUP` (the
/// group it runs in) and `after:NAME,NAME` (jobs that must succeed first), in any order.
///
/// `@gpu after:fetch-a,fetch-b python train.py` runs `python train.py` in group `gpu` once
/// `fetch-a` and `fetch-b` succeeded. A name is a job's name, else the id the table shows (or
/// the full one), else the command of a job without a name, among the jobs the dashboard
/// knows.
struct NewJobEntry: Equatable, Sendable {
    /// The shell command: what follows the leading words.
    var command: String
    /// The group, if one was given.
    var group: String?
    /// The jobs it waits for, in the order given, each once.
    var after: [JobID] = []

    /// Why a line cannot be submitted: said under the prompt, which stays open.
    struct Problem: Error, Equatable, CustomStringConvertible {
        var description: String
    }

    /// The longest name or group a message quotes in full.
    private static let quoted = 24

    /// Reads a line of the `n` prompt, resolving `after:` names against the jobs on `board`.
    static func parse(_ text: String, board: JobBoard) -> Result<NewJobEntry, Problem> {
        var entry = NewJobEntry(command: "", group: nil)
        var rest = text[...]
        while true {
            rest = rest.drop { $0 == " " || $0 == "\t" }
            let word = rest.prefix { $0 != " " && $0 != "\t" }
            if word.hasPrefix("@") {
                let group = String(word.dropFirst())
                guard !group.isEmpty else {
                    return .failure(Problem(description: "'@' needs a group name, e.g. @gpu before the command"))
                }
                if let earlier = entry.group, earlier != group {
                    return .failure(Problem(description: "two groups, @\(quote(earlier)) and @\(quote(group)): a job runs in one"))
                }
                entry.group = group
            } else if word.lowercased().hasPrefix("after:") {
                let names = word.dropFirst("after:".count).split(separator: ",").map(String.init)
                guard !names.isEmpty else {
                    return .failure(Problem(description: "'after:' needs job names, e.g. after:build,lint before the command"))
                }
                for name in names {
                    switch resolve(name, board: board) {
                    case .success(let id): if !entry.after.contains(id) { entry.after.append(id) }
                    case .failure(let problem): return .failure(problem)
                    }
                }
            } else {
                break
            }
            rest = rest.dropFirst(word.count)
        }
        entry.command = String(rest).trimmingCharacters(in: .whitespaces)
        return .success(entry)
    }

    /// The job `name` stands for: the one with that name, else with that id (the table's short
    /// form or the whole), else the one job without a name whose command it is. A name several
    /// jobs share names the one of them that has not ended, when exactly one has not, as
    /// `submit --after` reads it (``JobReference``). O(jobs): only on Enter.
    static func resolve(_ name: String, board: JobBoard) -> Result<JobID, Problem> {
        let jobs = board.jobs.values
        let lower = name.lowercased()
        let candidates: [[JobInfo]] = [
            jobs.filter { $0.name == name },
            jobs.filter { $0.id.short == lower || $0.id.description == lower },
            jobs.filter { $0.name == nil && $0.command == name },
        ]
        for matches in candidates where !matches.isEmpty {
            let active = matches.filter { !$0.state.isFinished }
            if matches.count > 1, active.count == 1 { return .success(active[0].id) }
            guard matches.count == 1 else {
                return .failure(Problem(description: "after:\(quote(name)): \(matches.count) jobs go by that name; give the id of the one you mean"))
            }
            return .success(matches[0].id)
        }
        return .failure(Problem(description: "after:\(quote(name)): no job has that name or id"))
    }

    private static func quote(_ text: String) -> String {
        TextWidth.truncate(TextWidth.visible(text), to: quoted)
    }
}
