import Foundation
import Scheduler
import SchedulerService
import Testing
@testable import jobtop

@Suite("Job references: ids, prefixes, names")
struct JobReferenceTests {
    static func job(_ uuid: String, name: String? = nil, state: JobState = .queued, submittedAt: SchedulerTime = .zero) -> JobInfo {
        JobInfo(id: JobID(uuid: UUID(uuidString: uuid)!), name: name, command: "true", state: state, submittedAt: submittedAt)
    }

    let jobs = [
        job("AB120000-0000-4000-8000-000000000001", name: "build"),
        job("AB340000-0000-4000-8000-000000000002"),
        job("CD560000-0000-4000-8000-000000000003", name: "ab"),
    ]

    @Test("a unique prefix, the short form, the full id and a name each find their job")
    func found() {
        #expect(JobReference.resolve("ab12", in: jobs) == .found(jobs[0]))
        #expect(JobReference.resolve("AB34", in: jobs) == .found(jobs[1]))
        #expect(JobReference.resolve("cd560000", in: jobs) == .found(jobs[2]))
        #expect(JobReference.resolve(jobs[1].id.description, in: jobs) == .found(jobs[1]))
        #expect(JobReference.resolve("build", in: jobs) == .found(jobs[0]))
    }

    @Test("many candidates: the first ten, and the count")
    func manyCandidates() throws {
        let many = (0..<25).map { Self.job(String(format: "EE%06X-0000-4000-8000-000000000000", $0)) }
        guard case .ambiguous(let shown, let count) = JobReference.resolve("ee", in: many) else {
            Issue.record("not ambiguous")
            return
        }
        #expect(shown.count == 10 && count == 25)
        #expect(throws: JobInputError.self) { try JobReference.jobs(["ee"], [.ambiguous(shown, count: count)]) }
    }

    @Test("a name wins over ids it is a prefix of; a prefix of several is ambiguous; no match is unknown")
    func ambiguousAndUnknown() {
        #expect(JobReference.resolve("ab", in: jobs) == .found(jobs[2]), "the job named 'ab', not the ids starting with ab")
        #expect(JobReference.resolve("AB", in: jobs) == .ambiguous([jobs[0], jobs[1]], count: 2), "names match exactly: 'AB' is only a prefix")
        #expect(JobReference.resolve("a", in: jobs) == .ambiguous([jobs[0], jobs[1]], count: 2))
        #expect(JobReference.resolve("ef", in: jobs) == .unknown)
        #expect(JobReference.resolve("", in: jobs) == .unknown)
        let texts = ["ab12", "zz"]
        #expect(throws: JobInputError.self) { try JobReference.jobs(texts, texts.map { JobReference.resolve($0, in: jobs) }) }
    }

    @Test("many references at once (cancel of thousands of ids): each resolves as it would alone, candidates in the list's order")
    func manyReferencesAtOnce() {
        var random = SystemRandomNumberGenerator()
        // Ids sharing prefixes, in no order, some named, a name shared by several.
        let many = (0..<600).map { index in
            Self.job(String(format: "%02X%06X-0000-4000-8000-%012X", index % 7, index * 7919 % 4096, index),
                     name: index % 50 == 0 ? "n\(index % 3)" : nil)
        }.shuffled(using: &random)
        let texts = many.prefix(100).map { $0.id.description } + many.prefix(100).map { $0.id.short }
            + ["0", "01", "06000", "n0", "n1", "n2", "N0", "zz", "", many[5].id.description.uppercased()]
        let each = texts.map { text in JobReference.resolve(text, in: many) }
        // The one-at-a-time answer, written out plainly: an exact id, then a name, then the ids
        // it starts.
        let plain = texts.map { text -> JobReference.Resolution in
            let wanted = text.lowercased()
            if wanted.isEmpty { return .unknown }
            if let exact = many.first(where: { $0.id.description == wanted }) { return .found(exact) }
            let named = many.filter { $0.name == text }
            if named.count == 1 { return .found(named[0]) }
            if !named.isEmpty {
                let active = named.filter { !$0.state.isFinished }
                if active.isEmpty { return .found(named.last { $0.submittedAt == named.map(\.submittedAt).max()! }!) }
                return active.count == 1 ? .found(active[0]) : .ambiguous(Array(named.prefix(10)), count: named.count)
            }
            let prefixed = many.filter { $0.id.description.hasPrefix(wanted) }
            return prefixed.isEmpty ? .unknown : prefixed.count == 1 ? .found(prefixed[0]) : .ambiguous(Array(prefixed.prefix(10)), count: prefixed.count)
        }
        #expect(JobReference.resolve(texts, in: many) == plain)
        #expect(each == plain)
    }

