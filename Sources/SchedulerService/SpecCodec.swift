import Foundation
import GRPCCore
import Scheduler

/// A submission in a compact binary form, for the one command that can be big: `jobtop submit`
/// of a long list.
///
/// Foundation's `JSONEncoder` builds a tree of every value before it writes a byte: a submission
/// of 1,000,000 jobs took the client to 3.2 GB and about 11 µs a spec each way. Here a spec is its
/// fields written one after another (``SnapshotCodec``'s writer and reader): strings as length
/// and UTF-8, integers as varints, durations as their two components.
///
/// Every field of ``JobSpec`` is written. A field added to it must be added to ``write(_:)`` and
/// ``readSpec()`` too; `SpecCodecTests` round-trips specs that set every field and compares
/// their JSON, so a field left out fails there.
enum SpecCodec {
    /// The first byte of a submission in this form (a command in JSON starts with `{`).
    static let submitTag: UInt8 = 1
    /// The first byte of a reply of submitted ids in this form (16 bytes each, after a count).
    static let submittedTag: UInt8 = 2

    /// Encodes a submission.
    static func encode(_ specs: [JobSpec], batch: BatchID?, into writer: inout ByteWriter) throws {
        writer.byte(submitTag)
        writer.byte(batch == nil ? 0 : 1)
        if let batch { writer.varint(batch.rawValue) }
        writer.varint(UInt64(specs.count))
        for spec in specs { try writer.write(spec) }
    }

    /// Decodes what ``encode(_:batch:into:)`` wrote, after its tag.
    static func decode(from reader: inout ByteReader) throws -> SchedulerCommand {
        let batch = try reader.byte() == 0 ? nil : BatchID(rawValue: try reader.varint())
        let count = try reader.count()
        var specs: [JobSpec] = []
        specs.reserveCapacity(count)
        for _ in 0..<count { specs.append(try reader.readSpec()) }
        return .submit(specs, batch: batch)
    }
}

/// Which optional fields of a spec are present.
private enum SpecFields {
    static let name: UInt64 = 1 << 0
    static let environment: UInt64 = 1 << 1
    static let workingDirectory: UInt64 = 1 << 2
    static let timeout: UInt64 = 1 << 3
    static let coalescingKey: UInt64 = 1 << 4
    static let progressPattern: UInt64 = 1 << 5
    static let keepBackground: UInt64 = 1 << 6
    static let group: UInt64 = 1 << 7
    static let dependencies: UInt64 = 1 << 8
    static let notBefore: UInt64 = 1 << 9
    static let argv: UInt64 = 1 << 10
}

extension ByteWriter {
    /// A spec: a varint of flags for what is present, then the fields.
    mutating func write(_ spec: JobSpec) throws {
        var flags: UInt64 = 0
        if spec.name != nil { flags |= SpecFields.name }
        if !spec.environment.isEmpty { flags |= SpecFields.environment }
        if spec.workingDirectory != nil { flags |= SpecFields.workingDirectory }
        if spec.timeout != nil { flags |= SpecFields.timeout }
        if spec.coalescingKey != nil { flags |= SpecFields.coalescingKey }
        if spec.progressPattern != nil { flags |= SpecFields.progressPattern }
        if spec.keepBackground { flags |= SpecFields.keepBackground }
        if spec.group != nil { flags |= SpecFields.group }
        if !spec.dependencies.isEmpty { flags |= SpecFields.dependencies }
        if spec.notBefore != nil { flags |= SpecFields.notBefore }
        switch spec.work {
        case .shell: break
        case .argv: flags |= SpecFields.argv
        case .closure: throw SnapshotCodecError(description: "job \(spec.displayName.prefix(40)) is Swift code, which cannot be sent")
        }
        varint(flags)
        switch spec.work {
        case .shell(let command):
            string(command)
        case .argv(let arguments):
            varint(UInt64(arguments.count))
            for argument in arguments { string(argument) }
        case .closure:
            break
        }
        if let name = spec.name { string(name) }
        if !spec.environment.isEmpty {
            varint(UInt64(spec.environment.count))
            for (key, value) in spec.environment {
                string(key)
                string(value)
            }
        }
        if let directory = spec.workingDirectory { string(directory) }
        signed(Int64(spec.priority))
        signed(Int64(spec.retry.maxAttempts))
        time(spec.retry.initialBackoff)
        double(spec.retry.multiplier)
        time(spec.retry.maxBackoff)
        double(spec.retry.jitter)
        if let timeout = spec.timeout { time(timeout) }
        if let key = spec.coalescingKey { string(key) }
        if let pattern = spec.progressPattern { string(pattern.pattern) }
        if let group = spec.group { string(group) }
        if !spec.dependencies.isEmpty {
            varint(UInt64(spec.dependencies.count))
            for dependency in spec.dependencies {
                switch dependency {
                case .job(let other):
                    byte(0)
                    id(other)
                case .earlier(let index):
                    byte(1)
                    signed(Int64(index))
                }
            }
        }
        switch spec.notBefore {
        case .delay(let delay):
            byte(0)
            time(delay)
        case .date(let date):
            byte(1)
            double(date.timeIntervalSinceReferenceDate)
        case nil:
            break
        }
    }
}

