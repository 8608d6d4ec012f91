import Foundation
import GRPCCore
import GRPCNIOTransportHTTP2Posix
import Scheduler

/// The coordinator's side of remote workers: a gRPC server that admits `jobtop worker`
/// processes into a scheduler's pool.
///
/// A worker that says hello with the right protocol version and token becomes a
/// ``RemoteWorker`` added with ``Scheduler/addWorker(_:)``. When its stream breaks, or it is
/// silent for `missedHeartbeats` intervals plus the scheduler's grace period, it is removed with
/// ``Scheduler/removeWorker(_:reason:)`` and its running jobs go back to the queue. A worker
/// that drains (SIGTERM) finishes its jobs, gets no new ones, and is then released.
///
/// Before a worker is admitted its connection is only a stranger's: it has
/// ``Configuration/helloDeadline`` to say a hello that gets in, at most
/// ``Configuration/maxPendingConnections`` such connections may wait at once, and ``stop()``
/// waits no longer than ``Configuration/shutdownGrace`` for any peer. Heartbeats and these
/// deadlines run on the scheduler's clock (``Scheduler/clock``).
///
/// Nothing a peer sends reaches the log raw: names are checked (``WorkerName``) and every
/// peer string that is printed is escaped (``PeerText``).
///
/// ```swift
/// let listener = try WorkerListener(scheduler: scheduler, configuration: .init(address: address, token: token))
/// let bound = try await listener.start()   // the real port when asked for port 0
/// ...
/// await listener.stop()
/// ```
public final class WorkerListener: Sendable {
    /// How a listener is set up.
    public struct Configuration: Sendable {
        /// Where to listen; port 0 picks a free port.
        public var address: RemoteAddress
        /// The token workers must show; `nil` admits any worker (loopback only).
        public var token: String?
        /// TLS: the certificate the listener shows (and the CA client certificates must chain
        /// to, for mutual TLS); `nil` for plaintext.
        public var tls: RemoteTLS.Server?
        /// Assignments each worker may hold beyond its slots, waiting on the worker, so a slot
        /// that frees starts its next job without a round trip to the coordinator: a fixed
        /// number (0 turns it off) or, by default, sized to each worker's link and jobs
        /// (``PrefetchDepth``). The engine counts them as running there (as slots of the worker);
        /// a held job's timeout starts when it starts on the worker.
        public var prefetch: Prefetch
        /// How often the coordinator sends every worker a heartbeat (one timer for all of
        /// them); each worker answers at once, so it is also how often a worker is heard from.
        public var heartbeatInterval: Duration
        /// Silent intervals after which a worker counts as lost, on top of the scheduler's
        /// grace period; at least ``WorkerListener/minimumMissedHeartbeats`` (5).
        ///
        /// A worker gives up on a silent coordinator sooner, after
        /// ``WorkerAgent/missedHeartbeats`` (3) intervals checked every quarter interval, and
        /// stops its jobs (SIGTERM, the grace period, SIGKILL). The coordinator's last word from
        /// the worker may be up to one interval older than the worker's from it (the answer to
        /// the last heartbeat lost, the one before got through), so with 5 intervals plus the
        /// grace period the jobs of a worker cut off by the network are stopped there before the
        /// coordinator requeues them (¾ of an interval to spare, less the one-way latency; the
        /// coordinator, which checks once per interval, may be up to an interval later still).
        public var missedHeartbeats: Int
        /// The time a new connection has to bring a worker in (a hello with the right token);
        /// then it is closed.
        public var helloDeadline: Duration
        /// Connections that may wait for admission at once; more are closed when accepted.
        public var maxPendingConnections: Int
        /// How long ``WorkerListener/stop()`` waits for workers to close their connections after
        /// the goodbye; then the connections are dropped.
        public var shutdownGrace: Duration
        /// Records assign → ack round trips (the benchmark reads them).
        public var roundTrips: RoundTripRecorder?
        /// Where the listener says what happened (joins, refusals, losses): one line each.
        public var log: @Sendable (String) -> Void

