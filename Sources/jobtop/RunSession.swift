import Foundation
import Scheduler
import SchedulerRemote
import TUI

/// One run: its jobs go to the scheduler as one batch, and one presenter shows it — the
/// dashboard, or the headless log. Run policy (halt on failure, "the batch is over") is the
/// engine's: this only wires the sources to the scheduler and its events to the presenter.
struct RunSession {
    /// How the run is shown.
    enum Presenter {
        /// One log line per event on stdout.
        case log(format: LogFormat, logsOutput: Bool)
        /// The full-screen dashboard.
        case screen(title: String)
    }

    /// Unfinished jobs of a streamed list kept in the scheduler at most: the read-ahead window.
    /// A list of any length costs the memory of this many jobs plus the finished ones kept.
    static let readAhead = 10_000
    /// Events the log may have unread before the jobs are slowed down.
    static let logBuffer = 8_192

    let scheduler: Scheduler
    let presenter: Presenter
    let outputDirectory: String?
    let haltsOnFailure: Bool
    /// Wall-clock seconds since 1970 at which the scheduler's clock read zero: the log's times
    /// are that clock's (a `Date()` of the caller's own, taken a moment apart, logged a file's `at
    /// = 2027-01-01T00:00:00Z` as 2026-12-31T23:59:59.983Z).
    var epoch: Double { scheduler.clock.wallClockEpoch.timeIntervalSince1970 }
    /// The remote workers' listener (`--listen`), stopped when the run is over.
    var listener: WorkerListener?

