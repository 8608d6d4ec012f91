import Scheduler

/// One `--group-limit NAME=N`: at most N of group NAME's jobs run at once, whatever the job
/// file's `parallel` says.
struct GroupLimit: Sendable, Equatable {
    /// The group.
    var name: String
    /// The most of its jobs that run at once, 1 or more.
    var limit: Int

    /// Reads `NAME=N`.
    ///
    /// - Throws: A message that says what is wrong and what to write (the argument parser puts
    ///   the option and the value before it).
    static func parse(_ text: String) throws(JobInputError) -> GroupLimit {
        let usage = "write NAME=N, e.g. --group-limit download=2"
        guard let equals = text.lastIndex(of: "=") else {
            throw JobInputError(.invalidValue, "it has no '=': \(usage)")
        }
        let name = String(text[..<equals])
        let number = String(text[text.index(after: equals)...])
        do {
            try SchedulerCore.validateGroupName(name)
        } catch {
            throw JobInputError(.invalidValue, "\(error.message); \(usage)")
        }
        guard let limit = Int(number) else {
            throw JobInputError(.invalidValue, "'\(number)' is not a whole number; \(usage)")
        }
        guard limit >= 1 else {
            throw JobInputError(.invalidValue, "the limit must be at least 1, not \(limit)")
        }
        return GroupLimit(name: name, limit: limit)
    }

    /// `groups` with each of `limits` applied (the last one given for a group wins); a limit
    /// on the default group adds it.
    ///
    /// - Throws: ``JobInputError`` `.unknownGroup` for a group that is neither `default` nor
    ///   among `groups`.
    static func apply(_ limits: [GroupLimit], to groups: [JobGroup]) throws(JobInputError) -> [JobGroup] {
        var result = groups
        for limit in limits {
            if let index = result.firstIndex(where: { $0.name == limit.name }) {
                result[index].limit = limit.limit
            } else if limit.name == JobSpec.defaultGroup {
                result.insert(JobGroup(name: limit.name, limit: limit.limit), at: 0)
            } else {
                let known = [JobSpec.defaultGroup] + groups.map(\.name).filter { $0 != JobSpec.defaultGroup }
                throw JobInputError(
                    .unknownGroup,
                    "--group-limit \(limit.name)=\(limit.limit): no group '\(limit.name)'\(JobFile.hint(limit.name, known)) (groups: \(known.joined(separator: ", ")); a job file declares groups under [groups])")
            }
        }
        return result
    }
}
