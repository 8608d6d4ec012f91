import CProcess
import DequeModule
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The few I/O threads that run every local process job of this process.
///
/// A local slot is a count, not a thread: whatever the number of slots, a small fixed set of
/// threads (``defaultThreadCount``) spawns each job's process, reads its output, delivers stop
/// requests (SIGTERM to the group, SIGKILL after the grace period), stops what the job leaves
/// behind in its process group and reaps it. Each thread waits in `epoll` on the pipes and
/// pidfds of its processes and on an eventfd that wakes it for new work; timers (grace periods,
/// rechecks) are the `epoll_wait` timeout. None of this blocks Swift's cooperative pool: an
/// attempt awaits a continuation that its I/O thread resumes.
final class ProcessReactor: Sendable {
    /// What the reactor is doing right now (for tests and diagnostics).
    struct Statistics: Sendable, Equatable {
        /// Processes spawned and not yet ended (their group emptied and reaped).
        var running = 0
        /// Attempts whose process could not be spawned for lack of a resource (file descriptors,
        /// processes) and that wait to try again.
        var waitingForResources = 0
        /// Processes whose output is not read for now: a lossless subscriber is behind.
        var readingPaused = 0
    }

    /// The reactor every local worker of this process uses.
    static let shared = ProcessReactor(threads: defaultThreadCount)

    /// Two threads, four on machines with 8 cores or more: spawning is the one slow step
    /// (`posix_spawn` blocks its thread until the child has exec'd), so a second thread keeps
    /// output flowing while the first spawns.
    static var defaultThreadCount: Int {
        min(4, max(2, ProcessInfo.processInfo.activeProcessorCount / 2))
    }

    private let loops: [ProcessLoop]
    private let watch: StatisticsWatch

    /// Starts `threads` I/O threads.
    init(threads: Int) {
        let watch = StatisticsWatch()
        self.watch = watch
        loops = (0..<max(1, threads)).map { ProcessLoop(name: "jobtop.io-\($0 + 1)", watch: watch) }
    }

    /// Runs one attempt's process to its end and says how it ended: spawns it, reports its
    /// output and progress, carries out stop requests, stops what it leaves in its process group
    /// (unless the spec keeps it), and reaps it.
    ///
    /// - Parameter grace: Between SIGTERM and SIGKILL for processes left in the group.
    func run(_ assignment: JobAssignment, grace: Duration) async -> Termination {
        var chosen = loops[0]
        var least = Int.max
        for loop in loops {
            let load = loop.load
            if load < least {
                least = load
                chosen = loop
            }
        }
        return await chosen.run(assignment, grace: grace)
    }

    /// The current statistics.
    var statistics: Statistics { watch.current }

    /// Waits until `predicate` holds for the statistics (a gate for tests).
    func waitUntil(_ predicate: @escaping @Sendable (Statistics) -> Bool) async {
        await watch.waitUntil(predicate)
    }
}

/// The reactor's statistics and whoever waits for them to change.
final class StatisticsWatch: Sendable {
    private struct State {
        var statistics = ProcessReactor.Statistics()
        var waiters: [(predicate: @Sendable (ProcessReactor.Statistics) -> Bool, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state = Locked(State())

    var current: ProcessReactor.Statistics { state.withLock { $0.statistics } }

    func update(_ change: (inout ProcessReactor.Statistics) -> Void) {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            change(&state.statistics)
            guard !state.waiters.isEmpty else { return [] }
            let statistics = state.statistics
            var ready: [CheckedContinuation<Void, Never>] = []
            state.waiters.removeAll { waiter in
                guard waiter.predicate(statistics) else { return false }
                ready.append(waiter.continuation)
                return true
            }
            return ready
        }
        for continuation in ready { continuation.resume() }
    }

    func waitUntil(_ predicate: @escaping @Sendable (ProcessReactor.Statistics) -> Bool) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                if predicate(state.statistics) { return true }
                state.waiters.append((predicate, continuation))
                return false
            }
            if now { continuation.resume() }
        }
    }
}

/// An attempt handed to an I/O thread, with the continuation that its end resumes.
struct ProcessStart: Sendable {
    let id: UInt64
    let assignment: JobAssignment
    let grace: Duration
    let continuation: CheckedContinuation<Termination, Never>
}

/// One I/O thread: its epoll set, the eventfd that wakes it and its mailbox.
final class ProcessLoop: Sendable {
    fileprivate enum Message: Sendable {
        case start(ProcessStart)
        case stop(UInt64)
        /// Send a signal to a running process's group.
        case signal(UInt64, Int32)
        /// Read a paused process's output again.
        case resumeReading(UInt64)
    }