        /// Creates a configuration.
        public init(
            address: RemoteAddress,
            token: String? = nil,
            tls: RemoteTLS.Server? = nil,
            prefetch: Prefetch = WorkerListener.defaultPrefetch,
            heartbeatInterval: Duration = .seconds(1),
            missedHeartbeats: Int = WorkerListener.minimumMissedHeartbeats,
            helloDeadline: Duration = .seconds(5),
            maxPendingConnections: Int = 32,
            shutdownGrace: Duration = .seconds(2),
            roundTrips: RoundTripRecorder? = nil,
            log: @escaping @Sendable (String) -> Void = { WorkerListener.writeToStandardError($0) }
        ) {
            self.address = address
            self.token = token
            self.tls = tls
            self.prefetch = prefetch
            self.heartbeatInterval = heartbeatInterval
            self.missedHeartbeats = max(WorkerListener.minimumMissedHeartbeats, missedHeartbeats)
            self.helloDeadline = helloDeadline
            self.maxPendingConnections = max(1, maxPendingConnections)
            self.shutdownGrace = shutdownGrace
            self.roundTrips = roundTrips
            self.log = log
        }
    }

    /// What the listener saw, for programs and tests that want more than log lines.
    public enum Event: Sendable, Equatable {
        /// A worker joined the pool.
        case joined(WorkerDescriptor)
        /// A worker was refused: the name it gave (escaped, see ``PeerText``) and why.
        case refused(name: String, reason: String)
        /// A worker left the pool, and why (rendered as text only where it is shown).
        case left(WorkerID, reason: WorkerLeaveReason)
    }

    /// Assignments a worker holds beyond its slots unless configured otherwise: sized to its
    /// link.
    public static let defaultPrefetch = Prefetch.automatic

    /// The fewest silent heartbeat intervals (plus the grace period) before a worker counts as
    /// lost: see ``Configuration/missedHeartbeats``.
    public static let minimumMissedHeartbeats = WorkerAgent.missedHeartbeats + 2

    /// The configuration it was made with.
    public let configuration: Configuration
    private let scheduler: Scheduler
    private let service: PoolService
    private let gate: ConnectionGate
    private let shutdownGrace = ShutdownGrace()
    private let server: Locked<(GRPCServer<HTTP2ServerTransport.Posix>, Task<Void, Never>)?> = Locked(nil)
    private let ticker: Locked<Task<Void, Never>?> = Locked(nil)

    /// Creates a listener; nothing listens until ``start()``.
    ///
    /// - Throws: ``RemoteError`` (`.tokenRequired`) for a non-loopback address without a token.
    public init(scheduler: Scheduler, configuration: Configuration) throws(RemoteError) {
        if !configuration.address.isLoopback && configuration.token == nil {
            throw RemoteError(
                .tokenRequired,
                "refusing to listen on \(configuration.address) without a token: anyone who can reach it could run commands here; pass --token-file PATH or set JOBTOP_TOKEN (or listen on 127.0.0.1)")
        }
        self.configuration = configuration
        self.scheduler = scheduler
        gate = ConnectionGate(
            clock: scheduler.clock,
            limits: .init(helloDeadline: configuration.helloDeadline, maxPending: configuration.maxPendingConnections),
            log: configuration.log)
        service = PoolService(scheduler: scheduler, configuration: configuration, gate: gate)
    }

    /// What the listener sees, from now on.
    public var events: AsyncStream<Event> { service.subscribe() }

