import CProcess
import Dispatch
import Foundation
import Scheduler

/// The dashboard's loop on the main actor: input → action → state change → mark dirty → one
/// coalesced redraw.
///
/// It knows the scheduler only as a ``SchedulerClient`` (the in-process actor, or one across a
/// socket) and the screen only as a ``Terminal`` (ncurses, or a fake in tests). Nothing here
/// polls: the terminal says when keys are waiting, signals come as a stream from whoever runs
/// the dashboard (the same dispatch sources the headless run uses), scheduler events through
/// their subscription. A change marks the screen dirty; a frame is drawn at most every
/// ``frameInterval`` and only when something changed. While jobs run (or wait to retry), a
/// 1 Hz tick keeps elapsed times moving; idle, it stops.
@MainActor
final class DashboardController {
    /// The shortest time between two frames: at most 29 in any second (~30 per second).
    static let frameInterval: Duration = .milliseconds(35)
    /// The signals the dashboard acts on: SIGWINCH relayouts, SIGINT is Ctrl-C, the others end it.
    nonisolated static let handledSignals: [Int32] = [SIGINT, SIGTERM, SIGHUP, SIGWINCH]

    private let client: any SchedulerClient
    private let terminal: any Terminal
    private let signals: AsyncStream<Int32>
    private let options: DashboardOptions
    private var model: DashboardModel
    private let clock = ContinuousClock()

    private var exitContinuation: CheckedContinuation<DashboardExit, Never>?
    private var result: DashboardExit?

    private var signalConsumer: Task<Void, Never>?
    private var noticeConsumer: Task<Void, Never>?
    private var consumer: Task<Void, Never>?
    private var commandRunner: Task<Void, Never>?
    private var commands: AsyncStream<DashboardCommand>.Continuation?
    private var ticker: Task<Void, Never>?
    private var outputFollower: Task<Void, Never>?
    private var isOutputStale = false
    private var isFetchingOutput = false
    private var isFetchingSnapshot = false
    /// Attached: the user asked the serve to shut down, so the end of its events is expected.
    private var askedServeShutdown = false

    private var isDirty = false
    private var isFrameScheduled = false
    private var lastFrame: ContinuousClock.Instant
    /// The scheduler's clock at a moment on ours, to tell its `now` between events.
    private var anchor: (time: SchedulerTime, at: ContinuousClock.Instant)
    private var frames = 0
    private var framesThisSecond = 0
    private var secondStart: ContinuousClock.Instant
    private var maxFramesPerSecond = 0
    private let started: ContinuousClock.Instant
    /// CPU time spent in the dashboard's own work (events, keys, frames), for the benchmark.
    private var busySeconds = 0.0
    /// The part of ``busySeconds`` spent drawing frames.
    private var frameSeconds = 0.0

    /// - Parameters:
    ///   - client: The scheduler to show and steer.
    ///   - terminal: The screen and keyboard; closed when the dashboard ends.
    ///   - signals: The signals of ``handledSignals`` as they arrive.
    ///   - options: How to set it up.
    init(client: any SchedulerClient, terminal: any Terminal, signals: AsyncStream<Int32>, options: DashboardOptions) {
        self.client = client
        self.terminal = terminal
        self.signals = signals
        self.options = options
        model = DashboardModel(title: options.title)
        model.isAttached = options.isAttached
        model.expectedJobs = options.expectedJobs
        let now = clock.now
        lastFrame = now - .seconds(1)
        anchor = (.zero, now)
        secondStart = now
        started = now
    }

    /// Runs until the user quits or a signal ends it; the terminal is restored before it returns.
    func run() async -> DashboardExit {
        let exit = await withCheckedContinuation { continuation in
            exitContinuation = continuation
            start()
        }
        stop()
        return exit
    }

    // MARK: - Setup and teardown

