import DequeModule

/// What kind of worker a slot belongs to.
public enum WorkerKind: String, Sendable, Codable {
    /// A thread of this process running jobs on this machine.
    case local
    /// A `jobtop worker` process, reached over the network.
    case remote
}

/// How a worker presents itself.
public struct WorkerDescriptor: Sendable, Equatable, Codable {
    /// Its identity.
    public var id: WorkerID
    /// A human name (`local-1`, a host name).
    public var name: String
    /// Local or remote.
    public var kind: WorkerKind
    /// How many jobs it runs at once.
    public var slots: Int
    /// Whether an attempt handed to it may wait there before it starts (a remote worker's
    /// prefetch, a Slurm queue): its `began` event says when it did (``Worker/holdsAttempts``;
    /// the scheduler sets it as the worker joins).
    public var holdsAttempts: Bool
    /// Of its slots, how many run attempts at once, when not all do: a remote worker with
    /// prefetch runs this many and holds the rest of what it is given behind them. `nil`: all.
    /// Dispatch fills every worker's running slots before it gives any worker more to hold.
    public var ownSlots: Int?
    /// Whether it gives back an attempt it holds and has not begun when asked
    /// (``Worker/withdraw(_:attempt:)``): the scheduler then asks for one whenever another
    /// worker has a slot free and nothing queued may start.
    public var withdrawsHeld: Bool

    /// Creates a descriptor.
    public init(
        id: WorkerID, name: String, kind: WorkerKind, slots: Int, holdsAttempts: Bool = false, ownSlots: Int? = nil,
        withdrawsHeld: Bool = false
    ) {
        self.id = id
        self.name = name
        self.kind = kind
        self.slots = max(1, slots)
        self.holdsAttempts = holdsAttempts
        self.ownSlots = ownSlots.map { max(1, $0) }
        self.withdrawsHeld = withdrawsHeld
    }

    private enum CodingKeys: String, CodingKey { case id, name, kind, slots, holdsAttempts, ownSlots, withdrawsHeld }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(WorkerID.self, forKey: .id)
        name = try container.decode(String.self, forKey: .name)
        kind = try container.decode(WorkerKind.self, forKey: .kind)
        slots = try container.decode(Int.self, forKey: .slots)
        // Absent from what a jobtop before it wrote.
        holdsAttempts = try container.decodeIfPresent(Bool.self, forKey: .holdsAttempts) ?? false
        ownSlots = try container.decodeIfPresent(Int.self, forKey: .ownSlots)
        withdrawsHeld = try container.decodeIfPresent(Bool.self, forKey: .withdrawsHeld) ?? false
    }

    /// How many of its `slots` run attempts at once (the rest hold attempts behind them).
    /// Of its slots, how many run attempts at once (``ownSlots``, else all): what a person
    /// calls its slots.
    public var runningSlots: Int { min(ownSlots ?? slots, slots) }

    /// How many attempts it may hold behind its running ones (a remote worker's prefetch).
    public var prefetchDepth: Int { slots - runningSlots }
}

/// A worker's place in the pool: a dense index, so the core reaches a worker without hashing
/// its ``WorkerID``. Indices of workers that left are reused; a job keeps its worker's handle
/// only while it runs there (so the worker is still in the pool).
struct WorkerHandle: Hashable, Sendable {
    /// The index in the pool.
    let index: Int32
}

/// The free slots of every worker: a pure value the ``SchedulerCore`` owns.
///
/// A free slot is handed out at once; when none is free, jobs wait in the core's queue, and a
/// slot that is returned goes straight to the first of them (the core asks for a slot in the
/// same transition that returns one, so nothing can overtake the waiting job). Free slots are
/// handed out first in, first out, so work spreads over the workers; and every worker's running
/// slots before any room to hold an attempt behind a busy one (``WorkerDescriptor/ownSlots``: a
/// remote worker's prefetch), so no job waits at a busy worker while another has a slot free.
///
/// Workers are reached by ``WorkerHandle`` (an array index); the one map from id to handle is
/// for commands that name a worker by id.
public struct WorkerPool: Sendable {
    struct Member: Sendable {
        var descriptor: WorkerDescriptor
        /// The jobs it runs now: at most its slots, so a short list searched on removal.
        var running: [JobHandle] = []
        /// Why it leaves as soon as its last job ends (it gets no new jobs); `nil` while it stays.
        var retireReason: WorkerLeaveReason?
        /// Whether an attempt may wait there before it starts (``Worker/holdsAttempts``).
        var holdsAttempts: Bool { descriptor.holdsAttempts }
        var isRetiring: Bool { retireReason != nil }
    }