    /// Starts listening.
    ///
    /// - Returns: The address bound (with the real port when port 0 was asked for).
    /// - Throws: ``RemoteError`` (`.cannotListen`) when the address cannot be bound.
    @discardableResult
    public func start() async throws(RemoteError) -> RemoteAddress {
        let address = configuration.address
        let socket = try ListeningSocket.make(address)
        var transportConfig = HTTP2ServerTransport.Posix.Config.defaults
        // A few small messages per job: coalescing flushes would only add its delay (100 µs,
        // more when the timer fires late on a busy machine) to every assign.
        transportConfig.connection.flushCoalescing = nil
        // A worker needs one stream; a few more cost little, thousands on one connection would.
        transportConfig.http2.maxConcurrentStreams = 4
        let gate = self.gate
        transportConfig.channelDebuggingCallbacks.onAcceptTCPConnection = { channel in gate.accepted(channel) }
        let server = GRPCServer(
            transport: .http2NIOPosix(
                listeningSocketDescriptor: Int(socket), transportSecurity: configuration.tls?.transportSecurity ?? .plaintext,
                config: transportConfig),
            services: [service])
        do throws(ServingServer.Failure) {
            let serving = try await ServingServer.start(server)
            self.server.withLock { $0 = (server, serving.task) }
            let service = self.service
            ticker.withLock { $0 = Task { await service.beat() } }
            return serving.bound ?? address
        } catch {
            throw RemoteError(.cannotListen, "cannot listen on \(address): \(Self.shortReason(error.reason))")
        }
    }

    /// Says goodbye to every worker, removes them from the pool and stops listening.
    ///
    /// Connections without a worker are closed at once; a worker that does not close its
    /// connection within ``Configuration/shutdownGrace`` of the goodbye (stopped, cut off) has
    /// it dropped, and so has every connection still open when ``dropConnectionsNow()`` is
    /// called.
    public func stop() async {
        guard let (server, task) = self.server.withLock({ value in defer { value = nil }; return value }) else { return }
        gate.close()
        let workers = await service.closeAll(reason: "the coordinator is shutting down")
        server.beginGracefulShutdown()
        let (clock, grace, gate, log, shutdownGrace) = (scheduler.clock, configuration.shutdownGrace, gate, configuration.log, shutdownGrace)
        if workers > 0 && !shutdownGrace.isCut {
            log("jobtop: said goodbye to \(workers) worker\(workers == 1 ? "" : "s"); waiting up to \(formatDuration(grace)) for \(workers == 1 ? "its connection" : "their connections") to close")
        }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                // Cancelled when every connection closed in time.
                guard let ending = await shutdownGrace.wait(grace, on: clock) else { return }
                let dropped = gate.closeAll()
                guard dropped > 0 else { return }
                let connections = "\(dropped) connection\(dropped == 1 ? "" : "s")"
                switch ending {
                case .expired: log("jobtop: dropped \(connections) still open \(formatDuration(grace)) after the goodbye")
                case .cut: log("jobtop: dropped \(connections) still open after the goodbye, without waiting any longer")
                }
            }
            await task.value
            group.cancelAll()
        }
        // Beating until every connection is gone: a worker still finishing its goodbye keeps
        // hearing from the coordinator.
        ticker.withLock { value in defer { value = nil }; return value }?.cancel()
    }

    /// Ends the wait of a ``stop()`` under way, or of the next one, at once: connections still
    /// open after the goodbye are dropped without waiting for the shutdown grace. For a second
    /// Ctrl-C; safe to call from any thread.
    public func dropConnectionsNow() {
        shutdownGrace.cut()
    }

    /// Writes one line to standard error.
    public static func writeToStandardError(_ line: String) {
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }

    static func shortReason(_ text: String) -> String {
        if text.contains("Address already in use") || text.contains("EADDRINUSE") { return "address already in use" }
        if text.contains("Cannot assign requested address") { return "that address is not on this machine" }
        if text.contains("Permission denied") { return "permission denied" }
        return text
    }
}

