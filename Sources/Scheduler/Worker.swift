/// Something that runs attempts: a local slot or a remote `jobtop worker`.
///
/// The scheduler treats every worker alike: it hands over an assignment and awaits how it
/// ended. A stop (cancel, timeout) reaches the running work through the assignment's
/// ``JobControl``.
public protocol Worker: AnyObject, Sendable {
    /// Who the worker is and how many jobs it runs at once.
    var descriptor: WorkerDescriptor { get }

    /// Runs one attempt to its end and says how it ended. Never throws: failures are
    /// terminations.
    func execute(_ assignment: JobAssignment) async -> Termination

    /// The scheduler has started `assignment` here; its ``execute(_:)`` follows, from a task of
    /// its own. Called in the order the attempts were started, under the scheduler's lock, so
    /// it must not wait: a worker that sends attempts elsewhere sends it now, and they leave in
    /// that order (from their tasks they left in any order, and a worker with a free slot ran
    /// a later or lower-priority job first). Nothing by default.
    func assigned(_ assignment: JobAssignment)

    /// The worker has left the pool and will get no more work: release what it holds.
    func leave()

    /// Whether an attempt handed to it may wait there before it starts (a remote worker's
    /// prefetched assignment, a job pending in Slurm's queue). Such a worker calls
    /// ``JobReporter/began()`` when the attempt really starts, and its timeout counts from then,
    /// so a job never times out while it waits. `false` (the default): an attempt starts when
    /// it is handed over.
    var holdsAttempts: Bool { get }

    /// Whether the attempt was sent to where it runs, as far as the worker knows: asked when
    /// the worker is lost. An attempt it never sent (its connection had closed first) did not
    /// run there, and the loss is not held against the job. `true` (the default): an attempt
    /// reaches its worker when it is handed over.
    func wasDelivered(_ job: JobID, attempt: Int) -> Bool

    /// Asks for `attempt` of job `job` back: the worker holds it and has not begun it, and
    /// another worker has a slot free (only for workers whose descriptor says
    /// ``WorkerDescriptor/withdrawsHeld``). If it still holds it, its ``execute(_:)`` returns
    /// ``Termination/withdrawn``; if it began it meanwhile, nothing changes. Never waits.
    func withdraw(_ job: JobID, attempt: Int)

    /// Job `job`'s priority changed while the worker holds `attempt` of it and has not begun it
    /// (only for workers that ``holdsAttempts``): a worker that starts what it holds by priority
    /// reorders it. Never waits.
    func reprioritize(_ job: JobID, attempt: Int, to priority: Int)
}

extension Worker {
    public func assigned(_ assignment: JobAssignment) {}
    public var holdsAttempts: Bool { false }
    public func wasDelivered(_ job: JobID, attempt: Int) -> Bool { true }
    public func withdraw(_ job: JobID, attempt: Int) {}
    public func reprioritize(_ job: JobID, attempt: Int, to priority: Int) {}
}
