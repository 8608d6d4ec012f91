import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Whether a process runs: it exists and is not a zombie waiting for a parent that is not
/// reaping (orphans go to PID 1, which in a container may never reap them).
public func isRunning(_ pid: pid_t) -> Bool {
    guard kill(pid, 0) == 0 else { return errno != ESRCH }
    guard let state = processState(pid) else { return false }
    return state != "Z" && state != "X"
}

/// A process's state letter from `/proc/PID/stat` (`R`, `S`, `T`, `Z`...), if it can be read.
private func processState(_ pid: pid_t) -> Substring? {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let close = stat.lastIndex(of: ")")
    else { return nil }
    return stat[stat.index(after: close)...].split(separator: " ").first
}

/// Whether a process is stopped (SIGSTOP took effect: every thread of it has stopped, which on a
/// loaded machine can come well after `kill` returned).
public func isStopped(_ pid: pid_t) -> Bool { processState(pid) == "T" }

/// The pids written one per line into `file`.
public func pids(in file: String) -> [pid_t] {
    ((try? String(contentsOfFile: file, encoding: .utf8)) ?? "").split(whereSeparator: \.isNewline).compactMap { pid_t($0) }
}

/// Polls `condition` until it holds or `limit` passes: for what has no event to wait for (a
/// process is gone, a file appeared, a line was logged by another process). `limit` is a hang
/// guard, never what a test measures.
///
/// A condition that blocks (it runs a command such as `pgrep` or `squeue`) awaits
/// ``offThePool(_:)`` inside `condition`.
public func eventually(within limit: Duration = .seconds(20), _ condition: () async -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + limit
    while ContinuousClock.now < deadline {
        if await condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return await condition()
}

/// Runs `work` to its end on a thread of its own and gives back what it returns: for a test's
/// blocking work (a command it runs and waits for, a long computation), which on a cooperative
/// thread would hold one of the test process's two pool threads and starve other tests' tasks
/// (an in-process coordinator's heartbeats, a hang guard's timer).
public func offThePool<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread { continuation.resume(returning: work()) }.start()
    }
}

/// The running processes whose working directory is `directory` (a test's scratch directory:
/// what a test's jobs started, wherever they ended up in the process tree).
public func processes(workingIn directory: String) -> [pid_t] {
    let target = URL(fileURLWithPath: directory).resolvingSymlinksInPath().path
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    return entries.compactMap { pid_t($0) }.filter { pid in
        guard let cwd = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/cwd") else { return false }
        return cwd == target && isRunning(pid)
    }
}
