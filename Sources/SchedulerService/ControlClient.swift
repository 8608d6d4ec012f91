import Foundation
import GRPCCore
import GRPCNIOTransportHTTP2Posix
import Scheduler
import SchedulerRemote

/// Where a client finds `jobtop serve`.
public enum ControlEndpoint: Sendable, CustomStringConvertible {
    /// The Unix domain socket at this path.
    case unixSocket(String)
    /// A serve listening on TCP (`jobtop serve --listen`), with the token it wants.
    case tcp(RemoteAddress, token: String?)

    public var description: String {
        switch self {
        case .unixSocket(let path): path
        case .tcp(let address, _): address.description
        }
    }
}

/// A ``SchedulerClient`` across a socket: `jobtop serve`'s scheduler, seen from the dashboard of
/// `jobtop attach` or from `jobtop submit`, exactly as the in-process actor is seen.
///
/// Where the protocol cannot throw (a snapshot, the output), a lost connection gives an empty
/// answer and the event stream ends; the throwing ``send(_:)``, ``fetchSnapshot()`` and
/// ``fetchLog(of:)`` say why instead (what the command line uses).
public final class ControlClient: SchedulerClient {
    public typealias Events = ControlEvents

    private let client: GRPCClient<HTTP2ClientTransport.Posix>
    private let connections: Task<Void, Never>
    /// The subscriptions' tasks, which ``close()`` cancels: a stream its consumer dropped keeps
    /// its call open (the stream's continuation holds it), and a graceful shutdown would wait
    /// for that call forever.
    private let subscriptions = Locked<[UInt64: Task<Void, Never>]>([:])
    private let nextSubscription = Locked<UInt64>(0)
    private let metadata: Metadata
    /// Whether the serve has answered a call yet: until it has, a call that cannot get through
    /// is explained from the socket (``unreachable(_:)``).
    private let answered = Locked(false)
    /// Where it connects.
    public let endpoint: ControlEndpoint
    /// How a TCP serve is trusted (`nil`: plaintext).
    private let tls: RemoteTLS.Client?

    /// Connects to `endpoint`, over TLS trusted as `tls` says when it is TCP and `tls` is given
    /// (nothing, the token included, is then sent before the serve's certificate is verified).
    ///
    /// - Throws: ``ControlError`` `.notRunning` when no serve answers at the Unix socket (the
    ///   one-line message says how to start one), `.connectionLost` when the transport cannot
    ///   be set up.
    public init(endpoint: ControlEndpoint, tls: RemoteTLS.Client? = nil) throws(ControlError) {
        self.endpoint = endpoint
        self.tls = tls
        var security = HTTP2ClientTransport.Posix.TransportSecurity.plaintext
        let target: any ResolvableTarget
        var metadata: Metadata = [:]
        switch endpoint {
        case .unixSocket(let path):
            // Only whether the socket is there: a test connection here made the serve set up
            // (and tear down) a whole HTTP/2 connection for every command, beside the real one.
            // A socket no serve answers at is found when the first call cannot connect.
            if !ControlSocket.exists(path) { throw Self.unreachable(path, .absent, "") }
            target = .unixDomainSocket(path: path)
        case .tcp(let address, let token):
            target = address.host.contains(":")
                ? .ipv6(address: address.host, port: address.port)
                : address.isIPv4 ? .ipv4(address: address.host, port: address.port) : .dns(host: address.host, port: address.port)
            if let token { metadata.addString(token, forKey: ControlWire.tokenKey) }
            if let tls { security = tls.transportSecurity }
        }
        self.metadata = metadata
        var config = HTTP2ClientTransport.Posix.Config.defaults
        config.connection.flushCoalescing = nil
        let transport: HTTP2ClientTransport.Posix
        do {
            transport = try HTTP2ClientTransport.Posix(target: target, transportSecurity: security, config: config)
        } catch {
            throw ControlError(.connectionLost, "cannot connect to \(endpoint): \(error)")
        }
        let client = GRPCClient(transport: transport)
        self.client = client
        connections = Task { try? await client.runConnections() }
    }

    deinit {
        client.beginGracefulShutdown()
    }

    /// Begins closing the connection without waiting.
    public func beginClose() {
        client.beginGracefulShutdown()
    }

    /// Closes the connection once the calls under way have ended.
    public func close() async {
        for task in subscriptions.withLock({ $0.values }) { task.cancel() }
        client.beginGracefulShutdown()
        await connections.value
    }

    private var options: CallOptions {
        var options = CallOptions.defaults
        options.maxResponseMessageBytes = ControlWire.maxMessageBytes
        options.maxRequestMessageBytes = ControlWire.maxMessageBytes
        // A call made after the serve went away fails at once rather than waiting for it to
        // come back (which would also hold up ``close()``).
        options.waitForReady = false
        return options
    }

    private func unary<Request: Codable & Sendable, Response: Codable & Sendable>(
        _ method: MethodDescriptor, _ request: Request, as _: Response.Type = Response.self
    ) async throws(ControlError) -> Response {
        try await unary(method, request, serializer: JSONMessageSerializer<Request>(), deserializer: JSONMessageDeserializer<Response>())
    }

