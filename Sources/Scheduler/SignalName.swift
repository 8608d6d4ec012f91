#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The signals a user sends to a running job (`x` in the dashboard, `jobtop signal`), by name.
public enum SignalName {
    /// The menu's signals, in its order: name without `SIG`, and number.
    public static let common: [(name: String, number: Int32)] = [
        ("TERM", SIGTERM), ("KILL", SIGKILL), ("INT", SIGINT), ("HUP", SIGHUP), ("STOP", SIGSTOP),
        ("CONT", SIGCONT), ("USR1", SIGUSR1), ("USR2", SIGUSR2), ("QUIT", SIGQUIT),
    ]

    /// A signal from `TERM`, `SIGTERM`, `term` or a number (1 to 64); `nil` for anything else.
    public static func parse(_ text: String) -> Int32? {
        if let number = Int32(text) { return (1...64).contains(number) ? number : nil }
        var name = text.uppercased()
        if name.hasPrefix("SIG") { name.removeFirst(3) }
        return common.first { $0.name == name }?.number
    }

    /// `TERM` for SIGTERM, else the number.
    public static func name(of number: Int32) -> String {
        common.first { $0.number == number }?.name ?? String(number)
    }
}
