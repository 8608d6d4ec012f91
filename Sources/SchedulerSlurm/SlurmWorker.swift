import Dispatch
import Foundation
import Scheduler

/// A Slurm cluster as one worker of the pool: each attempt becomes a Slurm batch job.
///
/// The worker's slots are how many jobs jobtop keeps submitted at once (`-j N`); the rest wait
/// in jobtop's own queue, where priorities, pauses and group limits still act. The engine
/// decides what runs; this worker only submits, stops and reports:
///
/// - An attempt is written to a file (the exact command, no quoting) and submitted with
///   `sbatch --parsable -J NAME --output F.out --error F.err --no-requeue [--time] [--partition]
///   [extra] SCRIPT FILE`; the script runs `/bin/sh -c "$(cat FILE)"`, as a local job runs
///   `sh -c COMMAND`. An argv job's words are passed to the script as its arguments.
/// - Every poll interval ONE `squeue -h -o '%i|%T|%r' -j ID,ID,...` call covers every job;
///   a job that left the queue (or shows an ended state) gets one `scontrol -o show job ID` for
///   its end state and exit code. The output files are read on from where the last poll stopped:
///   their lines and progress go to the job's reporter, as a local job's do.
/// - A stop (cancel, jobtop's timeout) is `scancel --full --signal=TERM`, then `scancel --full
///   --signal=KILL` and `scancel` after the grace period, or at once when a stop with no grace
///   (a second Ctrl-C) follows (a pending or suspended job is cancelled at once: a suspended
///   job takes no signal, and `scancel --signal=TERM` retries it for minutes). Every `scancel`
///   runs on a thread of its own, bounded in time, so a stop that Slurm holds up never stalls
///   the polls, the submissions or the output of the other jobs.
/// - A job still pending in Slurm's queue is given back when the engine asks
///   (``withdraw(_:attempt:)``: a pause, a shutdown that keeps the queue) with `scancel
///   --state=PENDING`, which Slurm refuses for a job that started meanwhile (that one runs on).
///   Slurm's own outcomes map to failures
///   (``SlurmText/termination(_:wasStopped:)``); `NODE_FAIL` and `PREEMPTED` come back as a lost
///   worker, so the engine requeues the attempt.
///
/// All of it (the `sbatch`/`squeue` processes, the file reads) happens on one thread of the
/// worker's own, never on the cooperative pool: `execute` only queues the attempt and suspends.
public final class SlurmWorker: Worker {
    public let descriptor: WorkerDescriptor
    private let configuration: SlurmConfiguration
    private let commands: any SlurmCommands
    private let inbox = Locked(Inbox())
    private let wakeup = DispatchSemaphore(value: 0)

    /// What `execute`, stops and `leave` hand to the worker's thread.
    fileprivate struct Inbox {
        var submissions: [Submission] = []
        var stops: [(key: Key, request: StopRequest)] = []
        var withdrawals: [Key] = []
        var isThreadRunning = false
        var placements: [JobID: SlurmPlacement] = [:]
        var calls: [String: Int] = [:]
    }

    fileprivate struct Submission {
        let assignment: JobAssignment
        let continuation: CheckedContinuation<Termination, Never>
    }

    fileprivate struct Key: Hashable {
        let jobID: JobID
        let attempt: Int
    }

    /// Creates a worker (it submits nothing until the scheduler hands it an attempt).
    ///
    /// - Parameters:
    ///   - configuration: Partition, extra arguments, how many to keep submitted, the poll interval.
    ///   - commands: Runs Slurm's commands (the real ones by default).
    /// - Throws: ``SlurmError`` (`.directory`) when the directory for scripts and output cannot
    ///   be made.
    public init(configuration: SlurmConfiguration, commands: any SlurmCommands = SystemSlurmCommands()) throws {
        let name = configuration.options.partition.map { "slurm:\($0)" } ?? "slurm"
        descriptor = WorkerDescriptor(
            id: WorkerID(), name: name, kind: .remote, slots: configuration.submitted, holdsAttempts: true, withdrawsHeld: true)
        self.configuration = configuration
        self.commands = commands
        try Self.writeScripts(in: configuration.directory)
    }

