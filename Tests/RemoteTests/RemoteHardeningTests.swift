import Foundation
import JobtopTestSupport
import Scheduler
import Testing

@testable import SchedulerRemote

#if canImport(Glibc)
import Glibc
#endif

/// What a hostile or broken peer must not be able to do: keep a coordinator alive, make a worker
/// spin, or write into a log. Real processes and real TCP on loopback; deadlines on manual clocks.
@Suite("Remote hardening", .serialized, .timeLimit(.minutes(2)))
struct RemoteHardeningTests {
    // MARK: - Silent peers and the coordinator's end

    @Test("A coordinator whose run is over exits at once although a client connected and said nothing")
    func silentClientDoesNotKeepTheCoordinatorAlive() async throws {
        // Given a `jobtop run --listen` whose only job waits for a go-file.
        let coordinator = try await CoordinatorProcess.start()
        // When a client connects and says nothing, and then the run ends.
        let silent = try RawTCP.connect(port: coordinator.port)
        defer { close(silent) }
        try coordinator.go()
        // Then the coordinator exits 0 on its own (it used to live as long as the connection).
        let status = await coordinator.process.wait(atMost: .seconds(30))?.status
        #expect(status == 0, "jobtop run did not exit; log:\n\(coordinator.process.output)")
        // And the silent client's connection was closed.
        #expect(await RawTCP.waitForClose(silent))
    }

    @Test("A coordinator whose run is over exits promptly although a joined worker is stopped (SIGSTOP)")
    func stoppedWorkerDoesNotKeepTheCoordinatorAlive() async throws {
        // Heartbeats a minute apart: the frozen worker is not lost by silence while the test runs
        // (that would close its connection and end the wait another way).
        let coordinator = try await CoordinatorProcess.start(["--heartbeat", "60s"])
        let worker = try coordinator.worker(name: "frozen")
        #expect(await eventually { coordinator.process.output.contains("worker 'frozen' joined") })
        worker.send(SIGSTOP)
        #expect(await eventually { isStopped(worker.pid) })
        try coordinator.go()
        let status = await coordinator.process.wait(atMost: .seconds(30))?.status
        #expect(status == 0, "jobtop run did not exit; log:\n\(coordinator.process.output)")
        #expect(coordinator.process.output.contains("dropped 1 connection still open 2s after the goodbye"))
        worker.send(SIGKILL)
        _ = await worker.wait()
    }


    @Test(
        "Ctrl-C while the coordinator waits for a stopped worker to close its connection ends the wait at once: the first during the wait, or the second after one that cancelled the run",
        arguments: [1, 2])
    func signalEndsTheWaitForWorkers(ctrlCs: Int) async throws {
        // Given a `jobtop run --listen` with a joined worker that will never close its connection,
        // and a goodbye grace that cannot run out before the test's Ctrl-C lands, however busy
        // the machine (at the default 2 s, a loaded full run sometimes saw the wait expire first).
        // Heartbeats a minute apart, so the frozen worker is not lost by its silence either (at
        // 1 s it was, after about 10 s of a loaded run, and the wait ended before the Ctrl-C).
        let coordinator = try await CoordinatorProcess.start(["--goodbye-grace", "10m", "--heartbeat", "60s"])
        let worker = try coordinator.worker(name: "frozen")
        defer { worker.send(SIGKILL) }
        #expect(await eventually { coordinator.process.output.contains("worker 'frozen' joined") })
        worker.send(SIGSTOP)
        // Stopped for real before the run ends (under load it once still read the goodbye).
        #expect(await eventually { isStopped(worker.pid) })
        // When the run ends (its job is done, or a first Ctrl-C cancelled it) and the coordinator
        // has said goodbye and waits for the connection...
        if ctrlCs == 1 {
            try coordinator.go()
        } else {
            coordinator.process.send(SIGINT)
        }
        let waiting = "said goodbye to 1 worker; waiting up to 10m for its connection to close"
        #expect(await eventually { coordinator.process.output.contains(waiting) }, "\(coordinator.process.output)")
        // ...and Ctrl-C comes.
        coordinator.process.send(SIGINT)

        // Then the connection is dropped without waiting out the 2 s, and jobtop exits as interrupted.
        let outcome = try #require(await coordinator.process.wait(atMost: .seconds(30)))
        #expect(outcome.status == 130, "\(coordinator.process.output)\nworker:\n\(worker.output)")
        #expect(outcome.stderr.contains("jobtop: SIGINT: not waiting for remote workers to close their connections"))
        #expect(outcome.stderr.contains("jobtop: dropped 1 connection still open after the goodbye, without waiting any longer"))
        #expect(!outcome.stderr.contains("10m after the goodbye"), "\(outcome.stderr)")
        #expect(outcome.lines.last?.contains("exit_status=130") == true, "\(outcome.lines.last ?? "")")
    }

