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

    /// Finds the job `text` names among `jobs`: a full id wins outright; then a name (what the
    /// user chose: `cancel a` means the job named `a`, not whichever ids start with `a`, as
    /// git prefers a branch to an abbreviated commit); then a prefix of ids (case-insensitive).
    ///
    /// A name several jobs share (`jobtop submit --name build` every night) names the one of them
    /// that has not ended, when exactly one has not: the ended ones are its history. Anything
    /// else with several candidates is ambiguous.
    public static func resolve(_ text: String, in jobs: [JobInfo]) -> Resolution {
        let wanted = text.lowercased()
        guard !wanted.isEmpty else { return .unknown }
        if let exact = jobs.first(where: { $0.id.description == wanted }) { return .found(exact) }
        var named = Candidates()
        var prefixed = Candidates()
        var activeByName: [JobInfo] = []
        for job in jobs {
            if job.name == text {
                named.add(job)
                if !job.state.isFinished && activeByName.count < 2 { activeByName.append(job) }
            } else if job.id.description.hasPrefix(wanted) {
                prefixed.add(job)
            }
        }
        if named.count > 0 {
            if named.count == 1 { return .found(named.shown[0]) }
            if activeByName.count == 1 { return .found(activeByName[0]) }
            return .ambiguous(named.shown, count: named.count)
        }
        switch prefixed.count {
        case 0: return .unknown
        case 1: return .found(prefixed.shown[0])
        default: return .ambiguous(prefixed.shown, count: prefixed.count)
        }
    }

    /// The jobs a reference matched in one way: the first few, and how many in all.
    private struct Candidates {
        var shown: [JobInfo] = []
        var count = 0

        mutating func add(_ job: JobInfo) {
            count += 1
            if shown.count < shownCandidates { shown.append(job) }
        }
    }
}