    @Test("a name several jobs share names the one that has not ended, if only one has not; when all have ended, the newest (it was ambiguous: --after build exited 2 once tonight's build had ended)")
    func reusedName() {
        let earlier = Self.job("EF000000-0000-4000-8000-000000000001", name: "nightly", state: .succeeded(attempts: 1), submittedAt: .seconds(1))
        let failed = Self.job("EF000000-0000-4000-8000-000000000002", name: "nightly", state: .failed(reason: .exitStatus(1), attempts: 1), submittedAt: .seconds(2))
        let running = Self.job("EF000000-0000-4000-8000-000000000003", name: "nightly", state: .running(worker: WorkerID(), attempt: 1, since: .zero, stopping: nil))
        let queued = Self.job("EF000000-0000-4000-8000-000000000004", name: "nightly")
        #expect(JobReference.resolve("nightly", in: [earlier, failed, running]) == .found(running))
        // Two that have not ended: which one is meant cannot be told.
        #expect(JobReference.resolve("nightly", in: [earlier, running, queued]) == .ambiguous([earlier, running, queued], count: 3))
        // None: the newest, wherever it is in the list.
        #expect(JobReference.resolve("nightly", in: [earlier, failed]) == .found(failed))
        #expect(JobReference.resolve("nightly", in: [failed, earlier]) == .found(failed))
        // Ids that start with the name do not make it ambiguous: the name is meant.
        let named = Self.job("AB000000-0000-4000-8000-000000000005", name: "ab", state: .running(worker: WorkerID(), attempt: 1, since: .zero, stopping: nil))
        let prefixed = Self.job("AB100000-0000-4000-8000-000000000006", state: .succeeded(attempts: 1))
        #expect(JobReference.resolve("ab", in: [prefixed, named]) == .found(named))
        let other = Self.job("AB200000-0000-4000-8000-000000000007", name: "ab")
        #expect(JobReference.resolve("ab", in: [prefixed, named, other]) == .ambiguous([named, other], count: 2), "two named ab that have not ended")
    }

    @Test("a long run of ids is parsed apart: the first three words stay (an option's value, a signal, an id), the rest is taken in order")
    func longListsParsedApart() {
        let ids = (0..<100).map { "id\($0)" }
        let (arguments, taken) = ManyValues.longestRun(["--connect", "h:1"] + ids + ["--token-file", "t"])
        #expect(arguments == ["--connect", "h:1", "id0", "id1", "--token-file", "t"])
        #expect(taken == Array(ids[2...]))
        // The longest run is taken, not the first.
        let (others, rest) = ManyValues.longestRun(["TERM", "a", "--connect", "h:1"] + ids)
        #expect(others == ["TERM", "a", "--connect", "h:1", "id0", "id1"] && rest == Array(ids[2...]))
        // A short list is parsed as usual.
        let short = ["TERM"] + ids.prefix(ManyValues.parsedAsUsual - 1)
        #expect(ManyValues.longestRun(short) == (short, []))
    }

    @Test("many repeated options are parsed apart, each one's first left, in order, up to a '--'")
    func repeatedOptionsParsedApart() {
        let options = [["-c", "--command"], ["--after"]]
        let commands = (0..<70).flatMap { ["-c", "echo \($0)"] }
        let arguments = ["--after", "a"] + commands.prefix(10) + ["--command=x", "--after", "b"] + commands.dropFirst(10) + ["--", "-c", "z"]
        let (rest, taken) = ManyValues.split(arguments, idList: false, options: options)
        #expect(rest == ["--after", "a", "-c", "echo 0", "--", "-c", "z"])
        #expect(taken.options[0] == (1..<5).map { "echo \($0)" } + ["x"] + (5..<70).map { "echo \($0)" })
        #expect(taken.options[1] == ["b"])
        // A few are parsed as usual.
        let few = ["-c", "a", "--after", "b", "-c", "c"]
        #expect(ManyValues.split(few, idList: false, options: options).arguments == few)
    }

    @Test("submit's short forms: 8 digits, longer where two of the submission share them (never ending on a dash), each naming one of them")
    func distinctShortForms() {
        let ids = [
            "b91caa5a-1234-4000-8000-000000000001", "0123abcd-0000-4000-8000-000000000002",
            "b91caa5a-1299-4000-8000-000000000003", "b91caa5b-0000-4000-8000-000000000004",
        ].map { JobID(uuid: UUID(uuidString: $0)!) }
        let forms = JobID.distinctShortForms(of: ids)
        #expect(forms == ["b91caa5a-123", "0123abcd", "b91caa5a-129", "b91caa5b"])
        let jobs = ids.map { JobInfo(id: $0, command: "true") }
        for (form, job) in zip(forms, jobs) { #expect(JobReference.resolve(form, in: jobs) == .found(job)) }
        // Alike up to the dash: one digit past it.
        let pair = ["aaaaaaaa-1000-4000-8000-000000000000", "aaaaaaaa-2000-4000-8000-000000000000"].map { JobID(uuid: UUID(uuidString: $0)!) }
        #expect(JobID.distinctShortForms(of: pair) == ["aaaaaaaa-1", "aaaaaaaa-2"])
        // One id twice (a job that joined another with its key) is one job: short, both times,
        // and as long as its clash with another needs (it was printed whole).
        #expect(JobID.distinctShortForms(of: [ids[1], ids[1]]) == ["0123abcd", "0123abcd"])
        #expect(JobID.distinctShortForms(of: [ids[0], ids[2], ids[0]]) == ["b91caa5a-123", "b91caa5a-129", "b91caa5a-123"])
    }
}

