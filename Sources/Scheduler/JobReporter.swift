
/// Where a running attempt reports its output and progress. Safe to call from any thread.
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
    public func began() {
        let (scheduler, id, attempt) = (self.scheduler, jobID, self.attempt)
        Task { await scheduler.attemptBegan(id, attempt: attempt) }
    }

    /// Whether its output may be read on: `false` while a lossless subscriber is behind. A reader
    /// that can wait (the process reactor) stops reading until ``whenFlowing(_:)`` calls it back.
    public var isFlowing: Bool { bus.flow.isOpen }

    /// Calls `action` once output may be read on: at once when it may now.
    public func whenFlowing(_ action: @escaping @Sendable () -> Void) {
        bus.flow.whenOpen(action)
    }

    /// Records a line the job printed (ended by a newline).
    public func line(_ text: String, stream: OutputLine.Stream) {
        line(OutputLine(stream: stream, text: text))
    }

    /// Records a line, or a piece of one, the job printed.
    public func line(_ line: OutputLine) {
        store.append(line, to: jobID)
        bus.publish(.output(jobID, line), time: clock.now())
    }

    /// Records that the job's main process ended and left `count` processes in its process
    /// group, which were stopped or (`stopped` false) left running.
    public func leftoverProcesses(count: Int, stopped: Bool) {
        bus.publish(.leftoverProcesses(jobID, count: count, stopped: stopped), time: clock.now())
    }

    /// Records where the worker placed the job (a Slurm job id and state), replacing what it
    /// said before; shown in the dashboard's worker column.
    public func placed(_ detail: String) {
        store.setPlacement(detail, of: jobID)
        bus.publish(.placed(jobID, detail), time: clock.now())
    }

    /// Records progress (0...1). Repeats of the same value (to 0.1%) are not published.
    public func progress(_ fraction: Double) {
        guard fraction.isFinite else { return }
        let value = min(max(fraction, 0), 1)
        // The store keeps the job's progress (reset when an attempt starts): a repeat of it is
        // not published. No lock of its own per reporter, so an attempt costs one allocation less.
        guard store.setProgressIfChanged(value, of: jobID) else { return }
        bus.publish(.progress(jobID, value), time: clock.now())
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