    private struct Mailbox {
        var messages: [Message] = []
        var isWakePending = false
        var lastID: UInt64 = 0
        var load = 0
    }

    fileprivate static let wakeToken = UInt64.max
    fileprivate let epoll: Int32
    fileprivate let wake: Int32
    fileprivate let watch: StatisticsWatch
    fileprivate let name: String
    private let mailbox = Locked(Mailbox())

    init(name: String, watch: StatisticsWatch) {
        self.watch = watch
        self.name = name
        epoll = jt_epoll_create()
        wake = jt_eventfd()
        // Made when the first scheduler with local slots is, at start-up: running out of file
        // descriptors this early leaves nothing to run jobs with anyway.
        guard epoll >= 0, wake >= 0, jt_epoll_add(epoll, wake, Self.wakeToken) == 0 else {
            fatalError("jobtop: cannot set up an I/O thread: \(String(cString: strerror(errno)))")
        }
        // Taken here, not on the new thread: by the time this returns, the reserve is in hand
        // and the spawner's descriptors are open.
        let reserve = DescriptorReserve(duplicating: wake)
        let spawner = Spawner()
        let thread = Thread { [self] in ProcessLoopThread(loop: self, reserve: reserve, spawner: spawner).run() }
        thread.stackSize = 1 << 20
        thread.start()
    }

    /// Attempts handed to this thread and not yet ended.
    var load: Int { mailbox.withLock { $0.load } }

    func run(_ assignment: JobAssignment, grace: Duration) async -> Termination {
        await withCheckedContinuation { continuation in
            let id = mailbox.withLock { mailbox -> UInt64 in
                mailbox.lastID += 1
                mailbox.load += 1
                return mailbox.lastID
            }
            // Before the start: a stop that comes first is ignored by the I/O thread, which sees
            // the request when it takes the start.
            assignment.control.onStop { [self] _ in post(.stop(id)) }
            assignment.control.onSignal { [self] signal in post(.signal(id, signal)) }
            post(.start(ProcessStart(id: id, assignment: assignment, grace: grace, continuation: continuation)))
        }
    }

    private func post(_ message: Message) {
        let needsWake = mailbox.withLock { mailbox -> Bool in
            mailbox.messages.append(message)
            defer { mailbox.isWakePending = true }
            return !mailbox.isWakePending
        }
        if needsWake { jt_eventfd_signal(wake) }
    }

    fileprivate func resumeReading(_ id: UInt64) {
        post(.resumeReading(id))
    }

    /// Whether messages wait (a start, a stop, a signal): the loop looks between the events of a
    /// turn, so that a stop does not wait behind other jobs' output.
    fileprivate var hasMessages: Bool { mailbox.withLock { $0.isWakePending } }

    fileprivate func takeMessages() -> [Message] {
        jt_eventfd_drain(wake)
        return mailbox.withLock { mailbox in
            mailbox.isWakePending = false
            defer { mailbox.messages = [] }
            return mailbox.messages
        }
    }

    fileprivate func attemptEnded() {
        mailbox.withLock { $0.load -= 1 }
    }
}

/// An I/O thread's `jt_spawner`, made by the thread that starts it.
///
/// `@unchecked Sendable`: it is made before the I/O thread starts, handed to it through the
/// thread's closure (starting a thread orders everything before it), and from then on used by
/// that thread alone; the thread that made it never touches it again.
final class Spawner: @unchecked Sendable {
    let pointer: OpaquePointer?

    init() { pointer = jt_spawner_create() }
}

/// What one I/O thread owns: its processes, timers and waits. Touched by that thread only.
private final class ProcessLoopThread {
    private let loop: ProcessLoop
    private var processes: [UInt64: RunningProcess] = [:]
    /// Processes with a timer (a SIGKILL due, a recheck of their group, a poll without pidfd).
    private var timed: Set<UInt64> = []
    /// Processes whose output stops in the middle of a line, and when that partial line is
    /// handed on if nothing more is read meanwhile (``partialLineWait``).
    private var partials: [UInt64: ContinuousClock.Instant] = [:]
    /// Attempts waiting for a resource to spawn, in arrival order.
    private var waiting: [UInt64: WaitingStart] = [:]
    private var waitingOrder: [UInt64] = []
    /// A process ended: resources were freed, so try the waiting attempts again now.
    private var retryWaitingNow = false
    /// Processes whose group needs a count of its live members (one /proc pass for all).
    private var needsCount: [UInt64] = []
    /// Attempts taken from the mailbox and not spawned yet: a few are spawned per turn of the
    /// loop, so that a burst of thousands does not keep it from reading output and reaping.
    private var pendingStarts = Deque<ProcessStart>()
    /// Spawns per turn of the loop.
    static let spawnsPerTurn = 32
    private var buffer = [UInt8](repeating: 0, count: 1 << 16)
    /// Descriptors kept for the rest of the process (``DescriptorReserve``).
    private var reserve: DescriptorReserve
    /// What this thread spawns jobs with (`jt_spawner`; `nil` if it could not be made: then each
    /// spawn sets itself up).
    private let spawner: OpaquePointer?