    @Test("A connection that brings no worker in is closed at the hello deadline, on the scheduler's clock")
    func silentConnectionIsClosedAtTheHelloDeadline() async throws {
        let clock = ManualClock()
        let log = LogLines()
        let coordinator = try await Coordinator.start(clock: clock, helloDeadline: .seconds(5), log: log)
        let silent = try RawTCP.connect(port: coordinator.address.port)
        defer { close(silent) }
        // The connection's deadline is set when it is accepted.
        await clock.waitForSleeper(until: .init(offset: .seconds(5)))
        clock.advance(by: .seconds(5))
        #expect(await RawTCP.waitForClose(silent))
        #expect(log.all.contains { $0.contains("no worker joined on it within 5s") })
        await coordinator.stop()
    }

    @Test("Connections beyond the pending cap are closed when accepted; a worker joins once the silent ones time out, and stays")
    func pendingConnectionsAreCapped() async throws {
        let clock = ManualClock()
        let log = LogLines()
        let coordinator = try await Coordinator.start(
            heartbeat: .seconds(60), clock: clock, helloDeadline: .seconds(5), maxPendingConnections: 2, log: log)
        // Given two silent connections: the cap.
        let first = try RawTCP.connect(port: coordinator.address.port)
        let second = try RawTCP.connect(port: coordinator.address.port)
        defer {
            close(first)
            close(second)
        }
        await clock.waitForSleepers(2)
        // When a third comes, it is closed at once (no time passes on the clock).
        let third = try RawTCP.connect(port: coordinator.address.port)
        defer { close(third) }
        #expect(await RawTCP.waitForClose(third))
        // And a worker that comes now is turned away too (its agent on a clock of its own)...
        let agentClock = ManualClock()
        let agent = WorkerAgent(configuration: .init(
            coordinator: coordinator.address, name: "patient", slots: 1, token: coordinator.token, clock: agentClock, log: { _ in }))
        var agentEvents = agent.events.makeAsyncIterator()
        let running = Task { try await agent.run() }
        guard case .unreachable? = await agentEvents.next(), case .retrying(let delay)? = await agentEvents.next() else {
            Issue.record("the worker was not turned away")
            agent.stop()
            return
        }
        // ...until the silent two run out of time; its next attempt then gets in.
        clock.advance(by: .seconds(5))
        #expect(await RawTCP.waitForClose(first))
        #expect(await RawTCP.waitForClose(second))
        await agentClock.waitForSleeper(until: agentClock.now.advanced(by: delay))
        agentClock.advance(by: delay)
        _ = await coordinator.joined(1)
        #expect(await agentEvents.next() == .joined)
        // The cap was logged once, however many connections it turned away, and the two that
        // ran out of time together got one line.
        #expect(log.all.count { $0.contains("connections are waiting to say hello") } == 1)
        #expect(log.all.count { $0.contains("no worker joined on it within 5s") } == 1, "\(log.all)")

        // Then a joined worker is not a pending connection: past its deadline it stays and runs jobs.
        clock.advance(by: .seconds(10))
        let ended = try await coordinator.run(.shell("true"))
        if case .succeeded? = ended {} else { Issue.record("the job ended \(String(describing: ended))") }
        agent.drain()
        try await running.value
        await coordinator.stop()
    }

