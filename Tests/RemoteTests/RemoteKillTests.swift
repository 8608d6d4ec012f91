import Foundation
import JobtopTestSupport
import Scheduler
import Testing

@testable import SchedulerRemote

#if canImport(Glibc)
import Glibc
#endif

/// What happens to a worker's jobs when the worker itself is killed with SIGKILL.
@Suite("A worker killed with SIGKILL", .serialized, .timeLimit(.minutes(2)))
struct RemoteKillTests {
    @Test("kill -9 of a worker: every process of its running jobs is gone soon after, background children included")
    func killedWorkersJobsDoNotRunOn() async throws {
        // Given a worker running two jobs, each a shell with a background child in its group.
        let scratch = try Scratch()
        let coordinator = try await Coordinator.start()
        let worker = try JobtopProcess.worker(for: coordinator, slots: 2, name: "doomed")
        _ = await coordinator.joined(1)
        let files = (0..<2).map { scratch.file("pids-\($0)") }
        for file in files {
            _ = try await coordinator.scheduler.submit(
                .shell("sleep 300 & echo $$ > '\(file).tmp'; echo $! >> '\(file).tmp'; mv '\(file).tmp' '\(file)'; wait"))
        }
        #expect(await eventually(within: .seconds(60)) { files.allSatisfy { pids(in: $0).count == 2 } })
        let processes = files.flatMap { pids(in: $0) }
        #expect(processes.count == 4 && processes.allSatisfy(isRunning))

        // When the worker is killed with SIGKILL (it runs no code of its own after that).
        worker.send(SIGKILL)
        #expect(await worker.wait().status == 128 + SIGKILL)

        // Then its guard kills every one of those processes.
        let gone = await eventually(within: .seconds(30)) { !processes.contains(where: isRunning) }
        #expect(gone, "still running: \(processes.filter(isRunning))")
        for pid in processes where isRunning(pid) { kill(pid, SIGKILL) }
        await coordinator.stop()
    }

    @Test("A job whose worker was killed runs again elsewhere with the same attempt number: its output marks where the new run begins")
    func requeuedOutputIsSetApart() async throws {
        let scratch = try Scratch()
        let coordinator = try await Coordinator.start()
        let doomed = try JobtopProcess.worker(for: coordinator, slots: 1, name: "doomed")
        _ = await coordinator.joined(1)
        let (ran, go) = (scratch.file("ran"), scratch.file("go"))
        let events = await coordinator.scheduler.events(includeOutput: false)
        let id = try await coordinator.scheduler.submit(
            .shell("echo run; echo x >> '\(ran)'; while [ ! -e '\(go)' ]; do sleep 0.02; done; echo done"))
        #expect(await eventually(within: .seconds(60)) { FileManager.default.fileExists(atPath: ran) })
        // Its first line has reached the coordinator (on a busy machine the kill could come
        // before the worker sent it: then there is nothing to set apart).
        #expect(await eventually(within: .seconds(60)) { await coordinator.scheduler.output(of: id).lines.map(\.text) == ["run"] })
        doomed.send(SIGKILL)
        _ = await doomed.wait()
        let other = try JobtopProcess.worker(for: coordinator, slots: 1, name: "other")
        defer { other.send(SIGKILL) }
        #expect(await eventually(within: .seconds(60)) { ((try? String(contentsOfFile: ran, encoding: .utf8)) ?? "").count == 4 })
        try Data().write(to: URL(fileURLWithPath: go))
        var end: SchedulerEvent.Kind?
        for await event in events where event.kind.isFinal && event.kind.jobID == id {
            end = event.kind
            break
        }
        #expect(end.map { if case .succeeded(_, 1) = $0 { true } else { false } } == true, "\(String(describing: end))")
        let tail = await coordinator.scheduler.output(of: id).lines.map(\.text)
        #expect(tail == ["run", OutputLine.workerLostSeparator, "run", "done"])
        await coordinator.stop()
    }

    @Test("A worker that drains leaves a keep_background job's background process running, as a local run does")
    func drainedWorkerKeepsKeptBackground() async throws {
        // Given a worker that runs a keep_background job leaving a process behind.
        let scratch = try Scratch()
        let coordinator = try await Coordinator.start()
        let worker = try JobtopProcess.worker(for: coordinator, slots: 1, name: "keeper")
        _ = await coordinator.joined(1)
        let file = scratch.file("pid")
        var spec = JobSpec.shell("sleep 300 > /dev/null 2>&1 & echo $! > '\(file).tmp'; mv '\(file).tmp' '\(file)'")
        spec.keepBackground = true
        let end = try await coordinator.run(spec)
        #expect(end.map { if case .succeeded = $0 { true } else { false } } == true)
        let kept = try #require(pids(in: file).first)

        // When the worker drains and exits.
        worker.send(SIGTERM)
        #expect(await worker.wait(atMost: .seconds(60))?.status == 0)

        // Then the guard, which ends with it, did not touch the kept process.
        #expect(isRunning(kept))
        kill(kept, SIGKILL)
        await coordinator.stop()
    }
}
