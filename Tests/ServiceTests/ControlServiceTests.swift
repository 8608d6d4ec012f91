import Foundation
import JobtopTestSupport
@testable import Scheduler
import SchedulerService
import Testing

/// The control service over a real Unix socket, in process: the client is a `SchedulerClient`
/// like the actor it stands for.
@Suite("Control service over a real socket", .timeLimit(.minutes(2)))
struct ControlServiceTests {
    @Test("events, snapshots and errors survive the JSON round trip")
    func roundTrips() throws {
        let id = JobID(uuid: UUID())
        let worker = WorkerID(uuid: UUID())
        let info = JobInfo(
            id: id, name: "build", command: "make", priority: 3,
            state: .running(worker: worker, attempt: 2, since: .seconds(5), stopping: .timeout), attempts: 1, maxAttempts: 3,
            lastFailure: .timeout(.seconds(9)), group: "g", dependencies: [JobID(uuid: UUID())])
        let snapshot = SchedulerSnapshot(
            seq: 7, time: .milliseconds(1500), isPaused: true, counts: [.running: 1, .failed: 2], localSlots: 2, totalSlots: 2,
            groups: [GroupStatus(group: JobGroup(name: "g", limit: 2, isPaused: true), running: 1)], jobs: [info])
        let events: [SchedulerEvent.Kind] = [
            .snapshot(snapshot), .lagged(missed: 4), .submitted(info), .output(id, OutputLine(stream: .stderr, text: "x", ending: .none, bytes: [0xFF])),
            .failed(id, reason: .workerLost(.heartbeatMissed(.seconds(3))), attempts: 3), .skipped(id, reason: SkipReason(dependency: id, dependencyName: "a", outcome: .failed)),
            .requeued(id, reason: .workerLost(.connectionLost("gone"))), .shuttingDown(.drain), .groupChanged(JobGroup(name: "g")),
        ]
        for (seq, kind) in events.enumerated() {
            let event = SchedulerEvent(seq: UInt64(seq), time: .seconds(seq), kind: kind)
            let back = try JSONDecoder().decode(SchedulerEvent.self, from: JSONEncoder().encode(event))
            #expect(back.seq == event.seq && back.time == event.time && back.kind.name == kind.name)
            if case .snapshot(let decoded) = back.kind {
                #expect(decoded.jobs == snapshot.jobs && decoded.groups == snapshot.groups && decoded.workers == snapshot.workers)
                #expect(decoded.counts == snapshot.counts && decoded.isPaused)
            }
        }
        let error = SchedulerError(.notAllowed, "no")
        #expect(try JSONDecoder().decode(SchedulerError.self, from: JSONEncoder().encode(error)) == error)
        let command = SchedulerCommand.submit([.shell("echo hi", priority: 2)], batch: nil)
        if case .submit(let specs, _) = try JSONDecoder().decode(SchedulerCommand.self, from: JSONEncoder().encode(command)) {
            #expect(specs.first?.priority == 2)
        } else {
            Issue.record("the command came back as another")
        }
    }

    @Test("a client over the socket submits, sees the events, gets refusals as SchedulerError, and sees the end")
    func clientServer() async throws {
        let served = try await Served(localSlots: 1)
        let (scheduler, running, server, path) = (served.scheduler, served.running, served.server, served.path)
        let client = try ControlClient(endpoint: .unixSocket(path))
        let events = await client.subscribe(bufferLimit: nil, includeOutput: true, delivery: .latest)
        var iterator = events.makeAsyncIterator()
        guard case .snapshot? = await iterator.next()?.kind else {
            Issue.record("the first event is not a snapshot")
            return
        }
        let reply = try await client.perform(.submit([.shell("echo over-the-socket")], batch: nil))
        guard case .submitted(let ids) = reply else {
            Issue.record("unexpected reply \(reply)")
            return
        }
        var sawOutput = false
        var lastSeq: UInt64 = 0
        while let event = await iterator.next() {
            #expect(event.seq == lastSeq + 1 || lastSeq == 0, "numbered without gaps")
            lastSeq = event.seq
            if case .output(_, let line) = event.kind, line.text == "over-the-socket" { sawOutput = true }
            if case .succeeded(let id, _) = event.kind, id == ids[0] { break }
        }
        #expect(sawOutput)
        let tail = await client.outputTail(of: ids[0])
        #expect(tail.lines.map(\.text) == ["over-the-socket"])
        await #expect(throws: SchedulerError.self) { try await client.perform(.cancel(ids[0])) }
        let snapshot = await client.currentSnapshot()
        #expect(snapshot.jobs.map(\.id) == ids)

        // A second server on the same socket is refused while this one answers.
        let second = try ControlServer(backend: scheduler)
        await #expect(throws: ControlError.self) { try await second.start(socketPath: path) }

        _ = try await client.perform(.shutdown(.graceful))
        while await iterator.next() != nil {}
        await running.value
        await server.stop()
        await client.close()
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(throws: ControlError.self) { try ControlClient(endpoint: .unixSocket(path)) }
    }