/// The `WorkerPool` service: one `Connect` stream per worker.
private final class PoolService: WirePool.SimpleServiceProtocol {
    private let scheduler: Scheduler
    private let configuration: WorkerListener.Configuration
    private let gate: ConnectionGate
    private struct State {
        var connections: [WorkerID: Connection] = [:]
        /// Names given to workers still being admitted (not yet among the connections).
        var admittingNames: Set<String> = []
        var isClosed = false
    }
    private let state = Locked(State())
    private let subscribers = Subscribers<WorkerListener.Event>()
    /// A wake-up for the ticker (``beat()``) when a worker joins: with none it waits here, not
    /// on a timer.
    private let joins = Mailbox<Void>()
    /// Silence from a worker for longer than this (missed intervals + the grace period) loses
    /// it; the worker's own deadline, its check and its jobs' stop fit inside it.
    private let limit: Duration

    /// A joined worker's stream.
    struct Connection: Sendable {
        let worker: RemoteWorker
        let outbox: Mailbox<WireCoordinatorMessage>
        /// When the worker was last heard from.
        let liveness: Liveness
        /// Where the ticker says the worker was silent too long: its stream ends as lost.
        let loss: Mailbox<WorkerLeaveReason>
    }

    init(scheduler: Scheduler, configuration: WorkerListener.Configuration, gate: ConnectionGate) {
        self.scheduler = scheduler
        self.configuration = configuration
        self.gate = gate
        limit = configuration.heartbeatInterval * configuration.missedHeartbeats + scheduler.configuration.gracePeriod
    }

    /// The one heartbeat of the whole pool, until cancelled: every interval (on the scheduler's
    /// clock) each joined worker is sent a heartbeat, which it answers at once, and a worker
    /// silent for longer than ``limit`` is lost.
    ///
    /// One timer for all workers rather than one per worker: the heartbeats go out, and their
    /// answers come back, in one burst per interval, so the threads wake once for the lot
    /// instead of a few times per worker at as many moments (the idle cost with 100 workers was
    /// mostly such wake-ups). A worker is still checked every interval, so it is lost between
    /// ``limit`` and ``limit`` plus an interval after it was last heard from, as before.
    func beat() async {
        let clock = scheduler.clock
        let interval = configuration.heartbeatInterval
        let heartbeat = WireCoordinatorMessage.with { $0.heartbeat = .init() }
        while !Task.isCancelled {
            if state.withLock({ $0.connections.isEmpty }) {
                // No worker, no timer: the ticker costs nothing until one joins.
                guard await joins.take() != nil else { return }
                continue
            }
            do {
                try await clock.sleep(clock.now() + interval)
            } catch {
                return
            }
            let connections = state.withLock { Array($0.connections.values) }
            for connection in connections {
                if connection.liveness.silence > limit {
                    connection.loss.send(.heartbeatMissed(limit))
                } else {
                    connection.outbox.send(heartbeat)
                }
            }
        }
    }

    func subscribe() -> AsyncStream<WorkerListener.Event> { subscribers.subscribe() }

    private func publish(_ event: WorkerListener.Event) { subscribers.publish(event) }

    /// Says goodbye to every joined worker and admits no more.
    /// - Returns: The number of workers told.
    func closeAll(reason: String) async -> Int {
        let connections = state.withLock { state in
            state.isClosed = true
            return Array(state.connections.values)
        }
        for connection in connections {
            connection.outbox.send(.with { $0.goodbye = .with { $0.reason = reason } })
            connection.outbox.finish()
        }
        return connections.count
    }

