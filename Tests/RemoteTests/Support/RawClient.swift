import GRPCCore
import GRPCNIOTransportHTTP2Posix
import Scheduler

@testable import SchedulerRemote

/// A bare protocol client, for what a `jobtop worker` never sends.
enum RawClient {
    /// Says hello; returns the refusal, or `nil` when welcomed.
    static func hello(
        port: Int, version: UInt32 = RemoteProtocol.version, name: String = "time-traveller", token: String = ""
    ) async throws -> Jobtop_Remote_V1_Refusal? {
        try await withGRPCClient(
            transport: .http2NIOPosix(target: .ipv4(address: "127.0.0.1", port: port), transportSecurity: .plaintext)
        ) { client in
            try await WirePool.Client(wrapping: client).connect(requestProducer: { writer in
                try await writer.write(.with {
                    $0.hello = .with {
                        $0.name = name
                        $0.slots = 1
                        $0.protocolVersion = version
                        $0.token = token
                        $0.softwareVersion = "9.9.9"
                    }
                })
            }, onResponse: { response in
                for try await message in response.messages {
                    if case .refusal(let refusal) = message.kind { return refusal }
                    return nil
                }
                return nil
            })
        }
    }
}

extension RawClient {
    /// Joins as a worker of protocol version 1 as it first shipped (no features listed), runs
    /// `body` while joined, then leaves.
    ///
    /// - Returns: Every message the coordinator sent meanwhile.
    static func asOlderWorker(
        port: Int, token: String,
        _ body: @escaping @Sendable (AsyncStream<Jobtop_Remote_V1_CoordinatorMessage>) async throws -> Void
    ) async throws -> [Jobtop_Remote_V1_CoordinatorMessage] {
        try await asWorker(port: port, token: token, name: "old-timer", softwareVersion: "0.1.0", features: [], body)
    }

    /// Joins as a one-slot worker that lists `features`, answers nothing (what it is assigned
    /// stays held, never begun), runs `body` while joined, then leaves.
    ///
    /// - Returns: Every message the coordinator sent meanwhile.
    static func asWorker(
        port: Int, token: String, name: String = "raw", softwareVersion: String = "9.9.9",
        features: [Jobtop_Remote_V1_Feature],
        _ body: @escaping @Sendable (AsyncStream<Jobtop_Remote_V1_CoordinatorMessage>) async throws -> Void
    ) async throws -> [Jobtop_Remote_V1_CoordinatorMessage] {
        let (messages, received) = AsyncStream.makeStream(of: Jobtop_Remote_V1_CoordinatorMessage.self)
        let (leaving, leave) = AsyncStream.makeStream(of: Void.self)
        let seen = Locked<[Jobtop_Remote_V1_CoordinatorMessage]>([])
        try await withGRPCClient(
            transport: .http2NIOPosix(target: .ipv4(address: "127.0.0.1", port: port), transportSecurity: .plaintext)
        ) { client in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    try await WirePool.Client(wrapping: client).connect(requestProducer: { writer in
                        try await writer.write(.with {
                            $0.hello = .with {
                                $0.name = name
                                $0.token = token
                                $0.slots = 1
                                $0.protocolVersion = 1
                                $0.softwareVersion = softwareVersion
                                $0.features = features
                            }
                        })
                        for await _ in leaving {}  // the stream stays open until the test is done
                    }, onResponse: { response in
                        for try await message in response.messages {
                            seen.withLock { $0.append(message) }
                            received.yield(message)
                        }
                        received.finish()
                    })
                }
                try await body(messages)
                leave.finish()
                try await group.waitForAll()
            }
        }
        return seen.withLock { $0 }
    }
}

