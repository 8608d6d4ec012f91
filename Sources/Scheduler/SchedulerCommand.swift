/// Everything a client can ask of a scheduler, as a value: what the dashboard's keys, a script's
/// `jobtop submit`, or a remote dashboard send. Codable, so it can cross a socket or be written
/// to disk before it is acknowledged.
public enum SchedulerCommand: Sendable, Codable {
    /// Submit jobs (all queued, then one dispatch), into a batch if given.
    case submit([JobSpec], batch: BatchID?)
    /// Cancel a job.
    case cancel(JobID)
    /// Cancel several jobs in one step: none of the queued ones starts in a slot another of them
    /// frees. Replies ``SchedulerReply/refused(_:)`` with those that could not be cancelled.
    case cancelJobs([JobID])
    /// Set a job's priority.
    case setPriority(JobID, Int)
    /// Queue a failed or cancelled job again with a fresh retry budget.
    case retry(JobID)
    /// Start nothing new; running jobs go on.
    case pause
    /// Start jobs again.
    case resume
    /// Set the number of local slots.
    case setLocalSlots(Int)
    /// Open a batch (the jobs of one run, followed as a whole).
    case openBatch(haltsOnFailure: Bool)
    /// No more jobs will join the batch.
    case sealBatch(BatchID)
    /// Shut the scheduler down.
    case shutdown(ShutdownMode)
    /// Set how many jobs of a group run at once (`nil`: no limit); makes the group if needed.
    case setGroupLimit(String, Int?)
    /// Start no new job of a group; its running jobs go on.
    case pauseGroup(String)
    /// Start a group's jobs again.
    case resumeGroup(String)
    /// Forget every finished job still listed (`jobtop clean`).
    case forgetFinished
    /// Send a signal (SIGTERM, SIGSTOP, ...) to a running job's process group. The job's state
    /// does not change (a signal that ends it ends it as any exit does). Local jobs only.
    case signal(JobID, Int32)
    /// Give a job that is not running a new shell command; a failed, cancelled or skipped one
    /// is retried with it. Refused for running and succeeded jobs.
    case edit(JobID, command: String)
}

/// What a performed command gives back.
public enum SchedulerReply: Sendable, Codable, Equatable {
    /// Done; nothing to say.
    case done
    /// The ids of the submitted jobs (an existing job's for a coalesced spec), in order.
    case submitted([JobID])
    /// The batch that was opened.
    case batch(BatchID)
    /// How many finished jobs were forgotten.
    case forgotten(Int)
    /// The jobs of a command on several that it could not act on, with why (empty: none).
    case refused([JobRefusal])
}

/// A job a command on several jobs could not act on, and why.
public struct JobRefusal: Sendable, Codable, Equatable {
    public var id: JobID
    public var error: SchedulerError

    public init(id: JobID, error: SchedulerError) {
        self.id = id
        self.error = error
    }
}

/// What every client of a scheduler uses: the dashboard, the headless log, scripts. The
/// in-process ``Scheduler`` is one; a client of `jobtop serve` over a socket is another, and the
/// dashboard cannot tell them apart.
public protocol SchedulerClient: Sendable {
    /// The events of one subscription.
    associatedtype Events: AsyncSequence<SchedulerEvent, Never> & Sendable

    /// Performs a command.
    ///
    /// - Returns: What it gives back.
    /// - Throws: ``SchedulerError`` when it is refused (unknown job, not allowed in its state,
    ///   out of range, shutting down).
    func perform(_ command: SchedulerCommand) async throws(SchedulerError) -> SchedulerReply

    /// Subscribes: a snapshot first, then every event in order (numbered; with
    /// ``EventDelivery/latest``, a lag marker and a fresh snapshot when the subscriber fell
    /// behind).
    ///
    /// - Parameters:
    ///   - bufferLimit: Unread events allowed before the subscriber is marked lagged (or, with
    ///     ``EventDelivery/lossless``, before the scheduler slows its jobs down).
    ///   - includeOutput: Whether job output lines are delivered.
    ///   - delivery: Whether a subscriber that falls behind skips ahead or slows the jobs down.
    func subscribe(bufferLimit: Int?, includeOutput: Bool, delivery: EventDelivery) async -> Events

    /// The present state.
    func currentSnapshot() async -> SchedulerSnapshot

    /// The last lines a job printed (bounded), and how many earlier lines were dropped.
    func outputTail(of id: JobID) async -> (lines: [OutputLine], dropped: Int)

    /// Waits until fewer than `limit` jobs of `batch` are unfinished: how a source that streams
    /// jobs keeps only a window of them in the scheduler.
    ///
    /// - Returns: Whether the batch still takes jobs (`false` once halted, sealed or shutting down).
    func waitForRoom(in batch: BatchID, below limit: Int) async -> Bool
}

/// What happens when a subscriber falls behind the events.
public enum EventDelivery: String, Sendable, Codable {
    /// It skips ahead: what it missed is dropped and it gets a lag marker and a fresh snapshot.
    /// For screens, which show the present.
    case latest
    /// Nothing is dropped: while it has more than its buffer limit unread, the scheduler starts
    /// no new job and stops reading job output (the jobs block on their pipes), until it has
    /// caught up. For logs, which must say everything. The scheduler itself never waits for it.
    case lossless
}

extension SchedulerClient {
    /// Subscribes with ``EventDelivery/latest``.
    public func subscribe(bufferLimit: Int?, includeOutput: Bool) async -> Events {
        await subscribe(bufferLimit: bufferLimit, includeOutput: includeOutput, delivery: .latest)
    }
}

extension Scheduler: SchedulerClient {
    public func perform(_ command: SchedulerCommand) throws(SchedulerError) -> SchedulerReply {
        switch command {
        case .submit(let specs, let batch):
            return .submitted(try submit(contentsOf: specs, batch: batch))
        case .cancel(let id):
            try cancel(id)
        case .cancelJobs(let ids):
            return .refused(cancel(ids).map { JobRefusal(id: $0.id, error: $0.error) })
        case .setPriority(let id, let priority):
            try reprioritize(id, to: priority)
        case .retry(let id):
            try retry(id)
        case .pause:
            pause()
        case .resume:
            resume()
        case .setLocalSlots(let slots):
            try setLocalSlots(slots)
        case .openBatch(let haltsOnFailure):
            return .batch(openBatch(haltsOnFailure: haltsOnFailure))
        case .sealBatch(let batch):
            sealBatch(batch)
        case .shutdown(let mode):
            // Asked for, not awaited: a client must not wait for every job to end.
            beginShutdown(mode)
        case .setGroupLimit(let group, let limit):
            try setGroupLimit(group, to: limit)
        case .pauseGroup(let group):
            try pauseGroup(group)
        case .resumeGroup(let group):
            try resumeGroup(group)
        case .forgetFinished:
            return .forgotten(forgetFinished())
        case .signal(let id, let signal):
            try self.signal(id, signal)
        case .edit(let id, let command):
            try edit(id, command: command)
        }
        return .done
    }

    public func subscribe(bufferLimit: Int?, includeOutput: Bool, delivery: EventDelivery) -> EventStream {
        events(bufferLimit: bufferLimit, includeOutput: includeOutput, delivery: delivery)
    }

    public func currentSnapshot() -> SchedulerSnapshot {
        snapshot()
    }

    public func outputTail(of id: JobID) -> (lines: [OutputLine], dropped: Int) {
        output(of: id)
    }
}
