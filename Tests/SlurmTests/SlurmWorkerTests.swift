import Foundation
import JobtopTestSupport
import Scheduler
import SchedulerSlurm
import Testing

/// A Slurm that answers from a table the test controls: `sbatch` gives ids, `squeue` lists the
/// jobs not ended, `scontrol` tells how one ended, `scancel` cancels. Every call is recorded.
final class FakeSlurm: SlurmCommands {
    struct Job {
        var state = "PENDING"
        var exit = "0:0"
    }

    struct State {
        var nextID = 100
        var jobs: [String: Job] = [:]
        var calls: [(command: String, arguments: [String])] = []
        var squeueFails = false
        /// While set, `scancel --full --signal=TERM` does not return until it is signalled (as
        /// scancel retries a suspended job's SIGTERM); counted in `heldSignals`.
        var holdsSignals: DispatchSemaphore?
        var heldSignals = 0
        /// While set, sbatch cannot reach the controller.
        var controllerDown = false
    }

    let state = Locked(State())

    func run(_ command: String, _ arguments: [String]) -> SlurmCommandResult {
        if command == "scancel", arguments.contains("--signal=TERM"), let hold = state.withLock({ state -> DispatchSemaphore? in
            guard let hold = state.holdsSignals else { return nil }
            state.heldSignals += 1
            return hold
        }) {
            hold.wait()
            hold.signal()
            return SlurmCommandResult(status: 1, output: "", error: "scancel: error: Job can not be altered now, try again later")
        }
        return state.withLock { state in
            state.calls.append((command, arguments))
            switch command {
            case "sbatch":
                if state.controllerDown {
                    return SlurmCommandResult(
                        status: 1, output: "",
                        error: "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)\n")
                }
                let id = String(state.nextID)
                state.nextID += 1
                state.jobs[id] = Job()
                return SlurmCommandResult(status: 0, output: id + "\n", error: "")
            case "squeue":
                if state.squeueFails {
                    return SlurmCommandResult(status: 1, output: "", error: "squeue: error: Socket timed out on send/recv operation")
                }
                let ids = arguments.last?.split(separator: ",").map(String.init) ?? []
                let lines = ids.compactMap { id -> String? in
                    guard let job = state.jobs[id], ["PENDING", "RUNNING"].contains(job.state) else { return nil }
                    return "\(id)|\(job.state)|\(job.state == "PENDING" ? "Priority" : "None")"
                }
                return SlurmCommandResult(status: 0, output: lines.map { $0 + "\n" }.joined(), error: "")
            case "scontrol":
                let id = arguments.last ?? ""
                guard let job = state.jobs[id] else {
                    return SlurmCommandResult(status: 1, output: "", error: "slurm_load_jobs error: Invalid job id specified")
                }
                return SlurmCommandResult(
                    status: 0, output: "JobId=\(id) JobName=x JobState=\(job.state) Reason=None ExitCode=\(job.exit)\n", error: "")
            case "scancel":
                // (`--state=PENDING`: only those still pending.)
                let onlyPending = arguments.contains("--state=PENDING")
                for id in arguments where state.jobs[id] != nil && (!onlyPending || state.jobs[id]?.state == "PENDING") {
                    state.jobs[id]?.state = "CANCELLED"
                }
                return SlurmCommandResult(status: 0, output: "", error: "")
            default:
                return SlurmCommandResult(status: 127, output: "", error: "\(command): not faked")
            }
        }
    }

    var submitted: [String] { state.withLock { $0.jobs.keys.sorted() } }

    func set(_ id: String, state newState: String, exit: String = "0:0") {
        state.withLock { $0.jobs[id] = Job(state: newState, exit: exit) }
    }

    func calls(_ command: String) -> [[String]] {
        state.withLock { $0.calls.filter { $0.command == command }.map(\.arguments) }
    }
}

/// The worker's logic above Slurm's commands, on a fake Slurm (the real one is in
/// SlurmEndToEndTests).
@Suite("SlurmWorker on a fake Slurm", .timeLimit(.minutes(5)))
struct SlurmWorkerTests {
    /// Runs `body` with a scheduler whose only worker is a SlurmWorker over `slurm`.
    func withWorker(
        _ slurm: FakeSlurm, submitted: Int, _ body: (Scheduler, EventStream) async throws -> Void
    ) async throws {
        let scratch = try Scratch()
        let worker = try SlurmWorker(
            configuration: SlurmConfiguration(submitted: submitted, pollInterval: .milliseconds(20), directory: scratch.file("slurm")),
            commands: slurm)
        let scheduler = Scheduler(configuration: .init(localSlots: 0, seed: 3))
        let events = await scheduler.events()
        async let running: Void = scheduler.run()
        await scheduler.addWorker(worker)
        try await body(scheduler, events)
        await scheduler.shutdown(.cancelRunning)
        await running
    }

