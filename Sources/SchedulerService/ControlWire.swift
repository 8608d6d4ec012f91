import Foundation
import GRPCCore
import Scheduler

/// The control service's wire: gRPC methods whose messages are the scheduler's own Codable
/// values as JSON (commands, replies, refusals, snapshots, numbered events with their lag
/// markers, output). No protobuf schema: every payload is already a Codable value of the
/// Scheduler library, so one JSON codec carries them all, and a field added there crosses the
/// socket without a second definition to keep in step.
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
