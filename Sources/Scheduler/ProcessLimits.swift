import CProcess
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// How many local slots the operating system's limits can hold, and which limit says so.
public struct LocalSlotCapacity: Sendable, CustomStringConvertible {
    /// The most local jobs that can run at once.
    public var slots: Int
    /// The limit that bounds ``slots`` (`RLIMIT_NOFILE`, `RLIMIT_NPROC`, `kernel.pid_max`,
    /// `kernel.threads-max`).
    public var limit: String
    /// How ``slots`` follows from the limit, for a message.
    public var explanation: String

    public var description: String { explanation }

    /// Why `wanted` slots (given with `flag`) cannot run here, or `nil` when they fit: one
    /// message for every command that takes a number of slots.
    public func refusal(of wanted: Int, flag: String, fewer: String) -> String? {
        guard wanted > slots else { return nil }
        // No number helps then: only the limit (under `ulimit -n 64` it said "use a smaller -j"
        // to a run given none, and -j 1 was refused the same).
        if slots == 0 { return "this system has no room for a local job: \(explanation); raise \(limit)" }
        return "\(flag) \(wanted) is more than this system can run at once: \(explanation); raise \(limit) or use \(fewer)"
    }
}

extension Scheduler {
    /// File descriptors a running local process job holds: its stdout and stderr pipes and a
    /// pidfd.
    public static let filesPerLocalJob = 3

    /// Raises this process's soft limit on open files to its hard limit, so that many local
    /// slots (each holds ``filesPerLocalJob`` descriptors) can run. Call it once at start-up.
    ///
    /// - Returns: The soft limit now in force (`Int.max` for no limit).
    @discardableResult
    public nonisolated static func raiseOpenFileLimit() -> Int {
        var soft: UInt64 = 0
        var hard: UInt64 = 0
        guard jt_get_limit(0, &soft, &hard) == 0 else { return Int.max }
        if soft < hard, jt_set_soft_limit(0, hard) == 0 { soft = hard }
        return soft >= UInt64(Int.max) ? Int.max : Int(soft)
    }

    /// The most local slots this process can run at once under the limits in force now: open
    /// files (``filesPerLocalJob`` per job, plus `extraFilesPerJob`, above those already open and
    /// a margin), processes per user (`RLIMIT_NPROC`, one process per job at least; not enforced
    /// for root), and the system's pid and thread limits.
    ///
    /// - Parameter extraFilesPerJob: Descriptors the caller holds per running job (a log file).
    public nonisolated static func localSlotCapacity(extraFilesPerJob: Int = 0) -> LocalSlotCapacity {
        ProcessLimits.current().capacity(extraFilesPerJob: max(0, extraFilesPerJob))
    }
}

/// The limits on what this process can open and spawn, read now.
struct ProcessLimits {
    /// Descriptors kept free for everything but jobs (the log, sockets, the terminal), and the
    /// I/O threads' reserves (``DescriptorReserve``), which they give back when descriptors run out.
    static let fileMargin = 64 + ProcessReactor.defaultThreadCount * DescriptorReserve.size
    /// Processes and pids kept free for everything but jobs.
    static let processMargin = 64

    var openFiles: UInt64
    var openFilesInUse: Int
    var processes: UInt64
    var processesInUse: Int?
    var pidMax: Int?
    var threadsMax: Int?
    var tasksInUse: Int?

    static func current() -> ProcessLimits {
        var soft: UInt64 = 0
        var hard: UInt64 = 0
        let openFiles = jt_get_limit(0, &soft, &hard) == 0 ? soft : UInt64.max
        let processes = jt_get_limit(1, &soft, &hard) == 0 ? soft : UInt64.max
        // RLIMIT_NPROC is not enforced for root; counting a user's processes walks /proc.
        let countsProcesses = getuid() != 0 && processes != UInt64.max
        return ProcessLimits(
            openFiles: openFiles,
            openFilesInUse: max(0, Int(jt_count_open_fds())),
            processes: processes,
            processesInUse: countsProcesses ? userTasks() : nil,
            pidMax: readInteger("/proc/sys/kernel/pid_max"),
            threadsMax: readInteger("/proc/sys/kernel/threads-max"),
            tasksInUse: systemTasks())
    }