    @Test("A job on the coordinator inherits none of its connections, so a connection it closes is closed")
    func jobsInheritNoConnection() async throws {
        // Given a coordinator with a local slot and a connection it accepted.
        let clock = ManualClock()
        let coordinator = try await Coordinator.start(localSlots: 1, clock: clock)
        let silent = try RawTCP.connect(port: coordinator.address.port)
        defer { close(silent) }
        await clock.waitForSleepers(1)
        // When a job lists what its shell holds open.
        let events = await coordinator.scheduler.events()
        let id = try await coordinator.scheduler.submit(.shell("for f in /proc/$$/fd/*; do echo \"$f $(readlink $f)\"; done"))
        var lines: [String] = []
        for await event in events {
            if case .output(id, let line) = event.kind { lines.append(line.text) }
            if event.kind.isFinal && event.kind.jobID == id { break }
        }
        // Then it has stdin, stdout and stderr, and no socket (NIO opens its sockets without
        // O_CLOEXEC; the spawn closes every descriptor above 2).
        #expect(lines.count >= 3)
        #expect(!lines.contains { $0.contains("socket:") }, "\(lines)")
        await coordinator.stop()
    }

    @Test("stop() waits for a stopped worker only for the shutdown grace, on the scheduler's clock, then drops it")
    func stopDropsAWorkerThatDoesNotAnswer() async throws {
        let clock = ManualClock()
        let log = LogLines()
        let coordinator = try await Coordinator.start(
            heartbeat: .seconds(60), clock: clock, shutdownGrace: .seconds(2), log: log)
        let worker = try JobtopProcess.worker(for: coordinator, slots: 1, name: "frozen")
        _ = await coordinator.joined(1)
        worker.send(SIGSTOP)
        #expect(await eventually { isStopped(worker.pid) })
        async let stopped: Void = coordinator.listener.stop()
        await clock.waitForSleeper(until: .init(offset: .seconds(2)))
        clock.advance(by: .seconds(2))
        await stopped
        #expect(log.all.contains("jobtop: dropped 1 connection still open 2s after the goodbye"))
        await coordinator.scheduler.shutdown(.cancelRunning)
        await coordinator.running.value
        worker.send(SIGKILL)
        _ = await worker.wait()
    }

    @Test("A worker that stops answering is lost after five heartbeat intervals plus the grace period of the scheduler's clock")
    func silentWorkerIsLostOnTheClock() async throws {
        let clock = ManualClock()
        let coordinator = try await Coordinator.start(heartbeat: .seconds(1), clock: clock)
        let worker = try JobtopProcess.worker(for: coordinator, slots: 1, name: "frozen")
        let joined = await coordinator.joined(1)
        worker.send(SIGSTOP)
        #expect(await eventually { isStopped(worker.pid) })
        // Heartbeat intervals pass, one at a time, until the coordinator gives the worker up.
        let left = await clock.ticking(by: .seconds(1)) {
            await coordinator.next { if case .left = $0 { true } else { false } }
        }
        // 5 intervals of 1 s and the test coordinator's 2 s grace period.
        #expect(left == .left(joined[0].id, reason: .heartbeatMissed(.seconds(7))))
        worker.send(SIGKILL)
        _ = await worker.wait()
        await coordinator.stop()
    }

    @Test("The coordinator times one heartbeat for all its workers, not one per worker")
    func oneHeartbeatTimerForThePool() async throws {
        // Given a coordinator on a manual clock, and three workers (each on a clock of its own).
        let clock = ManualClock()
        let coordinator = try await Coordinator.start(heartbeat: .seconds(1), clock: clock)
        var agents: [(WorkerAgent, Task<Void, any Error>)] = []
        for name in ["w1", "w2", "w3"] {
            let agent = WorkerAgent(configuration: .init(
                coordinator: coordinator.address, name: name, slots: 1, token: coordinator.token, clock: ManualClock(),
                log: { _ in }))
            agents.append((agent, Task { try await agent.run() }))
        }
        // When all three are in.
        _ = await coordinator.joined(3)
        // Then one task sleeps until the next heartbeat on the coordinator's clock (the hello
        // deadlines, at 5 s, are the connections' own).
        await clock.waitForSleeper(until: .init(offset: .seconds(1)))
        #expect(clock.sleeperCount(until: .init(offset: .seconds(1))) == 1)
        for (agent, running) in agents {
            agent.stop()
            try await running.value
        }
        await coordinator.stop()
    }

    // MARK: - The worker's backoff