    private var members: [Member?] = []
    private var handles: [WorkerID: WorkerHandle] = [:]
    private var freeIndices: [Int32] = []
    private var freeSlots: Deque<WorkerHandle> = []
    /// Free room to hold an attempt behind a busy slot (a worker's slots beyond its running
    /// slots), handed out only when no running slot is free.
    private var freeHoldingRoom: Deque<WorkerHandle> = []
    /// Join order, for stable display.
    private var order: [WorkerHandle] = []

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
    public var freeCount: Int { freeSlots.count + freeHoldingRoom.count }

    /// The number of free slots that run a job at once (not room to hold one behind a busy slot).
    var freeRunningCount: Int { freeSlots.count }

    /// The workers in the pool that give back held attempts (``WorkerDescriptor/withdrawsHeld``).
    private(set) var withdrawingMembers = 0
    /// Local workers to leave once their job ends because the slots were lowered.
    private var leavingLocalMembers = 0

    /// Whether `member` is a local worker that leaves once its job ends, the slots lowered.
    private static func isLeavingLocal(_ member: Member) -> Bool {
        member.descriptor.kind == .local && member.retireReason == .slotsReduced
    }

    /// Calls `body` with every worker in the pool, in join order.
    func forEachMember(_ body: (Member) -> Void) {
        for handle in order { if let member = members[Int(handle.index)] { body(member) } }
    }

    /// Gives the worker at `handle`, which runs `running` jobs, its free slots and room, from
    /// scratch: first takes every one it had.
    private mutating func refillFree(_ handle: WorkerHandle, descriptor: WorkerDescriptor, running: Int) {
        dropFree(handle)
        addFree(handle, descriptor: descriptor, running: running)
    }

    /// Takes every free slot and room of the worker at `handle` out of the lists.
    private mutating func dropFree(_ handle: WorkerHandle) {
        freeSlots.removeAll { $0 == handle }
        freeHoldingRoom.removeAll { $0 == handle }
    }

    /// Adds the free slots and room of a worker that has none listed.
    private mutating func addFree(_ handle: WorkerHandle, descriptor: WorkerDescriptor, running: Int) {
        let free = max(0, descriptor.slots - running)
        let freeRunning = min(free, max(0, descriptor.runningSlots - running))
        for _ in 0..<freeRunning { freeSlots.append(handle) }
        for _ in 0..<(free - freeRunning) { freeHoldingRoom.append(handle) }
    }

    /// The handle of the worker `id`, if it is in the pool (retiring ones included).
    func handle(of id: WorkerID) -> WorkerHandle? { handles[id] }

    /// The worker at `handle`, which must be in the pool.
    subscript(handle: WorkerHandle) -> Member { members[Int(handle.index)]! }

    /// Adds a worker with all its slots free.
    mutating func join(_ descriptor: WorkerDescriptor) {
        guard handles[descriptor.id] == nil else { return }
        let handle: WorkerHandle
        let member = Member(descriptor: descriptor)
        if let index = freeIndices.popLast() {
            handle = WorkerHandle(index: index)
            members[Int(index)] = member
        } else {
            handle = WorkerHandle(index: Int32(members.count))
            members.append(member)
        }
        handles[descriptor.id] = handle
        count(descriptor, +1)
        if descriptor.withdrawsHeld { withdrawingMembers += 1 }
        order.append(handle)
        addFree(handle, descriptor: descriptor, running: 0)
    }

    /// Takes a free slot for `job`, or `nil` when none is free.
    mutating func checkOut(for job: JobHandle) -> WorkerHandle? {
        guard let worker = freeSlots.popFirst() ?? freeHoldingRoom.popFirst() else { return nil }
        members[Int(worker.index)]!.running.append(job)
        return worker
    }

    /// Whether `worker` is in the pool (retiring ones included).
    func contains(_ worker: WorkerID) -> Bool { handles[worker] != nil }