    /// How long an attempt waits for a resource before it fails.
    static let resourceWaitLimit: Duration = .seconds(60)
    /// How long the rest of a group may take to go after SIGKILL before jobtop gives up on it
    /// (a process in uninterruptible sleep).
    static let killWaitLimit: Duration = .seconds(5)
    /// How long a job may stay silent in the middle of a line before the part written so far is
    /// handed on (`printf 'Downloading... '; sleep 60`: watched live, the text shows now, not
    /// when the line ends). Output that keeps coming is still cut only at line ends.
    static let partialLineWait: Duration = .milliseconds(500)
    /// Without a pidfd (old kernels, or none left), how often the main process is polled.
    static let pollInterval: Duration = .milliseconds(20)
    /// The most bytes read from each pipe once the group is gone (an escaped process may keep
    /// writing to it for ever).
    static let finalReadLimit = 1 << 20

    init(loop: ProcessLoop, reserve: DescriptorReserve, spawner: Spawner) {
        self.loop = loop
        self.reserve = reserve
        self.spawner = spawner.pointer
    }

    func run() -> Never {
        // Named, so that `top -H` and /proc show which threads these are.
        jt_set_thread_name(loop.name)
        // A stack overflow here (or any crash) still reaches the crash guard's handler, which
        // needs an alternate signal stack on the crashing thread.
        _ = jt_crash_guard_prepare_thread()
        // This thread is the parent of the processes it spawns, and it inherited libdispatch's
        // mask, which blocks SIGCHLD: the kernel never discards a signal its target blocks, so
        // each job's end queued a SIGCHLD that woke the main thread (parked in sigsuspend) only
        // to ignore it, a thread wake-up per job. Unblocked here, an ignored SIGCHLD is dropped
        // when it is sent. (Jobs are reaped through pidfds and waitid, never by the signal.)
        var childSignal = sigset_t()
        sigemptyset(&childSignal)
        sigaddset(&childSignal, SIGCHLD)
        pthread_sigmask(SIG_UNBLOCK, &childSignal, nil)
        var ready = [UInt64](repeating: 0, count: 256)
        while true {
            let timeout = millisecondsToNextTimer()
            let count = ready.withUnsafeMutableBufferPointer {
                jt_epoll_wait(loop.epoll, $0.baseAddress, Int32($0.count), timeout)
            }
            if count < 0 {
                if errno == EINTR { continue }
                fatalError("jobtop: epoll_wait failed: \(String(cString: strerror(errno)))")
            }
            for index in 0..<Int(count) {
                handle(ready[index])
                // A stop (a cancel, a timeout) or a signal is not kept waiting behind the reads
                // of the turn: with 19 jobs flooding output, a turn's reads took seconds, and a
                // cancel's SIGTERM reached its job 2.6–3.9 s after it was asked for.
                if loop.hasMessages { handle(ProcessLoop.wakeToken) }
            }
            let now = ContinuousClock.now
            fireTimers(now)
            flushPartialLines(now)
            countGroupMembers(now)
            retryWaiting(now)
            for _ in 0..<Self.spawnsPerTurn {
                guard let next = pendingStarts.popFirst() else { break }
                start(next, after: nil)
            }
        }
    }

    // MARK: - Events

    private func handle(_ token: UInt64) {
        if token == ProcessLoop.wakeToken {
            for message in loop.takeMessages() {
                switch message {
                case .start(let start): pendingStarts.append(start)
                case .stop(let id): stop(id)
                case .signal(let id, let signal): send(signal, to: id)
                case .resumeReading(let id): resumeReading(id)
                }
            }
            return
        }
        if token & 3 == 3 {
            // A pipe a kept background process still writes to, after its job ended.
            discard(from: Int32(truncatingIfNeeded: token >> 2))
            return
        }
        guard let process = processes[token >> 2] else { return }
        switch token & 3 {
        case 0, 1:
            guard process.start.assignment.reporter.isFlowing else { return pauseReading(process) }
            readOnce(process, token & 3 == 0 ? .stdout : .stderr)
        default: leaderExited(process)
        }
    }