    @Test("Backoff holds: after each failed attempt the agent waits on its clock, doubling to the cap, and logs once")
    func agentBacksOffOnItsClock() async throws {
        // Given a port where every connection is closed at once.
        let port = try TCPListener(mode: .closeAtOnce)
        defer { port.close() }
        let clock = ManualClock()
        let log = LogLines()
        let agent = WorkerAgent(configuration: .init(
            coordinator: RemoteAddress(host: "127.0.0.1", port: port.port), name: "w", slots: 1,
            initialBackoff: .milliseconds(100), maxBackoff: .milliseconds(800), clock: clock, log: log.sink))
        let events = agent.events
        let running = Task { try await agent.run() }

        // When it fails eight times.
        let bases: [Duration] = [100, 200, 400, 800, 800, 800, 800, 800].map { .milliseconds($0) }
        var attempt = 0
        for await event in events {
            guard case .retrying(let delay) = event else { continue }
            // Then it waits a jittered step of the doubling, never more than the cap...
            #expect(delay >= bases[attempt] / 2 && delay <= bases[attempt], "delay \(delay) after attempt \(attempt + 1)")
            attempt += 1
            // ...and does not knock again before its clock says so.
            #expect(port.accepts.count == attempt)
            if attempt == bases.count { break }
            await clock.waitForSleeper(until: clock.now.advanced(by: delay))
            clock.advance(by: delay)
            await port.waitForAccepts(attempt + 1)
        }
        agent.stop()
        try await running.value
        #expect(port.accepts.count == bases.count)
        // And it said so once, not once per attempt.
        #expect(log.all.count { $0.contains("cannot reach the coordinator") } == 1, "\(log.all)")
        #expect(log.all.allSatisfy { !$0.contains("retrying in") })
    }

    @Test("A worker whose coordinator finished its run reconnects with backoff on its clock, quietly, instead of spinning")
    func workerDoesNotSpinAfterItsCoordinatorLeaves() async throws {
        // Given an agent on a manual clock joined to a coordinator that then ends normally.
        let coordinator = try await Coordinator.start(clock: ManualClock())
        let clock = ManualClock()
        let log = LogLines()
        let agent = WorkerAgent(configuration: .init(
            coordinator: coordinator.address, name: "loyal", slots: 1, token: coordinator.token,
            initialBackoff: .milliseconds(100), maxBackoff: .seconds(5), clock: clock, log: log.sink))
        var events = agent.events.makeAsyncIterator()
        let running = Task { try await agent.run() }
        #expect(await events.next() == .joined)
        await coordinator.stop()
        #expect(await events.next() == .disconnected("the coordinator is shutting down"))

        // When its attempts to come back land on a port that closes every connection.
        let port = try TCPListener(port: coordinator.address.port, mode: .closeAtOnce)
        defer { port.close() }

        // Then each attempt waits for its clock: a delay from the doubling (jittered down by at
        // most half, reset after the loss), and no connection before the clock says so.
        let bases: [Duration] = [100, 200, 400, 800, 1600].map { .milliseconds($0) }
        for (attempt, base) in bases.enumerated() {
            guard case .retrying(let delay)? = await events.next() else {
                Issue.record("no backoff before attempt \(attempt + 1)")
                break
            }
            #expect(delay >= base / 2 && delay <= base, "delay \(delay) before attempt \(attempt + 1)")
            #expect(port.accepts.count == attempt)
            await clock.waitForSleeper(until: clock.now.advanced(by: delay))
            clock.advance(by: delay)
            await port.waitForAccepts(attempt + 1)
            guard case .unreachable? = await events.next() else {
                Issue.record("attempt \(attempt + 1) did not fail")
                break
            }
        }
        // And the log said it once, not once per attempt.
        let lines = log.all
        #expect(lines.count { $0.contains("closed the connection (the coordinator is shutting down); reconnecting with backoff") } == 1, "\(lines)")
        #expect(lines.count { $0.contains("cannot reach") || $0.contains("retrying in") } == 0, "\(lines)")
        agent.stop()
        try await running.value
    }

