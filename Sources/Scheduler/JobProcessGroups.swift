import CProcess
#if canImport(Glibc)
import Glibc
#endif

/// The process groups of every job process running in this process, whichever scheduler or
/// worker started it: the one place that knows them, for a last-resort kill.
///
/// They are kept in a fixed-size, lock-free C table (CrashGuard.c) that the fatal-signal handler
/// reads without a lock: a crash of any kind still kills them. A group the table has no room
/// for (more than 65,536 at once) is kept in a set instead, which ``killAll()`` still reaches
/// but the crash handler does not.
enum JobProcessGroups {
    private static let overflow = Locked<Set<pid_t>>([])

    /// A job's process group (its leader's pid) was spawned.
    static func started(_ group: pid_t) {
        if jt_crash_guard_add_group(group) == 0, group > 0 {
            overflow.withLock { _ = $0.insert(group) }
        }
    }

    /// A job's process group was spawned by `jt_spawn`, which records it in the crash guard's
    /// table itself (as early as it can); one that found no room there is kept here.
    static func spawned(_ group: pid_t, recordedByTheGuard: Bool) {
        if !recordedByTheGuard, group > 0 {
            overflow.withLock { _ = $0.insert(group) }
        }
    }

    /// The group's leader is about to be reaped: after that its pid, and so the group id, may
    /// be reused and must not be signalled any more.
    static func ended(_ group: pid_t) {
        if jt_crash_guard_remove_group(group) == 0 {
            overflow.withLock { _ = $0.remove(group) }
        }
    }

    /// Sends SIGKILL to every job process group now.
    static func killAll() {
        wereAllKilled.withLock { $0 = true }
        jt_crash_guard_kill_groups(SIGKILL)
        for group in overflow.withLock({ $0 }) { kill(-group, SIGKILL) }
    }

    /// Whether ``killAll()`` was called: from then on a job that dies did not end by itself,
    /// so a stop that reaches it late (the kill was faster than the stop's SIGTERM) still took
    /// effect, and the job counts as cancelled, not failed.
    static let wereAllKilled = Locked(false)

    /// How many job process groups are recorded now.
    static var count: Int {
        Int(jt_crash_guard_group_count()) + overflow.withLock { $0.count }
    }
}

extension Scheduler {
    /// Kills the process group of every job process running in this process at once (SIGKILL,
    /// no grace period): for a user who asked twice to stop. Synchronous and safe to call from a
    /// signal source's handler; the jobs then end through the usual path.
    public nonisolated static func killAllJobProcessesNow() {
        JobProcessGroups.killAll()
    }

    /// Installs a last-resort handler for the fatal signals (SIGSEGV, SIGBUS, SIGILL, SIGTRAP,
    /// SIGABRT, SIGFPE; a Swift runtime trap is SIGILL or SIGTRAP): if the process crashes, every
    /// job process group it started is killed (SIGKILL), a terminal the dashboard had is given
    /// back, one line goes to standard error, and the signal then ends the process as it would
    /// have (Swift's crash reporter or the default action), so the exit status and a core dump
    /// stay honest.
    ///
    /// Call it once at process start, before any job runs. The handler runs on an alternate
    /// signal stack of the calling thread, so a stack overflow on that thread is handled too.
    ///
    /// - Returns: Whether the handler is installed.
    @discardableResult
    public nonisolated static func installCrashGuard() -> Bool {
        JobProcessGuards.installCrashGuard()
    }

    /// Starts a guard process that outlives this one by a moment: when this process is gone,
    /// however it went (`kill -9` included, which runs no code here), the guard kills (SIGKILL)
    /// the process group of every job process it had started and not yet reaped, then exits.
    ///
    /// The guard is a forked child named `jobtop-guard`, waiting for the end of a pipe this
    /// process alone holds open; it shares the table of recorded groups (shared memory), so
    /// recording and forgetting a group costs it nothing and never wakes it. Groups that ended
    /// before (and those a `keep_background` job leaves on purpose) are not touched.
    /// It ignores SIGINT, SIGTERM and SIGHUP: only the end of this process ends it. Call it once,
    /// early, before any job runs.
    ///
    /// - Returns: Whether the guard runs (it also returns `true` when it already did).
    @discardableResult
    public nonisolated static func startLifelineGuard() -> Bool {
        JobProcessGuards.startLifelineGuard()
    }
}

/// ``Scheduler/installCrashGuard()`` and ``Scheduler/startLifelineGuard()`` without the
/// `Scheduler` type: a static method of the actor takes its metatype, and making the actor's
/// metadata at first use (its stored properties' generic types, each checked against the
/// binary's every protocol conformance) before anything else ran, in every `jobtop` command,
/// even those that never make a scheduler (`--version`, `submit`).
public enum JobProcessGuards {
    /// See ``Scheduler/installCrashGuard()``.
    @discardableResult
    public static func installCrashGuard() -> Bool {
        jt_crash_guard_install() == 0
    }

    /// See ``Scheduler/startLifelineGuard()``.
    @discardableResult
    public static func startLifelineGuard() -> Bool {
        jt_lifeline_start() >= 0
    }

    /// Arms the lifeline guard's watchdog (`nil` disarms it): once ``tick()`` has not been called
    /// for `timeout`, the guard sends SIGTERM to every job process group, and SIGKILL `grace`
    /// later unless a tick came meanwhile. For a process that may be stopped (SIGSTOP, Ctrl-Z)
    /// while its jobs, in process groups of their own, run on: a worker whose coordinator
    /// requeues its jobs elsewhere once it falls silent. Does nothing without a guard.
    public static func watch(timeout: Duration?, grace: Duration) {
        func nanoseconds(_ duration: Duration) -> Int64 {
            let (seconds, attoseconds) = duration.components
            return seconds.multipliedReportingOverflow(by: 1_000_000_000).partialValue &+ attoseconds / 1_000_000_000
        }
        _ = jt_lifeline_watch(timeout.map(nanoseconds) ?? 0, nanoseconds(grace))
    }

    /// Tells the guard's watchdog this process is alive (see ``watch(timeout:grace:)``). Never
    /// blocks.
    public static func tick() {
        _ = jt_lifeline_tick()
    }

    /// How many times the guard's watchdog has fired (sent SIGTERM to every job process group)
    /// since this process started: a job that ended after this count moved may have been ended
    /// by the watchdog, not by itself. Counted before the signals are sent.
    public static var watchdogFirings: UInt64 {
        jt_lifeline_fired()
    }
}
