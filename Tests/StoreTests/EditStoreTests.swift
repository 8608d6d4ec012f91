import Foundation
import JobtopTestSupport
import Scheduler
import SchedulerStore
import Testing

/// `e` on `jobtop serve`: the new command is on disk, so a restart runs it.
@Suite("Durable edits")
struct EditStoreTests {
    private func withDurable<R: Sendable>(_ directory: StateDirectory, _ body: (DurableScheduler) async throws -> R) async throws -> R {
        let durable = try DurableScheduler.open(
            directory: directory, configuration: .init(localSlots: 1, gracePeriod: .seconds(2)), storeConfiguration: .init())
        async let running: Void = durable.scheduler.run()
        await durable.restored()
        do {
            let result = try await body(durable)
            await durable.scheduler.shutdown(.graceful)
            await running
            await durable.close()
            return result
        } catch {
            await durable.scheduler.shutdown(.cancelRunning)
            await running
            await durable.close()
            throw error
        }
    }

    @Test("an edited queued job runs its new command after a restart; an edited failed job is retried with it")
    func editSurvivesARestart() async throws {
        let scratch = try Scratch()
        let directory = StateDirectory(path: scratch.file("state"))
        let marker = scratch.file("ran")
        let (queued, failed) = try await withDurable(directory) { durable in
            // A failed job first (dispatch running), then a queued one held by the pause.
            guard case .submitted(let first) = try await durable.perform(.submit([.shell("exit 3")], batch: nil)) else {
                throw SpawnError(message: "no ids")
            }
            for await event in await durable.subscribe(bufferLimit: nil, includeOutput: false) {
                if case .failed(first[0], _, _) = event.kind { break }
                if case .snapshot(let snapshot) = event.kind, snapshot.jobs.contains(where: { $0.id == first[0] && $0.state.isFinished }) { break }
            }
            _ = try await durable.perform(.pause)
            guard case .submitted(let second) = try await durable.perform(.submit([.shell("echo old >> \(marker)")], batch: nil)) else {
                throw SpawnError(message: "no ids")
            }
            _ = try await durable.perform(.edit(second[0], command: "echo new >> \(marker)"))
            // The failed one: edited and retried, it is queued behind the pause.
            _ = try await durable.perform(.edit(first[0], command: "echo fixed >> \(marker)"))
            let snapshot = await durable.currentSnapshot()
            #expect(snapshot.jobs.first { $0.id == first[0] }?.state == .queued)
            return (second[0], first[0])
        }
        #expect(!FileManager.default.fileExists(atPath: marker))
        try await withDurable(directory) { durable in
            let snapshot = await durable.currentSnapshot()
            let byID = Dictionary(uniqueKeysWithValues: snapshot.jobs.map { ($0.id, $0) })
            #expect(byID[queued]?.command == "echo new >> \(marker)")
            #expect(byID[failed]?.command == "echo fixed >> \(marker)")
            #expect(byID[failed]?.state == .queued)
            _ = try await durable.perform(.resume)
            var open: Set<JobID> = [queued, failed]
            for await event in await durable.subscribe(bufferLimit: nil, includeOutput: false) {
                if case .snapshot(let snapshot) = event.kind {
                    for job in snapshot.jobs where job.state.isFinished { open.remove(job.id) }
                }
                if event.kind.isFinal, let id = event.kind.jobID { open.remove(id) }
                if open.isEmpty { break }
            }
        }
        let lines = Set((scratch.read("ran") ?? "").split(separator: "\n").map(String.init))
        #expect(lines == ["new", "fixed"])
    }
}
