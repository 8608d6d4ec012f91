import Foundation
import Scheduler
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

    @Test("a prefix of several, or a name that is also a prefix, is ambiguous; no match is unknown")
    func ambiguousAndUnknown() {
        #expect(JobReference.resolve("ab", in: jobs) == .ambiguous(jobs))
        #expect(JobReference.resolve("a", in: jobs) == .ambiguous([jobs[0], jobs[1]]))
        #expect(JobReference.resolve("ef", in: jobs) == .unknown)
        #expect(JobReference.resolve("", in: jobs) == .unknown)
        #expect(throws: JobInputError.self) { try JobReference.resolveAll(["ab12", "zz"], in: jobs) }
    }
}
