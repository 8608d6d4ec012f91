import Foundation

/// An identity that is a random version-4 UUID, never a guessable counter (``JobID``,
/// ``WorkerID``): compared and hashed as two machine words.
public protocol RandomIdentifier: Hashable, Sendable, CustomStringConvertible {
    /// The full identifier.
    var uuid: UUID { get }
}

extension RandomIdentifier {
    /// The first 8 hex digits: enough to tell them apart on a screen or in a log line.
    public var short: String { UUIDText.format(uuid, digits: 8) }

    /// The full UUID, lowercase (`8-4-4-4-12` hex digits). Formatted here rather than through
    /// `uuidString` (Foundation's goes through `vfprintf`, a measurable share of a restart that
    /// writes 100,000 ids).
    public var description: String { UUIDText.format(uuid, digits: 32) }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.words == rhs.words }

    // Hashing the UUID byte by byte is a measurable share of every scheduling decision; the
    // same 128 bits as two words hash several times faster.
    public func hash(into hasher: inout Hasher) {
        let (high, low) = words
        hasher.combine(high)
        hasher.combine(low)
    }

    // What dictionaries and sets call (the standard library's hook for types that hash faster
    // than through `Hasher`): every job's id is hashed when it is submitted and when its record
    // is dropped, in a map as big as the queue, and a job's worker is looked up on every start;
    // setting up SipHash cost more than the rest of the lookup. The id is random already; one
    // multiply-and-fold keyed by the table's own seed (as in wyhash) spreads it over the buckets
    // (equal ids hash equally, which is all a table needs).
    public func _rawHashValue(seed: Int) -> Int {
        let (high, low) = words
        let product = (low ^ UInt64(bitPattern: Int64(seed)) ^ 0xA076_1D64_78BD_642F)
            .multipliedFullWidth(by: high ^ 0xE703_7ED1_A0B4_28DB)
        return Int(truncatingIfNeeded: product.high ^ product.low)
    }

    fileprivate var words: (UInt64, UInt64) {
        withUnsafeBytes(of: uuid.uuid) { ($0.loadUnaligned(as: UInt64.self), $0.loadUnaligned(fromByteOffset: 8, as: UInt64.self)) }
    }
}

/// A job's identity.
public struct JobID: RandomIdentifier, Comparable {
    public let uuid: UUID

    /// Wraps an existing UUID (for example one read back from a log or the wire).
    public init(uuid: UUID) { self.uuid = uuid }

    /// Reads a UUID's text (`8-4-4-4-12` hex digits, either case), as `UUID(uuidString:)` does
    /// but without its `sscanf`: a restart reads 100,000 ids back. `nil` for anything else.
    public init?(parsing text: some StringProtocol) {
        guard let uuid = UUIDText.parse(text) else { return nil }
        self.uuid = uuid
    }

    /// The order of their texts (`uuidString`), compared as two big-endian words instead.
    public static func < (lhs: JobID, rhs: JobID) -> Bool {
        let (l0, l1) = lhs.words
        let (r0, r1) = rhs.words
        return l0 != r0 ? l0.bigEndian < r0.bigEndian : l1.bigEndian < r1.bigEndian
    }
}

/// A UUID's text, read and written without Foundation's `sscanf`/`vfprintf`.
enum UUIDText {
    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// The UUID in lowercase hex: the first `digits` (8 or 32) digits, with the hyphens of the
    /// `8-4-4-4-12` form when all 32 are asked for.
    static func format(_ uuid: UUID, digits: Int) -> String {
        let length = digits == 32 ? 36 : digits
        return withUnsafeBytes(of: uuid.uuid) { bytes in
            String(unsafeUninitializedCapacity: length) { buffer in
                var out = 0
                for index in 0..<(digits / 2) {
                    if digits == 32, index == 4 || index == 6 || index == 8 || index == 10 {
                        buffer[out] = UInt8(ascii: "-")
                        out += 1
                    }
                    let byte = bytes[index]
                    buffer[out] = hexDigits[Int(byte >> 4)]
                    buffer[out + 1] = hexDigits[Int(byte & 0x0F)]
                    out += 2
                }
                return out
            }
        }
    }

    /// The UUID `text` spells (`8-4-4-4-12` hex digits, either case), or `nil`.
    static func parse(_ text: some StringProtocol) -> UUID? {
        if let result = text.utf8.withContiguousStorageIfAvailable({ parse(bytes: $0) }) { return result }
        return parse(bytes: Array(text.utf8))
    }