    // MARK: - Flow

    /// A lossless subscriber is behind: stop reading this process's output (it blocks on its
    /// full pipe) until the events flow again. Its exit and timers are still watched; when its
    /// group is gone, what its pipes hold is read as always.
    private func pauseReading(_ process: RunningProcess) {
        guard !process.isReadingPaused else { return }
        process.isReadingPaused = true
        if process.out >= 0 { _ = jt_epoll_remove(loop.epoll, process.out) }
        if process.err >= 0 { _ = jt_epoll_remove(loop.epoll, process.err) }
        loop.watch.update { $0.readingPaused += 1 }
        let id = process.id
        let loop = loop
        process.start.assignment.reporter.whenFlowing { loop.resumeReading(id) }
    }

    private func resumeReading(_ id: UInt64) {
        guard let process = processes[id], process.isReadingPaused else { return }
        process.isReadingPaused = false
        loop.watch.update { $0.readingPaused -= 1 }
        if process.out >= 0 { _ = jt_epoll_add(loop.epoll, process.out, id << 2) }
        if process.err >= 0 { _ = jt_epoll_add(loop.epoll, process.err, id << 2 | 1) }
    }

    /// Spawns the attempt's process, or ends the attempt when it cannot run. Returns false when
    /// a resource (file descriptors, processes) is lacking: the attempt then waits in `waiting`.
    @discardableResult
    private func start(_ start: ProcessStart, after previous: WaitingStart?) -> Bool {
        if start.assignment.control.stopRequest != nil {
            complete(start, .signal(SIGTERM))
            return true
        }
        let command: ProcessCommand
        switch ProcessCommand.make(for: start.assignment) {
        case .success(let made): command = made
        case .failure(let failure):
            fail(start, failure)
            return true
        }
        // Only while the reserve for the rest of the process is in hand (taken back first if
        // a lack gave it away): without it, this spawn waits as for any lack of descriptors.
        let spawn = reserve.take() ? command.spawn(using: spawner) : .lacking(EMFILE)
        switch spawn {
        case .spawned(let pid, let out, let err):
            spawned(start, pid: pid, out: out, err: err)
            // The next job's pipes, made now while this one starts rather than after it ends
            // (before the check below: they may take the last free descriptors).
            if let spawner, reserve.isHeld { _ = jt_spawner_prepare(spawner) }
            reserve.checkAfterSpawn()
            return true
        case .failed(let failure):
            fail(start, failure)
            return true
        case .lacking(let code):
            // Out of descriptors (or close to it): the reserve goes to the rest of the process.
            if code == EMFILE || code == ENFILE { reserve.release() }
            let now = ContinuousClock.now
            let since = previous?.since ?? now
            if now - since >= Self.resourceWaitLimit {
                let limits = ProcessLimits.current()
                complete(start, .error(
                    "jobtop could not start it: \(String(cString: strerror(code))) for \(formatDuration(Self.resourceWaitLimit)) (\(limits.summary))"))
                return true
            }
            let attempts = (previous?.attempts ?? 0) + 1
            let backoff = Duration.milliseconds(min(1_000, 5 << min(attempts, 8)))
            if previous == nil {
                waitingOrder.append(start.id)
                loop.watch.update { $0.waitingForResources += 1 }
            }
            waiting[start.id] = WaitingStart(start: start, since: since, attempts: attempts, nextTry: now + backoff)
            return false
        }
    }

    private func fail(_ start: ProcessStart, _ failure: ProcessCommand.Failure) {
        if let line = failure.line { start.assignment.reporter.line(line, stream: .stderr) }
        complete(start, failure.termination)
    }

    private func spawned(_ start: ProcessStart, pid: pid_t, out: Int32, err: Int32) {
        // Its group was recorded for the crash guard by the spawn itself.
        let pidfd = jt_pidfd_open(pid)
        let process = RunningProcess(start: start, pid: pid, pidfd: pidfd, out: out, err: err)
        processes[start.id] = process
        loop.watch.update { $0.running += 1 }
        _ = jt_epoll_add(loop.epoll, out, start.id << 2)
        _ = jt_epoll_add(loop.epoll, err, start.id << 2 | 1)
        if pidfd >= 0 {
            _ = jt_epoll_add(loop.epoll, pidfd, start.id << 2 | 2)
        } else {
            schedule(process, at: .now + Self.pollInterval)
        }
    }