    /// Where each running attempt is in Slurm: its Slurm job id and state (and, while it waits,
    /// Slurm's reason). Updated at every poll.
    public var placements: [JobID: SlurmPlacement] { inbox.withLock { $0.placements } }

    /// How many times each Slurm command ran (`squeue`, `scontrol`, `sbatch`, `scancel`).
    public var callCounts: [String: Int] { inbox.withLock { $0.calls } }

    // MARK: - Worker

    public func execute(_ assignment: JobAssignment) async -> Termination {
        let spec = assignment.spec
        if case .closure = spec.work { return .error("a Swift closure job cannot run on Slurm") }
        if spec.keepBackground {
            return .error("keep_background cannot be honoured on Slurm: Slurm ends every process of a job when it ends")
        }
        let key = Key(jobID: assignment.jobID, attempt: assignment.attempt)
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Termination, Never>) in
                let startThread = inbox.withLock { inbox -> Bool in
                    inbox.submissions.append(Submission(assignment: assignment, continuation: continuation))
                    defer { inbox.isThreadRunning = true }
                    return !inbox.isThreadRunning
                }
                if startThread { startLoop() }
                wakeup.signal()
                assignment.control.onStop { [weak self] request in
                    self?.post(key, StopRequest(reason: request.reason, grace: request.grace))
                }
            }
        } onCancel: {
            post(key, StopRequest(reason: .cancel, grace: configuration.gracePeriod))
        }
    }

    /// A job waits in Slurm's queue before it runs: its timeout counts from when it runs.
    public var holdsAttempts: Bool { true }

    public func leave() {
        // Nothing to release: the worker's thread ends by itself once no attempt is left.
    }

    /// Gives back the attempt if it is still pending in Slurm's queue (or not yet submitted):
    /// its `execute` returns ``Termination/withdrawn``. One that started runs on.
    public func withdraw(_ job: JobID, attempt: Int) {
        inbox.withLock { $0.withdrawals.append(Key(jobID: job, attempt: attempt)) }
        wakeup.signal()
    }

    /// Ends the run on Slurm: cancels, in one `scancel` call, every Slurm job this worker
    /// submitted that has not been seen to end (a run that did not wait for its jobs, after a
    /// second signal, must leave nothing running on the cluster), then removes the run's scripts
    /// and output files (their lines have been delivered), and the default parent
    /// `.jobtop-slurm` if that leaves it empty. Returns once done; the blocking work runs on a thread of its own.
    public func finish() async {
        let ids = inbox.withLock { $0.placements.values.map(\.slurmID) }.sorted()
        let directory = configuration.directory
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Thread { [self] in
                if !ids.isEmpty { _ = run("scancel", ids) }
                try? FileManager.default.removeItem(atPath: directory)
                // The default parent (.jobtop-slurm), only when empty: rmdir refuses one that
                // other runs still use. A directory the user named stays.
                let parent = (directory as NSString).deletingLastPathComponent
                if (parent as NSString).lastPathComponent == ".jobtop-slurm" { _ = rmdir(parent) }
                continuation.resume()
            }.start()
        }
    }

    // MARK: - Internals

    private func post(_ key: Key, _ request: StopRequest) {
        inbox.withLock { $0.stops.append((key, request)) }
        wakeup.signal()
    }

    private func startLoop() {
        let thread = Thread { [self] in
            var loop = SlurmLoop(worker: self)
            loop.run()
        }
        thread.name = "jobtop-slurm"
        thread.start()
    }

    fileprivate func take() -> (submissions: [Submission], stops: [(key: Key, request: StopRequest)], withdrawals: [Key]) {
        inbox.withLock { inbox in
            defer {
                inbox.submissions = []
                inbox.stops = []
                inbox.withdrawals = []
            }
            return (inbox.submissions, inbox.stops, inbox.withdrawals)
        }
    }

    /// Ends the thread if nothing came in meanwhile; returns whether it may end.
    fileprivate func mayEndThread() -> Bool {
        inbox.withLock { inbox in
            guard inbox.submissions.isEmpty, inbox.stops.isEmpty, inbox.withdrawals.isEmpty else { return false }
            inbox.isThreadRunning = false
            return true
        }
    }

    fileprivate func run(_ command: String, _ arguments: [String]) -> SlurmCommandResult {
        inbox.withLock { $0.calls[command, default: 0] += 1 }
        return commands.run(command, arguments)
    }

    /// Runs `body` on a thread of its own, with this worker to run commands: for `scancel`,
    /// which Slurm may hold up ("try again later") while the loop goes on.
    fileprivate func detached(_ body: @escaping @Sendable (SlurmWorker) -> Void) {
        Thread { [self] in body(self) }.start()
    }

    fileprivate func place(_ assignment: JobAssignment, _ placement: SlurmPlacement?) {
        let changed = inbox.withLock { inbox -> Bool in
            defer { inbox.placements[assignment.jobID] = placement }
            return inbox.placements[assignment.jobID]?.description != placement?.description
        }
        // Published only when what the dashboard shows changes (pending → running is `1234
        // Priority` → `1234`; a pending job's state and reason alone are one string).
        if changed, let placement { assignment.reporter.placed(placement.description) }
    }

    fileprivate func wait(until deadline: ContinuousClock.Instant?) {
        guard let deadline else {
            wakeup.wait()
            return
        }
        let left = ContinuousClock.now.duration(to: deadline)
        guard left > .zero else { return }
        let nanoseconds = left.components.seconds * 1_000_000_000 + left.components.attoseconds / 1_000_000_000
        _ = wakeup.wait(timeout: .now() + .nanoseconds(Int(nanoseconds)))
    }

    fileprivate var shellScript: String { configuration.directory + "/shell.sh" }
    fileprivate var argvScript: String { configuration.directory + "/argv.sh" }
    fileprivate var settings: SlurmConfiguration { configuration }

    private static func writeScripts(in directory: String) throws {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            // $1: the file holding the exact command; $2: a file of `export` lines, or "".
            let shell = """
                #!/bin/sh
                # jobtop: runs the command in the file $1 as `sh -c` does (a local job runs the same way).
                if [ -n "$2" ]; then . "$2"; fi
                exec /bin/sh -c "$(cat "$1")" sh

                """
            // $1: a file of `export` lines, or ""; the rest: the argv.
            let argv = """
                #!/bin/sh
                # jobtop: runs its arguments as they are (an argv job).
                if [ -n "$1" ]; then . "$1"; fi
                shift
                exec "$@"

                """
            try shell.write(toFile: directory + "/shell.sh", atomically: true, encoding: .utf8)
            try argv.write(toFile: directory + "/argv.sh", atomically: true, encoding: .utf8)
        } catch {
            throw SlurmError(code: .directory, message: "cannot write Slurm job scripts in '\(directory)': \(error.localizedDescription)")
        }
    }
}

