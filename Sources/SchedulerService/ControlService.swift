import Foundation
import GRPCCore
import Scheduler
import SchedulerRemote

/// Why `follow` reads the job's file again.
private enum FollowWake: Equatable, Sendable {
    case output
    case ended(JobStateKind)
    case unknownJob
}

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
    /// The finished jobs a reference names that the backend no longer keeps but its history
    /// does (a durable scheduler's database): the matches, at most ``JobReference/shownCandidates``
    /// of them, and how many there are; asked only for a reference the backend's own jobs do
    /// not resolve.
    var history: (@Sendable (String) async -> (jobs: [JobInfo], count: Int))? = nil
    /// The token every call must carry (TCP); `nil` on the Unix socket, whose permissions and
    /// peer check do the job.
    let token: String?
    /// The TCP listener's connections (`nil` on the Unix socket): a call that passes the token
    /// check lets its connection stay past the deadline for silent ones.
    var gate: ConnectionGate? = nil

    func registerMethods<Transport: ServerTransport>(with router: inout RPCRouter<Transport>) {
        let backend = backend
        let admission = Admission(token: token, gate: gate)
        let outputFile = outputFile

        Self.unary(
            &router, ControlWire.perform, admission: admission, deserializer: CommandMessageDeserializer(), serializer: ResultMessageSerializer()
        ) { command -> PerformResult in
            do throws(SchedulerError) {
                return .reply(try await backend.perform(command))
            } catch {
                return .refused(error)
            }
        }

        router.registerHandler(
            forMethod: ControlWire.subscribe,
            deserializer: JSONMessageDeserializer<SubscribeRequest>(),
            serializer: EventMessageSerializer()
        ) { request, context in
            try Self.admit(request.metadata, context, admission)
            let settings = try await ServerRequest(stream: request).message
            return StreamingServerResponse { writer in
                // Never lossless over the wire, whatever was asked: a client that stops reading
                // (a `submit --wait` stopped with Ctrl-Z, a slow link) would hold every job of
                // the serve back. One that falls behind skips ahead to a fresh snapshot instead.
                // And at most ``maxRemoteBuffer`` events wait for one (each client that stops
                // reading holds that many).
                try await Self.whileTheCallLasts(context) {
                    let events = await backend.subscribe(
                        bufferLimit: min(settings.bufferLimit ?? Self.maxRemoteBuffer, Self.maxRemoteBuffer),
                        includeOutput: settings.includeOutput, delivery: .latest)
                    var share = FairShare()
                    for await event in events {
                        await share.take()
                        if let job = settings.job, let about = event.kind.jobID, about != job { continue }
                        try await writer.write(event)
                    }
                }
                return [:]
            }
        }

        router.registerHandler(
            forMethod: ControlWire.follow,
            deserializer: JSONMessageDeserializer<JobID>(),
            serializer: JSONMessageSerializer<FollowPart>()
        ) { request, context in
            try Self.admit(request.metadata, context, admission)
            let id = try await ServerRequest(stream: request).message
            return StreamingServerResponse { writer in
                try await Self.whileTheCallLasts(context) {
                    try await Self.follow(id, backend: backend, outputFile: outputFile, writer: writer)
                }
                return [:]
            }
        }

        Self.unary(&router, ControlWire.ping, admission: admission) { (_: Empty) in Empty() }
        let history = history
        Self.unary(&router, ControlWire.resolve, admission: admission) { (references: [String]) in
            let jobs = await backend.currentSnapshot().jobs
            var resolutions = JobReference.resolve(references, in: jobs)
            // Unknown here: perhaps beyond what the backend keeps of finished jobs, and still in
            // its history.
            if let history {
                for index in resolutions.indices where resolutions[index] == .unknown {
                    let (found, count) = await history(references[index])
                    if count == 1, let job = found.first {
                        resolutions[index] = .found(job)
                    } else if count > 1 {
                        resolutions[index] = .ambiguous(found, count: count)
                    }
                }
            }
            return resolutions
        }
        router.registerHandler(
            forMethod: ControlWire.snapshot,
            deserializer: JSONMessageDeserializer<Empty>(),
            serializer: SnapshotMessageSerializer()
        ) { request, context in
            try Self.admit(request.metadata, context, admission)
            _ = try await ServerRequest(stream: request).message
            return StreamingServerResponse(single: ServerResponse(message: await backend.currentSnapshot()))
        }
        Self.unary(&router, ControlWire.outputTail, admission: admission) { (id: JobID) in
            let (lines, dropped) = await backend.outputTail(of: id)
            return OutputTail(lines: lines, dropped: dropped)
        }
        // The one call that can wait long: a caller that goes away stops waiting.
        Self.unary(&router, ControlWire.waitForRoom, admission: admission, endsWithTheCall: true) { (wait: WaitForRoomRequest) in
            await backend.waitForRoom(in: wait.batch, below: wait.limit)
        }

        router.registerHandler(
            forMethod: ControlWire.log,
            deserializer: JSONMessageDeserializer<JobID>(),
            serializer: JSONMessageSerializer<LogPart>()
        ) { request, context in
            try Self.admit(request.metadata, context, admission)
            let id = try await ServerRequest(stream: request).message
            return StreamingServerResponse { writer in
                if let outputFile, let path = await outputFile(id) {
                    // A long file stops being read when its client goes.
                    try await Self.whileTheCallLasts(context) {
                        try await Self.stream(file: path) { try await writer.write(.bytes($0)) }
                    }
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

    /// `jobtop follow`: the job's output file from its first byte, then, woken by the job's
    /// events, whatever the file has gained since, until the job ends. The file is the one
    /// source, read by offset, so nothing is shown twice or lost between the past and the live
    /// part. A backend that keeps no file sends the lines it holds, then the lines as they come.
    private static func follow(
        _ id: JobID, backend: Backend, outputFile: (@Sendable (JobID) async -> String?)?, writer: RPCWriter<FollowPart>
    ) async throws {
        let events = await backend.subscribe(bufferLimit: 10_000, includeOutput: true, delivery: .latest)
        guard let outputFile else { return try await followTail(id, events: events, backend: backend, writer: writer) }
        // The watcher turns the job's events into wake-ups, which coalesce: a chatty job's
        // thousand lines cost one read of the file, not a thousand.
        let (wakes, wake) = AsyncStream<FollowWake>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let watcher = Task {
            var isFirst = true
            var ending = EndWatch()
            var share = FairShare()
            for await event in events {
                await share.take()
                if isFirst, case .snapshot(let snapshot) = event.kind, !snapshot.jobs.contains(where: { $0.id == id }) {
                    wake.yield(.unknownJob)
                    return
                }
                isFirst = false
                if let end = ending.end(of: id, in: event) {
                    wake.yield(.ended(end))
                    return
                }
                if event.kind.jobID == id || event.kind.name == "snapshot" { wake.yield(.output) }
            }
            wake.finish()
        }
        defer { watcher.cancel() }
        var offset: off_t = 0
        for await reason in wakes {
            if reason == .unknownJob { return try await writer.write(.unknownJob) }
            if let path = await outputFile(id) {
                offset = try await Self.stream(file: path, from: offset) { try await writer.write(.bytes($0)) }
            }
            if case .ended(let end) = reason { return try await writer.write(.ended(end)) }
        }
    }

    /// `follow` where the backend keeps no file: the lines it still holds, then the lines as they
    /// come.
    private static func followTail(
        _ id: JobID, events: Backend.Events, backend: Backend, writer: RPCWriter<FollowPart>
    ) async throws {
        var iterator = events.makeAsyncIterator()
        guard let first = try await iterator.next(), case .snapshot(let snapshot) = first.kind else { return }
        guard let job = snapshot.jobs.first(where: { $0.id == id }) else { return try await writer.write(.unknownJob) }
        let (lines, _) = await backend.outputTail(of: id)
        try await writer.write(.bytes(Data(lines.flatMap(\.rawBytes))))
        if job.state.isFinished { return try await writer.write(.ended(job.state.kind)) }
        var ending = EndWatch()
        var share = FairShare()
        while let event = try await iterator.next() {
            await share.take()
            switch event.kind {
            case .output(id, let line): try await writer.write(.bytes(Data(line.rawBytes)))
            case .lagged(let missed): try await writer.write(.lagged(missed: missed))
            default: if let end = ending.end(of: id, in: event) { return try await writer.write(.ended(end)) }
            }
        }
    }

    /// A loop's turn at the serve's threads: every 64th step it yields. A loop over events that
    /// are already buffered never suspends by itself, and during a job's flood of output two
    /// such loops (two clients) held both of the cooperative pool's threads: nothing else was
    /// answered for up to 30 s.
    struct FairShare {
        private var steps = 0

        mutating func take() async {
            steps &+= 1
            if steps & 63 == 0 { await Task.yield() }
        }
    }

    /// Tells from the events how a job ends, if it does.
    private struct EndWatch {
        /// A serve stopping with its jobs cancelled (a second SIGTERM, a shutdown that cancels)
        /// does not end them on disk: its next start runs them on. Their `cancelled` then is the
        /// serve going away, not how they ended (`follow` said 1, with nothing on stderr, for a
        /// job that then succeeded), as `wait` reads it.
        private var serveIsStopping = false

        /// How `event` ends job `id`, if it does.
        mutating func end(of id: JobID, in event: SchedulerEvent) -> JobStateKind? {
            switch event.kind {
            case .shuttingDown(let mode) where mode.stopsRunningJobs:
                serveIsStopping = true
                return nil
            case .succeeded(id, _): return .succeeded
            case .failed(id, _, _): return .failed
            case .cancelled(id): return serveIsStopping ? nil : .cancelled
            case .skipped(id, _): return .skipped
            case .snapshot(let snapshot):
                return snapshot.jobs.first(where: { $0.id == id }).flatMap { $0.state.isFinished ? $0.state.kind : nil }
            default: return nil
            }
        }
    }

    /// Registers a call of one request and one reply, both JSON, behind the token.
    /// `endsWithTheCall`: `body` is cancelled when the call is (see ``whileTheCallLasts(_:_:)``);
    /// otherwise it runs to its end (a command is carried out even if its client has gone).
    private static func unary<Request: Decodable & Sendable, Reply: Encodable & Sendable, Transport: ServerTransport>(
        _ router: inout RPCRouter<Transport>, _ method: MethodDescriptor, admission: Admission, endsWithTheCall: Bool = false,
        _ body: @escaping @Sendable (Request) async throws -> Reply
    ) {
        unary(
            &router, method, admission: admission, endsWithTheCall: endsWithTheCall, deserializer: JSONMessageDeserializer<Request>(),
            serializer: JSONMessageSerializer<Reply>(), body)
    }

    /// ``unary(_:_:admission:endsWithTheCall:_:)`` with messages in another form than JSON.
    private static func unary<Deserializer: MessageDeserializer, Serializer: MessageSerializer, Transport: ServerTransport>(
        _ router: inout RPCRouter<Transport>, _ method: MethodDescriptor, admission: Admission, endsWithTheCall: Bool = false,
        deserializer: Deserializer, serializer: Serializer, _ body: @escaping @Sendable (Deserializer.Message) async throws -> Serializer.Message
    ) where Deserializer.Message: Sendable, Serializer.Message: Sendable {
        router.registerHandler(
            forMethod: method,
            deserializer: deserializer,
            serializer: serializer
        ) { request, context in
            try admit(request.metadata, context, admission)
            let message = try await ServerRequest(stream: request).message
            let reply = endsWithTheCall ? try await whileTheCallLasts(context) { try await body(message) } : try await body(message)
            return StreamingServerResponse(single: ServerResponse(message: reply))
        }
    }

    /// Runs a handler's `body`, cancelling it when gRPC cancels the call: its client went away
    /// (the stream reset, the connection closed), its deadline passed, or the server is
    /// stopping. gRPC says so only through the call's context, never by cancelling the
    /// handler's task: a handler waiting for the next event of an idle serve went on waiting
    /// for a client long gone, holding its subscription, and the server's graceful stop waited
    /// for that handler for ever.
    ///
    /// - Throws: What `body` throws; `RPCError` `.cancelled` when the call was cancelled first.
    @discardableResult
    static func whileTheCallLasts<Result: Sendable>(
        _ context: ServerContext, _ body: @escaping @Sendable () async throws -> Result
    ) async throws -> Result {
        try await withThrowingTaskGroup(of: Result?.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await context.cancellation.cancelled
                return nil
            }
            defer { group.cancelAll() }
            guard let result = try await group.next(), let result else {
                throw RPCError(code: .cancelled, message: "the call was cancelled")
            }
            return result
        }
    }

    /// The most events a client's subscription holds unread before it skips ahead to a fresh
    /// snapshot.
    static var maxRemoteBuffer: Int { 16_384 }

    /// What a call must show, and where a connection that showed it is let in.
    struct Admission: Sendable {
        let token: String?
        let gate: ConnectionGate?
    }

    /// Refuses a call without the token; a call with it lets its connection stay (TCP).
    private static func admit(_ metadata: Metadata, _ context: ServerContext, _ admission: Admission) throws {
        if let token = admission.token {
            let given = metadata[stringValues: ControlWire.tokenKey].first(where: { _ in true }) ?? ""
            guard RemoteToken.matches(given, token) else {
                throw RPCError(code: .unauthenticated, message: given.isEmpty ? "this serve requires a token (--token-file)" : "wrong token")
            }
        }
        if let gate = admission.gate, !gate.admit(peer: context.remotePeer) {
            throw RPCError(code: .unavailable, message: "this connection was closed: it showed no token in time, or the serve is stopping")
        }
    }

    /// Sends a file from `offset` to its end in pieces of 256 KiB, each read on a dispatch queue
    /// (a blocking read must not hold a thread of the cooperative pool); returns the offset
    /// reached.
    @discardableResult
    private static func stream(file path: String, from offset: off_t = 0, to send: (Data) async throws -> Void) async throws -> off_t {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return offset }
        defer { close(fd) }
        var offset = offset
        while true {
            let at = offset
            let chunk: Data = await withCheckedContinuation { continuation in
                DispatchQueue.global().async {
                    var buffer = [UInt8](repeating: 0, count: 256 * 1024)
                    var count: Int
                    repeat {
                        count = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, at) }
                    } while count < 0 && errno == EINTR
                    continuation.resume(returning: Data(buffer.prefix(max(0, count))))
                }
            }
            if chunk.isEmpty { return offset }
            offset += off_t(chunk.count)
            try await send(chunk)
        }
    }
}
