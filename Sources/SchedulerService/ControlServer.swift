import Foundation
import GRPCCore
import GRPCNIOTransportHTTP2Posix
import NIOCore
import Scheduler
import SchedulerRemote

#if canImport(Glibc)
import Glibc
#endif

/// `jobtop serve`'s listener: the control service of one scheduler on a Unix domain socket
/// (this user only: a 0700 directory, a 0600 socket, and the peer's uid checked), and, if
/// asked, on TCP behind a token (and TLS, when given a certificate).
///
/// Generic over the backend: anything that is a ``SchedulerClient`` (the in-process
/// ``Scheduler``, or a durable one) is served the same way.
public final class ControlServer<Backend: SchedulerClient>: Sendable {
    private let service: ControlService<Backend>
    /// With `listen`: where, the service behind the token, and the gate that keeps the
    /// connections that have not shown the token yet few and short-lived (see
    /// ``ConnectionGate``): anyone who can reach the port can open one.
    private let tcp: (address: RemoteAddress, service: ControlService<Backend>, gate: ConnectionGate)?
    private let tls: RemoteTLS.Server?
    private let servers = Locked<[(GRPCServer<HTTP2ServerTransport.Posix>, Task<Void, Never>)]>([])
    private let socketPath = Locked<String?>(nil)

    /// Creates a server; nothing listens until ``start(socketPath:)``.
    ///
    /// - Parameters:
    ///   - backend: The scheduler to serve.
    ///   - outputFile: Where a job's whole output is kept, if the backend keeps it (`jobtop log`);
    ///     without it, `log` gets the tail the scheduler holds.
    ///   - history: The finished jobs a reference names that the backend no longer keeps, from
    ///     its history (`wait`, `log` of a job beyond the scheduler's retention).
    ///   - listen: Also serve on this TCP address.
    ///   - token: The token TCP clients must show (required for a non-loopback address).
    ///   - tls: The certificate TCP is served with (`nil`: plaintext); clients then send the
    ///     token only inside a verified TLS session.
    ///   - clock: The clock of the TCP connections' deadline.
    ///   - connections: How long a new TCP connection has to make a call that passes the token
    ///     check, and how many may be waiting at once (beyond that, closed as they come).
    ///   - log: Where a closed connection is reported (at most one line per deadline).
    /// - Throws: ``ControlError`` for a non-loopback address without a token.
    public init(
        backend: Backend, outputFile: (@Sendable (JobID) async -> String?)? = nil,
        history: (@Sendable (String) async -> (jobs: [JobInfo], count: Int))? = nil,
        listen: RemoteAddress? = nil, token: String? = nil, tls: RemoteTLS.Server? = nil,
        clock: SchedulerClock = SchedulerClock(ContinuousClock()),
        connections: (deadline: Duration, maxPending: Int) = (.seconds(5), 32),
        log: @escaping @Sendable (String) -> Void = { _ in }
    ) throws(ControlError) {
        if let listen, !listen.isLoopback, token == nil {
            throw ControlError(.cannotListen,
                "refusing to listen on \(listen) without a token: anyone who can reach it could run commands here; pass --token-file PATH or set JOBTOP_TOKEN (or listen on 127.0.0.1)")
        }
        service = ControlService(backend: backend, outputFile: outputFile, history: history, token: nil)
        tcp = listen.map { address in
            let gate = ConnectionGate(
                clock: clock, limits: .init(helloDeadline: connections.deadline, maxPending: connections.maxPending),
                wording: .control, log: log)
            return (address, ControlService(backend: backend, outputFile: outputFile, history: history, token: token, gate: gate), gate)
        }
        self.tls = tls
    }