    /// The final events of `ids`, in the order they come.
    func finals(of ids: Set<JobID>, in events: EventStream) async -> [JobID: SchedulerEvent.Kind] {
        var finals: [JobID: SchedulerEvent.Kind] = [:]
        for await event in events {
            if event.kind.isFinal, let id = event.kind.jobID, ids.contains(id) { finals[id] = event.kind }
            if finals.count == ids.count { break }
        }
        return finals
    }

    @Test("Twenty submitted jobs are watched with one squeue call per poll for all of them, and end as scontrol says")
    func onePollForAll() async throws {
        let slurm = FakeSlurm()
        try await withWorker(slurm, submitted: 20) { scheduler, events in
            // Given 20 jobs, all submitted to Slurm at once
            let ids = try await scheduler.submit(contentsOf: (0..<20).map { _ in JobSpec.shell("true") })
            #expect(await eventually(within: .seconds(120)) { slurm.submitted.count == 20 })
            // When Slurm runs them, and half succeed and half exit 3
            for (index, id) in slurm.submitted.enumerated() {
                slurm.set(id, state: index % 2 == 0 ? "COMPLETED" : "FAILED", exit: index % 2 == 0 ? "0:0" : "3:0")
            }
            let finals = await finals(of: Set(ids), in: events)
            // Then each ended as Slurm said
            #expect(finals.values.count { if case .succeeded = $0 { true } else { false } } == 10)
            #expect(finals.values.count { if case .failed(_, .exitStatus(3), _) = $0 { true } else { false } } == 10)
            // And every squeue call named all the jobs in Slurm at the time, in one -j list:
            // once all 20 were in, a call listed all 20 (never one call per job)
            let lists = slurm.calls("squeue").map { $0.last?.split(separator: ",").count ?? 0 }
            #expect(lists.contains(20), "\(lists)")
            // And scontrol was asked once per job that left the queue
            #expect(slurm.calls("scontrol").count == 20)
        }
    }

    @Test("squeue failing for a while decides nothing; a job Slurm has forgotten fails with a reason")
    func failuresOfSlurm() async throws {
        let slurm = FakeSlurm()
        try await withWorker(slurm, submitted: 2) { scheduler, events in
            // Given a running job while squeue fails
            slurm.state.withLock { $0.squeueFails = true }
            let id = try await scheduler.submit(.shell("true"))
            #expect(await eventually(within: .seconds(120)) { slurm.submitted.count == 1 })
            let slurmID = try #require(slurm.submitted.first)
            slurm.set(slurmID, state: "RUNNING")
            #expect(await eventually(within: .seconds(120)) { slurm.calls("squeue").count >= 3 })
            // Then it is still running (nothing was decided without an answer)
            #expect(await scheduler.snapshot().jobs.first { $0.id == id }?.state.kind == .running)
            // When squeue answers again and Slurm has no record of the job
            slurm.state.withLock { state in
                state.jobs[slurmID] = nil
                state.squeueFails = false
            }
            // Then the attempt fails, saying so
            let final = await finals(of: [id], in: events)[id]
            guard case .failed(_, .error(let message), _)? = final else {
                Issue.record("expected a failure, got \(String(describing: final))")
                return
            }
            #expect(message.contains("Slurm has no record of job \(slurmID)"))
        }
    }