    func capacity(extraFilesPerJob: Int) -> LocalSlotCapacity {
        let perJob = Scheduler.filesPerLocalJob + extraFilesPerJob
        var best = LocalSlotCapacity(slots: Int.max, limit: "", explanation: "no limit applies")
        func consider(_ slots: Int, _ limit: String, _ explanation: String) {
            let slots = max(0, slots)
            if slots < best.slots { best = LocalSlotCapacity(slots: slots, limit: limit, explanation: explanation) }
        }
        if openFiles != UInt64.max {
            let limit = Int(clamping: openFiles)
            let slots = (limit - openFilesInUse - Self.fileMargin) / perJob
            consider(slots, "RLIMIT_NOFILE",
                     "the open-file limit (RLIMIT_NOFILE, ulimit -n) is \(limit) with \(openFilesInUse) open; each running job holds \(perJob), \(Self.fileMargin) are kept free: room for \(max(0, slots)) local slots")
        }
        if let inUse = processesInUse {
            let limit = Int(clamping: processes)
            let slots = limit - inUse - Self.processMargin
            consider(slots, "RLIMIT_NPROC",
                     "the process limit of this user (RLIMIT_NPROC, ulimit -u) is \(limit) with about \(inUse) in use; each running job is at least one process, \(Self.processMargin) are kept free: room for \(max(0, slots)) local slots")
        }
        if let pidMax, let tasks = tasksInUse {
            let slots = pidMax - tasks - Self.processMargin
            consider(slots, "kernel.pid_max",
                     "the system's pid limit (kernel.pid_max) is \(pidMax) with \(tasks) in use; each running job takes at least one, \(Self.processMargin) are kept free: room for \(max(0, slots)) local slots")
        }
        if let threadsMax, let tasks = tasksInUse {
            let slots = threadsMax - tasks - Self.processMargin
            consider(slots, "kernel.threads-max",
                     "the system's task limit (kernel.threads-max) is \(threadsMax) with \(tasks) in use; each running job takes at least one, \(Self.processMargin) are kept free: room for \(max(0, slots)) local slots")
        }
        return best
    }

    /// One line on the limits, for a job that could not be started.
    var summary: String {
        var parts: [String] = []
        parts.append(openFiles == UInt64.max ? "open files: no limit" : "open files: \(openFilesInUse) of \(openFiles) (RLIMIT_NOFILE)")
        if let processesInUse { parts.append("processes of this user: about \(processesInUse) of \(processes) (RLIMIT_NPROC)") }
        if let pidMax, let tasksInUse { parts.append("tasks: \(tasksInUse), pid_max \(pidMax)") }
        return parts.joined(separator: "; ")
    }

    private static func readInteger(_ path: String) -> Int? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        return Int(text.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Threads and processes on the system: the fourth field of /proc/loadavg is `running/total`.
    private static func systemTasks() -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return nil }
        let fields = text.split(separator: " ")
        guard fields.count >= 4, let slash = fields[3].firstIndex(of: "/") else { return nil }
        return Int(fields[3][fields[3].index(after: slash)...])
    }

    /// An estimate of the tasks that count against this user's RLIMIT_NPROC: the processes whose
    /// /proc entry this user owns, plus this process's own threads.
    private static func userTasks() -> Int {
        let uid = getuid()
        var count = 0
        guard let directory = opendir("/proc") else { return 0 }
        defer { closedir(directory) }
        while let entry = readdir(directory) {
            let first = entry.pointee.d_name.0
            guard first >= 0x31, first <= 0x39 else { continue }
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            var info = stat()
            if stat("/proc/\(name)", &info) == 0, info.st_uid == uid { count += 1 }
        }
        let threads = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").count) ?? 1
        return count + max(0, threads - 1)
    }
}