extension ByteReader {
    /// A spec as ``ByteWriter/write(_:)-(JobSpec)`` wrote it.
    mutating func readSpec() throws -> JobSpec {
        let flags = try varint()
        let work: JobWork
        if flags & SpecFields.argv != 0 {
            let count = try count()
            var arguments: [String] = []
            arguments.reserveCapacity(count)
            for _ in 0..<count { arguments.append(try string()) }
            work = .argv(arguments)
        } else {
            work = .shell(try string())
        }
        var spec = JobSpec(work: work)
        if flags & SpecFields.name != 0 { spec.name = try string() }
        if flags & SpecFields.environment != 0 {
            let count = try count()
            for _ in 0..<count {
                let key = try string()
                spec.environment[key] = try string()
            }
        }
        if flags & SpecFields.workingDirectory != 0 { spec.workingDirectory = try string() }
        spec.priority = try int()
        spec.retry = RetryPolicy(
            maxAttempts: try int(), initialBackoff: try time(), multiplier: try double(), maxBackoff: try time(), jitter: try double())
        if flags & SpecFields.timeout != 0 { spec.timeout = try time() }
        if flags & SpecFields.coalescingKey != 0 { spec.coalescingKey = try string() }
        if flags & SpecFields.progressPattern != 0 {
            let pattern = try string()
            do {
                spec.progressPattern = try ProgressPattern(pattern)
            } catch {
                throw SnapshotCodecError(description: error.description)
            }
        }
        spec.keepBackground = flags & SpecFields.keepBackground != 0
        if flags & SpecFields.group != 0 { spec.group = try string() }
        if flags & SpecFields.dependencies != 0 {
            let count = try count()
            spec.dependencies.reserveCapacity(count)
            for _ in 0..<count {
                switch try byte() {
                case 0: spec.dependencies.append(.job(try id()))
                case 1: spec.dependencies.append(.earlier(try int()))
                case let tag: throw SnapshotCodecError(description: "a dependency of unknown kind \(tag)")
                }
            }
        }
        if flags & SpecFields.notBefore != 0 {
            switch try byte() {
            case 0: spec.notBefore = .delay(try time())
            case 1: spec.notBefore = .date(Date(timeIntervalSinceReferenceDate: try double()))
            case let tag: throw SnapshotCodecError(description: "a start time of unknown kind \(tag)")
            }
        }
        return spec
    }
}

/// A command: a submission in ``SpecCodec``'s form, any other command as JSON.
struct CommandMessageSerializer: MessageSerializer {
    func serialize<Bytes: GRPCContiguousBytes>(_ command: SchedulerCommand) throws -> Bytes {
        if case .submit(let specs, let batch) = command, specs.allSatisfy(\.work.isProcess) {
            var writer = ByteWriter(capacity: 16 + specs.count * 64)
            try SpecCodec.encode(specs, batch: batch, into: &writer)
            return Bytes(writer.bytes)
        }
        return Bytes(try JSONEncoder().encode(command))
    }
}

/// Reads what ``CommandMessageSerializer`` wrote.
struct CommandMessageDeserializer: MessageDeserializer {
    func deserialize<Bytes: GRPCContiguousBytes>(_ serializedMessageBytes: Bytes) throws -> SchedulerCommand {
        try serializedMessageBytes.withUnsafeBytes { buffer in
            try decodeJSON(buffer, unless: SpecCodec.submitTag) { try SpecCodec.decode(from: &$0) }
        }
    }
}

/// A command's result: the ids of a submission in binary (a million of them were 38 MB of JSON
/// and a tree of a million strings on each side), anything else as JSON.
struct ResultMessageSerializer: MessageSerializer {
    func serialize<Bytes: GRPCContiguousBytes>(_ result: PerformResult) throws -> Bytes {
        if case .reply(.submitted(let ids)) = result {
            var writer = ByteWriter(capacity: 16 + ids.count * 16)
            writer.byte(SpecCodec.submittedTag)
            writer.varint(UInt64(ids.count))
            for id in ids { writer.id(id) }
            return Bytes(writer.bytes)
        }
        return Bytes(try JSONEncoder().encode(result))
    }
}

/// Reads what ``ResultMessageSerializer`` wrote.
struct ResultMessageDeserializer: MessageDeserializer {
    func deserialize<Bytes: GRPCContiguousBytes>(_ serializedMessageBytes: Bytes) throws -> PerformResult {
        try serializedMessageBytes.withUnsafeBytes { buffer in
            try decodeJSON(buffer, unless: SpecCodec.submittedTag) { reader in
                let count = try reader.count()
                var ids: [JobID] = []
                ids.reserveCapacity(count)
                for _ in 0..<count { ids.append(try reader.id()) }
                return .reply(.submitted(ids))
            }
        }
    }
}

/// A message that is JSON unless its first byte is `tag`; then `read` reads the binary form after it.
private func decodeJSON<Message: Decodable>(
    _ buffer: UnsafeRawBufferPointer, unless tag: UInt8, _ read: (inout ByteReader) throws -> Message
) throws -> Message {
    guard buffer.first == tag else { return try JSONDecoder().decode(Message.self, from: Data(buffer)) }
    var reader = ByteReader(UnsafeRawBufferPointer(rebasing: buffer[1...]))
    return try read(&reader)
}