/// A coordinator that misbehaves in one chosen way, for testing what a worker does about it.
struct FakeCoordinator: WirePool.SimpleServiceProtocol {
    enum Behavior: Sendable {
        /// Refuses every hello with this code and message.
        case refuse(Jobtop_Remote_V1_Refusal.Code, String)
        /// Welcomes, then never sends anything again.
        case welcomeThenSilent(heartbeatMilliseconds: UInt32)
        /// Welcomes, then `count` times sends a heartbeat and reads the worker's next message,
        /// telling `heard` whether it was a heartbeat; then stays silent.
        case heartbeats(count: Int, heard: AsyncStream<Bool>.Continuation)
        /// Welcomes, sends `messages` in order, then tells `heard` every message of the worker.
        case script([WireCoordinatorMessage], heard: AsyncStream<WireWorkerMessage>.Continuation)
        /// As `script`, but sends the rest of the script only once the worker says the job
        /// `waitsFor` started (each of its messages until then told to `heard` too).
        case scriptAfterStart([WireCoordinatorMessage], waitsFor: String, then: [WireCoordinatorMessage], heard: AsyncStream<WireWorkerMessage>.Continuation)
    }

    /// A fake serving on a loopback port.
    struct Running {
        let port: Int
        let server: GRPCServer<HTTP2ServerTransport.Posix>
        let task: Task<Void, any Error>

        func stop() async {
            server.beginGracefulShutdown()
            _ = try? await task.value
        }
    }

    let behavior: Behavior

    /// Starts one on a free loopback port.
    static func start(_ behavior: Behavior) async throws -> Running {
        let server = GRPCServer(
            transport: .http2NIOPosix(address: .ipv4(host: "127.0.0.1", port: 0), transportSecurity: .plaintext),
            services: [FakeCoordinator(behavior: behavior)])
        let task = Task { try await server.serve() }
        let address = try await server.listeningAddress
        return Running(port: address?.ipv4?.port ?? 0, server: server, task: task)
    }

    func connect(
        request: RPCAsyncSequence<WireWorkerMessage, any Error>,
        response: RPCWriter<WireCoordinatorMessage>,
        context: ServerContext
    ) async throws {
        var messages = request.makeAsyncIterator()
        _ = try await messages.next()
        switch behavior {
        case .refuse(let code, let message):
            try await response.write(.with {
                $0.refusal = .with {
                    $0.code = code
                    $0.message = message
                }
            })
        case .welcomeThenSilent(let heartbeat):
            try await response.write(Self.welcome(heartbeatMilliseconds: heartbeat))
            while try await messages.next() != nil {}
        case .heartbeats(let count, let heard):
            defer { heard.finish() }
            try await response.write(Self.welcome(heartbeatMilliseconds: 1000))
            for _ in 0..<count {
                try await response.write(.with { $0.heartbeat = .init() })
                guard let answer = try await messages.next() else { return }
                if case .heartbeat = answer.kind { heard.yield(true) } else { heard.yield(false) }
            }
            heard.finish()
            while try await messages.next() != nil {}
        case .script(let script, let heard):
            defer { heard.finish() }
            try await response.write(Self.welcome(heartbeatMilliseconds: 60_000))
            for message in script { try await response.write(message) }
            while let message = try await messages.next() { heard.yield(message) }
        case .scriptAfterStart(let first, let job, let rest, let heard):
            defer { heard.finish() }
            try await response.write(Self.welcome(heartbeatMilliseconds: 60_000))
            for message in first { try await response.write(message) }
            while let message = try await messages.next() {
                heard.yield(message)
                if case .started(let started) = message.kind, started.jobID == job { break }
            }
            for message in rest { try await response.write(message) }
            while let message = try await messages.next() { heard.yield(message) }
        }
    }

    private static func welcome(heartbeatMilliseconds: UInt32) -> WireCoordinatorMessage {
        .with {
            $0.welcome = .with {
                $0.workerID = "fake"
                $0.heartbeatIntervalMs = heartbeatMilliseconds
                $0.gracePeriodMs = 1000
                $0.protocolVersion = RemoteProtocol.version
            }
        }
    }
}
