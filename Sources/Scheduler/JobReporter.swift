
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Where a running attempt reports its output and progress. Safe to call from any thread.
///
/// Once the attempt has ended, what is reported through it is dropped: a closure job's context
/// that outlives its attempt (a task it left running) adds nothing after the job's end, or to
/// its next attempt.
public final class JobReporter: Sendable {
    /// The job reporting.
    public let jobID: JobID
    /// The attempt reporting.
    public let attempt: Int
    private let store: JobOutputStore
    private let bus: EventBus
    private let clock: SchedulerClock
    /// Told when a worker that holds attempts starts this one (``began()``).
    private let scheduler: Scheduler
    /// ``ended`` set once the attempt has ended; below it, how many reports are being published
    /// now. A report counts itself in before it checks, so the end waits out the ones that
    /// checked before it and no report is published after the attempt's end event. (An atomic
    /// in the object, not a lock of its own: no allocation more per attempt.)
    private let reports = Atomic<UInt32>(0)
    private static let ended: UInt32 = 1 << 31

    init(jobID: JobID, attempt: Int, store: JobOutputStore, bus: EventBus, clock: SchedulerClock, scheduler: Scheduler) {
        self.jobID = jobID
        self.attempt = attempt
        self.store = store
        self.bus = bus
        self.clock = clock
        self.scheduler = scheduler
    }

    /// For a worker that may hold an attempt before it starts it (``Worker/holdsAttempts``):
    /// the attempt has started now, and its timeout counts from here.
    ///
    /// The scheduler takes it before this returns, so an end reported after it comes after it:
    /// in a task of its own it could come second, and a held job that began and ended at once
    /// (a remote worker's `Started` and `Finished` in one read) then ended without its `began`
    /// event, its start time the time it was sent and its timeout never counted.
    public func began() {
        scheduler.attemptBegan(jobID, attempt: attempt)
    }

    /// Whether its output may be read on: `false` while a lossless subscriber is behind. A reader
    /// that can wait (the process reactor) stops reading until ``whenFlowing(_:)`` calls it back.
    public var isFlowing: Bool { bus.flow.isOpen }

    /// Calls `action` once output may be read on: at once when it may now.
    public func whenFlowing(_ action: @escaping @Sendable () -> Void) {
        bus.flow.whenOpen(action)
    }

