import Foundation
import GRPCCore
import GRPCNIOTransportHTTP2Posix
import Scheduler

/// The worker process's side: joins a coordinator's pool and runs what it is assigned.
///
/// One gRPC stream per connection. Each assigned attempt is acknowledged at once, then run by
/// a local ``Scheduler`` inside this process (with as many local slots as the worker offers),
/// so a remote job runs exactly like a local one: its own process group, the same output and
/// progress parsing, the same SIGTERM → grace → SIGKILL stop. Its events go back on the
/// stream. When the connection is lost, every running job is killed (the coordinator has
/// requeued them) and the agent reconnects with backoff (doubling, capped, with jitter; reset
/// only once a coordinator welcomes it), saying so in its log once per change of state: not
/// once per attempt.
///
/// The coordinator has ``Configuration/helloDeadline`` to answer a hello. Once joined, a worker
/// answers each of the coordinator's heartbeats at once (it times none of its own), and one
/// that hears nothing from the coordinator for ``missedHeartbeats`` (3) heartbeat intervals
/// (checked every quarter interval) stops its jobs and reconnects; the coordinator waits
/// longer (``WorkerListener/Configuration/missedHeartbeats`` intervals plus the grace period),
/// so the jobs of a worker cut off by the network are stopped there before they are requeued
/// elsewhere. Backoff, the hello deadline and
/// heartbeats run on ``Configuration/clock``. Text the coordinator sends (refusals, goodbyes)
/// is escaped before it is logged (``PeerText``).
///
/// ``drain()`` (SIGTERM) tells the coordinator to send nothing new, finishes the running jobs
/// and returns from ``run()`` once the coordinator has released the worker.
public final class WorkerAgent: Sendable {
    /// How a worker is set up.
    public struct Configuration: Sendable {
        /// The coordinator.
        public var coordinator: RemoteAddress
        /// The name the coordinator shows.
        public var name: String
        /// Jobs run at once.
        public var slots: Int
        /// The token to show; `nil` for none.
        public var token: String?
        /// TLS: how the coordinator is trusted (and the worker's own certificate, for mutual
        /// TLS); `nil` for plaintext. With TLS the hello (and its token) is only ever sent
        /// inside a verified TLS session.
        public var tls: RemoteTLS.Client?
        /// The first delay before reconnecting; it doubles up to `maxBackoff`.
        public var initialBackoff: Duration
        /// The longest delay between attempts to reconnect.
        public var maxBackoff: Duration
        /// The time the coordinator has to answer a hello (welcome or refusal).
        public var helloDeadline: Duration
        /// The clock for backoff, the hello deadline and heartbeats.
        public var clock: any Clock<Duration>
        /// Where the agent says what happens (joined, lost, retrying): one line per change.
        public var log: @Sendable (String) -> Void

        /// Creates a configuration.
        public init(
            coordinator: RemoteAddress,
            name: String = ProcessInfo.processInfo.hostName,
            slots: Int = ProcessInfo.processInfo.activeProcessorCount,
            token: String? = nil,
            tls: RemoteTLS.Client? = nil,
            initialBackoff: Duration = .milliseconds(100),
            maxBackoff: Duration = .seconds(5),
            helloDeadline: Duration = .seconds(10),
            clock: any Clock<Duration> = ContinuousClock(),
            log: @escaping @Sendable (String) -> Void = { WorkerListener.writeToStandardError($0) }
        ) {
            self.coordinator = coordinator
            self.name = name
            self.slots = max(1, slots)
            self.token = token
            self.tls = tls
            self.initialBackoff = initialBackoff
            self.maxBackoff = maxBackoff
            self.helloDeadline = helloDeadline
            self.clock = clock
            self.log = log
        }
    }

    /// What the agent went through, for programs and tests that want more than log lines.
    public enum Event: Sendable, Equatable {
        /// A coordinator welcomed the worker.
        case joined
        /// An attempt to join ended before a welcome: why.
        case unreachable(String)
        /// The worker was in and the connection ended (lost, or the coordinator said goodbye): why.
        case disconnected(String)
        /// The next attempt comes after this delay.
        case retrying(after: Duration)
    }

    /// The configuration it was made with.
    public let configuration: Configuration

    /// Silent heartbeat intervals after which the worker gives the coordinator up (and stops
    /// its jobs).
    public static let missedHeartbeats = 3

