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
    /// that has not ended, when exactly one has not: the ended ones are its history; when all
    /// have ended, the newest of them (it was ambiguous: `--after build` once tonight's build had
    /// ended exited 2). Anything else with several candidates is ambiguous.
    public static func resolve(_ text: String, in jobs: [JobInfo]) -> Resolution {
        resolve([text], in: jobs)[0]
    }

    /// ``resolve(_:in:)`` of each of `texts`, with the jobs indexed once: `cancel` of 10,000
    /// ids among 10,000 jobs is 10,000 lookups, not 10,000 walks of the list.
    public static func resolve(_ texts: [String], in jobs: [JobInfo]) -> [Resolution] {
        guard !texts.isEmpty else { return [] }
        let index = Index(jobs)
        return texts.map { index.resolve($0) }
    }

    /// The jobs by id (sorted, for prefixes) and by name, each job's place in the list kept so
    /// that candidates come in the list's order.
    private struct Index {
        let jobs: [JobInfo]
        /// Every id as text with its job's place, sorted by the text.
        let ids: [(text: String, place: Int)]
        /// Each name's jobs, by place.
        let names: [String: [Int]]

        init(_ jobs: [JobInfo]) {
            self.jobs = jobs
            ids = jobs.indices.map { (jobs[$0].id.description, $0) }.sorted { $0.text < $1.text }
            var names: [String: [Int]] = [:]
            for place in jobs.indices {
                if let name = jobs[place].name { names[name, default: []].append(place) }
            }
            self.names = names
        }

        func resolve(_ text: String) -> Resolution {
            let wanted = text.lowercased()
            guard !wanted.isEmpty else { return .unknown }
            // The ids that start with `wanted` are one run of the sorted list, from the first
            // that is not below it.
            var low = 0
            var high = ids.count
            while low < high {
                let middle = (low + high) / 2
                if ids[middle].text < wanted { low = middle + 1 } else { high = middle }
            }
            if low < ids.count, ids[low].text == wanted { return .found(jobs[ids[low].place]) }
            if let places = names[text] {
                if places.count == 1 { return .found(jobs[places[0]]) }
                let active = places.lazy.filter { !jobs[$0].state.isFinished }.prefix(2)
                if active.count == 1 { return .found(jobs[active.first!]) }
                if active.isEmpty, let newest = places.max(by: { (jobs[$0].submittedAt, $0) < (jobs[$1].submittedAt, $1) }) {
                    // All ended: the newest is the name's present (tonight's build, ended too).
                    return .found(jobs[newest])
                }
                return .ambiguous(places.prefix(shownCandidates).map { jobs[$0] }, count: places.count)
            }
            var places: [Int] = []
            var position = low
            while position < ids.count, ids[position].text.hasPrefix(wanted) {
                places.append(ids[position].place)
                position += 1
            }
            switch places.count {
            case 0: return .unknown
            case 1: return .found(jobs[places[0]])
            default: return .ambiguous(places.sorted().prefix(shownCandidates).map { jobs[$0] }, count: places.count)
            }
        }
    }

}