    private func stop(_ id: UInt64) {
        if let waiter = waiting.removeValue(forKey: id) {
            waitingOrder.removeAll { $0 == id }
            loop.watch.update { $0.waitingForResources -= 1 }
            complete(waiter.start, .signal(SIGTERM))
            return
        }
        guard let process = processes[id], case .running(let scheduledKill) = process.phase,
              let request = process.start.assignment.control.stopRequest else { return }
        if scheduledKill != nil {
            // Stopping already: a request with no grace (kill now) does not wait for the rest.
            if request.grace == .zero, !Self.hasExited(process.pid) { kill(-process.pid, SIGKILL) }
            return
        }
        if Self.hasExited(process.pid) {
            // It ended by itself before the stop reached it: it keeps its own outcome (a job
            // that ran to its end is never reported cancelled); leaderExited cleans up.
            process.start.assignment.control.stopCameTooLate()
            return
        }
        kill(-process.pid, SIGTERM)
        // A stopped job (`jobtop signal STOP`, the `x` menu) gets its SIGTERM only when it runs
        // again: without this it waited out the grace and was killed, its `trap` never run.
        kill(-process.pid, SIGCONT)
        let killAt = ContinuousClock.now + request.grace
        process.phase = .running(killAt: killAt)
        schedule(process, at: killAt)
    }

    /// Sends `signal` to a running job's process group (`x` in the dashboard, `jobtop signal`).
    /// Here, on the thread that reaps it: the leader is not reaped yet, so its group id cannot
    /// have been reused.
    private func send(_ signal: Int32, to id: UInt64) {
        guard let process = processes[id], case .running = process.phase, !Self.hasExited(process.pid) else { return }
        kill(-process.pid, signal)
    }

    /// The job's main process has exited (it is a zombie until reaped below). Whatever else is
    /// in its group is either part of a stop (it got the stop's SIGTERM and keeps what is left
    /// of the grace period, then SIGKILL) or left behind (counted, then stopped unless the job
    /// keeps it).
    private func leaderExited(_ process: RunningProcess) {
        guard case .running(let killAt) = process.phase else { return }
        // From here on a stop reaches nothing: the attempt ended on its own.
        process.start.assignment.control.workEnded()
        if process.pidfd >= 0 {
            _ = jt_epoll_remove(loop.epoll, process.pidfd)
            close(process.pidfd)
            process.pidfd = -1
        }
        let group = process.pid
        let isStopped = process.start.assignment.control.stopRequest != nil
        if isStopped {
            // Once the grace period is over (SIGKILL was sent, or the stop came too late to
            // send SIGTERM), what is left goes now. The unreaped leader keeps the group id from
            // being reused: this reaches only what is left of this job. Else the rest of the
            // group, which got SIGTERM with the stop, may still be cleaning up: it keeps the
            // rest of its grace (the group stays registered, and its id reserved while a member
            // lives).
            if killAt == nil { kill(-group, SIGKILL) }
        } else {
            // Once the leader is reaped its pid may be reused; the group id stays reserved only
            // while members are left, which is checked right after.
            JobProcessGroups.ended(group)
        }
        while waitpid(process.pid, &process.status, 0) < 0 && errno == EINTR {}
        if Self.groupIsGone(group) {
            if isStopped { JobProcessGroups.ended(group) }
            finish(process, leftovers: nil)
            return
        }
        if isStopped {
            process.phase = .emptying(Emptying(leftovers: nil, killAt: killAt, killSentAt: killAt == nil ? .now : nil))
            schedule(process, at: .now + .milliseconds(1))
        } else {
            JobProcessGroups.started(group)
            process.phase = .counting
            unschedule(process)
            needsCount.append(process.id)
        }
    }

    // MARK: - Timers

    private func schedule(_ process: RunningProcess, at deadline: ContinuousClock.Instant) {
        process.deadline = deadline
        timed.insert(process.id)
    }

    private func unschedule(_ process: RunningProcess) {
        process.deadline = nil
        timed.remove(process.id)
    }

    private func millisecondsToNextTimer() -> Int32 {
        if retryWaitingNow || !needsCount.isEmpty || !pendingStarts.isEmpty { return 0 }
        var next: ContinuousClock.Instant?
        for id in timed {
            if let deadline = processes[id]?.deadline, next.map({ deadline < $0 }) ?? true { next = deadline }
        }
        for waiter in waiting.values where next.map({ waiter.nextTry < $0 }) ?? true { next = waiter.nextTry }
        for due in partials.values where next.map({ due < $0 }) ?? true { next = due }
        guard let next else { return -1 }
        let remaining = next - .now
        if remaining <= .zero { return 0 }
        return Int32(min(60_000, (remaining.seconds * 1_000).rounded(.up)))
    }