    /// Runs `plan` to its end (or to a signal, or until the user quits the dashboard) and
    /// returns the exit status.
    func run(_ plan: RunPlan) async -> Int32 {
        let started = ContinuousClock.now
        // A closed stdout (`jobtop | head`) must not kill jobtop before it has cleaned up.
        signal(SIGPIPE, SIG_IGN)
        let scheduler = scheduler
        // The in-process scheduler runs here; everything else goes through the client interface
        // a socket client also offers.
        let client = scheduler
        let listener = listener
        // For a user who asked twice: every job's process group killed now, remote workers told
        // to kill theirs, their goodbye not waited for.
        let killNow: @Sendable () -> Void = {
            Scheduler.killAllJobProcessesNow()
            scheduler.stopEveryAttemptNow()
            listener?.dropConnectionsNow()
        }
        // Made before the signal watcher: a second signal gives its stdout up.
        let writer = LogWriter()
        var signals: SignalWatcher?
        // The dashboard's signals come from the same watcher, as a stream it reads on the main actor.
        var screenSignals: (stream: AsyncStream<Int32>, continuation: AsyncStream<Int32>.Continuation)?
        // The first terminating signal after the dashboard ended (its jobs being stopped).
        let signalAfterScreen = Locked<Int32?>(nil)
        var isScreen = false
        var format: LogFormat?
        var logsOutput = false
        switch presenter {
        case .log(let logFormat, let output):
            format = logFormat
            logsOutput = output
            for group in plan.groups where group.isPaused {
                // Headless, nothing can resume it: say so rather than seem to hang (a group with
                // no job holds nothing back).
                // Its file jobs and its `-c` jobs (a list's come later: "and any" covers none).
                let count = (plan.fileJobs + plan.commandJobs).count { $0.groupName == group.name }
                guard count > 0 else { continue }
                StandardError.write(
                    "jobtop: group '\(group.name)' starts paused (paused = true) and nothing resumes it headless: its \(count) job\(count == 1 ? "" : "s") (and any job after \(count == 1 ? "it" : "them")) will not start; the run ends when interrupted (Ctrl-C)\n")
            }
            signals = SignalWatcher(
                onFirst: { _ in
                    writer.noteStopping()
                    Task { _ = try? await client.perform(.shutdown(.cancelRunning)) }
                },
                // A second signal ends the run at once: remote workers are told to kill their
                // jobs now, and their goodbye is not waited for, nor a stdout nobody reads (the
                // run stayed until its reader went away).
                onAgain: {
                    killNow()
                    writer.stopWaitingForStdout()
                })
        case .screen:
            isScreen = true
            guard Self.keysComeFromTheTerminal() else {
                StandardError.write(
                    "jobtop: the dashboard reads keys from a terminal, but stdin is not one and /dev/tty cannot be opened; use --headless\n")
                return ExitStatus.usage
            }
            // Started in the background (`jobtop jobs.toml &`): stopped until `fg` before any
            // job starts (stopped with them dispatched, a job's timeout ran on and it timed out
            // before it ran).
            Dashboard.waitUntilInForeground()
            let (stream, continuation) = AsyncStream<Int32>.makeStream(bufferingPolicy: .bufferingNewest(64))
            screenSignals = (stream, continuation)
            signals = SignalWatcher(signals: Dashboard.signals) { number, _ in
                // Once the dashboard has ended, its jobs are being cancelled (SIGTERM, SIGKILL
                // after the grace period): a signal then kills them at once, as a second one
                // does headless, and the remote workers' goodbye will not be waited for. The run
                // then ends by that signal, as a second one ends a headless run (it said 1).
                if case .terminated = continuation.yield(number), number != SIGWINCH {
                    StandardError.write("jobtop: \(signalName(number)): killing every running job now\n")
                    signalAfterScreen.withLock { if $0 == nil { $0 = number } }
                    killNow()
                }
            }
        }

        let epoch = epoch
        let outputDirectory = outputDirectory
        let running = Task { await scheduler.run() }
        // The log and the output files must say everything: lossless, bounded by slowing the jobs
        // down when it falls behind. Under the dashboard this subscription only feeds the output
        // files and the closing summary; the screen has its own.
        let events = await client.subscribe(
            bufferLimit: Self.logBuffer, includeOutput: logsOutput || outputDirectory != nil, delivery: .lossless)
        guard case .batch(let batch)? = try? await client.perform(.openBatch(haltsOnFailure: haltsOnFailure)) else {
            StandardError.write("jobtop: the scheduler refused to open a batch\n")
            await scheduler.shutdown(.cancelRunning)
            await running.value
            return ExitStatus.usage
        }
        let endsWithBatch = !isScreen
        let logFormat = format
        let logsLines = logsOutput
        let following = Task {
            let log = RunLog(
                writer: writer,
                formatter: logFormat.map { EventLogFormatter(format: $0, logsOutput: logsLines, epoch: epoch) },
                outputDirectory: outputDirectory.map(OutputDirectory.init(path:)))
            return await log.follow(events, batch: batch, client: client, endsWithBatch: endsWithBatch)
        }

        let reader = plan.list.map { CommandListReader(fd: $0.fd, source: $0.source) }
        reader?.start()
        let requiresJobs = !isScreen
        // Under the dashboard a refused list line is said on the screen at once (the run is
        // cancelled; on the terminal it shows only after the dashboard ends).
        let (notices, noticeSender) = AsyncStream<String>.makeStream()
        let feeding = Task {
            let outcome = await Self.feed(plan, reader: reader, to: client, batch: batch, requiresJobs: requiresJobs)
            if case .refused(let error) = outcome {
                noticeSender.yield("\(error.message): the run is cancelled; q quits (exit status 2)")
            }
            noticeSender.finish()
            return outcome
        }
        // Once the scheduler has stopped (a signal, a halt, the dashboard quit), nothing more is
        // read: a list whose writer keeps the pipe open (`tail -f queue | jobtop`) must not hold
        // the run open.
        let readerStopper = reader.map { reader in Task { await running.value; reader.stop() } }

        var dashboardSignal: Int32?
        if case .screen(let title) = presenter, let screenSignals {
            let exit = await Dashboard.run(
                client: client, signals: screenSignals.stream,
                options: DashboardOptions(title: title, notices: notices, expectedJobs: plan.knownTotal))
            screenSignals.continuation.finish()
            if case .signal(let number) = exit { dashboardSignal = number }
            let running = await client.currentSnapshot().count(.running)
            _ = try? await client.perform(.shutdown(.cancelRunning))
            if dashboardSignal == SIGINT {
                // A second Ctrl-C on the dashboard: the user wants out now, not after the grace.
                if running > 0 { StandardError.write("jobtop: Ctrl-C again: killing the jobs' process groups now\n") }
                killNow()
            } else if running > 0 {
                // The screen is gone while the jobs take their grace period to stop: say so.
                let jobs = running == 1 ? "1 job" : "\(running) jobs"
                StandardError.write("jobtop: stopping \(jobs)… (Ctrl-C again to kill now)\n")
            }
        }
        let fed = await feeding.value
        if case .refused(let error) = fed { StandardError.write("jobtop: \(printable(error.message))\n") }
        reader?.stop()
        await running.value
        await readerStopper?.value
        let followed = await following.value
        var wall = ContinuousClock.now - started
        // The dashboard may stay open long after the last job ended: the run's time is until then.
        if isScreen, let last = followed.lastFinish, last < wall { wall = last }
        let goodbyeSignal = await stopListening(signals: signals)
        // Under the dashboard, what a signal meant is what the dashboard made of it (SIGWINCH
        // and a first SIGINT do not end a run); a signal during the workers' goodbye ends it.
        let signal = (isScreen ? dashboardSignal ?? signalAfterScreen.withLock { $0 } : signals?.firstSignal) ?? goodbyeSignal
        var summary = RunSummary(counts: followed.counts, wall: wall, signal: signal)
        var isRefused = false
        if case .refused = fed { isRefused = true }
        // The summary line says the status the run exits with.
        summary.inputRefused = isRefused
        // The jobs of the run never handed over (a list file's lines past the read-ahead when it
        // was cut short): a total of 10,240 was said of a 30,000-line list.
        if case .stopped(let notRun?) = fed { summary.notRun = notRun }
        // Bad input before any job: stdout stays empty, as for every other input error.
        if let format, !(isRefused && summary.total == 0) {
            let formatter = EventLogFormatter(format: format, logsOutput: false, epoch: epoch)
            if let held = followed.heldLine { writer.line(held) }
            writer.line(formatter.summaryLine(summary, at: Date().timeIntervalSince1970))
        }
        writer.finish()
        signals?.stop()

        var status = summary.exitStatus
        if writer.stdoutBroke && status == ExitStatus.success { status = ExitStatus.logLost }
        if status != ExitStatus.usage && (isScreen || status != ExitStatus.success) {
            Self.report(summary, followed, isScreen: isScreen)
        }
        return status
    }