    /// Messages the worker's outbox holds before job output waits for room (a line is at most
    /// 16 KiB, so at most a few MiB).
    static let outboxCapacity = 256

    private enum Input: Sendable {
        case message(WireCoordinatorMessage)
        case event(SchedulerEvent)
        case drain
        case ended(SessionEnd)
    }

    private enum SessionEnd: Sendable {
        var isDrained: Bool { if case .drained = self { true } else { false } }

        /// Released after draining.
        case drained
        /// Never got in (no answer, no welcome, a coordinator on its way out): why.
        case unreachable(String)
        /// Refused: the coordinator's reason.
        case refused(String)
        /// The TLS handshake failed before any welcome (wrong CA or fingerprint, no TLS there,
        /// a client certificate wanted): why.
        case tlsFailed(String)
        /// Was in, then the connection broke or went silent.
        case lost(String)
        /// The coordinator said goodbye.
        case goodbye(String)
        /// Stopped at once (``stop()``).
        case stopped
    }

    private struct State {
        var isDraining = false
        var isStopped = false
        /// The joined session's inputs (drain and stop go there).
        var session: AsyncStream<Input>.Continuation?
        /// The attempt to join, until it is welcomed (drain and stop cancel it).
        var attempt: Task<SessionEnd, Never>?
        /// The sleep between attempts (drain and stop end it).
        var pause: Task<Void, Never>?
    }

    private let state = Locked(State())
    private let subscribers = Subscribers<Event>()
    private let clock: SchedulerClock

    /// Creates an agent; nothing happens until ``run()``.
    public init(configuration: Configuration) {
        self.configuration = configuration
        clock = SchedulerClock(configuration.clock)
    }

    /// What the agent goes through, from now on.
    public var events: AsyncStream<Event> { subscribers.subscribe() }

    private func publish(_ event: Event) { subscribers.publish(event) }

    /// Connects, serves, and reconnects until drained or stopped.
    ///
    /// - Throws: ``RemoteError`` (`.refused`) when the coordinator refuses the worker (wrong or
    ///   missing token, other protocol version): retrying would not help.
    public func run() async throws(RemoteError) {
        var backoff = Backoff(initial: configuration.initialBackoff, maximum: configuration.maxBackoff)
        var random = SystemRandomNumberGenerator()
        let coordinator = configuration.coordinator
        // Whether the log already says the agent is trying to get (back) in: attempts that fail
        // the same way say nothing more until something changes.
        var hasSaidRetrying = false
        while !isFinished {
            let end = await session()
            defer { if isFinished && !end.isDrained { configuration.log("jobtop worker: leaving") } }
            switch end {
            case .drained:
                configuration.log("jobtop worker: drained; leaving the pool")
                return
            case .stopped:
                return
            case .refused(let reason):
                throw RemoteError(.refused, "the coordinator at \(coordinator) refused this worker: \(reason)")
            case .tlsFailed(let why):
                throw RemoteError(.tlsFailed, "\(why); giving up (nothing was sent in the clear)")
            case .unreachable(let why):
                publish(.unreachable(why))
                if isFinished { return }
                if !hasSaidRetrying {
                    configuration.log("jobtop worker: cannot reach the coordinator at \(coordinator) (\(why)); retrying with backoff, up to \(formatDuration(backoff.maximum)) apart")
                }
            case .lost(let why):
                backoff.reset()
                publish(.disconnected(why))
                if isFinished { return }
                configuration.log("jobtop worker: lost the coordinator at \(coordinator) (\(why)); running jobs were stopped; reconnecting with backoff")
            case .goodbye(let why):
                backoff.reset()
                publish(.disconnected(why))
                if isFinished { return }
                configuration.log("jobtop worker: the coordinator at \(coordinator) closed the connection (\(why)); reconnecting with backoff")
            }
            hasSaidRetrying = true
            let delay = backoff.next(using: &random)
            publish(.retrying(after: delay))
            await pause(delay)
        }
    }

    /// Finishes the running jobs, accepts no new ones, then leaves: ``run()`` returns. Safe to
    /// call from a signal handler's queue. When not connected, ``run()`` returns at once.
    public func drain() {
        let (session, attempt, pause) = state.withLock { state in
            state.isDraining = true
            return (state.session, state.attempt, state.pause)
        }
        if let session { session.yield(.drain) } else { attempt?.cancel() }
        pause?.cancel()
    }