    @Test("A coordinator that accepts the connection and never answers is given up at the hello deadline")
    func frozenCoordinatorIsGivenUp() async throws {
        let port = try TCPListener(mode: .hold)
        defer { port.close() }
        let clock = ManualClock()
        let agent = WorkerAgent(configuration: .init(
            coordinator: RemoteAddress(host: "127.0.0.1", port: port.port), name: "w", slots: 1,
            helloDeadline: .seconds(10), clock: clock, log: { _ in }))
        let events = agent.events
        let running = Task { try await agent.run() }
        await clock.waitForSleeper(until: .init(offset: .seconds(10)))
        await port.waitForAccepts(1)
        clock.advance(by: .seconds(10))
        var seen: [WorkerAgent.Event] = []
        for await event in events {
            seen.append(event)
            if case .retrying = event { break }
        }
        #expect(seen.first == .unreachable("no answer to the hello within 10s"))
        agent.stop()
        try await running.value
    }

    /// A worker on `clock` whose coordinator (1 s heartbeat) welcomes it and then says nothing.
    static func agentOfSilentCoordinator(clock: ManualClock) async throws -> (WorkerAgent, FakeCoordinator.Running) {
        let fake = try await FakeCoordinator.start(.welcomeThenSilent(heartbeatMilliseconds: 1000))
        return (WorkerAgent(configuration: .init(
            coordinator: RemoteAddress(host: "127.0.0.1", port: fake.port), name: "w", slots: 1,
            clock: clock, log: { _ in })), fake)
    }

    @Test("A worker that did not run for longer than its limit (stopped) says so, not that the coordinator went silent (it said 'for 3s' after a 20 s stop)")
    func stoppedWorkerSaysItWasAway() async throws {
        let clock = ManualClock()
        let (agent, fake) = try await Self.agentOfSilentCoordinator(clock: clock)
        var events = agent.events.makeAsyncIterator()
        let running = Task { try await agent.run() }
        #expect(await events.next() == .joined)
        // Its check loop sleeps a quarter interval on the clock; the clock jumps 20 s at once,
        // as for a worker stopped that long.
        await clock.waitForSleeper(until: clock.now.advanced(by: .milliseconds(250)))
        clock.advance(by: .seconds(20))
        let lost = await events.next()
        #expect(lost == .disconnected("this worker did not run for 20s (stopped, or starved of CPU), and heard nothing from the coordinator meanwhile"), "\(String(describing: lost))")
        agent.stop()
        try await running.value
        await fake.stop()
    }

    @Test("A coordinator that welcomes and then goes silent is lost after three heartbeat intervals of the worker's clock")
    func silentCoordinatorIsLost() async throws {
        let clock = ManualClock()
        let (agent, fake) = try await Self.agentOfSilentCoordinator(clock: clock)
        let events = agent.events
        let running = Task { try await agent.run() }
        // Quarter heartbeat intervals (the worker checks that often) pass, once it is in,
        // without a word from the coordinator.
        let seen = await clock.ticking(by: .milliseconds(250)) { [events] in
            var seen: [WorkerAgent.Event] = []
            for await event in events {
                seen.append(event)
                if case .disconnected = event { break }
            }
            return seen
        }
        #expect(seen == [.joined, .disconnected("no heartbeat from the coordinator for 3s")])
        agent.stop()
        try await running.value
        await fake.stop()
    }

    @Test("A worker answers each heartbeat of the coordinator at once, and times none of its own (its clock stands still)")
    func workerAnswersHeartbeats() async throws {
        // Given a coordinator that sends three heartbeats, each after the worker's last answer,
        // and a worker whose clock never moves (so nothing it sends is timed by it).
        let (heard, answers) = AsyncStream.makeStream(of: Bool.self)
        let fake = try await FakeCoordinator.start(.heartbeats(count: 3, heard: answers))
        let agent = WorkerAgent(configuration: .init(
            coordinator: RemoteAddress(host: "127.0.0.1", port: fake.port), name: "w", slots: 1,
            clock: ManualClock(), log: { _ in }))
        let running = Task { try await agent.run() }
        // When the heartbeats come, then each one's next message from the worker is a heartbeat.
        var seen: [Bool] = []
        for await answer in heard { seen.append(answer) }
        #expect(seen == [true, true, true])
        agent.stop()
        try await running.value
        await fake.stop()
    }

    // MARK: - Peer text

