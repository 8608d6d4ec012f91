import Scheduler

/// How the client commands name a job: its full id, any unique prefix of it (the 8-digit short
/// form is one), or its name.
enum JobReference {
    /// What a reference names.
    enum Resolution: Equatable {
        case found(JobInfo)
        /// Several jobs: the reference is ambiguous.
        case ambiguous([JobInfo])
        case unknown
    }

    /// Finds the job `text` names among `jobs`: a full id wins outright; otherwise every job
    /// whose name is `text` or whose id starts with it (case-insensitive) is a candidate.
    static func resolve(_ text: String, in jobs: [JobInfo]) -> Resolution {
        let wanted = text.lowercased()
        guard !wanted.isEmpty else { return .unknown }
        if let exact = jobs.first(where: { $0.id.description == wanted }) { return .found(exact) }
        let candidates = jobs.filter { $0.name == text || $0.id.description.hasPrefix(wanted) }
        switch candidates.count {
        case 0: return .unknown
        case 1: return .found(candidates[0])
        default: return .ambiguous(candidates)
        }
    }

    /// Resolves every reference, or says why one cannot be: nothing is done unless all are
    /// found.
    static func resolveAll(_ texts: [String], in jobs: [JobInfo]) throws(JobInputError) -> [JobInfo] {
        var found: [JobInfo] = []
        for text in texts {
            switch resolve(text, in: jobs) {
            case .found(let job): found.append(job)
            case .unknown:
                throw JobInputError(.invalidValue, "no job '\(text)' (give its id, a unique prefix of it, or its name; see 'jobtop status --all')")
            case .ambiguous(let candidates):
                let shown = candidates.prefix(10).map { "\($0.id.short) (\($0.displayName))" }.joined(separator: ", ")
                let more = candidates.count > 10 ? ", and \(candidates.count - 10) more" : ""
                throw JobInputError(.invalidValue, "'\(text)' matches \(candidates.count) jobs: \(shown)\(more); give more of the id")
            }
        }
        return found
    }
}