    /// Stops at once: running jobs are killed (process groups, with grace) and ``run()`` returns.
    public func stop() {
        let (session, attempt, pause) = state.withLock { state in
            state.isStopped = true
            return (state.session, state.attempt, state.pause)
        }
        if let session { session.yield(.ended(.stopped)) } else { attempt?.cancel() }
        pause?.cancel()
    }

    // MARK: - One connection

    private var isFinished: Bool { state.withLock { $0.isDraining || $0.isStopped } }

    /// One attempt: connect, say hello, and serve until the connection ends. The coordinator has
    /// the hello deadline to answer; an attempt that gets no welcome by then is given up.
    private func session() async -> SessionEnd {
        let welcome = WelcomeDeadline()
        let attempt = Task { await self.connect(welcome) }
        let isFinished = state.withLock { state -> Bool in
            state.attempt = attempt
            return state.isDraining || state.isStopped
        }
        if isFinished { attempt.cancel() }
        let (clock, limit) = (clock, configuration.helloDeadline)
        let deadline = Task {
            do {
                try await clock.sleep(clock.now() + limit)
            } catch {
                return
            }
            if welcome.expire() { attempt.cancel() }
        }
        let end = await withTaskCancellationHandler { await attempt.value } onCancel: { attempt.cancel() }
        deadline.cancel()
        state.withLock { $0.attempt = nil }
        if welcome.hasExpired { return .unreachable("no answer to the hello within \(formatDuration(limit))") }
        return end
    }

    private func connect(_ welcome: WelcomeDeadline) async -> SessionEnd {
        // What the worker says, written by one writer loop in batches (one wake-up and one flush
        // per batch). Job output waits for room in it (see `serve`), so it stays near its
        // capacity however fast the jobs write and however slowly the coordinator reads; the few
        // other messages (acks, heartbeats, results) never wait.
        let outbox = Mailbox<WireWorkerMessage>(capacity: Self.outboxCapacity)
        let hello = WireWorkerMessage.with {
            $0.hello = .with {
                $0.name = configuration.name
                $0.slots = UInt32(clamping: configuration.slots)
                $0.protocolVersion = RemoteProtocol.version
                $0.token = configuration.token ?? ""
                $0.softwareVersion = RemoteProtocol.softwareVersion
                $0.features = [.keepBackground, .reportsStart, .withdraw]
            }
        }
        configuration.tls?.forgetRejected()
        do {
            var transportConfig = HTTP2ClientTransport.Posix.Config.defaults
            // Acks and results are small and latency-bound: flush each at once.
            transportConfig.connection.flushCoalescing = nil
            let transport = try HTTP2ClientTransport.Posix(
                target: Self.target(configuration.coordinator), transportSecurity: configuration.tls?.transportSecurity ?? .plaintext,
                config: transportConfig)
            return try await withGRPCClient(transport: transport) { client in
                var options = CallOptions.defaults
                // Fail fast when the coordinator is down: the agent's own loop retries and says so.
                options.waitForReady = false
                return try await WirePool.Client(wrapping: client).connect(options: options, requestProducer: { writer in
                    try await writer.write(hello)
                    while let batch = await outbox.take() { try await writer.write(contentsOf: batch) }
                }, onResponse: { response in
                    defer { outbox.finish() }
                    return await self.serve(response.messages, outbox: outbox, welcome: welcome)
                })
            }
        } catch {
            return ending(error, welcome)
        }
    }

