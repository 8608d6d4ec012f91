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

        router.registerHandler(
            forMethod: ControlWire.perform,
            deserializer: JSONMessageDeserializer<SchedulerCommand>(),
            serializer: JSONMessageSerializer<PerformResult>()
        ) { request, _ in
            try Self.checkToken(request.metadata, token)
            let command = try await ServerRequest(stream: request).message
            let result: PerformResult
            do throws(SchedulerError) {
                result = .reply(try await backend.perform(command))
            } catch {
                result = .refused(error)
            }
            return StreamingServerResponse(single: ServerResponse(message: result))
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

        router.registerHandler(
            forMethod: ControlWire.ping,
            deserializer: JSONMessageDeserializer<Empty>(),
            serializer: JSONMessageSerializer<Empty>()
        ) { request, _ in
            try Self.checkToken(request.metadata, token)
            _ = try await ServerRequest(stream: request).message
            return StreamingServerResponse(single: ServerResponse(message: Empty()))
        }

        router.registerHandler(
            forMethod: ControlWire.resolve,
            deserializer: JSONMessageDeserializer<[String]>(),
            serializer: JSONMessageSerializer<[JobReference.Resolution]>()
        ) { request, _ in
            try Self.checkToken(request.metadata, token)
            let references = try await ServerRequest(stream: request).message
            let jobs = await backend.currentSnapshot().jobs
            return StreamingServerResponse(single: ServerResponse(message: references.map { JobReference.resolve($0, in: jobs) }))
        }

        router.registerHandler(
            forMethod: ControlWire.snapshot,
            deserializer: JSONMessageDeserializer<Empty>(),
            serializer: JSONMessageSerializer<SchedulerSnapshot>()
        ) { request, _ in
            try Self.checkToken(request.metadata, token)
            _ = try await ServerRequest(stream: request).message
            return StreamingServerResponse(single: ServerResponse(message: await backend.currentSnapshot()))
        }

        router.registerHandler(
            forMethod: ControlWire.outputTail,
            deserializer: JSONMessageDeserializer<JobID>(),
            serializer: JSONMessageSerializer<OutputTail>()
        ) { request, _ in
            try Self.checkToken(request.metadata, token)
            let id = try await ServerRequest(stream: request).message
            let (lines, dropped) = await backend.outputTail(of: id)
            return StreamingServerResponse(single: ServerResponse(message: OutputTail(lines: lines, dropped: dropped)))
        }

        router.registerHandler(
            forMethod: ControlWire.waitForRoom,
            deserializer: JSONMessageDeserializer<WaitForRoomRequest>(),
            serializer: JSONMessageSerializer<Bool>()
        ) { request, _ in
            try Self.checkToken(request.metadata, token)
            let wait = try await ServerRequest(stream: request).message
            let open = await backend.waitForRoom(in: wait.batch, below: wait.limit)
            return StreamingServerResponse(single: ServerResponse(message: open))
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