    /// Gives back the slot `job` held. Returns why the worker retired when it has now left.
    mutating func checkIn(_ job: JobHandle, from worker: WorkerHandle) -> WorkerLeaveReason? {
        let index = Int(worker.index)
        guard index < members.count, members[index] != nil,
              let position = members[index]!.running.firstIndex(of: job)
        else { return nil }
        members[index]!.running.swapAt(position, members[index]!.running.count - 1)
        members[index]!.running.removeLast()
        if let reason = members[index]!.retireReason {
            if members[index]!.running.isEmpty {
                remove(worker)
                return reason
            }
            return nil
        }
        if leavingLocalMembers > 0, members[index]!.descriptor.kind == .local, members[index]!.running.isEmpty,
           let stays = order.first(where: { other in
               members[Int(other.index)].map { Self.isLeavingLocal($0) && $0.descriptor.slots == members[index]!.descriptor.slots } ?? false
           })
        {
            // The slots were lowered below what runs: a busy worker that was to leave stays in
            // this one's place, and this one leaves now. No new job starts until fewer run than
            // there are slots (the worker kept took the next job while the others still ran:
            // three ran on one slot, for as long as they lasted).
            let staying = members[Int(stays.index)]!
            members[Int(stays.index)]!.retireReason = nil
            leavingLocalMembers -= 1
            count(staying.descriptor, 1)
            addFree(stays, descriptor: staying.descriptor, running: staying.running.count)
            remove(worker)
            return .slotsReduced
        }
        // A worker whose slots were reduced below what it runs gets no slot back until it is
        // under its new count. Below its running slots it has one free to run (what it held
        // behind the one that ended begins there); else room to hold one.
        let running = members[index]!.running.count
        if running < members[index]!.descriptor.runningSlots {
            freeSlots.append(worker)
        } else if running < members[index]!.descriptor.slots {
            freeHoldingRoom.append(worker)
        }
        return nil
    }

    /// Gives a worker `slots` slots: added ones are free at once; removed ones are taken from
    /// its free slots first, and busy ones are not given back when their jobs end. Returns
    /// false (and changes nothing) for a worker not in the pool, a retiring one, or the same
    /// count.
    mutating func resize(_ worker: WorkerID, to slots: Int) -> Bool {
        guard let handle = handles[worker], let member = members[Int(handle.index)], !member.isRetiring,
              slots >= 1, slots != member.descriptor.slots
        else { return false }
        let old = member.descriptor
        count(old, -1)
        members[Int(handle.index)]!.descriptor.slots = slots
        count(members[Int(handle.index)]!.descriptor, +1)
        refillFree(handle, descriptor: members[Int(handle.index)]!.descriptor, running: member.running.count)
        return true
    }

    /// Removes a worker at once; returns the jobs it was running.
    @discardableResult
    mutating func remove(_ worker: WorkerHandle) -> [JobHandle] {
        let index = Int(worker.index)
        guard index < members.count, let member = members[index] else { return [] }
        members[index] = nil
        handles[member.descriptor.id] = nil
        if member.descriptor.withdrawsHeld { withdrawingMembers -= 1 }
        if Self.isLeavingLocal(member) { leavingLocalMembers -= 1 }
        freeIndices.append(worker.index)
        if !member.isRetiring { count(member.descriptor, -1) }
        dropFree(worker)
        order.removeAll { $0 == worker }
        return member.running
    }

    /// Marks a worker to leave when its jobs end; it gets no new ones. Returns true when it was
    /// idle and has left already.
    mutating func retire(_ worker: WorkerID, reason: WorkerLeaveReason) -> Bool {
        guard let handle = handles[worker], let member = members[Int(handle.index)], !member.isRetiring else { return false }
        if member.running.isEmpty {
            remove(handle)
            return true
        }
        members[Int(handle.index)]!.retireReason = reason
        if Self.isLeavingLocal(members[Int(handle.index)]!) { leavingLocalMembers += 1 }
        count(member.descriptor, -1)
        dropFree(handle)
        return false
    }

    /// Local workers marked to leave when their job ends because the slots were lowered stay
    /// instead, oldest first, until the local slots come to `slots`: raising the slots again
    /// takes them back before any is made (a new one beside them ran more jobs than slots).
    /// Returns how many slots were kept.
    mutating func keepLeavingLocalWorkers(upTo slots: Int) -> Int {
        var kept = 0
        for handle in order where localCapacity < slots {
            let index = Int(handle.index)
            guard let member = members[index], Self.isLeavingLocal(member) else { continue }
            members[index]!.retireReason = nil
            leavingLocalMembers -= 1
            count(member.descriptor, 1)
            addFree(handle, descriptor: member.descriptor, running: member.running.count)
            kept += member.descriptor.slots
        }
        return kept
    }

    /// The workers in join order.
    var orderedMembers: [Member] { order.compactMap { members[Int($0.index)] } }
}