    /// Says goodbye to the remote workers and waits for their connections to close, at most the
    /// listener's shutdown grace (`--goodbye-grace`, 2 s by default). A termination signal meanwhile (a second Ctrl-C, or a
    /// first one that comes now) ends the wait at once.
    ///
    /// - Parameter signals: The run's watcher, which now hands its signals here.
    /// - Returns: The signal that cut the wait short, if one did.
    private func stopListening(signals: SignalWatcher?) async -> Int32? {
        guard let listener else { return nil }
        let interrupted = Locked<Int32?>(nil)
        let watcher = signals ?? SignalWatcher(signals: [SIGINT, SIGTERM, SIGHUP]) { _, _ in }
        watcher.replaceHandler { number, _ in
            guard [SIGINT, SIGTERM, SIGHUP].contains(number) else { return }  // SIGWINCH, under the dashboard
            StandardError.write("jobtop: \(signalName(number)): not waiting for remote workers to close their connections\n")
            interrupted.withLock { $0 = $0 ?? number }
            listener.dropConnectionsNow()
        }
        await listener.stop()
        if signals == nil { watcher.stop() }
        return interrupted.withLock { $0 }
    }

    /// What feeding the batch came to.
    enum FeedOutcome: Sendable {
        /// Every job was handed over and the batch sealed.
        case complete
        /// A source turned out bad (a list line, an empty list): the run must end with status 2.
        case refused(JobInputError)
        /// The scheduler stopped taking jobs (a signal, a halt, the dashboard quit); `notRun`:
        /// how many of the run's jobs were never handed over (the rest of a list file, and the
        /// `-c` commands after it), when the run's size was known.
        case stopped(notRun: Int?)
    }

    /// Hands the plan's jobs to the scheduler as batch `batch`: first the groups are set up (so
    /// nothing of a paused or limited group starts before its setting), then the job file's jobs
    /// at once, then the list a window at a time as it is read, then the `-c` commands; then
    /// seals the batch.
    static func feed(
        _ plan: RunPlan, reader: CommandListReader?, to client: some SchedulerClient, batch: BatchID, requiresJobs: Bool
    ) async -> FeedOutcome {
        let outcome = await submitAll(plan, reader: reader, to: client, batch: batch, requiresJobs: requiresJobs)
        // A bad source cancels the run before the batch is sealed: sealed first, a batch whose
        // jobs had all ended would settle and end the run gracefully, and the cancel would come
        // second (two shutdowns in the log).
        if case .refused = outcome { _ = try? await client.perform(.shutdown(.cancelRunning)) }
        _ = try? await client.perform(.sealBatch(batch))
        return outcome
    }

