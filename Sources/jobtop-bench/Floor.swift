// The floor of the closure benchmark: the least a scheduler with jobtop's contract can do per
// job, written as plainly as it can be, so that `jobtop-bench floor` says how much of the
// scheduler's cost any design must pay on this machine and how much is jobtop's own.
//
// What it keeps of the contract, and nothing more:
// - every job has a fresh random 128-bit id and a record found by it (a hashed table), which a
//   command naming a job (cancel, reprioritize) needs; the records of the last 1,000 finished
//   jobs are kept, older ones dropped, as `finishedRetention: 1_000` does in the benchmark;
// - jobs wait in a FIFO queue and run at most `width` at a time, each in its slot's task (no task
//   per job), the slot taking its next job in the same locked step that ends the last one;
// - one lock over all of it, so that every change has one order;
// - one subscriber gets `submitted`, `started` and `succeeded` for every job, in that order,
//   through its own buffer, and parks when it has read everything (woken by the next publish);
// - the submitter queues batches of 10,000 and, with a window, waits while that many jobs are
//   unfinished.
// What it leaves out: priorities, groups, dependencies, retries, timeouts, stops, workers
// beyond local slots, output, progress, snapshots, a lagging subscriber, and the engine's
// typed events and actions. jobtop's figure against this one is the price of those, and of how
// they are built.
import DequeModule
import Foundation
import Scheduler

enum FloorEvent: Sendable {
    case submitted(JobID)
    case started(JobID)
    case succeeded(JobID)

    var isFinal: Bool {
        if case .succeeded = self { return true }
        return false
    }
}

final class FloorScheduler: Sendable {
    typealias Work = @Sendable () async -> Void

    struct Record: Sendable {
        /// Its state, which a job's end changes (one hashed look-up, as a real end's): what a
        /// status command would read.
        var isFinished = false
        let work: Work
    }

    struct State: Sendable {
        // (`Work` is Sendable, and so are the continuations: the state is.)
        var records: [JobID: Record] = [:]
        var queue = Deque<JobID>()
        var finished = Deque<JobID>()
        var unfinished = 0
        var idleSlots: [CheckedContinuation<(JobID, Work)?, Never>] = []
        var events: [FloorEvent] = []
        var subscriberWaiter: CheckedContinuation<Void, Never>?
        var roomWaiter: (limit: Int, continuation: CheckedContinuation<Void, Never>)?
        var isClosed = false
    }

    let state = Locked(State())
    let retention = 1_000

    /// What a step leaves to do after the lock is let go.
    struct Wakes {
        var subscriber: CheckedContinuation<Void, Never>?
        var room: CheckedContinuation<Void, Never>?
        var slots: [(CheckedContinuation<(JobID, Work)?, Never>, (JobID, Work)?)] = []

        func run() {
            subscriber?.resume()
            room?.resume()
            for (slot, job) in slots { slot.resume(returning: job) }
        }
    }

    /// Queues jobs; idle slots take them at once.
    func submit(_ batch: [(JobID, Work)]) {
        var wakes = Wakes()
        state.withLock { state in
            state.records.reserveCapacity(state.records.count + batch.count)
            for (id, work) in batch {
                state.records[id] = Record(work: work)
                state.queue.append(id)
                state.events.append(.submitted(id))
                state.unfinished += 1
            }
            while !state.idleSlots.isEmpty, let next = Self.start(&state) {
                wakes.slots.append((state.idleSlots.removeLast(), next))
            }
            wakes.subscriber = state.subscriberWaiter.take()
        }
        wakes.run()
    }

