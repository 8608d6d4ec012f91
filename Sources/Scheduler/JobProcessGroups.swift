#if canImport(Glibc)
import Glibc
#endif

/// The process groups of every job process running in this process, whichever scheduler or
/// worker started it: the one place that knows them, for a last-resort kill.
enum JobProcessGroups {
    private static let groups = Locked<Set<pid_t>>([])

    /// A job's process group (its leader's pid) was spawned.
    static func started(_ group: pid_t) {
        groups.withLock { _ = $0.insert(group) }
    }

    /// The group's leader is about to be reaped: after that its pid, and so the group id, may
    /// be reused and must not be signalled any more.
    static func ended(_ group: pid_t) {
        groups.withLock { _ = $0.remove(group) }
    }

    /// Sends SIGKILL to every job process group now.
    static func killAll() {
        for group in groups.withLock({ $0 }) { kill(-group, SIGKILL) }
    }
}

extension Scheduler {
    /// Kills the process group of every job process running in this process at once (SIGKILL,
    /// no grace period): for a user who asked twice to stop. Synchronous and safe to call from a
    /// signal source's handler; the jobs then end through the usual path.
    public nonisolated static func killAllJobProcessesNow() {
        JobProcessGroups.killAll()
    }
}