    private func serve(
        _ messages: RPCAsyncSequence<WireCoordinatorMessage, any Error>,
        outbox: Mailbox<WireWorkerMessage>,
        welcome deadline: WelcomeDeadline
    ) async -> SessionEnd {
        let (inputs, input) = AsyncStream.makeStream(of: Input.self)
        let clock = self.clock
        let liveness = Liveness(clock: clock)
        let heartbeat = WireWorkerMessage.with { $0.heartbeat = .init() }
        return await withTaskGroup(of: Void.self) { group -> SessionEnd in
            group.addTask {
                do {
                    for try await message in messages {
                        liveness.touch()
                        switch message.kind {
                        case .assign(let assign):
                            // Acknowledged as soon as it is read, before the dispatch loop
                            // (and the spawn): the coordinator measures this round trip.
                            outbox.send(.with {
                                $0.ack = .with {
                                    $0.jobID = assign.jobID
                                    $0.attempt = assign.attempt
                                }
                            })
                        case .heartbeat:
                            // Answered at once: the worker's heartbeat is this answer, so the
                            // coordinator's one timer paces both directions (and the answers of
                            // all its workers reach it in one burst). The dispatch loop has
                            // nothing to do with it.
                            outbox.send(heartbeat)
                            continue
                        default:
                            break
                        }
                        input.yield(.message(message))
                    }
                    input.yield(.ended(deadline.isWelcomed ? .lost("the coordinator closed the stream") : .unreachable("the coordinator closed the stream")))
                } catch {
                    input.yield(.ended(self.ending(error, deadline)))
                }
            }
            var pending = inputs.makeAsyncIterator()
            let welcome: Jobtop_Remote_V1_Welcome
            switch await pending.next() {
            case .message(let message)?:
                switch message.kind {
                case .welcome(let value):
                    welcome = value
                case .refusal(let refusal):
                    group.cancelAll()
                    let reason = PeerText.escaped(refusal.message, limit: 500)
                    // A coordinator on its way out may be replaced: try again (this was no welcome,
                    // so the backoff goes on growing).
                    if refusal.code == .shuttingDown { return .unreachable(reason) }
                    return .refused(reason)
                default:
                    group.cancelAll()
                    return .unreachable("the coordinator did not answer the hello")
                }
            case .ended(let end)?:
                group.cancelAll()
                return end
            default:
                group.cancelAll()
                return .unreachable("the coordinator did not answer the hello")
            }
            guard deadline.welcome() else {
                group.cancelAll()
                return .unreachable("the welcome came too late")
            }

            let interval = Duration.milliseconds(max(10, Int(welcome.heartbeatIntervalMs)))
            let grace = Duration.milliseconds(Int(welcome.gracePeriodMs))
            let inner = Scheduler(configuration: .init(localSlots: configuration.slots, gracePeriod: grace))
            // Lossless, as the coordinator's log is: when the coordinator reads slowly (its own
            // log is behind), the outbox fills, this loop waits for room, the subscription falls
            // behind and the local scheduler stops reading the jobs' output, so the jobs block on
            // their pipes; nothing is dropped and nothing grows without bound on either side.
            let events = await inner.events(bufferLimit: Self.outboxCapacity, delivery: .lossless)
            let limit = interval * Self.missedHeartbeats
            // A worker that is stopped (SIGSTOP, Ctrl-Z) checks nothing, while its jobs run on in
            // process groups of their own and the coordinator requeues them elsewhere: the
            // lifeline guard stops them once this worker has not ticked for half an interval more
            // than its own limit, well before the coordinator's 5 intervals.
            let guardTimeout = limit + interval / 2
            // Once the guard has fired, the jobs' ends are its doing, not theirs: they are not
            // reported (the worker would count its own SIGTERM as a job's failure, the job's exit
            // status from its trap as its outcome, while the coordinator still waited for it).
            // The session ends as lost instead, so the coordinator runs them again, as it would
            // have a few seconds later on its own.
            let firings = JobProcessGuards.watchdogFirings
            let stoppedByGuard = "this worker did not run for more than \(formatDuration(guardTimeout)) (stopped, or starved of CPU), so its guard stopped its jobs"
            /// Ends the session if the guard has fired since it began; says whether it did.
            @Sendable func endedAfterTheGuardFired() -> Bool {
                guard JobProcessGuards.watchdogFirings != firings else { return false }
                input.yield(.ended(.lost(stoppedByGuard)))
                return true
            }
            group.addTask { await inner.run() }
            group.addTask {
                for await event in events {
                    await outbox.waitForRoom()
                    if endedAfterTheGuardFired() { return }
                    input.yield(.event(event))
                }
            }
            group.addTask {
                // Silence is checked every quarter interval, so the worker gives up at most a
                // quarter interval after its limit: the coordinator's deadline counts on that
                // (see WorkerListener.minimumMissedHeartbeats). (A timer set for the exact
                // deadline woke less often, but the partition test then failed in full suite
                // runs: a starved coordinator's heartbeat missed the exact 3 s more often.)
                let check = interval / 4
                JobProcessGuards.watch(timeout: guardTimeout, grace: grace)
                var lastCheck = clock.now()
                while true {
                    JobProcessGuards.tick()
                    do {
                        try await clock.sleep(clock.now() + check)
                    } catch {
                        return
                    }
                    if endedAfterTheGuardFired() { return }
                    // Away longer than the limit itself: this worker was stopped (SIGSTOP) or
                    // starved, not the coordinator silent (it blamed the coordinator, "for 3s",
                    // after a 20 s stop).
                    let now = clock.now()
                    let away = now - lastCheck
                    lastCheck = now
                    if liveness.silence > limit {
                        let why = away > limit
                            ? "this worker did not run for \(formatDuration(away)) (stopped, or starved of CPU), and heard nothing from the coordinator meanwhile"
                            : "no heartbeat from the coordinator for \(formatDuration(limit))"
                        input.yield(.ended(.lost(why)))
                        return
                    }
                }
            }
            let isDraining = state.withLock { state in
                state.session = input
                return state.isDraining
            }
            if isDraining { input.yield(.drain) }
            if state.withLock({ $0.isStopped }) { input.yield(.ended(.stopped)) }
            configuration.log("jobtop worker: joined the coordinator at \(configuration.coordinator) as '\(PeerText.escaped(configuration.name))' with \(configuration.slots) slot\(configuration.slots == 1 ? "" : "s")")
            publish(.joined)

            let end = await dispatch(&pending, inner: inner, outbox: outbox)
            state.withLock { $0.session = nil }
            input.finish()
            // Whatever still runs belongs to attempts the coordinator has given up on.
            await inner.shutdown(.cancelRunning)
            group.cancelAll()
            // Nothing runs until the next session: no tick is due.
            JobProcessGuards.watch(timeout: nil, grace: .zero)
            return end
        }
    }

