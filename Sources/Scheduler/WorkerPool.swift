import DequeModule

/// What kind of worker a slot belongs to.
public enum WorkerKind: String, Sendable, Codable {
    /// A thread of this process running jobs on this machine.
    case local
    /// A `jobtop worker` process, reached over the network.
    case remote
}

/// How a worker presents itself.
public struct WorkerDescriptor: Sendable, Equatable {
    /// Its identity.
    public var id: WorkerID
    /// A human name (`local-1`, a host name).
    public var name: String
    /// Local or remote.
    public var kind: WorkerKind
    /// How many jobs it runs at once.
    public var slots: Int

    /// Creates a descriptor.
    public init(id: WorkerID, name: String, kind: WorkerKind, slots: Int) {
        self.id = id
        self.name = name
        self.kind = kind
        self.slots = max(1, slots)
    }
}

/// The free slots of every worker: a pure value the ``SchedulerCore`` owns.
///
/// A free slot is handed out at once; when none is free, jobs wait in the core's queue, and a
/// slot that is returned goes straight to the first of them (the core asks for a slot in the
/// same transition that returns one, so nothing can overtake the waiting job). Free slots are
/// handed out first in, first out, so work spreads over the workers.
public struct WorkerPool: Sendable {
    struct Member: Sendable {
        var descriptor: WorkerDescriptor
        var running: Set<JobID> = []
        /// Why it leaves as soon as its last job ends (it gets no new jobs); `nil` while it stays.
        var retireReason: WorkerLeaveReason?
        var isRetiring: Bool { retireReason != nil }
    }

    private(set) var members: [WorkerID: Member] = [:]
    private var freeSlots: Deque<WorkerID> = []
    /// Join order, for stable display.
    private(set) var order: [WorkerID] = []

    /// An empty pool.
    public init() {}

    /// The number of slots that can run jobs (retiring workers excluded). Kept as a count, not
    /// summed on demand: adding N workers one by one must not cost N².
    public private(set) var capacity = 0
    /// The same for local workers.
    public private(set) var localCapacity = 0

    private mutating func count(_ descriptor: WorkerDescriptor, _ sign: Int) {
        capacity += sign * descriptor.slots
        if descriptor.kind == .local { localCapacity += sign * descriptor.slots }
    }

    /// The number of free slots.
    public var freeCount: Int { freeSlots.count }

    /// Adds a worker with all its slots free.
    mutating func join(_ descriptor: WorkerDescriptor) {
        guard members[descriptor.id] == nil else { return }
        members[descriptor.id] = Member(descriptor: descriptor)
        count(descriptor, +1)
        order.append(descriptor.id)
        for _ in 0..<descriptor.slots { freeSlots.append(descriptor.id) }
    }

    /// Takes a free slot, or `nil` when none is free.
    mutating func checkOut(for job: JobID) -> WorkerID? {
        guard let worker = freeSlots.popFirst() else { return nil }
        members[worker]?.running.insert(job)
        return worker
    }

    /// Whether `worker` is in the pool (retiring ones included).
    func contains(_ worker: WorkerID) -> Bool { members[worker] != nil }

    /// Gives back the slot `job` held. Returns why the worker retired when it has now left.
    mutating func checkIn(_ job: JobID, from worker: WorkerID) -> WorkerLeaveReason? {
        guard var member = members[worker], member.running.remove(job) != nil else { return nil }
        if let reason = member.retireReason {
            if member.running.isEmpty {
                remove(worker)
                return reason
            }
            members[worker] = member
            return nil
        }
        members[worker] = member
        freeSlots.append(worker)
        return nil
    }

    /// Removes a worker at once; returns the jobs it was running.
    @discardableResult
    mutating func remove(_ worker: WorkerID) -> Set<JobID> {
        guard let member = members.removeValue(forKey: worker) else { return [] }
        if !member.isRetiring { count(member.descriptor, -1) }
        freeSlots.removeAll { $0 == worker }
        order.removeAll { $0 == worker }
        return member.running
    }

    /// Marks a worker to leave when its jobs end; it gets no new ones. Returns true when it was
    /// idle and has left already.
    mutating func retire(_ worker: WorkerID, reason: WorkerLeaveReason) -> Bool {
        guard var member = members[worker], !member.isRetiring else { return false }
        if member.running.isEmpty {
            remove(worker)
            return true
        }
        member.retireReason = reason
        members[worker] = member
        count(member.descriptor, -1)
        freeSlots.removeAll { $0 == worker }
        return false
    }

    /// The workers in join order.
    var orderedMembers: [Member] { order.compactMap { members[$0] } }
}