    @Test("A worker name with a newline and escape codes is refused at the hello, and the log shows it escaped")
    func forgedNameIsRefusedAndEscaped() async throws {
        let log = LogLines()
        let coordinator = try await Coordinator.start(token: "secret", log: log)
        let evil = "evil\njobtop: worker 'trusted' joined from ipv4:10.0.0.1:1 with 64 slots\u{1B}[2K"

        // With the right token: refused for the name, saying why.
        let refusal = try #require(try await RawClient.hello(port: coordinator.address.port, name: evil, token: "secret"))
        #expect(refusal.code == .badName)
        #expect(refusal.message.contains("control character (\\n) at position 5"))
        // Without it (checked first): refused for the token; the name is still never raw.
        let stranger = try #require(try await RawClient.hello(port: coordinator.address.port, name: evil, token: "guess"))
        #expect(stranger.code == .badToken)

        let lines = log.all
        #expect(lines.count == 2, "\(lines)")
        for line in lines {
            #expect(!line.contains("\n") && !line.contains("\u{1B}"), "raw peer text in \(line.debugDescription)")
            #expect(line.hasPrefix("jobtop: refused worker 'evil\\njobtop: worker "))
        }
        #expect(!lines.contains { $0.contains(" joined") && !$0.contains("refused") })
        await coordinator.stop()
    }

    @Test(
        "jobtop worker --name with control characters or an absurd length is refused before connecting, status 2",
        arguments: [
            ("evil\njobtop: worker 'x' joined", "control character (\\n) at position 5"),
            ("a\u{1B}[31mred", "control character (\\u{1B}) at position 2"),
            (String(repeating: "n", count: 300), "300 bytes long; the most is 255"),
        ])
    func badNameIsRefusedLocally(name: String, problem: String) async throws {
        let worker = try JobtopProcess(["worker", "--connect", "127.0.0.1:9", "--name", name], newSession: true)
        #expect(await worker.wait(atMost: .seconds(30))?.status == 2)
        #expect(worker.output.contains("--name"))
        #expect(worker.output.contains(problem), "\(worker.output)")
        #expect(!worker.output.contains("\u{1B}"))
    }

    @Test("Pointed at something that is not jobtop: the client says no serve answers there, the worker that it is no coordinator; no Swift source file in either message")
    func foreignListener() async throws {
        let foreign = try ForeignListener()
        defer { foreign.stop() }
        let scratch = try Scratch()
        let token = try scratch.write("token", "a-token\n")
        let status = try await JobtopProcess.run(["status", "--connect", "127.0.0.1:\(foreign.port)", "--token-file", token])
        #expect(status.status == 3, "\(status.stderr)")
        #expect(status.stderr.hasPrefix("jobtop: no jobtop serve answers at 127.0.0.1:\(foreign.port) ("), "\(status.stderr)")
        #expect(status.stderr.contains("not a jobtop serve"), "\(status.stderr)")
        let worker = try JobtopProcess(["worker", "--connect", "127.0.0.1:\(foreign.port)", "--token-file", token, "--name", "w"], newSession: true)
        #expect(await eventually { worker.output.contains("cannot reach") })
        let said = worker.outputLines.first { $0.contains("cannot reach") } ?? ""
        worker.send(SIGTERM)
        _ = await worker.wait()
        #expect(said.contains("what listens there is not a jobtop coordinator"), "\(said)")
        #expect(!said.contains("(file: ") && !status.stderr.contains("(file: "), "\(said)")
    }

    @Test("Text a coordinator sends (a refusal) is escaped in the worker's log")
    func coordinatorTextIsEscapedOnTheWorker() async throws {
        let fake = try await FakeCoordinator.start(
            .refuse(.badToken, "nope\njobtop worker: joined the coordinator\u{1B}]0;pwned\u{07}"))
        let worker = try JobtopProcess(
            ["worker", "--connect", "127.0.0.1:\(fake.port)", "--name", "w"], newSession: true)
        #expect(await worker.wait(atMost: .seconds(30))?.status == 1)
        let lines = worker.outputLines
        #expect(lines.count == 1, "\(lines)")
        #expect(lines.first?.hasSuffix("refused this worker: nope\\njobtop worker: joined the coordinator\\u{1B}]0;pwned\\u{7}") == true, "\(lines)")
        await fake.stop()
    }
}
