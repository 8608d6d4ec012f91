import Foundation
import JobtopTestSupport
import Scheduler
import Testing

@testable import SchedulerRemote

#if canImport(Glibc)
import Glibc
#endif

/// A worker holds assignments beyond its free slots, so a slot never waits for a round trip.
@Suite("Remote prefetch", .serialized, .timeLimit(.minutes(2)))
struct RemotePrefetchTests {
    @Test("A one-slot worker holds a second assignment (prefetch 1) and starts it only when its slot frees")
    func oneSlotWorkerHoldsOneMore() async throws {
        // Given a coordinator with prefetch 1 and a worker with one slot.
        let scratch = try Scratch()
        let coordinator = try await Coordinator.start(prefetch: .fixed(1))
        let worker = try JobtopProcess.worker(for: coordinator, slots: 1, name: "one-slot")
        _ = await coordinator.joined(1)
        let started = Locked(0)
        let events = await coordinator.scheduler.events(includeOutput: false)
        let watcher = Task {
            for await event in events {
                if case .started = event.kind { started.withLock { $0 += 1 } }
            }
        }
        defer { watcher.cancel() }

        // When two jobs are submitted, each marking its start and waiting for its own go-file.
        let names = ["a", "b"]
        for name in names {
            let mark = scratch.file("started-\(name)")
            let go = scratch.file("go-\(name)")
            _ = try await coordinator.scheduler.submit(.shell("touch '\(mark)'; while [ ! -e '\(go)' ]; do sleep 0.02; done"))
        }

        // Then both are assigned to the worker at once, but only one runs there.
        #expect(await eventually(within: .seconds(60)) { started.withLock { $0 } == 2 })
        let marks = names.map { scratch.file("started-\($0)") }
        #expect(await eventually(within: .seconds(60)) { marks.contains { FileManager.default.fileExists(atPath: $0) } })
        let first = try #require(names.first { FileManager.default.fileExists(atPath: scratch.file("started-\($0)")) })
        let second = names.first { $0 != first }!
        #expect(!FileManager.default.fileExists(atPath: scratch.file("started-\(second)")))

        // And when the first ends, the held one starts on the worker.
        try scratch.write("go-\(first)", "")
        #expect(await eventually(within: .seconds(60)) { FileManager.default.fileExists(atPath: scratch.file("started-\(second)")) })
        try scratch.write("go-\(second)", "")
        worker.send(SIGTERM)
        #expect(await worker.wait(atMost: .seconds(60))?.status == 0)
        await coordinator.stop()
    }

    @Test("A prefetched job's timeout counts from when it starts on the worker: held behind a longer job, it does not time out unstarted; once running, it does")
    func heldJobTimesOutFromItsStart() async throws {
        // Given a coordinator with prefetch 1 and a worker with one slot, busy for 5 s.
        let coordinator = try await Coordinator.start(prefetch: .fixed(1))
        let worker = try JobtopProcess.worker(for: coordinator, slots: 1, name: "one-slot")
        defer { worker.send(SIGKILL) }
        _ = await coordinator.joined(1)
        let events = await coordinator.scheduler.events(includeOutput: false, delivery: .lossless)
        let ends = EndCounter()
        let starts = Locked<[JobID]>([])
        let watcher = Task {
            for await event in events {
                if case .started(let id, _, _, _) = event.kind { starts.withLock { $0.append(id) } }
                if event.kind.isFinal, let id = event.kind.jobID {
                    let name: String
                    switch event.kind {
                    case .succeeded: name = "succeeded"
                    case .failed(_, let reason, _): name = "failed: \(reason)"
                    default: name = "\(event.kind)"
                    }
                    ends.record(id, name)
                }
            }
        }
        defer { watcher.cancel() }
        let busy = try await coordinator.scheduler.submit(.shell("sleep 5"))
        #expect(await eventually(within: .seconds(60)) { starts.withLock { $0.contains(busy) } })

        // When a quick job with a 3 s timeout is assigned to it (held: its slot is busy).
        let quick = try await coordinator.scheduler.submit(JobSpec(work: .shell("echo ran"), timeout: .seconds(3)))
        #expect(await eventually(within: .seconds(60)) { starts.withLock { $0.contains(quick) } })

        // Then it runs once the slot frees, 5 s after the busy job started, and succeeds (its
        // timeout counted from the assignment used to stop it, unstarted, after 3 s).
        #expect(await eventually(within: .seconds(120)) { ends.count(of: [busy, quick]) == 2 })
        #expect(ends.ends(of: busy) == ["succeeded"])
        #expect(ends.ends(of: quick) == ["succeeded"], "the held job: \(ends.ends(of: quick))")

        // And a held job that runs too long still times out, counted from its start.
        let busyAgain = try await coordinator.scheduler.submit(.shell("sleep 2"))
        #expect(await eventually(within: .seconds(60)) { starts.withLock { $0.contains(busyAgain) } })
        let slow = try await coordinator.scheduler.submit(JobSpec(work: .shell("sleep 600"), timeout: .seconds(1)))
        #expect(await eventually(within: .seconds(120)) { ends.count(of: [busyAgain, slow]) == 2 })
        #expect(ends.ends(of: slow) == ["failed: timed out after 1s"], "\(ends.ends(of: slow))")
        worker.send(SIGTERM)
        _ = await worker.wait(atMost: .seconds(60))
        await coordinator.stop()
    }

