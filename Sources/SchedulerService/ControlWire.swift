import Foundation
import GRPCCore
import Scheduler

/// The control service's wire: gRPC methods whose messages are the scheduler's own Codable
/// values as JSON (commands, replies, refusals, snapshots, numbered events with their lag
/// markers, output). No protobuf schema: every payload is already a Codable value of the
/// Scheduler library, so one JSON codec carries them all, and a field added there crosses the
/// socket without a second definition to keep in step. The big messages are the exceptions, in
/// compact binary forms: snapshots (``SnapshotCodec``), submissions and their ids
/// (``SpecCodec``).
enum ControlWire {
    static let service = ServiceDescriptor(fullyQualifiedService: "jobtop.control.v1.Control")

    /// A command in, ``PerformResult`` out (unary).
    static let perform = MethodDescriptor(service: service, method: "Perform")
    /// ``SubscribeRequest`` in, ``SchedulerEvent``s out (server stream: a snapshot, then events).
    static let subscribe = MethodDescriptor(service: service, method: "Subscribe")
    /// ``Empty`` in, ``SchedulerSnapshot`` out.
    static let snapshot = MethodDescriptor(service: service, method: "Snapshot")
    /// A ``JobID`` in, ``OutputTail`` out.
    static let outputTail = MethodDescriptor(service: service, method: "OutputTail")
    /// ``WaitForRoomRequest`` in, `Bool` out.
    static let waitForRoom = MethodDescriptor(service: service, method: "WaitForRoom")
    /// A ``JobID`` in, ``LogPart``s out (server stream): the job's whole output.
    static let log = MethodDescriptor(service: service, method: "Log")

    /// A ``JobID`` in, ``FollowPart``s out (server stream): the job's output from its start, as it
    /// comes, until it ends.
    static let follow = MethodDescriptor(service: service, method: "Follow")

    /// ``Empty`` in, ``Empty`` out: whether the serve answers and lets us in (the token).
    static let ping = MethodDescriptor(service: service, method: "Ping")

    /// Job references (`[String]`) in, a ``JobReference/Resolution`` for each out.
    static let resolve = MethodDescriptor(service: service, method: "Resolve")

    /// The metadata key that carries the token on TCP.
    static let tokenKey = "jobtop-token"

    /// The largest message either side accepts: a snapshot of 100,000 jobs is tens of
    /// megabytes of JSON.
    static let maxMessageBytes = 1 << 30
}

/// What a performed command gave: the reply, or the scheduler's refusal (a value, not a gRPC
/// status, so the client gets the very ``SchedulerError`` the engine threw).
enum PerformResult: Codable, Sendable {
    case reply(SchedulerReply)
    case refused(SchedulerError)
}

/// A subscription's settings.
struct SubscribeRequest: Codable, Sendable {
    var bufferLimit: Int?
    var includeOutput: Bool
    var delivery: EventDelivery
    /// Only this job's events (and the snapshots and lag markers): what `jobtop follow` needs.
    var job: JobID?
}

/// The last lines a job printed.
struct OutputTail: Codable, Sendable {
    var lines: [OutputLine]
    var dropped: Int
}

/// `waitForRoom(in:below:)`'s arguments.
struct WaitForRoomRequest: Codable, Sendable {
    var batch: BatchID
    var limit: Int
}

/// No arguments.
struct Empty: Codable, Sendable {}

/// A piece of a job's whole output.
public enum LogPart: Codable, Sendable, Equatable {
    /// Bytes of the job's output file, in order.
    case bytes(Data)
    /// The serve keeps no file for the job: the lines it still holds, and how many earlier
    /// lines were dropped.
    case tail(lines: [OutputLine], dropped: Int)
    /// No such job.
    case unknownJob
}

/// A piece of `jobtop follow`'s stream.
public enum FollowPart: Codable, Sendable, Equatable {
    /// Output, in order: the job's whole output so far first, then what it writes.
    case bytes(Data)
    /// The serve keeps no file for the job and its subscription fell behind: lines were missed.
    case lagged(missed: Int)
    /// The job ended (the last part).
    case ended(JobStateKind)
    /// No such job.
    case unknownJob
}

/// Encodes a message as JSON.
struct JSONMessageSerializer<Message: Encodable>: MessageSerializer {
    func serialize<Bytes: GRPCContiguousBytes>(_ message: Message) throws -> Bytes {
        Bytes(try JSONEncoder().encode(message))
    }
}

/// Decodes a message from JSON.
struct JSONMessageDeserializer<Message: Decodable>: MessageDeserializer {
    func deserialize<Bytes: GRPCContiguousBytes>(_ serializedMessageBytes: Bytes) throws -> Message {
        try serializedMessageBytes.withUnsafeBytes { buffer in
            try JSONDecoder().decode(Message.self, from: Data(buffer))
        }
    }
}

/// A snapshot in ``SnapshotCodec``'s binary form.
struct SnapshotMessageSerializer: MessageSerializer {
    func serialize<Bytes: GRPCContiguousBytes>(_ snapshot: SchedulerSnapshot) throws -> Bytes {
        var writer = ByteWriter(capacity: 64 + snapshot.jobs.count * 48)
        try SnapshotCodec.encode(snapshot, into: &writer)
        return Bytes(writer.bytes)
    }
}

/// Reads a snapshot in ``SnapshotCodec``'s binary form.
struct SnapshotMessageDeserializer: MessageDeserializer {
    func deserialize<Bytes: GRPCContiguousBytes>(_ serializedMessageBytes: Bytes) throws -> SchedulerSnapshot {
        try serializedMessageBytes.withUnsafeBytes { buffer in
            var reader = ByteReader(buffer)
            return try SnapshotCodec.decode(from: &reader)
        }
    }
}

/// A subscription's event: a byte that says how, then a snapshot event in ``SnapshotCodec``'s
/// binary form (the one big message: a subscription's first) or any other event as JSON.
struct EventMessageSerializer: MessageSerializer {
    static let json: UInt8 = 0
    static let snapshot: UInt8 = 1

    func serialize<Bytes: GRPCContiguousBytes>(_ event: SchedulerEvent) throws -> Bytes {
        if case .snapshot(let snapshot) = event.kind {
            var writer = ByteWriter(capacity: 64 + snapshot.jobs.count * 48)
            writer.byte(Self.snapshot)
            writer.varint(event.seq)
            writer.time(event.time)
            try SnapshotCodec.encode(snapshot, into: &writer)
            return Bytes(writer.bytes)
        }
        var bytes: [UInt8] = [Self.json]
        bytes.append(contentsOf: try JSONEncoder().encode(event))
        return Bytes(bytes)
    }
}

/// Reads what ``EventMessageSerializer`` wrote.
struct EventMessageDeserializer: MessageDeserializer {
    func deserialize<Bytes: GRPCContiguousBytes>(_ serializedMessageBytes: Bytes) throws -> SchedulerEvent {
        try serializedMessageBytes.withUnsafeBytes { buffer in
            var reader = ByteReader(buffer)
            switch try reader.byte() {
            case EventMessageSerializer.json:
                return try JSONDecoder().decode(SchedulerEvent.self, from: Data(UnsafeRawBufferPointer(rebasing: buffer[1...])))
            case EventMessageSerializer.snapshot:
                let seq = try reader.varint()
                let time = try reader.time()
                return SchedulerEvent(seq: seq, time: time, kind: .snapshot(try SnapshotCodec.decode(from: &reader)))
            case let tag:
                throw SnapshotCodecError(description: "event frame of unknown kind \(tag)")
            }
        }
    }
}