    private func start() {
        let signals = signals
        signalConsumer = Task { await self.consumeSignals(signals) }
        if let notices = options.notices {
            noticeConsumer = Task {
                for await notice in notices {
                    guard self.result == nil else { return }
                    self.model.notice(notice)
                    self.markDirty()
                }
            }
        }
        terminal.watchInput { [weak self] in self?.drainKeys() }

        let (stream, continuation) = AsyncStream<DashboardCommand>.makeStream()
        commands = continuation
        commandRunner = Task { await self.runCommands(stream) }
        updateTicker()
        let client = client
        consumer = Task {
            // A screen shows the present: one that falls behind skips ahead (a fresh snapshot)
            // rather than slowing the jobs down.
            let events = await client.subscribe(bufferLimit: nil, includeOutput: false, delivery: .latest)
            await self.consume(events)
            // Attached, the events end when the serve does: nothing left to show.
            if self.options.isAttached && !Task.isCancelled {
                self.finish(self.askedServeShutdown ? .quit : .disconnected)
            }
        }
        markDirty()
    }

    private func stop() {
        signalConsumer?.cancel()
        noticeConsumer?.cancel()
        consumer?.cancel()
        ticker?.cancel()
        outputFollower?.cancel()
        commands?.finish()
        commandRunner?.cancel()
        terminal.close()
        writeFrameStats()
    }

    private func finish(_ exit: DashboardExit) {
        guard result == nil else { return }
        result = exit
        exitContinuation?.resume(returning: exit)
        exitContinuation = nil
    }

    // MARK: - Input

    /// The main actor runs on whichever thread drains the main queue (after `dispatch_main`,
    /// a pool thread): each one it lands on gets an alternate signal stack, so that the crash
    /// guard still runs if the dashboard overflows its stack.
    private func prepareThread() {
        _ = jt_crash_guard_prepare_thread()
    }

    private func drainKeys() {
        prepareThread()
        let cpu = Self.threadCPUSeconds()
        defer { busySeconds += Self.threadCPUSeconds() - cpu }
        while result == nil, let key = terminal.readKey() {
            handle(key)
        }
        // Standard input closed (the terminal went away): nothing more can be typed.
        if result == nil, terminal.isInputClosed { finish(.signal(SIGHUP)) }
    }

    /// `JOBTOP_TEST_CRASH=1` makes `!` a Swift runtime trap and `@` a stack overflow, the ways
    /// a bug crashes the dashboard: the end-to-end tests check the crash guard with them. Unset,
    /// neither key does anything.
    private static let isCrashKeyEnabled = ProcessInfo.processInfo.environment["JOBTOP_TEST_CRASH"] == "1"

    /// Recurses until the stack runs out (the frame is used after the call, so it cannot be
    /// turned into a loop).
    @inline(never)
    private static func overflowStack(_ depth: Int) -> Int {
        if depth == .max { return 0 }
        var frame = (depth, depth &+ 1, depth &+ 2, depth &+ 3)
        let below = overflowStack(depth &+ 1)
        return withUnsafeMutablePointer(to: &frame) { $0.pointee.3 } &+ below
    }

    private func handle(_ key: Key) {
        if Self.isCrashKeyEnabled, key == .char("!") {
            fatalError("JOBTOP_TEST_CRASH: '!' pressed")
        }
        if Self.isCrashKeyEnabled, key == .char("@") {
            _ = Self.overflowStack(0)
        }
        // Ctrl-L: the whole screen drawn again (the terminal clears it first), as in htop and
        // less: after something wrote on the terminal behind the dashboard's back.
        if key == .resize || key == .control("l") {
            terminal.updateSize()
            markDirty()
            return
        }
        let commands: [DashboardCommand]
        let size = terminal.size
        if !DashboardView.fits(size) {
            commands = model.handleOnTooSmallScreen(key)
        } else if case .mouse(let event) = key {
            commands = model.handleMouse(event, size: size)
        } else {
            commands = model.handle(key)
        }
        markDirty()
        for command in commands { perform(command) }
    }

