import Foundation
import Scheduler

/// A compact binary form of a ``SchedulerSnapshot``, for the two messages that carry one: the
/// snapshot call and the first event of a subscription.
///
/// JSON through Foundation's coders cost about 10 µs per job each way, so a dashboard attaching to
/// a serve with 100,000 jobs waited over two seconds for its first frame, nearly all of it in
/// encoding and decoding. Here a job is a few dozen bytes written field by field: its id, strings
/// as length and UTF-8, integers as varints, times as their two components. The rare, richer
/// values (a running or retrying job's state, a failure reason, the snapshot's header of workers
/// and groups) stay JSON inside the frame, so a change to those types needs nothing here.
///
/// Every field of ``JobInfo`` is written. A field added to it must be added to ``write(_:)`` and
/// ``readJob()`` too; `SnapshotCodecTests` round-trips jobs of every kind a scheduler makes and
/// compares them with `==`, so a field left out fails there.
enum SnapshotCodec {
    /// Encodes a snapshot.
    static func encode(_ snapshot: SchedulerSnapshot, into writer: inout ByteWriter) throws {
        var header = snapshot
        header.jobs = []
        try writer.json(header)
        writer.varint(UInt64(snapshot.jobs.count))
        for job in snapshot.jobs { try writer.write(job) }
    }

    /// Decodes a snapshot.
    static func decode(from reader: inout ByteReader) throws -> SchedulerSnapshot {
        var snapshot = try reader.json(SchedulerSnapshot.self)
        let count = try reader.count()
        var jobs: [JobInfo] = []
        jobs.reserveCapacity(count)
        for _ in 0..<count { jobs.append(try reader.readJob()) }
        snapshot.jobs = jobs
        return snapshot
    }
}

/// A malformed frame: what the reader expected and where.
struct SnapshotCodecError: Error, CustomStringConvertible {
    var description: String
}

// MARK: - Writing

/// Appends values to a byte buffer.
struct ByteWriter {
    private(set) var bytes: [UInt8] = []

    init(capacity: Int = 0) { bytes.reserveCapacity(capacity) }

    mutating func byte(_ value: UInt8) { bytes.append(value) }