    /// ``unary(_:_:as:)`` with messages in another form than JSON.
    private func unary<Serializer: MessageSerializer, Deserializer: MessageDeserializer>(
        _ method: MethodDescriptor, _ request: Serializer.Message, serializer: Serializer, deserializer: Deserializer
    ) async throws(ControlError) -> Deserializer.Message where Serializer.Message: Sendable, Deserializer.Message: Sendable {
        do {
            let response = try await client.unary(
                request: ClientRequest(message: request, metadata: metadata), descriptor: method,
                serializer: serializer, deserializer: deserializer,
                options: options
            ) { response in try response.message }
            answered.withLock { $0 = true }
            return response
        } catch {
            throw Self.controlError(error, endpoint: endpoint, tls: tls, answered: answered)
        }
    }

    /// Why nothing answers at the socket `path`: one line that says how to start a serve.
    static func unreachable(_ path: String, _ probe: ControlSocket.Probe, _ reason: String) -> ControlError {
        probe == .absent
            ? ControlError(.notRunning, "no jobtop serve is running (no socket at \(path)); start one with 'jobtop serve' (or 'jobtop serve &')")
            : ControlError(.notRunning, "no jobtop serve answers at \(path) (\(reason)); start one with 'jobtop serve'")
    }

    static func controlError(
        _ error: any Error, endpoint: ControlEndpoint, tls: RemoteTLS.Client?, answered: Locked<Bool>
    ) -> ControlError {
        // A first call that could not get through: say why from the socket (none there, a stale
        // one, no permission), as a test connection before it used to.
        if case .unixSocket(let path) = endpoint, !answered.withLock({ $0 }), let error = error as? RPCError, error.code == .unavailable {
            let (probe, reason) = ControlSocket.check(path)
            if probe != .answers { return unreachable(path, probe, reason) }
        }
        if let tls, case .tcp(let address, _) = endpoint,
            let why = tls.handshakeFailure(in: error, connectingTo: address, peer: "jobtop serve", client: "client")
        {
            return ControlError(.refused, why)
        }
        if tls != nil, let closed = RemoteTLS.Client.closedDuringHandshake(in: error) {
            // Not a set-up problem (it said "TLS … failed: handshakeFailed(…EOF…)" as a refusal).
            return ControlError(.notRunning, "jobtop serve at \(endpoint): \(closed): try again")
        }
        if let error = error as? RPCError {
            switch error.code {
            case .unauthenticated, .permissionDenied:
                return ControlError(.refused, "jobtop serve at \(endpoint) refused us: \(error.message)")
            case .unimplemented:
                // A gRPC server without the control service: most likely the workers' port of a
                // serve or a run (it said "Requested RPC isn't implemented by this server.").
                return ControlError(
                    .notRunning,
                    "what answers at \(endpoint) is not a jobtop serve's control port (a workers port, for 'jobtop worker --connect'? the serve's own is its --listen)")
            case .unavailable:
                var hint = ""
                if tls == nil, case .tcp = endpoint, error.message.contains("before completing the HTTP/2 connection preface") {
                    hint = "; a serve with TLS needs --tls-ca or --tls-fingerprint here (or what listens there is not a jobtop serve, or the serve had too many connections waiting to show the token: try again)"
                }
                // "Lost" only for a serve that answered this client before: one that never did
                // was not reached.
                let what = answered.withLock { $0 } ? "lost jobtop serve at" : "no jobtop serve answers at"
                return ControlError(.notRunning, "\(what) \(endpoint) (\(PeerText.clause(error.message)))\(hint)")
            default:
                return ControlError(.connectionLost, "jobtop serve at \(endpoint): \(error.message)")
            }
        }
        return ControlError(.connectionLost, "jobtop serve at \(endpoint): \(error)")
    }

    // MARK: - Throwing calls, for the command line

    /// Performs a command.
    ///
    /// - Throws: ``SchedulerError`` when the scheduler refused it, ``ControlError`` when the
    ///   serve could not be reached.
    public func send(_ command: SchedulerCommand) async throws -> SchedulerReply {
        switch try await unary(ControlWire.perform, command, serializer: CommandMessageSerializer(), deserializer: ResultMessageDeserializer()) {
        case .reply(let reply): return reply
        case .refused(let error): throw error
        }
    }

    /// Checks that the serve answers and lets us in, without fetching anything big.
    public func ping() async throws(ControlError) {
        _ = try await unary(ControlWire.ping, Empty(), as: Empty.self)
    }

    /// What each reference (an id, a prefix of one, a name) names among the serve's jobs.
    public func resolve(_ references: [String]) async throws(ControlError) -> [JobReference.Resolution] {
        try await unary(ControlWire.resolve, references)
    }