    private func consumeSignals(_ signals: AsyncStream<Int32>) async {
        for await number in signals {
            guard result == nil else { return }
            received(signal: number)
        }
    }

    private func received(signal number: Int32) {
        switch number {
        case SIGWINCH:
            terminal.updateSize()
            markDirty()
        case SIGINT:
            // Like Ctrl-C typed: quit, asking first while jobs are active; twice forces.
            handle(.control("c"))
        default:
            finish(.signal(number))
        }
    }

    // MARK: - Commands

    private func perform(_ command: DashboardCommand) {
        switch command {
        case .quit: finish(.quit)
        case .forceQuit: finish(.signal(SIGINT))
        case .suspend:
            terminal.suspend()
            markDirty()
        case .showOutput(let id): showOutput(of: id)
        default: commands?.yield(command)
        }
    }

    /// Sends commands to the scheduler one at a time, in the order they were given.
    private func runCommands(_ stream: AsyncStream<DashboardCommand>) async {
        for await command in stream {
            let note = await execute(command)
            if let note {
                // A file not written: the prompt comes back for another name (it closed).
                if case .saveOutput(let id, let path) = command, note.role == .error { model.saveRefused(id, path: path) }
                model.message = note
                markDirty()
            }
        }
    }

    private func execute(_ command: DashboardCommand) async -> Segment? {
        let request: SchedulerCommand
        switch command {
        case .submit(let text, let priority, let group, let after):
            var spec = JobSpec.shell(text, priority: priority)
            spec.workingDirectory = options.workingDirectory
            spec.group = group
            spec.dependencies = after.map { .job($0) }
            request = .submit([spec], batch: nil)
        case .cancel(let ids): request = .cancelJobs(ids)
        case .reprioritize(let id, let priority): request = .setPriority(id, priority)
        case .retry(let ids):
            return await retry(ids)
        case .pause: request = .pause
        case .resume: request = .resume
        case .setLocalSlots(let slots): request = .setLocalSlots(slots)
        case .pauseGroup(let group): request = .pauseGroup(group)
        case .resumeGroup(let group): request = .resumeGroup(group)
        case .setGroupLimit(let group, let limit): request = .setGroupLimit(group, limit)
        case .shutdownServe:
            askedServeShutdown = true
            request = .shutdown(.graceful)
        case .saveOutput(let id, let path):
            let tail = await client.outputTail(of: id)
            return Self.write(tail.lines, dropped: tail.dropped, to: path)
        case .signal(let ids, let signal):
            return await send(signal, to: ids)
        case .edit(let id, let command): request = .edit(id, command: command)
        case .showOutput, .quit, .forceQuit, .suspend: return nil
        }
        let reply: SchedulerReply
        do {
            reply = try await client.perform(request)
        } catch {
            if case .reprioritize(let id, _) = command { model.priorityRefused(id) }
            if case .setLocalSlots = command { model.slotsRefused() }
            return Segment(error.description, .error)
        }
        switch (command, reply) {
        case (.submit(let text, _, let group, let after), .submitted(let ids)):
            var placement = group.map { " in group \($0)" } ?? ""
            if !after.isEmpty { placement += " after \(after.count == 1 ? "1 job" : "\(after.count) jobs")" }
            return Segment("submitted \(ids.first?.short ?? "?")\(placement): \(text)", .message)
        case (.cancel(let ids), .refused(let refusals)):
            // One job: its own `cancelled` event says how it went.
            if let first = refusals.first {
                let done = ids.count - refusals.count
                return Segment("\(ids.count > 1 ? "cancelled \(done) of \(ids.count); " : "")\(first.id.short): \(first.error.message)", .error)
            }
            return ids.count > 1 ? Segment("\(ids.count) jobs cancelled (running ones are stopping)", .message) : nil
        case (.edit(let id, _), _):
            return Segment("\(id.short): command changed", .message)
        case (.pauseGroup(let group), _):
            return Segment("group \(group) paused: its running jobs go on, none starts (P resumes)", .message)
        case (.resumeGroup(let group), _):
            return Segment("group \(group) resumed", .message)
        case (.setGroupLimit(let group, let limit), _):
            return Segment("group \(group): \(limit.map { "at most \($0) at once" } ?? "no limit")", .message)
        default:
            return nil
        }
    }