    func connect(
        request: RPCAsyncSequence<WireWorkerMessage, any Error>,
        response: RPCWriter<WireCoordinatorMessage>,
        context: ServerContext
    ) async throws {
        let peer = context.remotePeer
        // What the coordinator says to this worker, written by one writer loop in batches (one
        // wake-up and one flush per batch). Not bounded: the messages are small, and a worker
        // that stops reading is soon declared lost (it cannot answer heartbeats it does not read).
        let outbox = Mailbox<WireCoordinatorMessage>()
        let admission = Admission()
        let clock = scheduler.clock
        let liveness = Liveness(clock: clock)
        let loss = Mailbox<WorkerLeaveReason>()
        let helloDeadline = configuration.helloDeadline
        let end = await withTaskGroup(of: StreamEnd?.self) { group -> StreamEnd in
            group.addTask {
                // Reads the hello (answering it directly: nothing is in the outbox before the
                // welcome), then every message of the joined worker.
                do {
                    var messages = request.makeAsyncIterator()
                    guard let first = try await messages.next() else { return .closed }
                    guard
                        let worker = try await self.admit(
                            first, peer: peer, response: response, outbox: outbox, admission: admission, liveness: liveness,
                            loss: loss)
                    else {
                        return .refused
                    }
                    while let message = try await messages.next() {
                        liveness.touch()
                        switch message.kind {
                        case .heartbeat:
                            // Heard, and nothing else to do (no output to hold back).
                            continue
                        case .draining:
                            // No new job may reach a draining worker; it leaves when its jobs end.
                            await self.scheduler.retireWorker(worker.descriptor.id, reason: .drained)
                        default:
                            break
                        }
                        let handled = worker.handle(message)
                        if handled.isIdleWhileDraining { return .drained }
                        if let depth = handled.newDepth {
                            await self.scheduler.setWorkerSlots(worker.descriptor.id, to: worker.workerSlots + depth)
                        }
                        // A lossless subscriber that is behind (the headless log) slows remote
                        // jobs as it slows local ones: no more of their output is read until it
                        // catches up, and the worker's writes wait meanwhile.
                        await worker.waitUntilOutputFlows(liveness)
                    }
                    return .lost(.closedByWorker)
                } catch {
                    return .lost(.connectionLost(PeerText.escaped(Self.describe(error))))
                }
            }
            group.addTask {
                // The only writer of this stream once the worker is in.
                do {
                    while let batch = await outbox.take() { try await response.write(contentsOf: batch) }
                    return .closed  // finished by closeAll: the goodbye went out
                } catch {
                    return .lost(.connectionLost(PeerText.escaped(Self.describe(error))))
                }
            }
            group.addTask {
                // Before the hello: the hello deadline (once in, this task just ends).
                do {
                    try await clock.sleep(clock.now() + helloDeadline)
                } catch {
                    return .closed
                }
                return admission.worker == nil ? .refused : nil
            }
            group.addTask {
                // Once in: the listener's ticker (`beat()`) sends the heartbeats and says when
                // the worker has been silent too long.
                guard let reasons = await loss.take(), let reason = reasons.first else { return .closed }
                return .lost(reason)
            }
            var first = StreamEnd.closed
            while let end = await group.next() {
                guard let end else { continue }
                first = end
                break
            }
            group.cancelAll()
            return first
        }
        outbox.finish()
        guard let worker = admission.worker else { return }
        let descriptor = worker.descriptor
        let name = descriptor.name  // checked at the hello: printable
        state.withLock { _ = $0.connections.removeValue(forKey: descriptor.id) }
        let reason: WorkerLeaveReason
        switch end {
        case .drained where worker.release():
            // Nothing of it runs: once the scheduler has recorded the ends of its jobs (and
            // requeued the ones parked meanwhile), it has left the pool; then tell it to go.
            reason = .drained
            await worker.waitUntilLeft()
            worker.removed()
            try? await response.write(.with { $0.released = .init() })
            configuration.log("jobtop: worker '\(name)' drained and left")
        case .drained, .closed, .refused:
            reason = .coordinatorShutdown
            worker.markLost(reason)
            await scheduler.removeWorker(descriptor.id, reason: reason)
            worker.removed()
        case .lost(let why):
            reason = why
            worker.markLost(reason)
            await scheduler.removeWorker(descriptor.id, reason: reason)
            worker.removed()
            configuration.log("jobtop: worker '\(name)' lost: \(reason)")
        }
        publish(.left(descriptor.id, reason: reason))
    }

