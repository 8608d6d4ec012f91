import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Whether a process runs: it exists and is not a zombie waiting for a parent that is not
/// reaping (orphans go to PID 1, which in a container may never reap them).
func isRunning(_ pid: pid_t) -> Bool {
    guard kill(pid, 0) == 0 else { return errno != ESRCH }
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let close = stat.lastIndex(of: ")")
    else { return false }
    let state = stat[stat.index(after: close)...].split(separator: " ").first
    return state != "Z" && state != "X"
}

/// The pids written one per line into `file`.
func pids(in file: String) -> [pid_t] {
    ((try? String(contentsOfFile: file, encoding: .utf8)) ?? "").split(whereSeparator: \.isNewline).compactMap { pid_t($0) }
}
