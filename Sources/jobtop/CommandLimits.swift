import Foundation

/// What a shell command must be for `/bin/sh -c` to receive it whole: checked when jobs are
/// loaded, so a command that cannot run is refused before anything starts instead of failing
/// (or running cut short) later.
enum CommandLimits {
    /// The kernel's limit for one argument string, the terminating NUL included
    /// (`MAX_ARG_STRLEN`, 32 pages on Linux).
    static let maxArgumentBytes = 32 * 4096

    /// The kernel's limit for all arguments and the environment together (`ARG_MAX`), less what
    /// jobtop's own environment takes.
    static let roomForCommand: Int = {
        let argMax = sysconf(Int32(_SC_ARG_MAX))
        var environmentBytes = 0
        for (key, value) in ProcessInfo.processInfo.environment {
            environmentBytes += key.utf8.count + value.utf8.count + 2 + MemoryLayout<UnsafePointer<CChar>>.size
        }
        // "sh", "-c", three pointers and a margin for the kernel's own bookkeeping.
        return max(0, (argMax > 0 ? argMax : 2 * 1024 * 1024) - environmentBytes - 4096)
    }()

    /// Why `command` cannot be run, or `nil` when it can.
    static func problem(with command: String) -> String? {
        let bytes = command.utf8.count
        if command.utf8.contains(0) {
            return "contains a NUL byte (the shell would see only what comes before it)"
        }
        if bytes + 1 > maxArgumentBytes {
            return "is \(grouped(bytes)) bytes; the kernel passes at most \(grouped(maxArgumentBytes - 1)) bytes in one argument (put it in a script file)"
        }
        if bytes + 1 > roomForCommand {
            return "is \(grouped(bytes)) bytes; with the environment it exceeds the kernel's argument limit (ARG_MAX)"
        }
        return nil
    }

    /// `131072` as `131,072`.
    static func grouped(_ value: Int) -> String {
        let digits = String(value)
        var result = ""
        for (index, digit) in digits.enumerated() {
            if index > 0 && (digits.count - index) % 3 == 0 { result += "," }
            result.append(digit)
        }
        return result
    }
}