    /// Returns once fewer than `limit` jobs are unfinished.
    func waitForRoom(below limit: Int) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { state -> Bool in
                if state.unfinished < limit { return true }
                state.roomWaiter = (limit, continuation)
                return false
            }
            if ready { continuation.resume() }
        }
    }

    /// The next queued job, started (under the lock).
    private static func start(_ state: inout State) -> (JobID, Work)? {
        guard let id = state.queue.popFirst(), let work = state.records[id]?.work else { return nil }
        state.events.append(.started(id))
        return (id, work)
    }

    /// Ends `id` and takes the slot's next job (under the lock), or `nil` to park.
    private func finish(_ id: JobID, _ state: inout State, _ wakes: inout Wakes) -> (JobID, Work)? {
        state.records[id]?.isFinished = true
        state.events.append(.succeeded(id))
        state.unfinished -= 1
        state.finished.append(id)
        while state.finished.count > retention, let oldest = state.finished.popFirst() {
            state.records[oldest] = nil
        }
        if let (limit, continuation) = state.roomWaiter, state.unfinished < limit {
            state.roomWaiter = nil
            wakes.room = continuation
        }
        wakes.subscriber = state.subscriberWaiter.take()
        return Self.start(&state)
    }

    /// One slot: runs jobs one after another in this task.
    func slot() async {
        var next: (JobID, Work)? = await nextJob()
        while let (id, work) = next {
            await work()
            var wakes = Wakes()
            next = state.withLock { finish(id, &$0, &wakes) }
            wakes.run()
            if next == nil { next = await nextJob() }
        }
    }

    /// A job to run, waiting for one; `nil` once closed.
    private func nextJob() async -> (JobID, Work)? {
        await withCheckedContinuation { (continuation: CheckedContinuation<(JobID, Work)?, Never>) in
            let now = state.withLock { state -> (JobID, Work)?? in
                if let job = Self.start(&state) { return .some(job) }
                if state.isClosed { return .some(nil) }
                state.idleSlots.append(continuation)
                return nil
            }
            if let now { continuation.resume(returning: now) }
        }
    }

    /// Lets idle slots end.
    func close() {
        let idle = state.withLock { state -> [CheckedContinuation<(JobID, Work)?, Never>] in
            state.isClosed = true
            defer { state.idleSlots = [] }
            return state.idleSlots
        }
        for slot in idle { slot.resume(returning: nil) }
    }

    /// The subscriber: reads every event until `count` jobs have succeeded.
    func consume(until count: Int) async -> Int {
        var finals = 0
        var batch: [FloorEvent] = []
        while finals < count {
            batch.removeAll(keepingCapacity: true)
            let got = state.withLock { state -> Bool in
                if state.events.isEmpty { return false }
                swap(&batch, &state.events)
                return true
            }
            if !got {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let ready = state.withLock { state -> Bool in
                        if !state.events.isEmpty { return true }
                        state.subscriberWaiter = continuation
                        return false
                    }
                    if ready { continuation.resume() }
                }
                continue
            }
            for event in batch where event.isFinal { finals += 1 }
        }
        return finals
    }
}

extension Optional {
    /// The value, leaving `nil` behind.
    fileprivate mutating func take() -> Wrapped? {
        defer { self = nil }
        return self
    }
}

/// Runs `count` no-op closure jobs through the floor scheduler with `width` slots and one
/// subscriber, submitted as ``schedulerClosures(count:width:)`` submits them.
func floorClosures(count: Int, width: Int, window: Int?, batchSize: Int) async {
    let floor = FloorScheduler()
    var random = SystemRandomNumberGenerator()
    let work: FloorScheduler.Work = {}
    await withTaskGroup(of: Void.self) { group in
        for _ in 0..<width { group.addTask { await floor.slot() } }
        let consumed = Task { await floor.consume(until: count) }
        var submitted = 0
        while submitted < count {
            let size = min(batchSize, count - submitted)
            if let window { await floor.waitForRoom(below: window - size + 1) }
            floor.submit((0..<size).map { _ in (JobID(uuid: randomUUID(&random)), work) })
            submitted += size
        }
        let finished = await consumed.value
        precondition(finished == count, "only \(finished) of \(count) jobs finished")
        floor.close()
    }
}

/// A random UUID from `random` (Foundation's `UUID()` reads the kernel's generator each time).
func randomUUID(_ random: inout some RandomNumberGenerator) -> UUID {
    let (a, b) = (random.next(), random.next())
    return UUID(uuid: (
        UInt8(truncatingIfNeeded: a), UInt8(truncatingIfNeeded: a >> 8), UInt8(truncatingIfNeeded: a >> 16),
        UInt8(truncatingIfNeeded: a >> 24), UInt8(truncatingIfNeeded: a >> 32), UInt8(truncatingIfNeeded: a >> 40),
        UInt8(truncatingIfNeeded: a >> 48), UInt8(truncatingIfNeeded: a >> 56), UInt8(truncatingIfNeeded: b),
        UInt8(truncatingIfNeeded: b >> 8), UInt8(truncatingIfNeeded: b >> 16), UInt8(truncatingIfNeeded: b >> 24),
        UInt8(truncatingIfNeeded: b >> 32), UInt8(truncatingIfNeeded: b >> 40), UInt8(truncatingIfNeeded: b >> 48),
        UInt8(truncatingIfNeeded: b >> 56)))
}