    @Test("a client that does not read holds the serve's writer back: the serve's subscription lags and skips ahead, the client buffers no more than its limit")
    func slowClient() async throws {
        let served = try await Served(localSlots: 2)
        let (scheduler, running, server, path) = (served.scheduler, served.running, served.server, served.path)
        let client = try ControlClient(endpoint: .unixSocket(path))
        let events = await client.subscribe(bufferLimit: 64, includeOutput: false, delivery: .latest)
        var iterator = events.makeAsyncIterator()
        guard let first = await iterator.next(), case .snapshot = first.kind else {
            Issue.record("the first event is not a snapshot")
            return
        }
        // 4,000 jobs run to the end (about 12,000 events) while the client reads nothing.
        let local = await scheduler.events(bufferLimit: nil, includeOutput: false, delivery: .lossless)
        let count = 4_000
        for _ in 0..<count { _ = try await scheduler.submit(JobSpec(work: .closure { _ in })) }
        var ended = 0
        for await event in local {
            if case .succeeded = event.kind { ended += 1 }
            if ended == count { break }
        }
        // Now read: the serve skipped ahead (a lag and a fresh snapshot) instead of the client
        // having buffered every event; the snapshot shows every job ended.
        var lagged = false
        var received = 0
        var mirror = SchedulerMirror()
        _ = mirror.apply(first)
        while let event = await iterator.next() {
            received += 1
            if case .lagged = event.kind { lagged = true }
            _ = mirror.apply(event)
            if mirror.count(.succeeded) == count { break }
        }
        #expect(mirror.count(.succeeded) == count, "what the client saw adds up to every job ended")
        #expect(lagged, "the serve's subscription lagged: the client did not read ahead without bound")
        #expect(received < 3 * count, "the client got the skip, not every event (\(received))")
        await scheduler.shutdown(.graceful)
        await running.value
        await client.close()
        await server.stop()
    }

    @Test("A client that asks for lossless events and stops reading does not hold the serve's jobs back")
    func aStalledClientDoesNotHoldTheJobsBack() async throws {
        let served = try await Served(localSlots: 2)
        let (scheduler, running, server, path) = (served.scheduler, served.running, served.server, served.path)
        // Given a client subscribed losslessly with a small buffer, which never reads
        let stalled = try ControlClient(endpoint: .unixSocket(path))
        let unread = await stalled.subscribe(bufferLimit: 64, includeOutput: false, delivery: .lossless)
        // When far more events come than the buffers on the way hold (each job's events are
        // several hundred bytes of JSON: 4,000 jobs are megabytes)
        let local = await scheduler.events(bufferLimit: nil, includeOutput: false, delivery: .latest)
        let count = 4_000
        let ids = try await scheduler.submit(contentsOf: (0..<count).map { _ in JobSpec(work: .closure { _ in }) })
        // Then every job still runs (lossless over the wire, the jobs stopped after a few
        // hundred: the time limit ended the test)
        var open = Set(ids)
        for await event in local {
            if event.kind.isFinal, let id = event.kind.jobID { open.remove(id) }
            if case .snapshot(let snapshot) = event.kind {
                for job in snapshot.jobs where job.state.isFinished { open.remove(job.id) }
            }
            if open.isEmpty { break }
        }
        #expect(open.isEmpty)
        // The scheduler first: its end ends the serve's side of the unread subscription, which
        // the client's close and the server's stop then find over.
        await scheduler.shutdown(.graceful)
        await running.value
        _ = unread
        await stalled.close()
        await server.stop()
    }