    /// Retries each job; says how many were, or the first refusal.
    private func retry(_ ids: [JobID]) async -> Segment {
        var refusal: (JobID, String)?
        var retried = 0
        // Skipped ones last: retrying what they waited for may bring them back on its own (a
        // tagged failed job and its skipped dependent said "retried 1 of 2; cannot run: dependency
        // failed" while the dependent was back, blocked).
        let isSkipped = { (id: JobID) in self.model.board.mirror.jobs[id]?.state.kind == .skipped }
        let skipped = Set(ids.filter(isSkipped))
        let ordered = ids.filter { !skipped.contains($0) } + ids.filter { skipped.contains($0) }
        for id in ordered {
            do {
                _ = try await client.perform(.retry(id))
                retried += 1
            } catch {
                // Back already (it may have run since): the retry of what it waited for brought
                // it back. The screen may not show that yet; then the engine says.
                if skipped.contains(id), retried > 0, await hasComeBack(id) {
                    retried += 1
                    continue
                }
                if refusal == nil { refusal = (id, error.description) }
            }
        }
        if let (id, text) = refusal {
            return Segment("\(ids.count > 1 ? "retried \(retried) of \(ids.count); " : "")\(id.short): \(text)", .error)
        }
        return Segment(ids.count == 1 ? "\(ids[0].short) retried" : "\(retried) jobs retried", .message)
    }

    /// Whether job `id`, skipped when its retry was asked for, is skipped no more.
    private func hasComeBack(_ id: JobID) async -> Bool {
        guard model.board.mirror.jobs[id]?.state.kind == .skipped else { return true }
        return await client.currentSnapshot().jobs.first { $0.id == id }.map { $0.state.kind != .skipped } ?? false
    }

    /// Sends `signal` to each job; says to how many it went, or the first refusal.
    private func send(_ signal: Int32, to ids: [JobID]) async -> Segment {
        var sent: [JobID] = []
        var refusal: (JobID, String)?
        for id in ids {
            do {
                _ = try await client.perform(.signal(id, signal))
                sent.append(id)
            } catch {
                if refusal == nil { refusal = (id, error.description) }
            }
        }
        let name = "SIG" + SignalName.name(of: signal)
        let jobs = sent.count == 1 ? sent[0].short : "\(sent.count) jobs"
        if let (id, reason) = refusal {
            let prefix = sent.isEmpty ? "" : "sent \(name) to \(jobs); "
            return Segment("\(prefix)\(id.short): \(reason)", .error)
        }
        return Segment("sent \(name) to \(jobs)", .message)
    }

