import Foundation
import Scheduler
import SchedulerService
import Testing
@testable import jobtop

@Suite("Job references: ids, prefixes, names")
struct JobReferenceTests {
    static func job(_ uuid: String, name: String? = nil) -> JobInfo {
        JobInfo(id: JobID(uuid: UUID(uuidString: uuid)!), name: name, command: "true")
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

    @Test("a prefix of several, or a name that is also a prefix, is ambiguous; no match is unknown")
    func ambiguousAndUnknown() {
        #expect(JobReference.resolve("ab", in: jobs) == .ambiguous(jobs, count: 3))
        #expect(JobReference.resolve("a", in: jobs) == .ambiguous([jobs[0], jobs[1]], count: 2))
        #expect(JobReference.resolve("ef", in: jobs) == .unknown)
        #expect(JobReference.resolve("", in: jobs) == .unknown)
        let texts = ["ab12", "zz"]
        #expect(throws: JobInputError.self) { try JobReference.jobs(texts, texts.map { JobReference.resolve($0, in: jobs) }) }
    }
}