    /// Checks a hello; writes the welcome and adds the worker to the pool, or writes a refusal.
    /// - Returns: The worker, or `nil` when refused.
    private func admit(
        _ first: WireWorkerMessage, peer: String, response: RPCWriter<WireCoordinatorMessage>,
        outbox: Mailbox<WireCoordinatorMessage>, admission: Admission, liveness: Liveness,
        loss: Mailbox<WorkerLeaveReason>
    ) async throws -> RemoteWorker? {
        guard case .hello(let hello) = first.kind else {
            try await refuse(response, .badHello, name: "?", peer: peer, "the first message must be a hello")
            return nil
        }
        // Unchecked until the token is: shown escaped, never raw.
        let name = hello.name.isEmpty ? peer : hello.name
        if hello.protocolVersion != RemoteProtocol.version {
            let theirs = hello.softwareVersion.isEmpty ? "?" : PeerText.escaped(hello.softwareVersion, limit: 40)
            try await refuse(
                response, .versionMismatch, name: name, peer: peer,
                "protocol version mismatch: the coordinator speaks jobtop remote protocol \(RemoteProtocol.version) (jobtop \(RemoteProtocol.softwareVersion)), the worker speaks \(hello.protocolVersion) (jobtop \(theirs)); run the same jobtop version on both")
            return nil
        }
        if let expected = configuration.token {
            if hello.token.isEmpty {
                try await refuse(
                    response, .badToken, name: name, peer: peer,
                    "the coordinator requires a token and the worker sent none (use --token-file PATH or JOBTOP_TOKEN)")
                return nil
            }
            if !RemoteToken.matches(hello.token, expected) {
                try await refuse(response, .badToken, name: name, peer: peer, "wrong token")
                return nil
            }
        }
        if !hello.name.isEmpty, let problem = WorkerName.problem(with: hello.name) {
            try await refuse(response, .badName, name: name, peer: peer, "bad worker name: \(problem)")
            return nil
        }
        guard hello.slots >= 1, hello.slots <= 4096 else {
            try await refuse(response, .badHello, name: name, peer: peer, "slots must be from 1 to 4096, not \(hello.slots)")
            return nil
        }
        if state.withLock({ $0.isClosed }) || !gate.admit(peer: peer) {
            // No longer open to workers: stopping, or this connection ran out of time.
            try await refuse(response, .shuttingDown, name: name, peer: peer, "the coordinator is shutting down")
            return nil
        }
        // The pool sees the prefetched assignments as slots: the worker's own scheduler queues
        // what is beyond its real slots and starts it the moment one frees.
        let depth = configuration.prefetch.initialDepth
        // Two workers may give the same name (one command started on two hosts, a worker back
        // before its old connection was found lost): the second is called `name#2`, so that
        // every screen and log line tells them apart.
        let unique = state.withLock { state in
            let taken = Set(state.connections.values.map(\.worker.descriptor.name)).union(state.admittingNames)
            var unique = name
            var number = 2
            while taken.contains(unique) {
                unique = "\(name)#\(number)"
                number += 1
            }
            state.admittingNames.insert(unique)
            return unique
        }
        defer { state.withLock { _ = $0.admittingNames.remove(unique) } }
        // Its own slots run at once; the prefetch depth beyond them holds jobs behind busy ones,
        // which it gives back for another worker's free slot when it can say when one began.
        let features = Set(hello.features)
        let descriptor = WorkerDescriptor(
            id: WorkerID(), name: unique, kind: .remote, slots: Int(hello.slots) + depth, ownSlots: Int(hello.slots),
            withdrawsHeld: features.contains(.reportsStart) && features.contains(.withdraw))
        let worker = RemoteWorker(
            descriptor: descriptor, workerSlots: Int(hello.slots), prefetch: configuration.prefetch, outbox: outbox,
            features: features, gracePeriod: scheduler.configuration.gracePeriod,
            roundTrips: configuration.roundTrips)
        try await response.write(.with {
            $0.welcome = .with {
                $0.workerID = descriptor.id.description
                $0.heartbeatIntervalMs = configuration.heartbeatInterval.wireMilliseconds
                $0.gracePeriodMs = scheduler.configuration.gracePeriod.wireMilliseconds
                $0.protocolVersion = RemoteProtocol.version
            }
        })
        // Admitted before anyone hears of it: the watchdog treats the stream as a worker's from now.
        admission.set(worker)
        liveness.touch()
        state.withLock {
            $0.connections[descriptor.id] = Connection(worker: worker, outbox: outbox, liveness: liveness, loss: loss)
        }
        joins.send(())
        await scheduler.addWorker(worker)
        let prefetched =
            switch configuration.prefetch {
            case .automatic: " (+\(depth) prefetched, sized to its link)"
            case .fixed(let depth): depth > 0 ? " (+\(depth) prefetched)" : ""
            }
        let renamed = unique == name ? "" : "; another worker has the name '\(name)'"
        configuration.log("jobtop: worker '\(unique)' joined from \(peer) with \(hello.slots) slot\(hello.slots == 1 ? "" : "s")\(prefetched) (id \(descriptor.id.short)\(renamed))")
        publish(.joined(descriptor))
        return worker
    }