/// A stop the worker's thread is to carry out.
private struct StopRequest {
    let reason: StopReason
    let grace: Duration
}

/// Where one attempt is in Slurm.
public struct SlurmPlacement: Sendable, Equatable, CustomStringConvertible {
    /// The Slurm job id.
    public var slurmID: String
    /// Its state at the last poll.
    public var state: SlurmJobState
    /// Slurm's reason while it waits (`Priority`, `Resources`); `nil` while it runs.
    public var reason: String?

    /// `1234` while running; `1234 Priority` while pending (Slurm's reason).
    public var description: String {
        switch state {
        case .pending: reason.map { "\(slurmID) \($0)" } ?? slurmID
        default: slurmID
        }
    }
}

/// One attempt submitted to Slurm, owned by the worker's thread.
private final class TrackedJob {
    let assignment: JobAssignment
    let continuation: CheckedContinuation<Termination, Never>
    let slurmID: String
    let outPath: String
    let errPath: String
    var outOffset: UInt64 = 0
    var errOffset: UInt64 = 0
    /// Whether it was seen running (``SlurmWorker`` told its reporter it began).
    var hasBegun = false
    var out = LineSplitter(stream: .stdout)
    var err = LineSplitter(stream: .stderr)
    let parser: ProgressParser
    var state = SlurmJobState.pending
    var reason = ""
    var stop: StopRequest?
    /// Asked back while pending (``SlurmWorker/withdraw(_:attempt:)``): a `CANCELLED` end that
    /// never began is the withdrawal's.
    var isWithdrawn = false
    var killAt: ContinuousClock.Instant?
    var failedLookups = 0

