import ArgumentParser

/// Reads durations as the command line and job files write them: `500ms`, `10s`, `1.5s`, `5m`,
/// `1h`, `2d`, and sums of them such as `1m30s` or `1d12h`.
enum DurationParser {
    /// A duration that cannot be read, with the reason.
    struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// The text as given.
        let text: String
        /// What is wrong with it.
        let reason: String

        var description: String { "'\(text)' is not a duration (\(reason); write e.g. 500ms, 10s, 1.5s, 5m, 1h)" }
    }

    private static let units: [(suffix: String, seconds: Double)] = [
        ("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86_400),
    ]

    /// Parses `text`.
    ///
    /// - Throws: ``Failure`` when it is empty, negative, has no unit or an unknown unit.
    static func parse(_ text: String) throws(Failure) -> Duration {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty else { throw Failure(text: text, reason: "it is empty") }
        if trimmed.hasPrefix("-") { throw Failure(text: text, reason: "it is negative") }
        // Zero needs no unit (`--grace 0`), as the README has it; any other number does.
        if trimmed.allSatisfy({ $0 == "0" || $0 == "." }), trimmed.contains("0") { return .zero }
        var rest = Substring(trimmed)
        var total = 0.0
        // Each unit once, from the largest down (1h30m): `5s5s` or `30s1m` is a typo more likely
        // than a sum (it was taken as one).
        var previous: (suffix: String, seconds: Double)?
        while !rest.isEmpty {
            let number = rest.prefix { $0.isASCII && ($0.isNumber || $0 == ".") }
            guard !number.isEmpty, let value = Double(number) else {
                throw Failure(text: text, reason: "expected a number at '\(rest)'")
            }
            rest = rest.dropFirst(number.count)
            let unitText = rest.prefix { $0.isLetter }
            guard !unitText.isEmpty else {
                throw Failure(text: text, reason: "'\(number)' needs a unit: ms, s, m, h or d")
            }
            guard let unit = units.first(where: { $0.suffix == unitText }) else {
                throw Failure(text: text, reason: "unknown unit '\(unitText)'; use ms, s, m, h or d")
            }
            rest = rest.dropFirst(unitText.count)
            if let previous, unit.seconds >= previous.seconds {
                throw Failure(text: text, reason: "'\(unit.suffix)' after '\(previous.suffix)': give each unit once, the largest first, like 1h30m")
            }
            previous = (String(unit.suffix), unit.seconds)
            total += value * unit.seconds
        }
        guard total.isFinite, total < 1e9 else { throw Failure(text: text, reason: "it is too long: at most 11574d") }
        // Times are kept and shown to the millisecond: `0.0001ms` passed as more than zero, then
        // timed every job out "after 0ms".
        if total > 0 && total < 0.001 { throw Failure(text: text, reason: "it is shorter than 1ms") }
        return .nanoseconds(Int64((total * 1e9).rounded()))
    }
}

extension DurationParser {
    /// The value of a duration option, parsed and, with `limits`, checked: a usage error that
    /// names the option (`--heartbeat must be from 100ms to 60s, not 10ms`), `range` saying the
    /// limits in words.
    ///
    /// A negative one is refused in the same words as one out of `limits` when they start above
    /// zero (`--heartbeat must be from 100ms to 60s, not -1s`), else as negative
    /// (`--goodbye-grace must not be negative, not -1s`), as every duration flag says it.
    static func option(
        _ text: String, _ flag: String, within limits: ClosedRange<Duration>? = nil, range: String = ""
    ) throws(ValidationError) -> Duration {
        if text.trimmingCharacters(in: .whitespaces).hasPrefix("-") {
            if let limits, limits.lowerBound > .zero { throw ValidationError("\(flag) must be \(range), not \(text)") }
            throw ValidationError("\(flag) must not be negative, not \(text)")
        }
        let value: Duration
        do { value = try parse(text) } catch { throw ValidationError("\(flag): \(error.description)") }
        if let limits, !limits.contains(value) { throw ValidationError("\(flag) must be \(range), not \(text)") }
        return value
    }
}