    private static func parse(bytes text: some RandomAccessCollection<UInt8>) -> UUID? {
        guard text.count == 36 else { return nil }
        var uuid: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        let ok = withUnsafeMutableBytes(of: &uuid) { out -> Bool in
            var position = text.startIndex
            for index in 0..<16 {
                if index == 4 || index == 6 || index == 8 || index == 10 {
                    guard text[position] == UInt8(ascii: "-") else { return false }
                    position = text.index(after: position)
                }
                guard let high = value(of: text[position]) else { return false }
                position = text.index(after: position)
                guard let low = value(of: text[position]) else { return false }
                position = text.index(after: position)
                out[index] = high << 4 | low
            }
            return true
        }
        return ok ? UUID(uuid: uuid) : nil
    }

    private static func value(of digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit &- UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit &- UInt8(ascii: "a") &+ 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit &- UInt8(ascii: "A") &+ 10
        default: nil
        }
    }
}

/// A worker's identity.
public struct WorkerID: RandomIdentifier {
    public let uuid: UUID

    /// Wraps an existing UUID.
    public init(uuid: UUID) { self.uuid = uuid }

    /// Makes a new random identifier.
    public init() { self.uuid = UUID() }

    /// Reads a UUID's text, as ``JobID/init(parsing:)``.
    public init?(parsing text: some StringProtocol) {
        guard let uuid = UUIDText.parse(text) else { return nil }
        self.uuid = uuid
    }
}

/// A batch: the jobs of one run, followed as a whole (see ``SchedulerCore/openBatch(haltsOnFailure:)``).
///
/// Batches are numbered by the scheduler that opened them; the number means nothing elsewhere.
public struct BatchID: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The number.
    public let rawValue: UInt64

    /// Wraps a number.
    public init(rawValue: UInt64) { self.rawValue = rawValue }

    public var description: String { "#\(rawValue)" }
}

/// A batch as it stands.
public struct BatchStatus: Sendable, Equatable {
    /// Which batch.
    public var id: BatchID
    /// Its jobs that have not ended.
    public var unfinished: Int
    /// Whether it takes no more jobs.
    public var isSealed: Bool
    /// The job whose failure halted it, if one did.
    public var haltedBy: JobID?

    /// Whether it is sealed and every job of it has ended.
    public var isSettled: Bool { isSealed && unfinished == 0 }
}

/// Makes random version-4 UUIDs quickly.
///
/// `UUID()` asks the kernel for randomness on every call; a million submissions would spend
/// most of their time there. This generator is seeded once from the system's random source and
/// then uses xoshiro256**, so ids stay unpredictable to anyone outside the process while costing
/// a few nanoseconds each.
struct IdentifierGenerator: Sendable {
    private var state: (UInt64, UInt64, UInt64, UInt64)

    init() {
        var system = SystemRandomNumberGenerator()
        state = (system.next(), system.next(), system.next(), system.next() | 1)
    }

    init(seed: UInt64) {
        var splitMix = SplitMix64(state: seed)
        state = (splitMix.next(), splitMix.next(), splitMix.next(), splitMix.next() | 1)
    }

    mutating func nextUInt64() -> UInt64 {
        let result = rotl(state.1 &* 5, 7) &* 9
        let t = state.1 << 17
        state.2 ^= state.0
        state.3 ^= state.1
        state.1 ^= state.2
        state.0 ^= state.3
        state.2 ^= t
        state.3 = rotl(state.3, 45)
        return result
    }

    /// A uniformly distributed value in 0..<1.
    mutating func nextUnit() -> Double {
        Double(nextUInt64() >> 11) * 0x1.0p-53
    }

    mutating func nextJobID() -> JobID {
        JobID(uuid: nextUUID())
    }

    mutating func nextUUID() -> UUID {
        let a = nextUInt64()
        let b = nextUInt64()
        var bytes = (
            UInt8(truncatingIfNeeded: a), UInt8(truncatingIfNeeded: a >> 8),
            UInt8(truncatingIfNeeded: a >> 16), UInt8(truncatingIfNeeded: a >> 24),
            UInt8(truncatingIfNeeded: a >> 32), UInt8(truncatingIfNeeded: a >> 40),
            UInt8(truncatingIfNeeded: a >> 48), UInt8(truncatingIfNeeded: a >> 56),
            UInt8(truncatingIfNeeded: b), UInt8(truncatingIfNeeded: b >> 8),
            UInt8(truncatingIfNeeded: b >> 16), UInt8(truncatingIfNeeded: b >> 24),
            UInt8(truncatingIfNeeded: b >> 32), UInt8(truncatingIfNeeded: b >> 40),
            UInt8(truncatingIfNeeded: b >> 48), UInt8(truncatingIfNeeded: b >> 56)
        )
        bytes.6 = (bytes.6 & 0x0F) | 0x40  // version 4
        bytes.8 = (bytes.8 & 0x3F) | 0x80  // RFC 4122 variant
        return UUID(uuid: bytes)
    }

    private func rotl(_ x: UInt64, _ k: UInt64) -> UInt64 { (x << k) | (x >> (64 - k)) }
}

private struct SplitMix64 {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