    /// The serve's present state.
    public func fetchSnapshot() async throws(ControlError) -> SchedulerSnapshot {
        do {
            let snapshot = try await client.unary(
                request: ClientRequest(message: Empty(), metadata: metadata), descriptor: ControlWire.snapshot,
                serializer: JSONMessageSerializer<Empty>(), deserializer: SnapshotMessageDeserializer(),
                options: options
            ) { response in try response.message }
            answered.withLock { $0 = true }
            return snapshot
        } catch {
            throw Self.controlError(error, endpoint: endpoint, tls: tls, answered: answered)
        }
    }

    /// The job's whole output, piece by piece, handed to `body` as it arrives.
    public func fetchLog(of id: JobID, _ body: @escaping @Sendable (LogPart) async throws -> Void) async throws(ControlError) {
        try await stream(ControlWire.log, id, body)
    }

    /// The job's output from its start, then as it comes, handed to `body` piece by piece until
    /// the job ends (the last part is ``FollowPart/ended(_:)``, or ``FollowPart/unknownJob``).
    public func follow(_ id: JobID, _ body: @escaping @Sendable (FollowPart) async throws -> Void) async throws(ControlError) {
        try await stream(ControlWire.follow, id, body)
    }

    /// A call of one JSON request and a stream of JSON parts, each handed to `body`.
    private func stream<Request: Codable & Sendable, Part: Codable & Sendable>(
        _ method: MethodDescriptor, _ request: Request, _ body: @escaping @Sendable (Part) async throws -> Void
    ) async throws(ControlError) {
        let answered = answered
        do {
            try await client.serverStreaming(
                request: ClientRequest(message: request, metadata: metadata), descriptor: method,
                serializer: JSONMessageSerializer<Request>(), deserializer: JSONMessageDeserializer<Part>(),
                options: options
            ) { response in
                for try await part in response.messages {
                    answered.withLock { $0 = true }
                    try await body(part)
                }
            }
        } catch let error as ControlError {
            throw error
        } catch {
            throw Self.controlError(error, endpoint: endpoint, tls: tls, answered: answered)
        }
    }

    /// Subscribes; the stream ends when the serve shuts down or the connection is lost, and
    /// `ended` then says why (`nil`: the serve ended the stream itself).
    public func events(
        bufferLimit: Int?, includeOutput: Bool, delivery: EventDelivery, job: JobID? = nil,
        ended: (@Sendable (ControlError?) -> Void)? = nil
    ) -> ControlEvents {
        let request = SubscribeRequest(bufferLimit: bufferLimit, includeOutput: includeOutput, delivery: delivery, job: job)
        let (client, metadata, options, endpoint, subscriptions, tls, answered) = (client, metadata, options, endpoint, subscriptions, tls, answered)
        let number = nextSubscription.withLock { $0 += 1; return $0 }
        let reader = Locked<Task<Void, Never>?>(nil)
        // A consumer that stops (its task cancelled) stops the call.
        let pipe = EventPipe(limit: Self.unreadEventLimit) { reader.withLock { $0 }?.cancel() }
        let task = Task {
            var failure: ControlError?
            do {
                try await client.serverStreaming(
                    request: ClientRequest(message: request, metadata: metadata), descriptor: ControlWire.subscribe,
                    serializer: JSONMessageSerializer<SubscribeRequest>(), deserializer: EventMessageDeserializer(),
                    options: options
                ) { response in
                    for try await event in response.messages {
                        answered.withLock { $0 = true }
                        await pipe.put(event)
                        try Task.checkCancellation()
                    }
                }
            } catch {
                if !Task.isCancelled { failure = Self.controlError(error, endpoint: endpoint, tls: tls, answered: answered) }
            }
            ended?(failure)
            pipe.finish()
            subscriptions.withLock { $0[number] = nil }
        }
        reader.withLock { $0 = task }
        subscriptions.withLock { $0[number] = task }  // (a task already ended leaves a finished one here: harmless)
        return ControlEvents(pipe: pipe)
    }

    /// Events a subscription holds unread before it stops reading the call (and the serve's own
    /// limit for a slow subscriber takes over).
    static let unreadEventLimit = 256

    // MARK: - SchedulerClient

    public func perform(_ command: SchedulerCommand) async throws(SchedulerError) -> SchedulerReply {
        do {
            return try await send(command)
        } catch let error as SchedulerError {
            throw error
        } catch {
            throw SchedulerError(.shuttingDown, String(describing: error))
        }
    }

    public func subscribe(bufferLimit: Int?, includeOutput: Bool, delivery: EventDelivery) async -> ControlEvents {
        events(bufferLimit: bufferLimit, includeOutput: includeOutput, delivery: delivery)
    }

    public func currentSnapshot() async -> SchedulerSnapshot {
        (try? await fetchSnapshot()) ?? SchedulerSnapshot()
    }

    public func outputTail(of id: JobID) async -> (lines: [OutputLine], dropped: Int) {
        guard let tail = try? await unary(ControlWire.outputTail, id, as: OutputTail.self) else { return ([], 0) }
        return (tail.lines, tail.dropped)
    }

    public func waitForRoom(in batch: BatchID, below limit: Int) async -> Bool {
        (try? await unary(ControlWire.waitForRoom, WaitForRoomRequest(batch: batch, limit: limit), as: Bool.self)) ?? false
    }
}
