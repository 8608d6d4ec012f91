import Scheduler

/// Short text for times and progress, the way the table shows them.
enum Formatting {
    /// `7s`, `1m05s`, `2h03m`: at most six cells.
    static func compact(_ duration: Duration) -> String {
        compact(seconds: duration.seconds)
    }

    /// `7s`, `1m05s`, `2h03m` for a number of seconds (negative and not-a-number show as 0s).
    static func compact(seconds: Double) -> String {
        let total = wholeSeconds(seconds)
        if total < 60 { return "\(total)s" }
        if total < 3600 { return "\(total / 60)m\(twoDigits(total % 60))s" }
        if total < 86_400 { return "\(total / 3600)h\(twoDigits((total % 3600) / 60))m" }
        return "\(total / 86_400)d\(twoDigits((total % 86_400) / 3600))h"
    }

    /// `<1m`, `5m`, `2h03m`, `1d02h`: whole minutes (an idle dashboard's `up`).
    static func minutes(_ duration: Duration) -> String {
        let total = wholeSeconds(duration.seconds)
        return total < 60 ? "<1m" : (total < 3600 ? "\(total / 60)m" : compact(duration))
    }

    /// `01:23` or `1:02:03`, for the event pane.
    static func clock(_ duration: Duration) -> String {
        // Before the clock's zero: a job a restarted serve kept from before its start.
        // (Bounded first: the negation of the most negative time has no components.)
        if duration < .zero { return "-" + clock(.zero - max(duration, .seconds(-Int64.max))) }
        let total = wholeSeconds(duration.seconds)
        let hours = total / 3600, minutes = (total % 3600) / 60, seconds = total % 60
        return hours > 0 ? "\(hours):\(twoDigits(minutes)):\(twoDigits(seconds))" : "\(twoDigits(minutes)):\(twoDigits(seconds))"
    }

    /// A bar `width` cells wide filled to `fraction`: `███░░░`.
    static func bar(_ fraction: Double, width: Int) -> (filled: String, empty: String) {
        let width = max(0, width)
        let clamped = min(max(fraction.isFinite ? fraction : 0, 0), 1)
        let filled = min(width, Int((clamped * Double(width)).rounded(.down)))
        return (String(repeating: "█", count: filled), String(repeating: "░", count: width - filled))
    }

    /// `42%`, rounded down so that only a finished job shows 100%.
    static func percent(_ fraction: Double) -> String {
        let clamped = min(max(fraction.isFinite ? fraction : 0, 0), 1)
        return "\(Int((clamped * 100).rounded(.down)))%"
    }

    /// `12.5` with one decimal.
    static func rate(_ value: Double) -> String {
        // Bounded before the conversion to Int, which would trap on NaN or beyond Int's range.
        let tenths = Int(min(max((value.isNaN ? 0 : value) * 10, -1e15), 1e15).rounded())
        return "\(tenths < 0 ? "-" : "")\(abs(tenths) / 10).\(abs(tenths) % 10)"
    }

    /// Whole seconds, rounded down, at least 0 (NaN too), at most 10^15 (about 31 million years):
    /// a conversion that cannot trap whatever the value (infinite, beyond `Int`).
    static func wholeSeconds(_ seconds: Double) -> Int {
        guard !seconds.isNaN, seconds > 0 else { return 0 }
        return Int(min(seconds, 1e15).rounded(.down))
    }

    private static func twoDigits(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
}
