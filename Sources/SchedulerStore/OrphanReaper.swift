import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Finds and stops the processes a serve that died left running.
///
/// Every job a durable scheduler starts carries `JOBTOP_SERVE_ID=<the state directory's id>` in
/// its environment, which its children inherit. A serve that starts on the same directory looks
/// for that exact value in `/proc/<pid>/environ` of every process it may read, and stops the
/// process groups it finds (SIGTERM, then SIGKILL after the grace period) before any job starts.
/// Unlike a recorded pid, the value cannot name an unrelated process that reused a pid, and it
/// also finds a job whose start the journal had not written yet, or whose leader already exited.
/// A job that clears its own environment escapes it (the README says so). What a job that had
/// ended left running (a `keep_background` daemon, on purpose) is left alone: a process whose
/// `JOBTOP_JOB_ID` names a job that had ended is not stopped.
enum OrphanReaper {
    /// The variable.
    static let variable = "JOBTOP_SERVE_ID"
    /// The variable with the job's id.
    static let jobVariable = "JOBTOP_JOB_ID"

    /// The process groups whose members carry `variable=id`, leaving out this process's own and
    /// those of processes whose job (`JOBTOP_JOB_ID`) is not among `jobs`, when given.
    static func groups(carrying id: String, ofJobs jobs: Set<String>? = nil) -> Set<pid_t> {
        let needle = Array("\(variable)=\(id)".utf8)
        let jobPrefix = Array("\(jobVariable)=".utf8)
        let me = getpid()
        let myGroup = getpgrp()
        var found: Set<pid_t> = []
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
        for entry in entries {
            guard let pid = pid_t(entry), pid != me else { continue }
            guard let environ = FileManager.default.contents(atPath: "/proc/\(pid)/environ") else { continue }
            // Each variable ends in a NUL: the needle matches a whole one (a value that only
            // starts with the id does not).
            let variables = [UInt8](environ).split(separator: 0)
            guard variables.contains(where: { $0.elementsEqual(needle) }) else { continue }
            if let jobs, let job = variables.first(where: { $0.starts(with: jobPrefix) }),
               !jobs.contains(String(decoding: job.dropFirst(jobPrefix.count), as: UTF8.self)) { continue }
            let group = getpgid(pid)
            if group > 0, group != myGroup { found.insert(group) }
        }
        return found
    }

    /// Stops every group carrying the id: SIGTERM, then SIGKILL to those still there after
    /// `grace`. Blocks the calling thread (a start-up step, before the scheduler runs).
    ///
    /// - Returns: How many groups it found.
    static func stopAll(carrying id: String, ofJobs jobs: Set<String>? = nil, grace: Duration) -> Int {
        let groups = groups(carrying: id, ofJobs: jobs)
        guard !groups.isEmpty else { return 0 }
        for group in groups { kill(-group, SIGTERM) }
        let deadline = ContinuousClock.now + grace
        var left = groups
        while !left.isEmpty, ContinuousClock.now < deadline {
            left = liveGroups(among: left)
            if !left.isEmpty { usleep(20_000) }
        }
        for group in left { kill(-group, SIGKILL) }
        return groups.count
    }

    /// The groups of `groups` that still have a member that is not a zombie (a zombie is dead;
    /// only its parent's wait removes it, and the parent of an orphan may never wait).
    static func liveGroups(among groups: Set<pid_t>) -> Set<pid_t> {
        var live: Set<pid_t> = []
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
        for entry in entries {
            guard pid_t(entry) != nil, let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")")
            else { continue }
            // After the command's closing parenthesis: state, ppid, pgrp, ...
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 2, fields[0] != "Z", let group = pid_t(fields[2]), groups.contains(group) else { continue }
            live.insert(group)
        }
        return live
    }
}