    init(assignment: JobAssignment, continuation: CheckedContinuation<Termination, Never>, slurmID: String, outPath: String, errPath: String) {
        self.assignment = assignment
        self.continuation = continuation
        self.slurmID = slurmID
        self.outPath = outPath
        self.errPath = errPath
        parser = ProgressParser(pattern: assignment.spec.progressPattern)
    }
}

/// The worker's thread: submits, polls, stops, reads output. Owns every ``TrackedJob``.
private struct SlurmLoop {
    let worker: SlurmWorker
    var jobs: [SlurmWorker.Key: TrackedJob] = [:]
    /// Withdrawals that came before their attempt's submission.
    var earlyWithdrawals: Set<SlurmWorker.Key> = []
    /// Submissions sbatch could not get to Slurm's controller (down, restarting): tried again
    /// at `next`, for as long as a lookup may fail, not failed at once.
    var unsent: [SlurmWorker.Key: (submission: SlurmWorker.Submission, tries: Int, since: ContinuousClock.Instant, next: ContinuousClock.Instant)] = [:]
    var nextPoll = ContinuousClock.now
    /// A squeue or scontrol lookup that fails this many polls in a row fails the attempt: five
    /// minutes of a controller that does not answer (a restart, a failover), and at least 30 polls.
    let lookupFailureLimit: Int
    /// The most read from one output file per poll, so one chatty job cannot stall the others.
    static let readLimit = 4 << 20

    init(worker: SlurmWorker) {
        self.worker = worker
        lookupFailureLimit = max(30, Int((Duration.seconds(300) / worker.settings.pollInterval).rounded(.up)))
    }

    mutating func run() {
        while true {
            let (submissions, stops, withdrawals) = worker.take()
            var stopped: [SlurmWorker.Key: StopRequest] = [:]
            for stop in stops where stopped[stop.key].map({ stop.request.grace < $0.grace }) ?? true {
                // The most urgent of them (a second Ctrl-C asks again, with no grace).
                stopped[stop.key] = stop.request
            }
            earlyWithdrawals.formUnion(withdrawals.filter { jobs[$0] == nil && unsent[$0] == nil })
            // Not sent yet: a stop ends it here, a withdrawal gives it back as it is.
            for key in withdrawals { if let waiting = unsent.removeValue(forKey: key) { finish(waiting.submission, .withdrawn) } }
            for stop in stops { if let waiting = unsent.removeValue(forKey: stop.key) { finish(waiting.submission, .signal(15)) } }
            for submission in submissions {
                let key = SlurmWorker.Key(jobID: submission.assignment.jobID, attempt: submission.assignment.attempt)
                if earlyWithdrawals.remove(key) != nil && stopped[key] == nil {
                    // Asked back before it was submitted: given back as it is.
                    finish(submission, .withdrawn)
                    continue
                }
                if stopped[key] != nil || submission.assignment.control.stopRequest != nil {
                    // Stopped before it was submitted: nothing runs anywhere.
                    stopped[key] = nil
                    submission.assignment.control.onStop(nil)
                    submission.continuation.resume(returning: .signal(15))
                    continue
                }
                submit(submission)
            }
            // Pending jobs asked back: cancelled only while still pending (Slurm refuses the
            // others, which run on), in one call.
            var giveBack: [TrackedJob] = []
            for key in withdrawals {
                guard let job = jobs[key], job.state == .pending, !job.hasBegun, job.stop == nil, !job.isWithdrawn else { continue }
                job.isWithdrawn = true
                giveBack.append(job)
            }
            if !giveBack.isEmpty {
                let ids = giveBack.map(\.slurmID)
                worker.detached { _ = $0.run("scancel", ["--state=PENDING"] + ids) }
            }
            // Pending (and suspended) jobs are cancelled outright, all in one scancel call (a
            // cancel of a whole run may stop a thousand at once); running ones get SIGTERM first.
            var cancelNow: [TrackedJob] = []
            for (key, request) in stopped {
                guard let job = jobs[key] else { continue }
                if let earlier = job.stop {
                    // Asked again with no grace (a second Ctrl-C: kill now) while it has its
                    // SIGTERM's grace: the kill is due now. (Its handler stays installed until
                    // the job ends, for this.)
                    if request.grace == .zero && earlier.grace > .zero && job.killAt != nil { job.killAt = .now }
                    continue
                }
                job.stop = request
                if job.state == .pending || job.state == .active("SUSPENDED") { cancelNow.append(job) } else { signal(job, request) }
            }
            if !cancelNow.isEmpty {
                let ids = cancelNow.map(\.slurmID)
                worker.detached { _ = $0.run("scancel", ids) }
            }
            let now = ContinuousClock.now
            for job in jobs.values {
                if let killAt = job.killAt, killAt <= now {
                    job.killAt = nil
                    // SIGKILL to every step, the batch script's included, at once; then a plain
                    // cancel, so that Slurm ends the job (alone, it sends SIGTERM and waits
                    // KillWait again before its SIGKILL).
                    let id = job.slurmID
                    worker.detached { worker in
                        _ = worker.run("scancel", ["--full", "--signal=KILL", id])
                        _ = worker.run("scancel", [id])
                    }
                }
            }
            for (key, waiting) in unsent where waiting.next <= now {
                unsent[key] = nil
                submit(waiting.submission, tries: waiting.tries, since: waiting.since)
            }
            if !jobs.isEmpty && now >= nextPoll {
                poll()
                nextPoll = ContinuousClock.now + worker.settings.pollInterval
            }
            if jobs.isEmpty && unsent.isEmpty {
                // Idle: the thread ends (unless something just came in); the next execute starts another.
                if worker.mayEndThread() { return }
                continue
            }
            // (With no job in Slurm, something waits to be sent: the first of those is due first.)
            var deadline = jobs.isEmpty ? unsent.values.map(\.next).min()! : nextPoll
            for waiting in unsent.values where waiting.next < deadline { deadline = waiting.next }
            for job in jobs.values { if let killAt = job.killAt, killAt < deadline { deadline = killAt } }
            worker.wait(until: deadline)
        }
    }

