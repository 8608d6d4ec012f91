import Scheduler

/// Short text for times and progress, the way the table shows them.
enum Formatting {
    /// `7s`, `1m05s`, `2h03m`: at most six cells.
    static func compact(_ duration: Duration) -> String {
        let total = max(0, Int(duration.seconds.rounded(.down)))
        if total < 60 { return "\(total)s" }
        if total < 3600 { return "\(total / 60)m\(twoDigits(total % 60))s" }
        if total < 86_400 { return "\(total / 3600)h\(twoDigits((total % 3600) / 60))m" }
        return "\(total / 86_400)d\(twoDigits((total % 86_400) / 3600))h"
    }

    /// `01:23` or `1:02:03`, for the event pane.
    static func clock(_ duration: Duration) -> String {
        let total = max(0, Int(duration.seconds.rounded(.down)))
        let hours = total / 3600, minutes = (total % 3600) / 60, seconds = total % 60
        return hours > 0 ? "\(hours):\(twoDigits(minutes)):\(twoDigits(seconds))" : "\(twoDigits(minutes)):\(twoDigits(seconds))"
    }

    /// A bar `width` cells wide filled to `fraction`: `███░░░`.
    static func bar(_ fraction: Double, width: Int) -> (filled: String, empty: String) {
        let clamped = min(max(fraction.isFinite ? fraction : 0, 0), 1)
        let filled = Int((clamped * Double(width)).rounded(.down))
        return (String(repeating: "█", count: filled), String(repeating: "░", count: width - filled))
    }

    /// `42%`, rounded down so that only a finished job shows 100%.
    static func percent(_ fraction: Double) -> String {
        let clamped = min(max(fraction.isFinite ? fraction : 0, 0), 1)
        return "\(Int((clamped * 100).rounded(.down)))%"
    }

    /// `12.5` with one decimal.
    static func rate(_ value: Double) -> String {
        let tenths = Int((value * 10).rounded())
        return "\(tenths / 10).\(tenths % 10)"
    }

    private static func twoDigits(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
}