    @Test("A call whose client went away ends though the serve has nothing more to send it: the server stops while the scheduler runs on")
    func callsEndWithTheirClient() async throws {
        let served = try await Served(localSlots: 1)
        let (scheduler, running, server, path) = (served.scheduler, served.running, served.server, served.path)
        // Given a job that runs until it is stopped, alone in a batch with room for one
        let batch = await scheduler.openBatch()
        let ids = try await scheduler.submit(contentsOf: [.shell("sleep 600")], batch: batch)
        // and a client with a call of each kind that waits: a subscription that has read its
        // snapshot, a follow of the job that has had its first part, a wait for room
        let client = try ControlClient(endpoint: .unixSocket(path))
        var events = await client.subscribe(bufferLimit: nil, includeOutput: false, delivery: .latest).makeAsyncIterator()
        guard case .snapshot? = await events.next()?.kind else {
            Issue.record("the first event is not a snapshot")
            return
        }
        let (parts, part) = AsyncStream<Void>.makeStream()
        let follow = Task { try await client.follow(ids[0]) { _ in part.yield() } }
        var partsSeen = parts.makeAsyncIterator()
        _ = await partsSeen.next()
        let room = Task { await client.waitForRoom(in: batch, below: 1) }
        await scheduler.waitUntilWaitingForRoom(1)
        // When the client goes (the follow and the wait stopped, the connection closed)
        follow.cancel()
        room.cancel()
        _ = try? await follow.value
        #expect(await room.value == false)
        await client.close()
        // Then every handler of its calls has ended: the server's graceful stop, which waits for
        // them, returns (each waited for ever for a next event or for room), and the scheduler
        // has let the wait go
        await server.stop()
        #expect(await scheduler.roomWaiterCount == 0)
        #expect(await scheduler.info(of: ids[0])?.state.kind == .running)
        await scheduler.shutdown(.cancelRunning)
        await running.value
    }

    /// A scheduler running and served on a Unix socket in a scratch directory.
    @Test("a reference the scheduler does not resolve is looked up in the backend's history (a job beyond the retention); one it resolves is not")
    func resolveFallsBackToHistory() async throws {
        let old = JobInfo(id: JobID(uuid: UUID()), name: "old", command: "true", state: .succeeded(attempts: 1))
        let asked = Locked<[String]>([])
        let served = try await Served(localSlots: 1) { reference in
            asked.withLock { $0.append(reference) }
            return reference == "old" ? ([old], 1) : reference == "many" ? ([old, old], 12) : ([], 0)
        }
        let client = try ControlClient(endpoint: .unixSocket(served.path))
        guard case .submitted(let ids) = try await client.perform(.submit([JobSpec(name: "here", work: .shell("true"))], batch: nil)) else {
            Issue.record("not submitted")
            return
        }
        let resolved = try await client.resolve(["old", "here", "many", "ghost"])
        #expect(resolved[0] == .found(old))
        guard case .found(let here) = resolved[1] else {
            Issue.record("the scheduler's own job was not found: \(resolved[1])")
            return
        }
        #expect(here.id == ids[0])
        #expect(resolved[2] == .ambiguous([old, old], count: 12))
        #expect(resolved[3] == .unknown)
        #expect(asked.withLock { $0 } == ["old", "many", "ghost"], "the history is asked only for what the scheduler does not know")
        await served.scheduler.shutdown(.graceful)
        await served.running.value
        await served.server.stop()
    }

    struct Served {
        let scratch: Scratch
        let scheduler: Scheduler
        let running: Task<Void, Never>
        let server: ControlServer<Scheduler>
        let path: String

        init(localSlots: Int, history: (@Sendable (String) async -> (jobs: [JobInfo], count: Int))? = nil) async throws {
            scratch = try Scratch()
            scheduler = Scheduler(configuration: .init(localSlots: localSlots))
            let scheduler = scheduler
            running = Task { await scheduler.run() }
            server = try ControlServer(backend: scheduler, history: history)
            path = scratch.file("run/jobtop/serve.sock")
            try await server.start(socketPath: path)
        }
    }
}