    private static func submitAll(
        _ plan: RunPlan, reader: CommandListReader?, to client: some SchedulerClient, batch: BatchID, requiresJobs: Bool
    ) async -> FeedOutcome {
        var submitted = 0
        do {
            for group in plan.groups {
                // Either command makes the group; a paused group without a limit needs only one.
                // A paused one is paused first: its limit set first, the log said `paused=false`
                // of a group that never ran unpaused.
                if group.isPaused { _ = try await client.perform(.pauseGroup(group.name)) }
                if group.limit != nil || !group.isPaused { _ = try await client.perform(.setGroupLimit(group.name, group.limit)) }
            }
            if !plan.fileJobs.isEmpty {
                _ = try await client.perform(.submit(plan.fileJobs, batch: batch))
                submitted += plan.fileJobs.count
            }
            if let reader, let list = plan.list {
                while let items = await reader.next() {
                    for item in items {
                        switch item {
                        case .failed(let error):
                            return .refused(error)
                        case .commands(let commands):
                            var index = 0
                            while index < commands.count {
                                guard await client.waitForRoom(in: batch, below: readAhead) else {
                                    reader.stop()
                                    return .stopped(notRun: plan.knownTotal.map { max(0, $0 - submitted) })
                                }
                                let end = min(commands.count, index + 1_024)
                                _ = try await client.perform(.submit(commands[index..<end].map(plan.spec(forListCommand:)), batch: batch))
                                submitted += end - index
                                index = end
                            }
                        }
                    }
                }
                if reader.wasStopped { return .stopped(notRun: plan.knownTotal.map { max(0, $0 - submitted) }) }
                if list.mustHaveCommands && reader.commandCount == 0 {
                    return .refused(list.hasNoCommands)
                }
            }
            if !plan.commandJobs.isEmpty {
                _ = try await client.perform(.submit(plan.commandJobs, batch: batch))
                submitted += plan.commandJobs.count
            }
        } catch where error.code == .invalidArgument {
            // The scheduler refused jobs the command line had checked (a library rule it does
            // not know): bad input all the same, said as such, not a run of nothing.
            reader?.stop()
            return .refused(JobInputError(.invalidValue, error.message))
        } catch {
            reader?.stop()
            return .stopped(notRun: plan.knownTotal.map { max(0, $0 - submitted) })
        }
        if requiresJobs && submitted == 0 {
            // A list piped in with only comments is that list's problem, said as for `-` (it was
            // told to give a list on stdin, which it had).
            if let list = plan.list, let reader, reader.commandCount == 0 {
                return .refused(list.hasNoCommands)
            }
            return .refused(JobInputError(.noJobs, "no jobs: give a job file, a list on stdin or -c COMMAND (see 'jobtop --help')"))
        }
        return .complete
    }

    /// The closing words on stderr: always under the dashboard (the screen is gone), and when
    /// something went wrong headless.
    static func report(_ summary: RunSummary, _ log: RunLog.Result, isScreen: Bool) {
        var text = "jobtop: \(summary.sentence)\n"
        if summary.exitStatus != ExitStatus.success {
            // A command or a reason is printed with its control characters escaped, as the log does:
            // raw, an escape sequence in a command acted on the terminal (set its title).
            for failure in log.failures { text += "  \(failure.outcome): \(printable(failure.name)): \(printable(failure.reason))\n" }
            if log.failureCount > log.failures.count { text += "  ... and \(log.failureCount - log.failures.count) more\n" }
        }
        StandardError.write(text)
    }

    /// The dashboard reads keys from stdin. When the job list comes in on a pipe
    /// (`cat list | jobtop`), the list has its own descriptor by now: read keys from the
    /// controlling terminal instead.
    private static func keysComeFromTheTerminal() -> Bool {
        guard isatty(STDIN_FILENO) == 0 else { return true }
        let terminal = open("/dev/tty", O_RDWR | O_CLOEXEC)
        guard terminal >= 0 else { return false }
        defer { close(terminal) }
        return dup2(terminal, STDIN_FILENO) >= 0
    }
}