    /// The one loop that handles the coordinator's messages and the local scheduler's events,
    /// in order: an attempt's id mapping exists before any of its events is handled.
    private func dispatch(
        _ inputs: inout AsyncStream<Input>.Iterator, inner: Scheduler, outbox: Mailbox<WireWorkerMessage>
    ) async -> SessionEnd {
        var byAttempt: [AttemptKey: JobID] = [:]
        var byJob: [JobID: AttemptKey] = [:]
        /// The jobs whose start the coordinator asked to hear of (`Assign.report_start`).
        var reportStart: Set<JobID> = []
        /// When each running attempt started here: its Finished says how long it ran (the
        /// coordinator's automatic prefetch is sized from it).
        var startedAt: [JobID: SchedulerTime] = [:]
        var isDraining = false

        func finish(_ id: JobID, _ termination: Termination, at time: SchedulerTime? = nil) {
            reportStart.remove(id)
            let start = startedAt.removeValue(forKey: id)
            guard let key = byJob.removeValue(forKey: id) else { return }
            byAttempt[key] = nil
            outbox.send(.with {
                $0.finished = .init(key, termination)
                if let start, let time { $0.finished.runMicros = (time - start).wireMicroseconds }
            })
        }

        while let input = await inputs.next() {
            switch input {
            case .message(let message):
                switch message.kind {
                case .assign(let assign):
                    let key = AttemptKey(jobID: assign.jobID, attempt: assign.attempt)
                    do {
                        var spec = try assign.spec.jobSpec()
                        // Held behind a busy slot, the highest priority starts first here too.
                        spec.priority = min(max(Int(assign.priority), JobSpec.priorityRange.lowerBound), JobSpec.priorityRange.upperBound)
                        let id = try await inner.submit(spec)
                        byAttempt[key] = id
                        byJob[id] = key
                        if assign.reportStart { reportStart.insert(id) }
                    } catch {
                        outbox.send(.with { $0.finished = .init(key, .error("the worker cannot run it: \(error)")) })
                    }
                case .cancel(let cancel):
                    let key = AttemptKey(jobID: cancel.jobID, attempt: cancel.attempt)
                    if let id = byAttempt[key] {
                        try? await inner.cancel(id)
                        // No grace: the coordinator's user asked twice to stop; kill it now.
                        if cancel.gracePeriodMs == 0 { try? await inner.signal(id, SIGKILL) }
                    }
                case .withdraw(let withdraw):
                    // Given back only if it has not started here: checked and cancelled in one
                    // step of the local scheduler, so it cannot start meanwhile. Its maps go
                    // now, so its `cancelled` event sends no Finished.
                    let key = AttemptKey(jobID: withdraw.jobID, attempt: withdraw.attempt)
                    guard let id = byAttempt[key], startedAt[id] == nil, await inner.cancelIfQueued(id) else { break }
                    byAttempt[key] = nil
                    byJob[id] = nil
                    reportStart.remove(id)
                    outbox.send(.with {
                        $0.withdrawn = .with {
                            $0.jobID = key.jobID
                            $0.attempt = key.attempt
                        }
                    })
                case .reprioritize(let reprioritize):
                    // What it holds starts by the new priority; one that started keeps running.
                    let key = AttemptKey(jobID: reprioritize.jobID, attempt: reprioritize.attempt)
                    if let id = byAttempt[key], startedAt[id] == nil {
                        let priority = min(max(Int(reprioritize.priority), JobSpec.priorityRange.lowerBound), JobSpec.priorityRange.upperBound)
                        try? await inner.reprioritize(id, to: priority)
                    }
                case .released:
                    return .drained
                case .goodbye(let goodbye):
                    return .goodbye(PeerText.escaped(goodbye.reason, limit: 500))
                case .heartbeat, .welcome, .refusal, nil:
                    break
                }
            case .event(let event):
                switch event.kind {
                case .started(let id, _, _, _):
                    if byJob[id] != nil { startedAt[id] = event.time }
                    // A prefetched assignment starts only when a slot frees: its timeout counts
                    // from here on the coordinator (asked for jobs with a timeout only).
                    guard reportStart.remove(id) != nil, let key = byJob[id] else { break }
                    outbox.send(.with {
                        $0.started = .with {
                            $0.jobID = key.jobID
                            $0.attempt = key.attempt
                        }
                    })
                case .output(let id, let line):
                    guard let key = byJob[id] else { break }
                    outbox.send(.with {
                        $0.output = .with {
                            $0.jobID = key.jobID
                            $0.attempt = key.attempt
                            $0.lines = [.init(line)]
                        }
                    })
                case .leftoverProcesses(let id, let count, let stopped):
                    // Before the attempt's Finished: its final event comes after this one.
                    guard let key = byJob[id] else { break }
                    outbox.send(.with {
                        $0.leftover = .with {
                            $0.jobID = key.jobID
                            $0.attempt = key.attempt
                            $0.count = UInt32(clamping: count)
                            $0.stopped = stopped
                        }
                    })
                case .progress(let id, let fraction):
                    guard let key = byJob[id] else { break }
                    outbox.send(.with {
                        $0.progress = .with {
                            $0.jobID = key.jobID
                            $0.attempt = key.attempt
                            $0.fraction = fraction
                        }
                    })
                case .succeeded(let id, _):
                    finish(id, .exit(0), at: event.time)
                case .failed(let id, let reason, _):
                    finish(id, Self.termination(reason), at: event.time)
                case .cancelled(let id):
                    finish(id, .signal(SIGTERM), at: event.time)
                case .lagged:
                    // Events were dropped: ask for the end of every attempt still open.
                    for id in Array(byJob.keys) {
                        guard let info = await inner.info(of: id) else { continue }
                        switch info.state {
                        case .succeeded: finish(id, .exit(0))
                        case .failed(let reason, _): finish(id, Self.termination(reason))
                        case .cancelled: finish(id, .signal(SIGTERM))
                        default: break
                        }
                    }
                default:
                    break
                }
            case .drain:
                if !isDraining {
                    isDraining = true
                    // Those it runs, and apart from them those it holds behind them (it runs
                    // them too before it leaves): "3 running" were 2 running and 1 held.
                    let running = startedAt.count
                    let held = byJob.count - running
                    let heldPart = held > 0 ? " and the \(held) held behind them" : ""
                    configuration.log(running + held == 0
                        ? "jobtop worker: draining: nothing running, accepting no new jobs"
                        : "jobtop worker: draining: finishing \(running) running job\(running == 1 ? "" : "s")\(heldPart), accepting no new ones")
                    outbox.send(.with { $0.draining = .init() })
                }
            case .ended(let end):
                return end
            }
        }
        return .stopped
    }