    // MARK: Submitting

    private mutating func submit(_ submission: SlurmWorker.Submission, tries: Int = 0, since: ContinuousClock.Instant? = nil) {
        let assignment = submission.assignment
        let spec = assignment.spec
        let settings = worker.settings
        let base = "\(settings.directory)/\(assignment.jobID.short)-\(assignment.attempt)"
        let outPath = base + ".out"
        let errPath = base + ".err"
        // (sbatch reads `%` in these as its patterns, `%j` and the like: `%%` is a `%`.)
        var arguments = [
            "--parsable", "-J", Self.jobName(spec.displayName), "--output", Self.literalPattern(outPath),
            "--error", Self.literalPattern(errPath), "--no-requeue",
        ]
        if let timeout = spec.timeout {
            arguments += ["--time", SlurmText.timeLimit(for: timeout, grace: settings.gracePeriod)]
        }
        let options = settings.options.merged(with: spec.name.flatMap { settings.overrides[$0] })
        if let partition = options.partition { arguments += ["--partition", partition] }
        if let directory = spec.workingDirectory { arguments += ["--chdir", directory] }
        arguments += options.extraArguments
        do {
            // Empty files first, so a poll that comes before Slurm opens them reads nothing.
            _ = FileManager.default.createFile(atPath: outPath, contents: nil)
            _ = FileManager.default.createFile(atPath: errPath, contents: nil)
            let environment = try Self.environmentFile(spec.environment, path: base + ".env")
            switch spec.work {
            case .shell(let command):
                try command.write(toFile: base + ".cmd", atomically: true, encoding: .utf8)
                arguments += [worker.shellScript, base + ".cmd", environment]
            case .argv(let argv):
                arguments += [worker.argvScript, environment] + argv
            case .closure:
                finish(submission, .error("a Swift closure job cannot run on Slurm"))
                return
            }
        } catch {
            finish(submission, .error("cannot write the Slurm job's files in '\(settings.directory)': \(error.localizedDescription)"))
            return
        }
        let result = worker.run("sbatch", arguments)
        if result.status != 0, SlurmText.isUnreachable(result.error) {
            // Slurm's controller is down or restarting: not the job's fault. Tried again with
            // backoff (1 s, doubling, at most 30 s) for as long as a lookup may fail; the job
            // shows why it waits. (It failed at once: "sbatch refused the job: ... Unable to
            // contact slurm controller".)
            let started = since ?? .now
            if ContinuousClock.now - started < worker.settings.pollInterval * lookupFailureLimit {
                let delay = min(Duration.seconds(30), .seconds(1) * (1 << min(tries, 5)))
                unsent[SlurmWorker.Key(jobID: assignment.jobID, attempt: assignment.attempt)] = (submission, tries + 1, started, .now + delay)
                if tries == 0 { assignment.reporter.placed("not submitted: Slurm's controller does not answer; trying again") }
                return
            }
            finish(submission, .error("sbatch could not reach Slurm's controller for \(formatDuration(ContinuousClock.now - started)): \(result.errorLine)"))
            return
        }
        guard result.status == 0, let id = SlurmText.submittedID(result.output) else {
            let why = result.status == 0 ? "no job id in its output '\(result.output.prefix(200))'" : result.errorLine
            finish(submission, .error("sbatch refused the job: \(why)"))
            return
        }
        let job = TrackedJob(assignment: assignment, continuation: submission.continuation, slurmID: id, outPath: outPath, errPath: errPath)
        jobs[SlurmWorker.Key(jobID: assignment.jobID, attempt: assignment.attempt)] = job
        worker.place(assignment, SlurmPlacement(slurmID: id, state: .pending, reason: nil))
    }