    @Test("A job's timeout counts from when Slurm runs it, not while it waits in Slurm's queue")
    func timeoutCountsFromRunning() async throws {
        let slurm = FakeSlurm()
        let scratch = try Scratch()
        let worker = try SlurmWorker(
            configuration: SlurmConfiguration(submitted: 1, pollInterval: .milliseconds(20), directory: scratch.file("slurm")),
            commands: slurm)
        let clock = ManualClock()
        let scheduler = Scheduler(configuration: .init(localSlots: 0, seed: 3), clock: clock)
        let events = await scheduler.events()
        async let running: Void = scheduler.run()
        await scheduler.addWorker(worker)

        // Given a job with a 10 s timeout, pending in Slurm for a minute.
        let id = try await scheduler.submit(JobSpec(work: .shell("true"), timeout: .seconds(10)))
        #expect(await eventually(within: .seconds(120)) { slurm.submitted.count == 1 && slurm.calls("squeue").count >= 1 })
        clock.advance(by: .seconds(60))

        // When Slurm runs it.
        let slurmID = try #require(slurm.submitted.first)
        slurm.set(slurmID, state: "RUNNING")

        // Then its timeout is set for 10 s from then (none fired while it waited: nothing was
        // cancelled), and fires there.
        let armed = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await clock.waitForSleeper(until: ManualClock.Instant(offset: .seconds(70)))
                return true
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(60))  // a deadline for the failure, not a wait
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        #expect(armed, "no timer for 10 s after Slurm ran it")
        #expect(slurm.calls("scancel").isEmpty, "stopped while it waited in Slurm's queue: \(slurm.calls("scancel"))")
        clock.advance(by: .seconds(10))
        let final = await finals(of: [id], in: events)[id]
        guard case .failed(_, .timeout(.seconds(10)), _)? = final else {
            Issue.record("expected a timeout, got \(String(describing: final))")
            await scheduler.shutdown(.cancelRunning)
            await running
            return
        }
        await scheduler.shutdown(.cancelRunning)
        await running
    }

    @Test("A job cancelled while pending in Slurm is cancelled outright (no SIGTERM first) and ends cancelled")
    func cancelPending() async throws {
        let slurm = FakeSlurm()
        try await withWorker(slurm, submitted: 1) { scheduler, events in
            let id = try await scheduler.submit(.shell("true"))
            #expect(await eventually(within: .seconds(120)) { slurm.submitted.count == 1 && slurm.calls("squeue").count >= 1 })
            try await scheduler.cancel(id)
            let final = await finals(of: [id], in: events)[id]
            #expect(final?.name == "cancelled")
            let cancels = slurm.calls("scancel")
            #expect(cancels == [slurm.submitted.prefix(1).map { $0 }], "\(cancels)")
        }
    }

    @Test("A pause gives back what waits in Slurm's queue (scancel --state=PENDING), not what runs; given back, a job waits uncounted, and resumed it is submitted again")
    func pauseGivesPendingJobsBack() async throws {
        let slurm = FakeSlurm()
        try await withWorker(slurm, submitted: 2) { scheduler, events in
            let seen = Self.collect(events)
            defer { seen.task.cancel() }
            // Given two jobs in Slurm, one running (begun) and one pending
            let ids = try await scheduler.submit(contentsOf: [.shell("first"), .shell("second")])
            #expect(await eventually(within: .seconds(120)) { slurm.submitted.count == 2 })
            // (Which Slurm job is whose: their sbatch calls may come in either order.)
            #expect(await eventually(within: .seconds(120)) { seen.placement(of: ids[0]) != nil })
            let running = try #require(seen.placement(of: ids[0]))
            let pending = try #require(slurm.submitted.first { $0 != running })
            slurm.set(running, state: "RUNNING")
            #expect(await eventually(within: .seconds(120)) { seen.has { if case .began(ids[0], _) = $0 { true } else { false } } })
            // When everything is paused
            await scheduler.pause()
            // Then only the pending one is asked back from Slurm, and it waits in the queue, its attempt not counted
            #expect(await eventually(within: .seconds(120)) {
                seen.has { if case .requeued(ids[1], .withdrawnForPause) = $0 { true } else { false } }
            })
            #expect(slurm.calls("scancel") == [["--state=PENDING", pending]], "\(slurm.calls("scancel"))")
            let given = await scheduler.snapshot().jobs.first { $0.id == ids[1] }
            #expect(given?.attempts == 0 && given?.state.kind == .queued)
            #expect(await scheduler.snapshot().jobs.first { $0.id == ids[0] }?.state.kind == .running)
            // When resumed, then it is submitted again and runs
            await scheduler.resume()
            #expect(await eventually(within: .seconds(120)) { slurm.submitted.count == 3 })
            slurm.set(running, state: "COMPLETED")
            slurm.set(slurm.submitted[2], state: "COMPLETED")
            #expect(await eventually(within: .seconds(120)) {
                ids.allSatisfy { id in seen.has { if case .succeeded(id, attempts: 1) = $0 { true } else { false } } }
            })
        }
    }

    @Test("A stop Slurm holds up (scancel retrying 'try again later') stalls nothing else: other jobs are still submitted and polled, and the kill after the grace period ends it")
    func heldUpStopStallsNothing() async throws {
        let slurm = FakeSlurm()
        let release = DispatchSemaphore(value: 0)
        slurm.state.withLock { $0.holdsSignals = release }
        let scratch = try Scratch()
        let worker = try SlurmWorker(
            configuration: SlurmConfiguration(
                submitted: 2, pollInterval: .milliseconds(20), gracePeriod: .milliseconds(200), directory: scratch.file("slurm")),
            commands: slurm)
        let scheduler = Scheduler(configuration: .init(localSlots: 0, gracePeriod: .milliseconds(200), seed: 3))
        let seen = Self.collect(await scheduler.events())
        defer { seen.task.cancel() }
        async let running: Void = scheduler.run()
        await scheduler.addWorker(worker)
        // Given a job running in Slurm
        let first = try await scheduler.submit(.shell("first"))
        #expect(await eventually(within: .seconds(120)) { slurm.submitted.count == 1 })
        slurm.set(slurm.submitted[0], state: "RUNNING")
        #expect(await eventually(within: .seconds(120)) { seen.has { if case .began(first, _) = $0 { true } else { false } } })
        // When it is cancelled and its SIGTERM's scancel does not return
        try await scheduler.cancel(first)
        #expect(await eventually(within: .seconds(120)) { slurm.state.withLock { $0.heldSignals } == 1 })
        // Then another job is still submitted and ends as Slurm says
        let second = try await scheduler.submit(.shell("second"))
        #expect(await eventually(within: .seconds(120)) { slurm.submitted.count == 2 })
        slurm.set(slurm.submitted[1], state: "COMPLETED")
        #expect(await eventually(within: .seconds(120)) { seen.has { if case .succeeded(second, attempts: 1) = $0 { true } else { false } } })
        // And the kill after the grace period (SIGKILL, then a plain scancel) ends the first
        #expect(await eventually(within: .seconds(120)) { seen.has { if case .cancelled(first) = $0 { true } else { false } } })
        #expect(slurm.calls("scancel").contains([slurm.submitted[0]]), "\(slurm.calls("scancel"))")
        release.signal()
        await scheduler.shutdown(.cancelRunning)
        await running
    }

    @Test("A controller that does not answer (down, restarting) does not fail the job: sbatch is tried again with backoff, and once Slurm answers the job runs as its first attempt")
    func unreachableControllerIsWaitedFor() async throws {
        let slurm = FakeSlurm()
        slurm.state.withLock { $0.controllerDown = true }
        try await withWorker(slurm, submitted: 1) { scheduler, events in
            let seen = Self.collect(events)
            defer { seen.task.cancel() }
            let id = try await scheduler.submit(.shell("true"))
            // Tried, refused, tried again
            #expect(await eventually(within: .seconds(120)) { slurm.calls("sbatch").count >= 2 })
            #expect(await scheduler.snapshot().jobs.first { $0.id == id }?.state.kind == .running)
            #expect(seen.has { if case .placed(id, let text) = $0 { text.contains("Slurm's controller does not answer") } else { false } })
            // When Slurm answers again
            slurm.state.withLock { $0.controllerDown = false }
            #expect(await eventually(within: .seconds(120)) { slurm.submitted.count == 1 })
            slurm.set(slurm.submitted[0], state: "COMPLETED")
            #expect(await eventually(within: .seconds(120)) { seen.has { if case .succeeded(id, attempts: 1) = $0 { true } else { false } } })
        }
    }

    /// Every event of `events`, as they come (collected by a task the caller cancels).
    static func collect(_ events: EventStream) -> Seen {
        let seen = Locked<[SchedulerEvent.Kind]>([])
        let task = Task {
            for await event in events { seen.withLock { $0.append(event.kind) } }
        }
        return Seen(task: task, events: seen)
    }

    struct Seen: Sendable {
        let task: Task<Void, Never>
        let events: Locked<[SchedulerEvent.Kind]>

        func has(_ condition: (SchedulerEvent.Kind) -> Bool) -> Bool { events.withLock { $0.contains(where: condition) } }

        /// The Slurm job id `id` was placed as, the first time.
        func placement(of id: JobID) -> String? {
            events.withLock { events in
                events.lazy.compactMap { if case .placed(id, let text) = $0 { text.split(separator: " ").first.map(String.init) } else { nil } }.first
            }
        }
    }
}