    /// Returns once output may be read on (at once, mostly), or once the calling task is
    /// cancelled: a job stopped (cancelled, timed out, shut down) while a log is behind is not
    /// kept waiting for the log (a closure job waiting here could not be stopped, and neither
    /// could the scheduler's shutdown).
    public func waitUntilFlowing() async {
        guard !isFlowing, !Task.isCancelled else { return }
        enum Wait { case waiting(CheckedContinuation<Void, Never>?), over }
        let wait = Locked(Wait.waiting(nil))
        @Sendable func end() {
            let continuation = wait.withLock { wait -> CheckedContinuation<Void, Never>? in
                defer { wait = .over }
                if case .waiting(let continuation) = wait { return continuation }
                return nil
            }
            continuation?.resume()
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                // Checked under the lock: a flow or a cancel that came first left `.over`.
                let isOver = wait.withLock { wait -> Bool in
                    if case .over = wait { return true }
                    wait = .waiting(continuation)
                    return false
                }
                if isOver { continuation.resume() } else { whenFlowing(end) }
            }
        } onCancel: {
            end()
        }
    }

    /// Records a line the job printed (ended by a newline).
    public func line(_ text: String, stream: OutputLine.Stream) {
        line(OutputLine(stream: stream, text: text))
    }

    /// Records a line, or a piece of one, the job printed.
    public func line(_ line: OutputLine) {
        whileRunning {
            store.append(line, to: jobID)
            bus.publish(.output(jobID, line), time: clock.now())
        }
    }

    /// Records lines, or pieces of lines, the job printed, in order, as one publication: what
    /// one read of its pipe holds (a line at a time, a job printing short lines was read at
    /// about a million lines a second, and was slowed to that pace). `progress`: what lines
    /// said their progress was, each after the line at `afterLine` (its place in `lines`), in
    /// order; a repeat of the job's present progress is left out, as ``progress(_:)`` leaves it.
    public func lines(_ lines: [OutputLine], progress: [(afterLine: Int, fraction: Double)] = []) {
        guard !lines.isEmpty else { return }
        whileRunning {
            guard !progress.isEmpty else {
                store.append(contentsOf: lines, to: jobID)
                bus.publish(lines.map { .output(jobID, $0) }, time: clock.now())
                return
            }
            var kinds: [SchedulerEvent.Kind] = []
            kinds.reserveCapacity(lines.count + progress.count)
            var next = 0
            for (afterLine, fraction) in progress {
                // The lines before it are in the store first, as they are published first.
                let end = min(lines.count, afterLine + 1)
                if next < end {
                    store.append(contentsOf: lines[next..<end], to: jobID)
                    kinds.append(contentsOf: lines[next..<end].lazy.map { .output(self.jobID, $0) })
                    next = end
                }
                guard let value = Self.progressValue(fraction) else { continue }
                if store.setProgressIfChanged(value, of: jobID) { kinds.append(.progress(jobID, value)) }
            }
            if next < lines.count {
                store.append(contentsOf: lines[next...], to: jobID)
                kinds.append(contentsOf: lines[next...].lazy.map { .output(self.jobID, $0) })
            }
            bus.publish(kinds, time: clock.now())
        }
    }

    /// Records that the job's main process ended and left `count` processes in its process
    /// group, which were stopped or (`stopped` false) left running.
    public func leftoverProcesses(count: Int, stopped: Bool) {
        whileRunning { bus.publish(.leftoverProcesses(jobID, count: count, stopped: stopped), time: clock.now()) }
    }

    /// Records where the worker placed the job (a Slurm job id and state), replacing what it
    /// said before; shown in the dashboard's worker column.
    public func placed(_ detail: String) {
        whileRunning {
            store.setPlacement(detail, of: jobID)
            bus.publish(.placed(jobID, detail), time: clock.now())
        }
    }

    /// Records progress (0...1). Repeats of the same value (to 0.1%) are not published.
    public func progress(_ fraction: Double) {
        guard let value = Self.progressValue(fraction) else { return }
        whileRunning {
            // The store keeps the job's progress (reset when an attempt starts): a repeat of it
            // is not published.
            guard store.setProgressIfChanged(value, of: jobID) else { return }
            bus.publish(.progress(jobID, value), time: clock.now())
        }
    }

    /// `fraction` as a progress: in 0...1; `nil` when it is not a number.
    private static func progressValue(_ fraction: Double) -> Double? {
        fraction.isFinite ? min(max(fraction, 0), 1) : nil
    }

    /// The attempt has ended (called before its end is published): what is reported from now on
    /// is dropped. Returns once the reports under way have been published.
    func end() {
        var under = reports.bitwiseOr(Self.ended, ordering: .acquiringAndReleasing).oldValue & ~Self.ended
        while under > 0 {
            // A report between its check and its publication (a few lock-free steps and the
            // bus's short lock): rare, and never waiting for anything this thread holds.
            sched_yield()
            under = reports.load(ordering: .acquiring) & ~Self.ended
        }
    }

    /// Runs `report` unless the attempt has ended.
    private func whileRunning(_ report: () -> Void) {
        let state = reports.wrappingAdd(1, ordering: .acquiringAndReleasing).newValue
        defer { reports.wrappingSubtract(1, ordering: .releasing) }
        guard state & Self.ended == 0 else { return }
        report()
    }
}

/// What one attempt needs to run: its identity, its spec, where to report and how it is stopped.
public struct JobAssignment: Sendable {
    /// The job.
    public let jobID: JobID
    /// The attempt, from 1.
    public let attempt: Int
    /// What to run.
    public var spec: JobSpec {
        var spec = submitted.spec
        spec.priority = priority
        return spec
    }
    /// The spec as submitted, boxed once per attempt by the core and shared rather than copied
    /// into every copy of the assignment on the way to its worker.
    let submitted: SchedulerCore.SubmittedSpec
    /// The job's priority now (it may have changed since it was submitted).
    public let priority: Int
    /// Where output and progress go.
    public let reporter: JobReporter
    /// How a cancel or timeout reaches the running work.
    public let control: JobControl
    /// The slot task it runs in, when its slot's attempts share one task: a closure job then runs
    /// directly in it, and a stop cancels that task (see ``SlotTask``).
    var slotTask: (task: SlotTask, attempt: SlotTask.Attempt)?
}