    /// Hands on the partial lines of the jobs that have been silent for ``partialLineWait``.
    private func flushPartialLines(_ now: ContinuousClock.Instant) {
        guard !partials.isEmpty else { return }
        for (id, due) in partials where due <= now {
            partials[id] = nil
            // Not read for now (a lossless subscriber is behind): the job is not silent, jobtop
            // is not listening. Its next read arms the wait again.
            guard let process = processes[id], !process.isReadingPaused else { continue }
            process.outLines.flushPartial(process.report)
            process.errLines.flushPartial(process.report)
        }
    }

    private func fireTimers(_ now: ContinuousClock.Instant) {
        guard !timed.isEmpty else { return }
        let due = timed.filter { processes[$0]?.deadline.map { $0 <= now } ?? true }
        for id in due {
            guard let process = processes[id] else {
                timed.remove(id)
                continue
            }
            unschedule(process)
            tick(process, now)
        }
    }

    private func tick(_ process: RunningProcess, _ now: ContinuousClock.Instant) {
        switch process.phase {
        case .running(let killAt):
            if process.pidfd < 0 && Self.hasExited(process.pid) {
                leaderExited(process)
                return
            }
            var next: ContinuousClock.Instant?
            if let killAt {
                if now >= killAt {
                    kill(-process.pid, SIGKILL)
                    process.phase = .running(killAt: nil)
                } else {
                    next = killAt
                }
            }
            if process.pidfd < 0 { next = min(next ?? .now + Self.pollInterval, .now + Self.pollInterval) }
            if let next { schedule(process, at: next) }
        case .counting:
            break
        case .emptying(var emptying):
            if Self.groupIsGone(process.pid) {
                groupEmptied(process, emptying)
                return
            }
            if let killAt = emptying.killAt, now >= killAt {
                kill(-process.pid, SIGKILL)
                emptying.killAt = nil
                emptying.killSentAt = now
            }
            if let sentAt = emptying.killSentAt, now - sentAt >= Self.killWaitLimit {
                groupEmptied(process, emptying)
                return
            }
            process.phase = .emptying(emptying)
            // Members that died stay zombies until their parent (init, once orphaned) reaps them,
            // and some init processes never do: count the live ones.
            needsCount.append(process.id)
        }
    }

    // MARK: - Leftovers

    /// Counts, in one pass over /proc, the live members of every group that needs it, and acts.
    private func countGroupMembers(_ now: ContinuousClock.Instant) {
        guard !needsCount.isEmpty else { return }
        var seen = Set<UInt64>()
        let asked = needsCount.compactMap { seen.insert($0).inserted ? processes[$0] : nil }
        needsCount = []
        let groups = Array(Set(asked.map(\.pid))).sorted()
        var counts = [Int32](repeating: 0, count: groups.count)
        if jt_count_group_members(groups, Int32(groups.count), &counts) != 0 {
            // No /proc: count one, so the group is stopped and rechecked with kill(2).
            counts = [Int32](repeating: 1, count: groups.count)
        }
        let live = Dictionary(uniqueKeysWithValues: zip(groups, counts.map(Int.init)))
        for process in asked {
            let live = live[process.pid] ?? 0
            switch process.phase {
            case .counting:
                let spec = process.start.assignment.spec
                if live == 0 {
                    JobProcessGroups.ended(process.pid)
                    finish(process, leftovers: nil)
                } else if spec.keepBackground {
                    JobProcessGroups.ended(process.pid)
                    finish(process, leftovers: (live, false))
                } else {
                    kill(-process.pid, SIGTERM)
                    kill(-process.pid, SIGCONT)  // (a stopped leftover gets it, as above)
                    let killAt = now + process.start.grace
                    process.phase = .emptying(Emptying(leftovers: live, killAt: killAt, killSentAt: nil))
                    schedule(process, at: min(killAt, now + .milliseconds(1)))
                }
            case .emptying(var emptying):
                if live == 0 {
                    groupEmptied(process, emptying)
                    continue
                }
                emptying.recheck = min(emptying.recheck * 2, .milliseconds(100))
                process.phase = .emptying(emptying)
                schedule(process, at: min(emptying.killAt ?? .now + emptying.recheck, .now + emptying.recheck))
            case .running:
                break
            }
        }
    }

    private func groupEmptied(_ process: RunningProcess, _ emptying: Emptying) {
        JobProcessGroups.ended(process.pid)
        finish(process, leftovers: emptying.leftovers.map { ($0, true) })
    }