    /// How a worker's stream ended.
    private enum StreamEnd: Sendable {
        /// Never admitted (refused, or silent before its hello).
        case refused
        /// The worker drained and has nothing running.
        case drained
        /// The coordinator closed it.
        case closed
        /// Broken or silent.
        case lost(WorkerLeaveReason)
    }

    private func refuse(
        _ response: RPCWriter<WireCoordinatorMessage>, _ code: Jobtop_Remote_V1_Refusal.Code,
        name: String, peer: String, _ message: String
    ) async throws {
        let shown = PeerText.escaped(name, limit: 64)
        configuration.log("jobtop: refused worker '\(shown)' from \(peer): \(message)")
        publish(.refused(name: shown, reason: message))
        try await response.write(.with {
            $0.refusal = .with {
                $0.code = code
                $0.message = message
            }
        })
    }

    static func describe(_ error: any Error) -> String {
        let text = if let rpc = error as? RPCError { rpc.message.isEmpty ? "\(rpc.code)" : rpc.message } else { String(describing: error) }
        // A sentence's full stop ("Stream unexpectedly closed.") reads wrong inside the reasons
        // it goes into ("connection lost: Stream unexpectedly closed.; 6 attempts").
        return text.hasSuffix(".") && !text.hasSuffix("..") ? String(text.dropLast()) : text
    }
}

/// The worker a stream admitted, once it is admitted.
private final class Admission: Sendable {
    private let value = Locked<RemoteWorker?>(nil)
    func set(_ worker: RemoteWorker) { value.withLock { $0 = worker } }
    var worker: RemoteWorker? { value.withLock { $0 } }
}

/// When the peer was last heard from, on the injected clock; a silence we caused (not reading
/// while ``pause()``d) does not count.
final class Liveness: Sendable {
    private struct State {
        var last: SchedulerTime
        var isPaused = false
    }

    private let clock: SchedulerClock
    private let state: Locked<State>

    init(clock: SchedulerClock) {
        self.clock = clock
        state = Locked(State(last: clock.now()))
    }

    func touch() {
        let now = clock.now()
        state.withLock { $0.last = now }
    }

    /// We stop reading the peer: its silence is not its fault until ``resume()``.
    func pause() {
        state.withLock { $0.isPaused = true }
    }

    /// We read the peer again; the silence counts from now.
    func resume() {
        let now = clock.now()
        state.withLock { state in
            state.isPaused = false
            state.last = now
        }
    }

    var silence: Duration {
        let now = clock.now()
        return state.withLock { $0.isPaused ? .zero : now - $0.last }
    }
}