    // MARK: - Helpers

    /// Sleeps `delay` on the clock, or less when drained or stopped meanwhile.
    private func pause(_ delay: Duration) async {
        // A task of its own that drain() and stop() cancel: nothing else can end it early.
        // (An AsyncStream of wake-ups used to; cancelling the first pause's wait on it finished
        // the stream for good, so every later pause returned at once: ~4 ms between attempts.)
        let clock = self.clock
        let sleeper = Task {
            do {
                try await clock.sleep(clock.now() + delay)
            } catch {}
        }
        let isFinished = state.withLock { state -> Bool in
            state.pause = sleeper
            return state.isDraining || state.isStopped
        }
        if isFinished { sleeper.cancel() }
        await withTaskCancellationHandler { await sleeper.value } onCancel: { sleeper.cancel() }
        state.withLock { $0.pause = nil }
    }

    private static func termination(_ reason: FailureReason) -> Termination {
        switch reason {
        case .exitStatus(let status): .exit(status)
        case .signal(let signal): .signal(signal)
        case .timeout: .signal(SIGKILL)
        case .error(let message): .error(message)
        case .workerLost(let why): .error("worker lost: \(why)")
        }
    }

    private static func target(_ address: RemoteAddress) -> any ResolvableTarget {
        if address.isIPv6 { return .ipv6(address: address.host, port: address.port) }
        if address.isIPv4 { return .ipv4(address: address.host, port: address.port) }
        return .dns(host: address.host, port: address.port)
    }