    /// Writes output lines (their exact bytes) to `path`; says what was done, or why not.
    nonisolated static func write(_ lines: [OutputLine], dropped: Int, to typed: String) -> Segment {
        let path = expandingHome(typed)
        var data = Data()
        for line in lines { data.append(contentsOf: line.rawBytes) }
        // Never over a file that is there (it truncated one to the tail, or to nothing).
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) {
            let what = isDirectory.boolValue ? "that is a directory (give a file's name)" : "a file is there (give another name)"
            return Segment("nothing written: \(what): \(path)", .error)
        }
        do {
            try data.write(to: URL(fileURLWithPath: path), options: .withoutOverwriting)
        } catch {
            let reason = (error as NSError).localizedFailureReason ?? (error as NSError).localizedDescription
            return Segment("nothing written: cannot write \(path): \(reason)", .error)
        }
        // Lines as the file has them (and the output view shows them): the pieces of a long line
        // are one (a 50 MB line was "wrote 64 lines" beside the view's "1 line").
        let ended = lines.count { $0.ending == .newline || $0.ending == .carriageReturnNewline }
        let written = ended + (lines.last.map { $0.ending == .none || $0.ending == .carriageReturn } ?? false ? 1 : 0)
        let count = "\(written) line\(written == 1 ? "" : "s")"
        let note = dropped > 0 ? " (the \(dropped) before them were not kept)" : ""
        return Segment("wrote \(count) to \(path)\(note)", .message)
    }

    /// `path` with a leading `~` (alone or before `/`) made `$HOME`, as a shell does. Left to
    /// Foundation, it was the home in the password database (`/root/out.log` for a dashboard
    /// whose `$HOME` was elsewhere).
    nonisolated static func expandingHome(_ path: String, environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        guard path == "~" || path.hasPrefix("~/"), let home = environment["HOME"], !home.isEmpty else { return path }
        return home + path.dropFirst()
    }

    // MARK: - Scheduler events

    private func consume(_ events: some AsyncSequence<SchedulerEvent, Never>) async {
        for await event in events {
            apply(event)
        }
    }

    private func apply(_ event: SchedulerEvent) {
        prepareThread()
        let cpu = Self.threadCPUSeconds()
        defer { busySeconds += Self.threadCPUSeconds() - cpu }
        if case .snapshot(let snapshot) = event.kind {
            anchor = (snapshot.time, clock.now)
        }
        model.apply(event)
        if let id = event.kind.jobID, id == model.outputJob { isOutputStale = true }
        if model.needsSnapshot { fetchSnapshot() }
        updateTicker()
        markDirty()
    }

    private func fetchSnapshot() {
        guard !isFetchingSnapshot else { return }
        isFetchingSnapshot = true
        let client = client
        Task {
            let snapshot = await client.currentSnapshot()
            self.isFetchingSnapshot = false
            self.anchor = (snapshot.time, self.clock.now)
            self.model.apply(snapshot: snapshot, seq: snapshot.seq)
            self.markDirty()
        }
    }

    /// The scheduler's present time, from the last snapshot plus the time passed since.
    private var schedulerNow: SchedulerTime {
        max(model.board.lastTime, anchor.time + (clock.now - anchor.at))
    }

    /// Ticks once a second while something on screen moves with time; idle, once a minute,
    /// when the header's `up` (whole minutes while idle) changes: one small frame, only the
    /// changed cells reach the terminal.
    ///
    /// A ticker asleep for the idle minute is started again once something moves with time (a
    /// job started): it used to sleep on, and a silent job's elapsed time and the header's `up`
    /// stood still until some event redrew the screen (up to a minute after the start).
    private func updateTicker() {
        if ticker != nil {
            guard isTickerIdle, needsTicks else { return }
            ticker?.cancel()
        }
        // Until the new ticker has looked (a burst of events must not start one per event).
        isTickerIdle = false
        ticker = Task {
            while !Task.isCancelled {
                // Idle, the header's `up` shows whole minutes: one frame a minute.
                let ticks = self.needsTicks
                self.isTickerIdle = !ticks
                let wait: Duration = ticks ? .seconds(1) : .seconds(60) - .seconds(Int64(self.schedulerNow.seconds) % 60)
                do {
                    try await Task.sleep(for: wait)
                } catch {
                    return  // cancelled: a new ticker took over, or the dashboard ends
                }
                self.markDirty()
            }
        }
    }

    /// Whether the ticker sleeps for the idle minute.
    private var isTickerIdle = false

    private var needsTicks: Bool {
        let board = model.board
        // Scheduled jobs count down.
        return board.count(.running) + board.count(.waiting) + board.count(.scheduled) > 0
            || board.jobsPerSecond(now: schedulerNow) > 0
    }

    // MARK: - Output view

    private func showOutput(of id: JobID) {
        outputFollower?.cancel()
        isOutputStale = true
        // While the job runs, its tail is fetched again every `outputRefresh` (its events, a
        // start or an end, mark it stale at once too). Not a subscription to the output lines:
        // an attached dashboard was sent every line of a flooding job, and with two of them
        // open the serve's threads did little else (`jobtop status` took 29 s).
        outputFollower = Task { [weak self] in
            while !Task.isCancelled {
                do {
                    try await Task.sleep(for: Self.outputRefresh)
                } catch {
                    return
                }
                guard let self, self.model.outputJob == id else { return }
                if self.model.board.jobs[id]?.state.kind == .running {
                    self.isOutputStale = true
                    self.markDirty()
                }
            }
        }
        markDirty()
    }

    /// How often the output view fetches a running job's tail.
    static let outputRefresh: Duration = .milliseconds(200)

    private func refreshOutputIfNeeded() {
        guard isOutputStale, !isFetchingOutput, let id = model.outputJob else { return }
        isOutputStale = false
        isFetchingOutput = true
        let client = client
        Task {
            let tail = await client.outputTail(of: id)
            self.isFetchingOutput = false
            self.model.setOutput(of: id, lines: tail.lines, dropped: tail.dropped)
            self.markDirty()
        }
    }

    // MARK: - Frames

    /// Notes that the screen must change; the frame follows, at most ~30 a second.
    private func markDirty() {
        isDirty = true
        guard !isFrameScheduled, result == nil else { return }
        isFrameScheduled = true
        let wait = (lastFrame + Self.frameInterval) - clock.now
        if wait <= .zero {
            DispatchQueue.main.async { [weak self] in MainActor.assumeIsolated { self?.drawFrame() } }
        } else {
            let nanoseconds = Int(wait.seconds * 1e9)
            DispatchQueue.main.asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { [weak self] in
                MainActor.assumeIsolated { self?.drawFrame() }
            }
        }
    }

    private func drawFrame() {
        prepareThread()
        isFrameScheduled = false
        guard isDirty, result == nil else { return }
        let cpu = Self.threadCPUSeconds()
        defer {
            let spent = Self.threadCPUSeconds() - cpu
            busySeconds += spent
            frameSeconds += spent
        }
        isDirty = false
        if model.outputJob == nil, outputFollower != nil {
            outputFollower?.cancel()
            outputFollower = nil
        }
        refreshOutputIfNeeded()
        let now = clock.now
        lastFrame = now
        let size = terminal.size
        // The table's order is kept one event at a time (TableOrder): a frame never sorts.
        model.prepare(tableRows: DashboardView.Layout(size: size).tableRows)
        model.outputRows = max(1, size.rows - 2)
        model.outputColumns = max(1, size.columns)
        terminal.draw(DashboardView.render(model, size: size, now: schedulerNow))
        countFrame(at: now)
        // After the frame is out: what only later events and keys need.
        if model.table.isIndexPending { model.indexTable() }
    }

    private func countFrame(at now: ContinuousClock.Instant) {
        frames += 1
        if now - secondStart >= .seconds(1) {
            secondStart = now
            framesThisSecond = 0
        }
        framesThisSecond += 1
        maxFramesPerSecond = max(maxFramesPerSecond, framesThisSecond)
    }

    /// The CPU time of the calling thread.
    private static func threadCPUSeconds() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    private func writeFrameStats() {
        let environment = ProcessInfo.processInfo.environment["JOBTOP_FRAME_STATS"]
        guard let path = options.frameStatsPath ?? environment, !path.isEmpty else { return }
        let seconds = (clock.now - started).seconds
        let busy = (busySeconds * 1000).rounded() / 1000
        let text = "frames=\(frames) seconds=\(Formatting.rate(seconds)) max_per_second=\(maxFramesPerSecond) ui_cpu_seconds=\(busy)"
            + " frame_cpu_seconds=\((frameSeconds * 1000).rounded() / 1000)\n"
        _ = FileManager.default.createFile(atPath: path, contents: Data(text.utf8))
    }
}
