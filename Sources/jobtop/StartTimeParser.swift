import Foundation

/// Reads the start times a job file gives with `at`: an RFC 3339 time
/// (`2026-11-24T02:00:00Z`, `2026-11-24T03:00:00+01:00`) or a local time of day (`02:00`,
/// `02:00:30`), which means the next such time: today if it is still to come, else tomorrow.
enum StartTimeParser {
    /// A start time that cannot be read, with the reason.
    struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// The text as given.
        let text: String
        /// What is wrong with it.
        let reason: String

        var description: String {
            "'\(text)' is not a start time (\(reason); write an RFC 3339 time like 2026-11-24T02:00:00Z or 2026-11-24T03:00:00+01:00, or a local time of day like 02:00)"
        }
    }

    /// A start time as read.
    enum StartTime: Sendable, Equatable {
        /// A moment given whole (RFC 3339): it may be in the past.
        case moment(Date)
        /// A local time of day, already moved to its next occurrence after `now`.
        case timeOfDay(Date)

        /// The moment it stands for.
        var date: Date {
            switch self {
            case .moment(let date), .timeOfDay(let date): date
            }
        }

        /// How far ahead a start time may be: the scheduler's clock counts nanoseconds in 64
        /// bits (about 292 years), and a time past that was quietly moved to its end.
        static let maximumYearsAhead = 100

        /// Why it cannot be a start time at `now`, if it cannot: a moment given whole that is not
        /// after `now` ("2020-01-01T00:00:00.000Z is in the past (now it is ...)"), or one more
        /// than ``maximumYearsAhead`` years away. A time of day is always its next occurrence,
        /// so never past.
        func unusableReason(now: Date) -> String? {
            guard case .moment(let date) = self else { return nil }
            if date <= now {
                return "\(EventLogFormatter.iso8601(date.timeIntervalSince1970)) is in the past (now it is \(EventLogFormatter.iso8601(now.timeIntervalSince1970)))"
            }
            if date.timeIntervalSince(now) > Double(Self.maximumYearsAhead) * 365.25 * 86_400 {
                return "\(EventLogFormatter.iso8601(date.timeIntervalSince1970)) is more than \(Self.maximumYearsAhead) years away"
            }
            return nil
        }
    }

    /// Parses `text`.
    ///
    /// - Parameters:
    ///   - now: The time a time of day is the next occurrence after.
    ///   - timeZone: The zone of a time of day.
    /// - Throws: ``Failure`` when it is neither form, or a field is out of range.
    static func parse(_ text: String, now: Date, timeZone: TimeZone) throws(Failure) -> StartTime {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if let match = trimmed.wholeMatch(of: #/(\d{1,2}):(\d{2})(?::(\d{2}))?/#) {
            return .timeOfDay(try nextTimeOfDay(
                hour: Int(match.1)!, minute: Int(match.2)!, second: match.3.map { Int($0)! } ?? 0,
                text: text, now: now, timeZone: timeZone))
        }
        let pattern = #/(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?(?:([Zz])|([+-])(\d{2}):(\d{2}))?/#
        guard let match = trimmed.wholeMatch(of: pattern) else {
            throw Failure(text: text, reason: "not in either form")
        }
        var offsetMinutes = 0
        if match.8 == nil {
            guard let sign = match.9, let hours = match.10, let minutes = match.11 else {
                throw Failure(text: text, reason: "it has no offset: end it with Z (UTC) or +HH:MM")
            }
            offsetMinutes = (Int(hours)! * 60 + Int(minutes)!) * (sign == "-" ? -1 : 1)
            guard Int(hours)! <= 23, Int(minutes)! <= 59 else { throw Failure(text: text, reason: "the offset is out of range") }
        }
        let fraction = match.7.map { Double("0" + $0)! } ?? 0
        return .moment(try moment(
            year: Int(match.1)!, month: Int(match.2)!, day: Int(match.3)!,
            hour: Int(match.4)!, minute: Int(match.5)!, second: Int(match.6)!, fraction: fraction,
            offsetMinutes: offsetMinutes, text: text))
    }

    /// The moment of a date and time at `offsetMinutes` east of UTC.
    ///
    /// - Throws: ``Failure`` when a field is out of range (month 13, February 30, hour 24).
    static func moment(
        year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int, fraction: Double = 0,
        offsetMinutes: Int, text: String
    ) throws(Failure) -> Date {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(secondsFromGMT: 0)!
        let components = DateComponents(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
        guard (1...12).contains(month), (0...23).contains(hour), (0...59).contains(minute), (0...59).contains(second),
              let date = calendar.date(from: components),
              calendar.dateComponents([.year, .month, .day], from: date) == DateComponents(year: year, month: month, day: day)
        else { throw Failure(text: text, reason: "no such date or time") }
        return date.addingTimeInterval(fraction - Double(offsetMinutes * 60))
    }

    /// The next moment after `now` whose local time of day in `timeZone` is the one given.
    ///
    /// - Throws: ``Failure`` when a field is out of range.
    static func nextTimeOfDay(
        hour: Int, minute: Int, second: Int, text: String, now: Date, timeZone: TimeZone
    ) throws(Failure) -> Date {
        guard (0...23).contains(hour), (0...59).contains(minute), (0...59).contains(second) else {
            throw Failure(text: text, reason: "no such time of day")
        }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        // `.nextTime`: a time a daylight-saving jump skips means the first moment after the jump.
        guard let date = calendar.nextDate(
            after: now, matching: DateComponents(hour: hour, minute: minute, second: second),
            matchingPolicy: .nextTime)
        else { throw Failure(text: text, reason: "no such time of day") }
        return date
    }
}
