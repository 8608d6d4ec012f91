import Testing
@testable import Scheduler

/// A worker that holds attempts and begins and ends each at once: a remote worker whose
/// `Started` and `Finished` come in one read, or a Slurm job that ran between two polls.
private final class BeginsAndEndsAtOnce: Worker {
    let descriptor = WorkerDescriptor(id: WorkerID(), name: "at-once", kind: .remote, slots: 1, holdsAttempts: true)
    var holdsAttempts: Bool { true }

    func execute(_ assignment: JobAssignment) async -> Termination {
        assignment.reporter.began()
        return .exit(0)
    }

    func leave() {}
}

@Suite struct BeganOrderTests {
    @Test("A held attempt's begin is taken before its end when its worker reports both at once: every job's `began` comes before its `succeeded` (a full run saw a job end with none)")
    func beganComesBeforeTheEnd() async throws {
        try await Scheduler.withScheduler(configuration: .init(localSlots: 0)) { scheduler in
            let events = await scheduler.events(includeOutput: false, delivery: .lossless)
            await scheduler.addWorker(BeginsAndEndsAtOnce())
            let ids = try await scheduler.submit(contentsOf: (0..<200).map { _ in .shell("true") })
            var began: Set<JobID> = []
            var endedFirst: [JobID] = []
            var ended = 0
            for await event in events {
                switch event.kind {
                case .began(let id, _):
                    began.insert(id)
                case .succeeded(let id, _):
                    if !began.contains(id) { endedFirst.append(id) }
                    ended += 1
                default:
                    break
                }
                if ended == ids.count { break }
            }
            #expect(endedFirst.isEmpty, "\(endedFirst.count) of \(ids.count) jobs ended before they began")
        }
    }
}