    // MARK: - Output

    private func readOnce(_ process: RunningProcess, _ stream: OutputLine.Stream) {
        let fd = stream == .stdout ? process.out : process.err
        guard fd >= 0 else { return }
        let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        if count > 0 {
            feed(process, stream, count)
        } else if count == 0 || (errno != EAGAIN && errno != EINTR) {
            closePipe(process, stream)
        }
    }

    /// Reads what the pipe holds now (at most `limit` bytes), then closes it (unless not
    /// `closing`, or at its end).
    private func drain(_ process: RunningProcess, _ stream: OutputLine.Stream, limit: Int, closing: Bool = true) {
        let fd = stream == .stdout ? process.out : process.err
        guard fd >= 0 else { return }
        var total = 0
        var isAtEnd = false
        while total < limit {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, min($0.count, limit - total)) }
            if count > 0 {
                total += count
                feed(process, stream, count)
            } else if count < 0 && errno == EINTR {
                continue
            } else {
                isAtEnd = count == 0 || errno != EAGAIN
                break
            }
        }
        if closing || isAtEnd { closePipe(process, stream) }
    }

    private func feed(_ process: RunningProcess, _ stream: OutputLine.Stream, _ count: Int) {
        buffer.withUnsafeBufferPointer { bytes in
            let chunk = UnsafeBufferPointer(rebasing: bytes[0..<count])
            if stream == .stdout {
                process.outLines.feed(chunk, process.collect)
            } else {
                process.errLines.feed(chunk, process.collect)
            }
        }
        process.reportCollected()
        if process.outLines.hasPartialLine || process.errLines.hasPartialLine {
            partials[process.id] = .now + Self.partialLineWait
        } else if !partials.isEmpty {
            partials[process.id] = nil
        }
    }

    /// Keeps reading (and dropping) a pipe of a job that ended with processes it keeps on purpose
    /// (`keep_background`) still writing to it, until they close it: closed now, a daemon died
    /// of SIGPIPE at its first write after its job's end.
    private func keepDraining(_ process: RunningProcess, _ stream: OutputLine.Stream) {
        let fd = stream == .stdout ? process.out : process.err
        guard fd >= 0 else { return }
        _ = jt_epoll_remove(loop.epoll, fd)
        if stream == .stdout { process.out = -1 } else { process.err = -1 }
        // Its token: the descriptor, and 3 (a job's are its id and 0–2).
        if jt_epoll_add(loop.epoll, fd, UInt64(fd) << 2 | 3) != 0 { close(fd) }
    }

    /// Reads what a kept pipe holds and drops it; closes the pipe at its end.
    private func discard(from fd: Int32) {
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count > 0 { continue }
            if count < 0 && errno == EINTR { continue }
            if count < 0 && errno == EAGAIN { return }
            _ = jt_epoll_remove(loop.epoll, fd)
            close(fd)
            return
        }
    }

    private func closePipe(_ process: RunningProcess, _ stream: OutputLine.Stream) {
        let fd = stream == .stdout ? process.out : process.err
        guard fd >= 0 else { return }
        _ = jt_epoll_remove(loop.epoll, fd)
        close(fd)
        if stream == .stdout { process.out = -1 } else { process.err = -1 }
    }

    // MARK: - Ends

    /// The group is empty (or given up on): the last output, the leftover report, the end.
    private func finish(_ process: RunningProcess, leftovers: (count: Int, stopped: Bool)?) {
        let keepsWriters = leftovers.map { $0.count > 0 && !$0.stopped } ?? false
        drain(process, .stdout, limit: Self.finalReadLimit, closing: !keepsWriters)
        drain(process, .stderr, limit: Self.finalReadLimit, closing: !keepsWriters)
        if keepsWriters {
            keepDraining(process, .stdout)
            keepDraining(process, .stderr)
        }
        process.outLines.flush(process.report)
        process.errLines.flush(process.report)
        if process.pidfd >= 0 {
            _ = jt_epoll_remove(loop.epoll, process.pidfd)
            close(process.pidfd)
            process.pidfd = -1
        }
        unschedule(process)
        partials[process.id] = nil
        processes[process.id] = nil
        loop.watch.update {
            $0.running -= 1
            if process.isReadingPaused { $0.readingPaused -= 1 }
        }
        let assignment = process.start.assignment
        if let leftovers { assignment.reporter.leftoverProcesses(count: leftovers.count, stopped: leftovers.stopped) }
        retryWaitingNow = !waiting.isEmpty
        complete(process.start, Self.termination(process.status))
    }

    private func complete(_ start: ProcessStart, _ termination: Termination) {
        start.assignment.control.onStop(nil)
        start.assignment.control.onSignal(nil)
        loop.attemptEnded()
        start.continuation.resume(returning: termination)
    }

    // MARK: - Waiting for resources

    private func retryWaiting(_ now: ContinuousClock.Instant) {
        guard !waitingOrder.isEmpty else { return }
        let retryAll = retryWaitingNow
        retryWaitingNow = false
        var index = 0
        while index < waitingOrder.count {
            let id = waitingOrder[index]
            guard let waiter = waiting[id], retryAll || waiter.nextTry <= now else {
                index += 1
                continue
            }
            // Still lacking: those behind it would lack it too, and keep their turn.
            guard start(waiter.start, after: waiter) else { return }
            waiting[id] = nil
            waitingOrder.remove(at: index)
            loop.watch.update { $0.waitingForResources -= 1 }
        }
    }

    // MARK: - Helpers

    /// Whether no process is left in `group` (kill(2) with signal 0 reaches none: ESRCH).
    private static func groupIsGone(_ group: pid_t) -> Bool {
        kill(-group, 0) != 0 && errno == ESRCH
    }

    private static func hasExited(_ pid: pid_t) -> Bool {
        var info = siginfo_t()
        info._sifields._sigchld.si_pid = 0
        let rc = waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT)
        return rc == 0 && info._sifields._sigchld.si_pid == pid
    }

    private static func termination(_ status: Int32) -> Termination {
        if jt_wifexited(status) != 0 { return .exit(jt_wexitstatus(status)) }
        if jt_wifsignaled(status) != 0 { return .signal(jt_wtermsig(status)) }
        return .error("unknown wait status \(status)")
    }
}