    /// LEB128: seven bits a byte, low bits first.
    mutating func varint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    /// A signed integer, zigzag-encoded so small negative numbers stay short.
    mutating func signed(_ value: Int64) {
        varint(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }

    mutating func string(_ value: String) {
        var value = value
        value.withUTF8 { utf8 in
            varint(UInt64(utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }

    mutating func id(_ id: JobID) {
        withUnsafeBytes(of: id.uuid.uuid) { bytes.append(contentsOf: $0) }
    }

    mutating func time(_ time: SchedulerTime) {
        let (seconds, attoseconds) = time.components
        signed(seconds)
        signed(attoseconds)
    }

    mutating func double(_ value: Double) {
        withUnsafeBytes(of: value.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func json<Value: Encodable>(_ value: Value) throws {
        let data = try JSONEncoder().encode(value)
        varint(UInt64(data.count))
        bytes.append(contentsOf: data)
    }

    /// A job: a byte of flags for what is present, then the fields.
    mutating func write(_ job: JobInfo) throws {
        let history = job.history
        var flags: UInt8 = 0
        if job.name != nil { flags |= JobFlags.name }
        if job.key != nil { flags |= JobFlags.key }
        if job.progress != nil { flags |= JobFlags.progress }
        if job.group != JobSpec.defaultGroup { flags |= JobFlags.group }
        if !job.dependencies.isEmpty { flags |= JobFlags.dependencies }
        if history.attempts != 0 || history.startedAt != nil || history.finishedAt != nil || history.lastFailure != nil {
            flags |= JobFlags.history
        }
        if job.workingDirectory != nil || job.environment != nil { flags |= JobFlags.place }
        byte(flags)
        id(job.id)
        if let name = job.name { string(name) }
        string(job.command)
        signed(Int64(job.priority))
        try state(job.state)
        signed(Int64(job.maxAttempts))
        if let progress = job.progress { double(progress) }
        time(job.submittedAt)
        varint(job.order)
        if let key = job.key { string(key) }
        if flags & JobFlags.group != 0 { string(job.group) }
        if flags & JobFlags.dependencies != 0 {
            varint(UInt64(job.dependencies.count))
            for dependency in job.dependencies { id(dependency) }
        }
        if flags & JobFlags.history != 0 {
            var present: UInt8 = 0
            if history.startedAt != nil { present |= 1 }
            if history.finishedAt != nil { present |= 2 }
            if history.lastFailure != nil { present |= 4 }
            byte(present)
            signed(Int64(history.attempts))
            if let startedAt = history.startedAt { time(startedAt) }
            if let finishedAt = history.finishedAt { time(finishedAt) }
            if let lastFailure = history.lastFailure { try json(lastFailure) }
        }
        if flags & JobFlags.place != 0 {
            byte((job.workingDirectory != nil ? 1 : 0) | (job.environment != nil ? 2 : 0))
            if let directory = job.workingDirectory { string(directory) }
            if let environment = job.environment {
                varint(UInt64(environment.count))
                for (name, value) in environment.sorted(by: { $0.key < $1.key }) {
                    string(name)
                    string(value)
                }
            }
        }
    }

    /// The states most jobs are in as one byte (and their one value); the rest as JSON.
    private mutating func state(_ state: JobState) throws {
        switch state {
        case .queued: byte(StateTag.queued)
        case .blocked: byte(StateTag.blocked)
        case .cancelled: byte(StateTag.cancelled)
        case .succeeded(let attempts):
            byte(StateTag.succeeded)
            signed(Int64(attempts))
        case .scheduled(let until):
            byte(StateTag.scheduled)
            time(until)
        case .running, .waitingForRetry, .failed, .skipped:
            byte(StateTag.json)
            try json(state)
        }
    }
}

private enum JobFlags {
    static let name: UInt8 = 1 << 0
    static let key: UInt8 = 1 << 1
    static let progress: UInt8 = 1 << 2
    static let group: UInt8 = 1 << 3
    static let dependencies: UInt8 = 1 << 4
    static let history: UInt8 = 1 << 5
    /// A working directory or added environment (the details panel's cwd and env).
    static let place: UInt8 = 1 << 6
}

private enum StateTag {
    static let queued: UInt8 = 0
    static let blocked: UInt8 = 1
    static let cancelled: UInt8 = 2
    static let succeeded: UInt8 = 3
    static let scheduled: UInt8 = 4
    static let json: UInt8 = 255
}

// MARK: - Reading

/// Reads values from a byte buffer, throwing where it ends early or holds nonsense. It holds
/// the buffer's pointer: use it only inside the `withUnsafeBytes` that lent the buffer.
struct ByteReader {
    private let buffer: UnsafeRawBufferPointer
    private(set) var offset = 0

    init(_ buffer: UnsafeRawBufferPointer) { self.buffer = buffer }

    var isAtEnd: Bool { offset == buffer.count }

    private func need(_ count: Int, _ what: String) throws {
        guard count >= 0, buffer.count - offset >= count else {
            throw SnapshotCodecError(description: "snapshot frame ends inside \(what) at byte \(offset)")
        }
    }

    mutating func byte() throws -> UInt8 {
        try need(1, "a byte")
        defer { offset += 1 }
        return buffer[offset]
    }

    mutating func varint() throws -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let byte = try byte()
            guard shift < 64 else { throw SnapshotCodecError(description: "snapshot frame has an overlong number at byte \(offset)") }
            value |= UInt64(byte & 0x7f) << shift
            if byte < 0x80 { return value }
            shift += 7
        }
    }

    mutating func signed() throws -> Int64 {
        let raw = try varint()
        return Int64(bitPattern: raw >> 1) ^ -Int64(bitPattern: raw & 1)
    }

    mutating func int() throws -> Int {
        let value = try signed()
        guard let int = Int(exactly: value) else { throw SnapshotCodecError(description: "snapshot frame has a number out of range at byte \(offset)") }
        return int
    }

    /// A length or count: no more than the bytes left could hold.
    mutating func count() throws -> Int {
        let value = try varint()
        guard value <= UInt64(buffer.count - offset) else {
            throw SnapshotCodecError(description: "snapshot frame claims \(value) items with \(buffer.count - offset) bytes left at byte \(offset)")
        }
        return Int(value)
    }

    mutating func string() throws -> String {
        let count = try count()
        defer { offset += count }
        return String(decoding: UnsafeRawBufferPointer(rebasing: buffer[offset..<offset + count]), as: UTF8.self)
    }

    mutating func id() throws -> JobID {
        try need(16, "a job id")
        defer { offset += 16 }
        return JobID(uuid: UUID(uuid: buffer.loadUnaligned(fromByteOffset: offset, as: uuid_t.self)))
    }

    mutating func time() throws -> SchedulerTime {
        let seconds = try signed()
        let attoseconds = try signed()
        return SchedulerTime(secondsComponent: seconds, attosecondsComponent: attoseconds)
    }

    mutating func double() throws -> Double {
        try need(8, "a number")
        defer { offset += 8 }
        return Double(bitPattern: UInt64(littleEndian: buffer.loadUnaligned(fromByteOffset: offset, as: UInt64.self)))
    }

    mutating func json<Value: Decodable>(_: Value.Type) throws -> Value {
        let count = try count()
        defer { offset += count }
        return try JSONDecoder().decode(Value.self, from: Data(UnsafeRawBufferPointer(rebasing: buffer[offset..<offset + count])))
    }

    mutating func readJob() throws -> JobInfo {
        let flags = try byte()
        let jobID = try id()
        let name = flags & JobFlags.name != 0 ? try string() : nil
        let command = try string()
        let priority = try int()
        let state = try state()
        let maxAttempts = try int()
        let progress = flags & JobFlags.progress != 0 ? try double() : nil
        let submittedAt = try time()
        let order = try varint()
        let key = flags & JobFlags.key != 0 ? try string() : nil
        let group = flags & JobFlags.group != 0 ? try string() : JobSpec.defaultGroup
        var dependencies: [JobID] = []
        if flags & JobFlags.dependencies != 0 {
            let count = try count()
            dependencies.reserveCapacity(count)
            for _ in 0..<count { dependencies.append(try id()) }
        }
        var job = JobInfo(
            id: jobID, name: name, command: command, priority: priority, state: state, maxAttempts: maxAttempts,
            progress: progress, submittedAt: submittedAt, key: key, group: group, dependencies: dependencies)
        job.order = order
        if flags & JobFlags.history != 0 {
            let present = try byte()
            job.history.attempts = try int()
            if present & 1 != 0 { job.history.startedAt = try time() }
            if present & 2 != 0 { job.history.finishedAt = try time() }
            if present & 4 != 0 { job.history.lastFailure = try json(FailureReason.self) }
        }
        if flags & JobFlags.place != 0 {
            let present = try byte()
            if present & 1 != 0 { job.workingDirectory = try string() }
            if present & 2 != 0 {
                let count = try count()
                var environment: [String: String] = [:]
                environment.reserveCapacity(count)
                for _ in 0..<count {
                    let name = try string()
                    environment[name] = try string()
                }
                job.environment = environment
            }
        }
        return job
    }

    private mutating func state() throws -> JobState {
        switch try byte() {
        case StateTag.queued: return .queued
        case StateTag.blocked: return .blocked
        case StateTag.cancelled: return .cancelled
        case StateTag.succeeded: return .succeeded(attempts: try int())
        case StateTag.scheduled: return .scheduled(until: try time())
        case StateTag.json: return try json(JobState.self)
        case let tag: throw SnapshotCodecError(description: "snapshot frame has an unknown job state \(tag) at byte \(offset - 1)")
        }
    }
}