    @Test("A job held behind a busy worker's long job is given back and runs at once on a worker that joins idle, its attempt not counted twice")
    func heldJobMovesToAnIdleWorker() async throws {
        // Given a coordinator with prefetch 1 and one worker with one slot.
        let scratch = try Scratch()
        let coordinator = try await Coordinator.start(prefetch: .fixed(1))
        let first = try JobtopProcess.worker(for: coordinator, slots: 1, name: "first")
        defer { first.send(SIGKILL) }
        let firstID = try #require(await coordinator.joined(1).first?.id)
        let events = await coordinator.scheduler.events(includeOutput: false, delivery: .lossless)
        let seen = Locked<[SchedulerEvent.Kind]>([])
        let watcher = Task {
            for await event in events { seen.withLock { $0.append(event.kind) } }
        }
        defer { watcher.cancel() }

        // When a long job runs there (until its go-file) and a short one is sent behind it.
        let go = scratch.file("go-long")
        let long = try await coordinator.scheduler.submit(.shell("touch '\(scratch.file("started-long"))'; while [ ! -e '\(go)' ]; do sleep 0.02; done"))
        // (Begun before the short one is sent: an idle worker starts whatever reaches it first,
        // and the two assignments are sent each from its own task.)
        #expect(await eventually(within: .seconds(60)) { FileManager.default.fileExists(atPath: scratch.file("started-long")) })
        let short = try await coordinator.scheduler.submit(.shell("touch '\(scratch.file("ran-short"))'"))
        #expect(await eventually(within: .seconds(60)) {
            seen.withLock { $0.contains { if case .started(short, 1, _, firstID) = $0 { true } else { false } } }
        })
        #expect(!FileManager.default.fileExists(atPath: scratch.file("ran-short")), "held behind the long job")

        // And a second worker joins with its slot free.
        let second = try JobtopProcess.worker(for: coordinator, slots: 1, name: "second")
        defer { second.send(SIGKILL) }
        let secondID = try #require(await coordinator.joined(1).first?.id)

        // Then the short job is given back by the first and runs on the second, while the long
        // one still runs: once, as its first attempt.
        #expect(await eventually(within: .seconds(60)) { FileManager.default.fileExists(atPath: scratch.file("ran-short")) })
        #expect(await eventually(within: .seconds(60)) {
            seen.withLock { $0.contains { if case .succeeded(short, attempts: 1) = $0 { true } else { false } } }
        })
        let shortEvents = seen.withLock { $0.filter { $0.jobID == short } }
        #expect(shortEvents.contains { if case .requeued(short, .withdrawn) = $0 { true } else { false } }, "\(shortEvents)")
        #expect(shortEvents.contains { if case .started(short, 1, _, secondID) = $0 { true } else { false } }, "\(shortEvents)")
        #expect(!shortEvents.contains { if case .failed = $0 { true } else { false } })
        #expect(await coordinator.scheduler.info(of: long)?.state.isFinished == false, "the long job still runs")

        // And the long job ends where it ran.
        try scratch.write("go-long", "")
        #expect(await eventually(within: .seconds(60)) {
            seen.withLock { $0.contains { if case .succeeded(long, attempts: 1) = $0 { true } else { false } } }
        })
        first.send(SIGTERM)
        second.send(SIGTERM)
        _ = await first.wait(atMost: .seconds(60))
        _ = await second.wait(atMost: .seconds(60))
        await coordinator.stop()
    }

    @Test("Jobs a worker holds behind a busy slot start there by priority, not in the order they reached it")
    func heldJobsStartByPriority() async throws {
        // Given a coordinator with prefetch 4 and a one-slot worker busy with a job until its go-file.
        let scratch = try Scratch()
        let coordinator = try await Coordinator.start(prefetch: .fixed(4))
        let worker = try JobtopProcess.worker(for: coordinator, slots: 1, name: "one-slot")
        defer { worker.send(SIGKILL) }
        _ = await coordinator.joined(1)
        let events = await coordinator.scheduler.events(includeOutput: false, delivery: .lossless)
        let starts = Locked<[JobID]>([])
        let began = Locked<[JobID]>([])
        // Every event, for the message of a failure (seen once in a full run: after the busy
        // job, only the first held job began).
        let seen = Locked<[String]>([])
        let watcher = Task {
            for await event in events {
                seen.withLock { $0.append("\(event.seq) \(event.kind)") }
                if case .started(let id, _, _, _) = event.kind { starts.withLock { $0.append(id) } }
                if case .began(let id, _) = event.kind { began.withLock { $0.append(id) } }
            }
        }
        defer { watcher.cancel() }
        let go = scratch.file("go")
        let busy = try await coordinator.scheduler.submit(.shell("while [ ! -e '\(go)' ]; do sleep 0.02; done"))
        #expect(await eventually(within: .seconds(60)) { began.withLock { $0.contains(busy) } })

        // When three jobs come one by one, lowest priority first, each sent to it at once (held).
        var held: [JobID] = []
        for priority in 1...3 {
            let id = try await coordinator.scheduler.submit(.shell("true", priority: priority))
            #expect(await eventually(within: .seconds(60)) { starts.withLock { $0.contains(id) } })
            held.append(id)
        }
        // (And they have reached it: a fourth held job is cancelled, which the worker answers
        // in the order of its messages, after the three Assigns. Under load one that arrived
        // after the slot freed began first, as it should: it was not there to be passed over.)
        let probe = try await coordinator.scheduler.submit(.shell("true", priority: 0))
        #expect(await eventually(within: .seconds(60)) { starts.withLock { $0.contains(probe) } })
        try await coordinator.scheduler.cancel(probe)
        #expect(await eventually(within: .seconds(60)) {
            seen.withLock { $0.contains { $0.hasSuffix("cancelled(\(probe))") } }
        })

        // Then, once the slot frees, they begin highest priority first.
        try scratch.write("go", "")
        let allBegan = await eventually(within: .seconds(60)) { began.withLock { $0.count } == 4 }
        #expect(allBegan, "events: \(seen.withLock { $0 }.joined(separator: "\n")) worker: \(worker.output)")
        #expect(began.withLock { Array($0.dropFirst()) } == held.reversed(), "events: \(seen.withLock { $0 }.joined(separator: "\n")) worker: \(worker.output)")
        worker.send(SIGTERM)
        _ = await worker.wait(atMost: .seconds(60))
        await coordinator.stop()
    }

    @Test("A job of a higher priority submitted while a worker holds a lower one behind its busy slot runs first there: the held one is given back and runs after it, its attempt not counted")
    func higherPriorityTakesTheHeldPlace() async throws {
        // Given a coordinator with prefetch 1 and a one-slot worker busy with a job until its go-file
        let scratch = try Scratch()
        let coordinator = try await Coordinator.start(prefetch: .fixed(1))
        let worker = try JobtopProcess.worker(for: coordinator, slots: 1, name: "one-slot")
        defer { worker.send(SIGKILL) }
        _ = await coordinator.joined(1)
        let events = await coordinator.scheduler.events(includeOutput: false, delivery: .lossless)
        let seen = Locked<[SchedulerEvent.Kind]>([])
        let watcher = Task {
            for await event in events { seen.withLock { $0.append(event.kind) } }
        }
        defer { watcher.cancel() }
        func began() -> [JobID] { seen.withLock { $0.compactMap { if case .began(let id, _) = $0 { id } else { nil } } } }
        let go = scratch.file("go")
        let busy = try await coordinator.scheduler.submit(.shell("while [ ! -e '\(go)' ]; do sleep 0.02; done"))
        #expect(await eventually(within: .seconds(60)) { began().contains(busy) })
        // and a job of priority 0 held behind it
        let low = try await coordinator.scheduler.submit(.shell("true"))
        #expect(await eventually(within: .seconds(60)) {
            seen.withLock { $0.contains { if case .started(low, 1, _, _) = $0 { true } else { false } } }
        })

        // When a job of priority 5 is submitted
        let high = try await coordinator.scheduler.submit(.shell("true", priority: 5))

        // Then the low one is given back and the high one is sent in its place
        #expect(await eventually(within: .seconds(60)) {
            seen.withLock { $0.contains { if case .started(high, 1, _, _) = $0 { true } else { false } } }
        })
        let lowEvents = seen.withLock { $0.filter { $0.jobID == low } }
        #expect(lowEvents.contains { if case .requeued(low, .withdrawnForPriority) = $0 { true } else { false } }, "\(lowEvents)")
        // And once the slot frees, the high one begins first, then the low one, which succeeds as its first attempt
        try scratch.write("go", "")
        #expect(await eventually(within: .seconds(60)) {
            seen.withLock { $0.contains { if case .succeeded(low, attempts: 1) = $0 { true } else { false } } }
        })
        #expect(began() == [busy, high, low], "\(seen.withLock { $0 })")
        worker.send(SIGTERM)
        _ = await worker.wait(atMost: .seconds(60))
        await coordinator.stop()
    }

    @Test("Assigns leave in the order the coordinator started the attempts: forty started in one step reach the worker in that order (each left from its own task, in any order, and a worker with a free slot ran a later or lower-priority job first)")
    func assignsLeaveInStartOrder() async throws {
        // Given a worker that holds all it is sent (one slot, prefetch 39) and never begins any.
        let coordinator = try await Coordinator.start(clock: ManualClock(), prefetch: .fixed(39))
        let events = await coordinator.scheduler.events(includeOutput: false, delivery: .lossless)
        let startOrder = Task {
            var started: [String] = []
            for await event in events {
                if case .started(let id, _, _, _) = event.kind { started.append(id.description) }
                if started.count == 40 { break }
            }
            return started
        }
        let received = try await RawClient.asWorker(port: coordinator.address.port, token: coordinator.token, features: [.reportsStart]) { messages in
            _ = await coordinator.joined(1)
            var incoming = messages.makeAsyncIterator()
            // When forty jobs of mixed priorities start in one step
            _ = try await coordinator.scheduler.submit(contentsOf: (0..<40).map { JobSpec.shell("true", priority: $0 % 7) })
            var assigns = 0
            while assigns < 40, let message = await incoming.next() {
                if case .assign = message.kind { assigns += 1 }
            }
        }
        // Then their Assigns came in the order they started.
        let assigned = received.compactMap { if case .assign(let assign) = $0.kind { assign.jobID } else { nil } }
        let started = await startOrder.value
        #expect(assigned.count == 40 && started.count == 40)
        #expect(assigned == started, "assigned \(assigned.map { $0.prefix(8) }), started \(started.map { $0.prefix(8) })")
        await coordinator.stop()
    }

    @Test("A held job given a new priority: its worker is told (Reprioritize, after the job's Assign); one that holds nothing back (an older worker) is not")
    func newPriorityReachesTheHoldingWorker() async throws {
        // Given a worker that holds what it is sent and never begins it (no heartbeats: the
        // coordinator's clock stands still).
        let coordinator = try await Coordinator.start(clock: ManualClock(), prefetch: .fixed(2))
        let received = try await RawClient.asWorker(port: coordinator.address.port, token: coordinator.token, features: [.reportsStart]) { messages in
            _ = await coordinator.joined(1)
            var incoming = messages.makeAsyncIterator()
            let id = try await coordinator.scheduler.submit(.shell("true", priority: 1))
            while let message = await incoming.next() { if case .assign = message.kind { break } }
            // When the job gets a new priority
            try await coordinator.scheduler.reprioritize(id, to: 7)
            // Then the worker hears of it
            while let message = await incoming.next() { if case .reprioritize = message.kind { break } }
        }
        let told = received.compactMap { if case .reprioritize(let message) = $0.kind { message } else { nil } }
        #expect(told.count == 1 && told.first?.priority == 7 && told.first?.attempt == 1, "\(told)")
        let assigned = received.firstIndex { if case .assign = $0.kind { true } else { false } }
        let reprioritized = received.firstIndex { if case .reprioritize = $0.kind { true } else { false } }
        #expect(assigned != nil && reprioritized != nil && assigned! < reprioritized!)

        // An older worker (it does not say when it begins, so nothing is held there) is not told.
        let older = try await RawClient.asOlderWorker(port: coordinator.address.port, token: coordinator.token) { messages in
            _ = await coordinator.joined(1)
            var incoming = messages.makeAsyncIterator()
            let id = try await coordinator.scheduler.submit(.shell("true", priority: 1))
            while let message = await incoming.next() { if case .assign = message.kind { break } }
            try await coordinator.scheduler.reprioritize(id, to: 7)
        }
        #expect(!older.contains { if case .reprioritize = $0.kind { true } else { false } })
        await coordinator.stop()
    }

    @Test("A worker starts what it holds by the newest priority the coordinator sent (Reprioritize): one sent with the lowest and raised starts first")
    func workerStartsByTheNewPriority() async throws {
        let scratch = try Scratch()
        let go = scratch.file("go")
        let ids = (0..<5).map { _ in UUID().uuidString.lowercased() }
        func assign(_ index: Int, _ command: String, priority: Int32) -> WireCoordinatorMessage {
            .with {
                $0.assign = .with {
                    $0.jobID = ids[index]
                    $0.attempt = 1
                    $0.spec = Jobtop_Remote_V1_JobSpec(.shell(command))!
                    $0.reportStart = true
                    $0.priority = priority
                }
            }
        }
        // Given a one-slot worker busy with one job (the rest is sent once it has started: an idle
        // worker starts what reaches it first, and under load all five could come in one read)
        // and holding three, sent with priorities 1, 2, 3 (and a fourth, asked back at the end:
        // its answer says every message before it was handled)
        let first = [assign(0, "while [ ! -e '\(go)' ]; do sleep 0.02; done", priority: 0)]
        let script: [WireCoordinatorMessage] = [
            assign(1, "true", priority: 1), assign(2, "true", priority: 2), assign(3, "true", priority: 3),
            assign(4, "true", priority: 0),
            // When the one sent with 1 is raised to 10
            .with { $0.reprioritize = .with { $0.jobID = ids[1]; $0.attempt = 1; $0.priority = 10 } },
            .with { $0.withdraw = .with { $0.jobID = ids[4]; $0.attempt = 1 } },
        ]
        let (heard, hearing) = AsyncStream.makeStream(of: WireWorkerMessage.self)
        let fake = try await FakeCoordinator.start(.scriptAfterStart(first, waitsFor: ids[0], then: script, heard: hearing))
        let agent = WorkerAgent(configuration: .init(
            coordinator: RemoteAddress(host: "127.0.0.1", port: fake.port), name: "w", slots: 1, log: { _ in }))
        let running = Task { try await agent.run() }
        var started: [String] = []
        for await message in heard {
            switch message.kind {
            case .withdrawn(let withdrawn) where withdrawn.jobID == ids[4]: try scratch.write("go", "")
            case .started(let begun): started.append(begun.jobID)
            default: break
            }
            if started.count == 4 { break }
        }
        // Then, once the slot frees, it starts first, then the others by their priority
        #expect(started == [ids[0], ids[1], ids[3], ids[2]])
        agent.stop()
        try await running.value
        await fake.stop()
    }

    @Test("Pausing a group takes its held job back from the worker: once the worker's slot frees, it does not start there; resumed, it runs")
    func pauseTakesAHeldJobBack() async throws {
        // Given a one-slot worker busy with a job until its go-file and holding a job of group g.
        let scratch = try Scratch()
        let coordinator = try await Coordinator.start(prefetch: .fixed(1))
        let worker = try JobtopProcess.worker(for: coordinator, slots: 1, name: "one-slot")
        defer { worker.send(SIGKILL) }
        _ = await coordinator.joined(1)
        let events = await coordinator.scheduler.events(includeOutput: false, delivery: .lossless)
        var incoming = events.makeAsyncIterator()
        let go = scratch.file("go")
        let busy = try await coordinator.scheduler.submit(.shell("while [ ! -e '\(go)' ]; do sleep 0.02; done"))
        // (Begun before the next is sent: an idle worker starts whatever reaches it first.)
        while let event = await incoming.next() { if case .began(busy, _) = event.kind { break } }
        var grouped = JobSpec.shell("true")
        grouped.group = "g"
        let held = try await coordinator.scheduler.submit(grouped)
        while let event = await incoming.next() { if case .started(held, _, _, _) = event.kind { break } }

        // When its group is paused, then it is given back and waits in the queue
        try await coordinator.scheduler.pauseGroup("g")
        while let event = await incoming.next() {
            if case .requeued(held, let reason) = event.kind {
                #expect(reason == .withdrawnForPause)
                break
            }
        }
        // and once the worker's slot frees, it still waits
        try scratch.write("go", "")
        while let event = await incoming.next() { if case .succeeded(busy, _) = event.kind { break } }
        #expect(await coordinator.scheduler.info(of: held)?.state == .queued)

        // When the group is resumed, then it runs
        try await coordinator.scheduler.resumeGroup("g")
        while let event = await incoming.next() { if event.kind.isFinal && event.kind.jobID == held { break } }
        #expect(await coordinator.scheduler.info(of: held)?.state == .succeeded(attempts: 1))
        worker.send(SIGTERM)
        _ = await worker.wait(atMost: .seconds(60))
        await coordinator.stop()
    }
}