/// An attempt waiting for a resource to spawn.
private struct WaitingStart {
    let start: ProcessStart
    let since: ContinuousClock.Instant
    let attempts: Int
    let nextTry: ContinuousClock.Instant
}

/// What is left of a group whose main process was reaped, being stopped.
struct Emptying {
    /// How many live processes the job left behind; `nil` when the whole job is being stopped
    /// (a cancel or timeout), which is not a leftover.
    var leftovers: Int?
    /// When SIGKILL is due; `nil` once sent.
    var killAt: ContinuousClock.Instant?
    /// When SIGKILL was sent.
    var killSentAt: ContinuousClock.Instant?
    /// The time between two checks of the group, doubling up to 100 ms.
    var recheck: Duration = .milliseconds(1)
}

/// One spawned process, owned by its I/O thread.
final class RunningProcess {
    enum Phase {
        /// The main process runs; `killAt` is when SIGKILL is due after a stop's SIGTERM.
        case running(killAt: ContinuousClock.Instant?)
        /// The main process was reaped and members of its group are left: they are being counted.
        case counting
        /// The main process was reaped; what is left of its group is being stopped.
        case emptying(Emptying)
    }

    let start: ProcessStart
    let pid: pid_t
    var pidfd: Int32
    var out: Int32
    var err: Int32
    var outLines = LineSplitter(stream: .stdout)
    var errLines = LineSplitter(stream: .stderr)
    var phase = Phase.running(killAt: nil)
    var status: Int32 = 0
    var deadline: ContinuousClock.Instant?
    /// Its output is not read for now (see `pauseReading`).
    var isReadingPaused = false
    private let parser: ProgressParser

    var id: UInt64 { start.id }

    init(start: ProcessStart, pid: pid_t, pidfd: Int32, out: Int32, err: Int32) {
        self.start = start
        self.pid = pid
        self.pidfd = pidfd
        self.out = out
        self.err = err
        parser = ProgressParser(pattern: start.assignment.spec.progressPattern)
    }

    func report(_ line: OutputLine) {
        collect(line)
        reportCollected()
    }

    /// The lines of one read and the progress they said, reported together by
    /// ``reportCollected()``.
    private var collected: [OutputLine] = []
    private var collectedProgress: [(afterLine: Int, fraction: Double)] = []

    func collect(_ line: OutputLine) {
        collected.append(line)
        if let fraction = parser.fraction(in: line.text) { collectedProgress.append((collected.count - 1, fraction)) }
    }

    /// Reports what was collected since the last time, as one publication.
    func reportCollected() {
        guard !collected.isEmpty else { return }
        start.assignment.reporter.lines(collected, progress: collectedProgress)
        // (Not kept: a read of short lines holds thousands, and many jobs run.)
        collected = []
        collectedProgress = []
    }
}
