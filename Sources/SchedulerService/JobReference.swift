import Scheduler

/// How the client commands name a job: its full id, any unique prefix of it (the 8-digit short
/// form is one), or its name. Resolved by the serve (``ControlClient/resolve(_:)``), so a
/// client never needs the whole job list to find one job.
public enum JobReference {
    /// What a reference names.
    public enum Resolution: Equatable, Sendable, Codable {
        case found(JobInfo)
        /// Several jobs: the first few of them, and how many there are in all.
        case ambiguous([JobInfo], count: Int)
        case unknown
    }

    /// How many candidates an ambiguous reference brings back.
    public static let shownCandidates = 10

    /// Finds the job `text` names among `jobs`: a full id wins outright; otherwise every job
    /// whose name is `text` or whose id starts with it (case-insensitive) is a candidate.
    ///
    /// A name several jobs share (`jobtop submit --name build` every night) names the one of them
    /// that has not ended, when exactly one has not and no id starts with `text`: the ended ones
    /// are its history. Anything else with several candidates is ambiguous.
    public static func resolve(_ text: String, in jobs: [JobInfo]) -> Resolution {
        let wanted = text.lowercased()
        guard !wanted.isEmpty else { return .unknown }
        if let exact = jobs.first(where: { $0.id.description == wanted }) { return .found(exact) }
        var candidates: [JobInfo] = []
        var count = 0
        var byPrefix = 0
        var activeByName: [JobInfo] = []
        for job in jobs {
            let isPrefix = job.id.description.hasPrefix(wanted)
            guard isPrefix || job.name == text else { continue }
            count += 1
            if candidates.count < shownCandidates { candidates.append(job) }
            if isPrefix {
                byPrefix += 1
            } else if !job.state.isFinished && activeByName.count < 2 {
                activeByName.append(job)
            }
        }
        switch count {
        case 0: return .unknown
        case 1: return .found(candidates[0])
        default:
            if byPrefix == 0 && activeByName.count == 1 { return .found(activeByName[0]) }
            return .ambiguous(candidates, count: count)
        }
    }
}