    /// How a connection that failed with `error` ends: lost once welcomed; before that a TLS
    /// failure (which retrying does not mend), or unreachable.
    private func ending(_ error: any Error, _ welcome: WelcomeDeadline) -> SessionEnd {
        if !welcome.isWelcomed, let tls = configuration.tls,
            let why = tls.handshakeFailure(in: error, connectingTo: configuration.coordinator)
        {
            return .tlsFailed(why)
        }
        if !welcome.isWelcomed, let rpc = error as? RPCError, rpc.code == .unimplemented {
            // A gRPC server without the workers' service (a serve's --listen control port): no
            // retry will find one there (it retried forever, saying "requested RPC isn't
            // implemented by this server").
            return .refused("what answers there is not a workers port (a jobtop serve's --listen control port? give the serve's --workers address)")
        }
        var why = PeerText.escaped(Self.describe(error))
        if configuration.tls != nil, let closed = RemoteTLS.Client.closedDuringHandshake(in: error) { why = closed }
        if configuration.tls == nil, why.contains("before completing the HTTP/2 connection preface") {
            why += " (a coordinator with TLS needs --tls-ca or --tls-fingerprint here; or what listens there is not a jobtop coordinator; or it had too many connections waiting for a hello)"
        }
        return welcome.isWelcomed ? .lost(why) : .unreachable(why)
    }

    static func describe(_ error: any Error) -> String {
        var text = String(describing: error)
        if let rpc = error as? RPCError {
            text = rpc.message.isEmpty ? "\(rpc.code)" : PeerText.clause(rpc.message)
            // NIO's HTTP/2 errors name the Swift file and line they come from
            // (`UnableToParseFrame(file: "…", line: 662)`): nothing a person can use.
            if let cause = rpc.cause, !"\(cause)".contains("(file: ") { text += ": \(cause)" }
        }
        // NIO's connection errors are long; the system's reason is what a person needs.
        for reason in [
            "Connection refused", "Connection reset by peer", "Connection timed out", "No route to host",
            "Network is unreachable", "Name or service not known", "Temporary failure in name resolution",
        ] where text.contains(reason) {
            return reason.lowercased()
        }
        return text
    }
}

/// An attempt's race between the welcome and the hello deadline: whichever comes first wins.
final class WelcomeDeadline: Sendable {
    private enum Outcome { case waiting, welcomed, expired }
    private let outcome = Locked(Outcome.waiting)

    /// The welcome came. - Returns: `false` when the deadline had already passed.
    func welcome() -> Bool {
        outcome.withLock { outcome in
            guard outcome == .waiting else { return outcome == .welcomed }
            outcome = .welcomed
            return true
        }
    }

    /// The deadline passed. - Returns: `true` when no welcome had come (the attempt is over).
    func expire() -> Bool {
        outcome.withLock { outcome in
            guard outcome == .waiting else { return outcome == .expired }
            outcome = .expired
            return true
        }
    }

    var isWelcomed: Bool { outcome.withLock { $0 == .welcomed } }
    var hasExpired: Bool { outcome.withLock { $0 == .expired } }
}
