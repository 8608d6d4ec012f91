import Foundation
import GRPCCore
import GRPCNIOTransportHTTP2Posix
import Scheduler

/// The least an assign → ack round trip costs over the remote workers' transport, measured: the
/// same gRPC stream (`WorkerPool.Connect`), transport configuration (plaintext, no flush
/// coalescing) and messages as a coordinator and its worker, with nothing of jobtop between
/// them. The coordinator's side writes an `Assign` and waits for the `Ack` in one task; the
/// worker's side answers each `Assign` from the task that read it. No mailbox, no writer task, no
/// scheduler: what is left is grpc-swift, HTTP/2, protobuf, loopback and the thread wake-ups they
/// need. A benchmark's tool (`jobtop-remote-bench floor`), not part of the protocol.
public enum TransportFloor {
    /// The coordinator's side: listens on loopback, and sends the first worker that connects
    /// `count` assignments one at a time, each once the answer to the one before has arrived.
    public final class Coordinator: Sendable {
        private let service: FloorService
        private let serving: ServingServer
        /// The port it listens on.
        public let port: Int

        /// Starts listening on 127.0.0.1 (a free port).
        public init(count: Int) async throws {
            service = FloorService(count: count)
            var config = HTTP2ServerTransport.Posix.Config.defaults
            config.connection.flushCoalescing = nil
            let server = GRPCServer(
                transport: .http2NIOPosix(
                    address: .ipv4(host: "127.0.0.1", port: 0), transportSecurity: .plaintext, config: config),
                services: [service])
            do {
                serving = try await ServingServer.start(server)
            } catch {
                throw RemoteError(.cannotListen, error.reason)
            }
            port = serving.bound?.port ?? 0
        }

        /// Each round trip, from writing an `Assign` to reading its `Ack`, in order; once the
        /// worker has answered them all.
        public func roundTrips() async -> [Duration] {
            await service.done()
        }

        /// Stops listening.
        public func stop() async {
            serving.server.beginGracefulShutdown()
            await serving.task.value
        }
    }

    /// The worker's side: connects to `port` on loopback, says hello, and answers every `Assign`
    /// with its `Ack` from the task that read it, until the coordinator ends the stream.
    public static func runWorker(port: Int) async throws {
        var config = HTTP2ClientTransport.Posix.Config.defaults
        config.connection.flushCoalescing = nil
        let transport = try HTTP2ClientTransport.Posix(
            target: .ipv4(address: "127.0.0.1", port: port), transportSecurity: .plaintext, config: config)
        // The request writer, handed to the side that reads the responses (a write needs no hop).
        let (writers, giveWriter) = AsyncStream.makeStream(of: RPCWriter<WireWorkerMessage>.self)
        let (ended, end) = AsyncStream.makeStream(of: Void.self)
        try await withGRPCClient(transport: transport) { client in
            try await WirePool.Client(wrapping: client).connect(requestProducer: { writer in
                try await writer.write(.with {
                    $0.hello = .with {
                        $0.name = "floor"
                        $0.slots = 1
                        $0.protocolVersion = RemoteProtocol.version
                    }
                })
                giveWriter.yield(writer)
                giveWriter.finish()
                for await _ in ended {}
            }, onResponse: { response in
                defer { end.finish() }
                var next = writers.makeAsyncIterator()
                guard let writer = await next.next() else { return }
                for try await message in response.messages {
                    guard case .assign(let assign) = message.kind else { continue }
                    try await writer.write(.with {
                        $0.ack = .with {
                            $0.jobID = assign.jobID
                            $0.attempt = assign.attempt
                        }
                    })
                }
            })
        }
    }
}

/// The coordinator's side of ``TransportFloor``.
private final class FloorService: WirePool.SimpleServiceProtocol {
    private let count: Int
    private let result = Locked<(trips: [Duration]?, waiters: [CheckedContinuation<[Duration], Never>])>((nil, []))

    init(count: Int) { self.count = count }

    func connect(
        request: RPCAsyncSequence<WireWorkerMessage, any Error>,
        response: RPCWriter<WireCoordinatorMessage>,
        context: ServerContext
    ) async throws {
        var messages = request.makeAsyncIterator()
        guard try await messages.next() != nil else { return }  // its hello
        // The spec an assignment of `jobtop-remote-bench` carries (`true`), with a fresh job id.
        let spec = Jobtop_Remote_V1_JobSpec(JobSpec.shell("true"))!
        var trips: [Duration] = []
        trips.reserveCapacity(count)
        for _ in 0..<count {
            let assign = WireCoordinatorMessage.with {
                $0.assign = .with {
                    $0.jobID = JobID(uuid: UUID()).description
                    $0.attempt = 1
                    $0.spec = spec
                }
            }
            let start = ContinuousClock.now
            try await response.write(assign)
            guard try await messages.next() != nil else { break }
            trips.append(ContinuousClock.now - start)
        }
        let waiters = result.withLock { state in
            state.trips = trips
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: trips) }
    }

    func done() async -> [Duration] {
        await withCheckedContinuation { continuation in
            let trips = result.withLock { state -> [Duration]? in
                if let trips = state.trips { return trips }
                state.waiters.append(continuation)
                return nil
            }
            if let trips { continuation.resume(returning: trips) }
        }
    }
}