    /// Listens on the Unix socket at `socketPath` (and TCP if asked).
    ///
    /// - Returns: The TCP address bound (with the real port when port 0 was asked), if any.
    /// - Throws: ``ControlError``: a serve already answers there, or the socket cannot be made.
    @discardableResult
    public func start(socketPath path: String) async throws(ControlError) -> RemoteAddress? {
        let fd = try ControlSocket.listen(at: path)
        socketPath.withLock { $0 = path }
        var config = Self.transportConfig()
        let ownUID = getuid()
        config.channelDebuggingCallbacks.onAcceptTCPConnection = { channel in
            Self.checkPeer(channel, ownUID: ownUID)
        }
        let server = GRPCServer(
            transport: .http2NIOPosix(listeningSocketDescriptor: Int(fd), transportSecurity: .plaintext, config: config),
            services: [service])
        _ = try await run(server, describing: path)
        guard let (tcpAddress, tcpService, gate) = tcp else { return nil }
        do throws(ControlError) {
            var tcpConfig = Self.transportConfig()
            tcpConfig.channelDebuggingCallbacks.onAcceptTCPConnection = { channel in gate.accepted(channel) }
            // Bound as the workers' port is (and as serve checks it before it opens its state):
            // a port that cannot be bound is said in one line, where the transport's own bind
            // said `transportError: "Server transport threw an error." (cause: …)`.
            let socket: Int32
            do throws(RemoteError) { socket = try ListeningSocket.make(tcpAddress) } catch {
                throw ControlError(.cannotListen, error.message)
            }
            let tcp = GRPCServer(
                transport: .http2NIOPosix(
                    listeningSocketDescriptor: Int(socket), transportSecurity: tls?.transportSecurity ?? .plaintext,
                    config: tcpConfig),
                services: [tcpService])
            return try await run(tcp, describing: tcpAddress.description) ?? tcpAddress
        } catch {
            await stop()
            throw error
        }
    }

    /// Stops listening and removes the socket file.
    public func stop() async {
        let running = servers.withLock { value in defer { value = [] }; return value }
        tcp?.gate.close()
        for (server, _) in running { server.beginGracefulShutdown() }
        for (_, task) in running { await task.value }
        if let path = socketPath.withLock({ value in defer { value = nil }; return value }) {
            unlink(path)
        }
    }

    private func run(_ server: GRPCServer<HTTP2ServerTransport.Posix>, describing: String) async throws(ControlError) -> RemoteAddress? {
        do throws(ServingServer.Failure) {
            let serving = try await ServingServer.start(server)
            servers.withLock { $0.append((server, serving.task)) }
            return serving.bound
        } catch {
            throw ControlError(.cannotListen, "cannot listen on \(describing): \(error.reason)")
        }
    }

    private static func transportConfig() -> HTTP2ServerTransport.Posix.Config {
        var config = HTTP2ServerTransport.Posix.Config.defaults
        config.rpc.maxRequestPayloadSize = ControlWire.maxMessageBytes
        // Commands and events are small: coalescing flushes would only add delay to each.
        config.connection.flushCoalescing = nil
        return config
    }

    /// Refuses a connection from another user (root excepted: it can read any socket anyway).
    /// The 0700 directory already keeps others out; this holds even if its mode was changed.
    private static func checkPeer(_ channel: any Channel, ownUID: uid_t) -> EventLoopFuture<Void> {
        guard let provider = channel as? any SocketOptionProvider else { return channel.eventLoop.makeSucceededVoidFuture() }
        let credentials: EventLoopFuture<PeerCredentials> = provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(Self.peerCredentialsOption))
        return credentials.flatMap { peer in
            if peer.uid == ownUID || peer.uid == 0 { return channel.eventLoop.makeSucceededVoidFuture() }
            return channel.close()
        }.flatMapErrorThrowing { _ in }
    }

    /// `SO_PEERCRED` (Linux; Glibc's module leaves it and `struct ucred` out without _GNU_SOURCE).
    private static var peerCredentialsOption: Int32 { 17 }
}

/// `struct ucred`: the pid, uid and gid of a Unix socket's peer, as `SO_PEERCRED` gives them.
private struct PeerCredentials: Sendable {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}
