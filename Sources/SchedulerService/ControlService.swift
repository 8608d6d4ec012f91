import Foundation
import GRPCCore
import Scheduler
import SchedulerRemote

/// The gRPC handlers of the control service over any ``SchedulerClient``: the in-process
/// ``Scheduler`` today, a durable one that commits each command before it answers.
///
/// Every handler only awaits the backend (an actor) and writes what it gives: nothing here
/// blocks a thread. Reading a job's output file is the one disk read, and it runs on a
/// dispatch queue of its own, not the cooperative pool.
struct ControlService<Backend: SchedulerClient>: RegistrableRPCService {
    let backend: Backend
    /// The file that holds a job's whole output, if the backend keeps one.
    let outputFile: (@Sendable (JobID) async -> String?)?
    /// The token every call must carry (TCP); `nil` on the Unix socket, whose permissions and
    /// peer check do the job.
    let token: String?

    func registerMethods<Transport: ServerTransport>(with router: inout RPCRouter<Transport>) {
        let backend = backend
        let token = token
        let outputFile = outputFile

        Self.unary(&router, ControlWire.perform, token: token) { (command: SchedulerCommand) -> PerformResult in
            do throws(SchedulerError) {
                return .reply(try await backend.perform(command))
            } catch {
                return .refused(error)
            }
        }

        router.registerHandler(
            forMethod: ControlWire.subscribe,
            deserializer: JSONMessageDeserializer<SubscribeRequest>(),
            serializer: JSONMessageSerializer<SchedulerEvent>()
        ) { request, _ in
            try Self.checkToken(request.metadata, token)
            let settings = try await ServerRequest(stream: request).message
            return StreamingServerResponse { writer in
                let events = await backend.subscribe(
                    bufferLimit: settings.bufferLimit, includeOutput: settings.includeOutput, delivery: settings.delivery)
                for await event in events {
                    if let job = settings.job, let about = event.kind.jobID, about != job { continue }
                    try await writer.write(event)
                }
                return [:]
            }
        }

        Self.unary(&router, ControlWire.ping, token: token) { (_: Empty) in Empty() }
        Self.unary(&router, ControlWire.resolve, token: token) { (references: [String]) in
            let jobs = await backend.currentSnapshot().jobs
            return references.map { JobReference.resolve($0, in: jobs) }
        }
        Self.unary(&router, ControlWire.snapshot, token: token) { (_: Empty) in await backend.currentSnapshot() }
        Self.unary(&router, ControlWire.outputTail, token: token) { (id: JobID) in
            let (lines, dropped) = await backend.outputTail(of: id)
            return OutputTail(lines: lines, dropped: dropped)
        }
        Self.unary(&router, ControlWire.waitForRoom, token: token) { (wait: WaitForRoomRequest) in
            await backend.waitForRoom(in: wait.batch, below: wait.limit)
        }

        router.registerHandler(
            forMethod: ControlWire.log,
            deserializer: JSONMessageDeserializer<JobID>(),
            serializer: JSONMessageSerializer<LogPart>()
        ) { request, _ in
            try Self.checkToken(request.metadata, token)
            let id = try await ServerRequest(stream: request).message
            return StreamingServerResponse { writer in
                if let outputFile, let path = await outputFile(id) {
                    try await Self.stream(file: path, to: writer)
                    return [:]
                }
                let snapshot = await backend.currentSnapshot()
                guard snapshot.jobs.contains(where: { $0.id == id }) else {
                    try await writer.write(.unknownJob)
                    return [:]
                }
                let (lines, dropped) = await backend.outputTail(of: id)
                try await writer.write(.tail(lines: lines, dropped: dropped))
                return [:]
            }
        }
    }

    /// Registers a call of one request and one reply, both JSON, behind the token.
    private static func unary<Request: Decodable & Sendable, Reply: Encodable & Sendable, Transport: ServerTransport>(
        _ router: inout RPCRouter<Transport>, _ method: MethodDescriptor, token: String?,
        _ body: @escaping @Sendable (Request) async throws -> Reply
    ) {
        router.registerHandler(
            forMethod: method,
            deserializer: JSONMessageDeserializer<Request>(),
            serializer: JSONMessageSerializer<Reply>()
        ) { request, _ in
            try checkToken(request.metadata, token)
            let message = try await ServerRequest(stream: request).message
            return StreamingServerResponse(single: ServerResponse(message: try await body(message)))
        }
    }

    private static func checkToken(_ metadata: Metadata, _ token: String?) throws {
        guard let token else { return }
        let given = metadata[stringValues: ControlWire.tokenKey].first(where: { _ in true }) ?? ""
        guard RemoteToken.matches(given, token) else {
            throw RPCError(code: .unauthenticated, message: given.isEmpty ? "this serve requires a token (--token-file)" : "wrong token")
        }
    }

    /// Sends a file in pieces of 256 KiB, each read on a dispatch queue (a blocking read must
    /// not hold a thread of the cooperative pool).
    private static func stream(file path: String, to writer: RPCWriter<LogPart>) async throws {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { close(fd) }
        while true {
            let chunk: Data = await withCheckedContinuation { continuation in
                DispatchQueue.global().async {
                    var buffer = [UInt8](repeating: 0, count: 256 * 1024)
                    var count: Int
                    repeat {
                        count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                    } while count < 0 && errno == EINTR
                    continuation.resume(returning: Data(buffer.prefix(max(0, count))))
                }
            }
            if chunk.isEmpty { return }
            try await writer.write(.bytes(chunk))
        }
    }
}