    private func finish(_ submission: SlurmWorker.Submission, _ termination: Termination) {
        submission.assignment.control.onStop(nil)
        submission.continuation.resume(returning: termination)
    }

    /// `path` as sbatch's `--output`/`--error` take it literally: each `%` doubled (`%j` in a
    /// directory's name was the job id, and every job failed to start).
    static func literalPattern(_ path: String) -> String {
        path.replacingOccurrences(of: "%", with: "%%")
    }

    /// A Slurm job name: printable, one line, at most 100 characters.
    static func jobName(_ name: String) -> String {
        let cleaned = String(name.map { $0.isNewline || ($0.asciiValue.map { $0 < 0x20 || $0 == 0x7F } ?? false) ? " " : $0 })
        let trimmed = String(cleaned.prefix(100)).trimmingCharacters(in: .whitespaces)
        return trimmed.isEmpty ? "jobtop" : trimmed
    }

    /// Writes `export NAME='value'` lines (single quotes, each `'` as `'\''`: the one quoting
    /// rule of sh with no exceptions). Returns the path, or "" for no environment.
    static func environmentFile(_ environment: [String: String], path: String) throws -> String {
        guard !environment.isEmpty else { return "" }
        var text = ""
        for (name, value) in environment.sorted(by: { $0.key < $1.key }) {
            text += "export \(name)='\(value.replacingOccurrences(of: "'", with: "'\\''"))'\n"
        }
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    // MARK: Stopping

    private func signal(_ job: TrackedJob, _ request: StopRequest) {
        let id = job.slurmID
        let now = request.grace == .zero
        // The kill is due after the grace period whatever the signal's call says (it is not
        // waited for).
        if !now { job.killAt = ContinuousClock.now + request.grace }
        worker.detached { worker in
            let signalled = worker.run("scancel", ["--full", "--signal=\(now ? "KILL" : "TERM")", id])
            // Pending after all, or between states (or killed already, or held up past its
            // time limit): cancel it outright.
            if signalled.status != 0 || now { _ = worker.run("scancel", [id]) }
        }
    }

    // MARK: Polling

    private mutating func poll() {
        let ids = jobs.values.map(\.slurmID)
        let result = worker.run("squeue", ["-h", "-o", SlurmText.queueFormat, "-j", ids.joined(separator: ",")])
        var queue: [String: SlurmQueueEntry] = [:]
        if result.status == 0 {
            for entry in SlurmText.queue(result.output) { queue[entry.id] = entry }
        } else if !result.error.contains("Invalid job id") {
            // squeue failed (slurmctld busy or restarting): read output, decide nothing.
            for job in jobs.values { read(job, final: false) }
            for job in jobs.values {
                job.failedLookups += 1
                if job.failedLookups >= lookupFailureLimit {
                    end(job, .error("Slurm did not answer about job \(job.slurmID) for \(lookupFailureLimit) polls: \(result.errorLine)"))
                }
            }
            return
        }
        for job in Array(jobs.values) {
            if let entry = queue[job.slurmID], !entry.state.isEnded {
                job.failedLookups = 0
                if entry.state != job.state || entry.reason != job.reason {
                    job.state = entry.state
                    job.reason = entry.reason
                    let reason = entry.state == .pending && entry.reason != "None" ? entry.reason : nil
                    worker.place(job.assignment, SlurmPlacement(slurmID: job.slurmID, state: entry.state, reason: reason))
                }
                if entry.state != .pending {
                    began(job)
                    read(job, final: false)
                }
                continue
            }
            // Left the queue, or shows an end: Slurm's record says how it ended.
            let lookup = worker.run("scontrol", ["-o", "show", "job", job.slurmID])
            if lookup.status == 0, let record = SlurmText.jobRecord(lookup.output, id: job.slurmID) {
                job.failedLookups = 0
                guard record.state.isEnded else {
                    job.state = record.state
                    if record.state != .pending { began(job) }
                    read(job, final: false)
                    continue
                }
                if job.isWithdrawn, !job.hasBegun, job.stop == nil, record.state == .ended("CANCELLED") {
                    end(job, .withdrawn)
                } else {
                    end(job, SlurmText.termination(record, wasStopped: job.stop != nil))
                }
            } else if lookup.error.contains("Invalid job id") {
                end(job, .error("Slurm has no record of job \(job.slurmID) any more (purged before jobtop saw it end)"))
            } else {
                job.failedLookups += 1
                read(job, final: false)
                if job.failedLookups >= lookupFailureLimit {
                    end(job, .error("scontrol did not answer about job \(job.slurmID): \(lookup.errorLine)"))
                }
            }
        }
    }

    /// The job left Slurm's queue and runs: its timeout counts from now (it may have waited
    /// in the queue for long; see ``Worker/holdsAttempts``). Once per attempt.
    private func began(_ job: TrackedJob) {
        guard !job.hasBegun else { return }
        job.hasBegun = true
        job.assignment.reporter.began()
    }

    private mutating func end(_ job: TrackedJob, _ termination: Termination) {
        job.assignment.control.workEnded()
        read(job, final: true)
        jobs[SlurmWorker.Key(jobID: job.assignment.jobID, attempt: job.assignment.attempt)] = nil
        worker.place(job.assignment, nil)
        job.assignment.control.onStop(nil)
        job.continuation.resume(returning: termination)
    }

    // MARK: Output

    /// Reads what the job's output files gained since the last read. While a lossless subscriber
    /// is behind, nothing is read (the files keep it); the final read reads everything.
    private func read(_ job: TrackedJob, final: Bool) {
        let reporter = job.assignment.reporter
        guard final || reporter.isFlowing else { return }
        let parser = job.parser
        // What a read gained is reported as one publication (as a local job's output is).
        var lines: [OutputLine] = []
        var progress: [(afterLine: Int, fraction: Double)] = []
        let collect: (OutputLine) -> Void = { line in
            lines.append(line)
            if let fraction = parser.fraction(in: line.text) { progress.append((lines.count - 1, fraction)) }
        }
        job.outOffset = Self.read(job.outPath, from: job.outOffset, limit: final ? Int.max : Self.readLimit) { bytes in
            job.out.feed(bytes, collect)
        }
        job.errOffset = Self.read(job.errPath, from: job.errOffset, limit: final ? Int.max : Self.readLimit) { bytes in
            job.err.feed(bytes, collect)
        }
        if final {
            job.out.flush(collect)
            job.err.flush(collect)
        }
        reporter.lines(lines, progress: progress)
    }

    private static func read(_ path: String, from offset: UInt64, limit: Int, _ body: (UnsafeBufferPointer<UInt8>) -> Void) -> UInt64 {
        guard let handle = FileHandle(forReadingAtPath: path) else { return offset }
        defer { try? handle.close() }
        var position = offset
        do {
            try handle.seek(toOffset: offset)
            var left = limit
            while left > 0, let data = try handle.read(upToCount: min(left, 1 << 20)), !data.isEmpty {
                data.withUnsafeBytes { raw in body(raw.bindMemory(to: UInt8.self)) }
                position += UInt64(data.count)
                left -= data.count
            }
        } catch {
            return position
        }
        return position
    }
}
