import DequeModule
import Synchronization

/// Fans events out to any number of subscribers without ever waiting for one.
///
/// Publishing numbers the events and appends them to each subscriber's bounded buffer under one
/// short lock. A subscriber whose buffer is full is marked lagged: its buffer is dropped and it
/// counts what it missed until it takes a fresh snapshot. Memory stays bounded and the publisher
/// never blocks. A lossless subscriber (a log) is never dropped: when its buffer passes its limit
/// the bus closes its ``FlowGate`` and the producers slow down at their source until it has read.
/// The limit counts events, and job output by its bytes too (``outputByteLimit``):
/// a job's line can be 16 KiB, and 8,192 of them would be 128 MiB.
/// Snapshots are built outside the lock (they are as big as the job table): the subscriber is
/// registered first, and its snapshot put in front of whatever arrived meanwhile.
final class EventBus: Sendable {
    fileprivate struct Subscriber {
        var buffer: [SchedulerEvent] = []
        let limit: Int
        let includeOutput: Bool
        /// Never dropped: a full buffer closes the flow gate instead.
        let isLossless: Bool
        /// A lossless subscriber over its limit: it holds the flow gate closed.
        var isCongested = false
        /// Events dropped since the subscriber fell behind; `nil` while it keeps up.
        var missed: Int?
        /// The bytes of the job output lines in `buffer`.
        var outputBytes = 0
        /// Its snapshot is being built: nothing is handed out until it is in front.
        var awaitsSnapshot = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    fileprivate struct State {
        var lastSeq: UInt64 = 0
        var subscribers: [Int: Subscriber] = [:]
        var nextToken = 0
        var isFinished = false
        /// Lossless subscribers over their limit.
        var congested = 0
        /// Counts the flow gate's changes (see ``FlowGate/set(closed:generation:)``).
        var flowGeneration: UInt64 = 0
        /// The most events any lossless subscriber has had unread (for tests).
        var mostUnread = 0
        /// The most bytes of job output any lossless subscriber has had unread (for tests).
        var mostUnreadOutputBytes = 0
    }

    /// The bytes of job output a subscriber may have unread, beyond its limit in events: over
    /// it, a lossless subscriber holds the flow gate closed and another lags, as over its limit.
    static let outputByteLimit = 2 << 20

    private let state = Locked(State())

    /// Counts the changes that may give a subscriber something to pull (an event, a snapshot, the
    /// end), bumped after the lock is released: a subscriber looking again before it parks reads
    /// it instead of taking the lock the publisher needs.
    private let changes = Atomic<UInt64>(0)

    private func changed() {
        changes.wrappingAdd(1, ordering: .releasing)
    }

    /// Closed while a lossless subscriber is behind.
    let flow = FlowGate()

    /// The most events a lossless subscriber has had unread at once.
    var mostUnreadByLosslessSubscribers: Int { state.withLock { $0.mostUnread } }

    /// The most bytes of job output a lossless subscriber has had unread at once.
    var mostUnreadOutputBytesByLosslessSubscribers: Int { state.withLock { $0.mostUnreadOutputBytes } }

    /// The number of the last event published.
    var lastSeq: UInt64 { state.withLock { $0.lastSeq } }

    /// Publishes events in order.
    ///
    /// - Returns: Whether a lossless subscriber is behind now (the flow gate is closed): the
    ///   publisher of state changes holds back new jobs at once instead of asking the gate.
    @discardableResult
    func publish(_ kinds: [SchedulerEvent.Kind], time: SchedulerTime) -> Bool {
        guard !kinds.isEmpty else { return false }
        var toResume: [CheckedContinuation<Void, Never>] = []
        let (flowChange, isBehind) = state.withLock { state -> (UInt64?, Bool) in
            let first = state.lastSeq + 1
            state.lastSeq += UInt64(kinds.count)
            guard !state.subscribers.isEmpty else { return (nil, false) }
            let wasCongested = state.congested
            var newlyCongested = 0
            var (mostUnread, mostBytes) = (state.mostUnread, state.mostUnreadOutputBytes)
            state.subscribers.forEachInPlace { subscriber in
                if subscriber.deliver(kinds, from: first, time: time, into: &toResume) { newlyCongested += 1 }
                if subscriber.isLossless {
                    mostUnread = max(mostUnread, subscriber.buffer.count)
                    mostBytes = max(mostBytes, subscriber.outputBytes)
                }
            }
            state.congested += newlyCongested
            (state.mostUnread, state.mostUnreadOutputBytes) = (mostUnread, mostBytes)
            let isBehind = state.congested > 0
            return (wasCongested == 0 && isBehind ? state.nextFlowGeneration() : nil, isBehind)
        }
        changed()
        if let flowChange { flow.set(closed: true, generation: flowChange) }
        for waiter in toResume { waiter.resume() }
        return isBehind
    }

    /// Publishes one event.
    func publish(_ kind: SchedulerEvent.Kind, time: SchedulerTime) {
        publish(CollectionOfOne(kind).map { $0 }, time: time)
    }

    /// Adds a subscriber whose first event is the snapshot `makeSnapshot` builds for the
    /// sequence number at which it was registered.
    ///
    /// Call it from the one publisher of state changes (a step under the scheduler's lock), so
    /// that no state change is published while the snapshot is built; output and progress
    /// published from other threads meanwhile follow the snapshot in order.
    func subscribe(
        limit: Int, includeOutput: Bool, isLossless: Bool = false, time: SchedulerTime,
        makeSnapshot: (UInt64) -> SchedulerSnapshot
    ) -> Int {
        let (token, seq) = state.withLock { state -> (Int, UInt64) in
            let token = state.nextToken
            state.nextToken += 1
            var subscriber = Subscriber(limit: max(16, limit), includeOutput: includeOutput, isLossless: isLossless)
            subscriber.awaitsSnapshot = true
            // Even after a shutdown: a late subscriber still gets the final state, then the end.
            state.subscribers[token] = subscriber
            return (token, state.lastSeq)
        }
        let snapshot = SchedulerEvent(seq: seq, time: time, kind: .snapshot(makeSnapshot(seq)))
        putInFront([snapshot], of: token)
        return token
    }

    /// Replaces a lagged subscriber's buffer with a lag marker and a fresh snapshot (built
    /// outside the lock, as in ``subscribe(limit:includeOutput:time:makeSnapshot:)``).
    func resync(_ token: Int, time: SchedulerTime, makeSnapshot: (UInt64) -> SchedulerSnapshot) {
        let lag = state.withLock { state -> (missed: Int, seq: UInt64)? in
            guard var subscriber = state.subscribers[token], let missed = subscriber.missed, !subscriber.awaitsSnapshot else {
                return nil
            }
            subscriber.buffer = []
            subscriber.missed = nil
            subscriber.awaitsSnapshot = true
            state.subscribers[token] = subscriber
            return (missed, state.lastSeq)
        }
        guard let lag else { return }
        putInFront([
            SchedulerEvent(seq: lag.seq, time: time, kind: .lagged(missed: lag.missed)),
            SchedulerEvent(seq: lag.seq, time: time, kind: .snapshot(makeSnapshot(lag.seq))),
        ], of: token)
    }

    private func putInFront(_ events: [SchedulerEvent], of token: Int) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard var subscriber = state.subscribers[token] else { return nil }
            subscriber.awaitsSnapshot = false
            // If it fell behind again meanwhile, the next resync brings a newer snapshot.
            if subscriber.missed == nil { subscriber.buffer.insert(contentsOf: events, at: 0) }
            let waiter = subscriber.waiter
            subscriber.waiter = nil
            state.subscribers[token] = subscriber
            return waiter
        }
        changed()
        waiter?.resume()
    }

    enum Pull {
        case events([SchedulerEvent])
        case lagged
        case finished
    }

    /// How many times a subscriber that found nothing lets the other tasks run and looks again
    /// before it parks.
    ///
    /// A parked subscriber is woken by the next publish, and on this 2-vCPU VM a thread's wake-up
    /// costs more than a step of the scheduler: with jobs ending 200,000 times a second, parking
    /// after every drained batch made the subscriber's thread sleep and wake once per step (133,510
    /// context switches for 300,000 closure jobs). Yielding a few times first finds the next
    /// events waiting most of the time (3,834 context switches; 209k -> 272k jobs/s, CPU per job
    /// about the same). When nothing comes, it costs a few task switches before the same park.
    /// Between yields it reads ``changes`` rather than taking the lock: looking under the lock
    /// each time made the publisher wait for it (futex waits and wakes, 15% of the CPU).
    static let yieldsBeforeParking = 6

    /// A park shorter than this says events come fast enough that yielding first finds them.
    static let shortPark: Duration = .microseconds(50)

    /// How many times one subscriber yields before it parks: ``yieldsBeforeParking`` while
    /// events come fast, none while they come slowly. Yielding costs more than it saves when
    /// nothing comes during it: each yield can wake another thread of the pool for nothing
    /// (2,000 shell jobs, one event every ~100 µs: a third of a wasted wake-up per job). So a
    /// subscriber that had to park for longer than ``shortPark`` parks at once the next time,
    /// and one whose park was short yields again.
    struct YieldBudget: Sendable {
        var yields = EventBus.yieldsBeforeParking

        mutating func parked(for duration: Duration) {
            yields = duration < EventBus.shortPark ? EventBus.yieldsBeforeParking : 0
        }
    }

    /// ``pull(_:budget:recycling:)`` with a budget of its own.
    func pull(_ token: Int) async -> Pull {
        var budget = YieldBudget()
        var spare: [SchedulerEvent] = []
        return await pull(token, budget: &budget, recycling: &spare)
    }

    /// Takes everything buffered for `token`, waiting while there is nothing.
    ///
    /// - Parameter spare: An empty array whose storage becomes the subscriber's next buffer
    ///   (the batch it took last time, emptied): a subscriber pulls every few events while jobs
    ///   end quickly (350,000 pulls for 400,000 closure jobs), and a fresh buffer per pull was
    ///   an allocation under the lock the publisher needs and a free in the subscriber.
    func pull(_ token: Int, budget: inout YieldBudget, recycling spare: inout [SchedulerEvent]) async -> Pull {
        var yields = 0
        // The count of changes when the buffer was last looked at under the lock (`nil`: look).
        var looked: UInt64?
        while true {
            let now = changes.load(ordering: .acquiring)
            if looked != now {
                looked = now
                if let ready = tryPull(token, recycling: &spare) { return ready }
            }
            if Task.isCancelled { return .finished }
            if yields < budget.yields {
                yields += 1
                await Task.yield()
                continue
            }
            yields = 0
            looked = nil
            let parkedAt = ContinuousClock.now
            defer { budget.parked(for: .now - parkedAt) }
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let resumeNow = state.withLock { state -> Bool in
                        // In place, as in `tryPull`.
                        guard let index = state.subscribers.index(forKey: token), !state.isFinished else { return true }
                        if Task.isCancelled { return true }
                        return !state.subscribers.values[index].park(continuation)
                    }
                    if resumeNow { continuation.resume() }
                }
            } onCancel: {
                let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                    defer { state.subscribers[token]?.waiter = nil }
                    return state.subscribers[token]?.waiter
                }
                waiter?.resume()
            }
        }
    }

    private func tryPull(_ token: Int, recycling spare: inout [SchedulerEvent]) -> Pull? {
        let (pull, flowChange) = state.withLock { state -> (Pull?, UInt64?) in
            // The subscriber is changed where it is (by index): taking a copy out and putting it
            // back cost two hash lookups and a retain and release of each of its references, on
            // every pull, under the lock the publisher needs.
            guard let index = state.subscribers.index(forKey: token) else { return (.finished, nil) }
            switch state.subscribers.values[index].takeBuffer(recycling: &spare) {
            case .awaitsSnapshot: return (nil, nil)
            case .lagged: return (.lagged, nil)
            case .empty: return (state.isFinished ? .finished : nil, nil)
            case .events(let events, let wasCongested):
                return (.events(events), wasCongested ? state.countUncongested() : nil)
            }
        }
        if let flowChange { flow.set(closed: false, generation: flowChange) }
        return pull
    }

    /// Removes a subscriber.
    func unsubscribe(_ token: Int) {
        let (waiter, flowChange) = state.withLock { state -> (CheckedContinuation<Void, Never>?, UInt64?) in
            guard var subscriber = state.subscribers.removeValue(forKey: token) else { return (nil, nil) }
            let flowChange = subscriber.isCongested ? state.uncongest(&subscriber) : nil
            return (subscriber.waiter, flowChange)
        }
        changed()
        if let flowChange { flow.set(closed: false, generation: flowChange) }
        waiter?.resume()
    }

    /// Ends every subscription once its buffer is drained.
    func finish() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.isFinished = true
            var waiters: [CheckedContinuation<Void, Never>] = []
            state.subscribers.forEachInPlace { subscriber in
                if let waiter = subscriber.waiter { waiters.append(waiter) }
                subscriber.waiter = nil
            }
            return waiters
        }
        changed()
        for waiter in waiters { waiter.resume() }
    }
}

extension EventBus.State {
    fileprivate mutating func nextFlowGeneration() -> UInt64 {
        flowGeneration += 1
        return flowGeneration
    }

    /// Marks a congested subscriber as caught up; returns the flow gate's next generation when
    /// that opens the gate.
    fileprivate mutating func uncongest(_ subscriber: inout EventBus.Subscriber) -> UInt64? {
        subscriber.isCongested = false
        return countUncongested()
    }

    /// One lossless subscriber is no longer congested (its flag cleared already).
    ///
    /// - Returns: The flow gate's new generation when it opens.
    fileprivate mutating func countUncongested() -> UInt64? {
        congested -= 1
        return congested == 0 ? nextFlowGeneration() : nil
    }
}

extension EventBus.Subscriber {
    /// What ``takeBuffer()`` found.
    fileprivate enum Taken {
        case awaitsSnapshot
        case lagged
        case empty
        /// The buffered events, and whether the subscriber was congested (it is not now).
        case events([SchedulerEvent], wasCongested: Bool)
    }

    /// Keeps `waiter` to be resumed by the next event, unless there is something to hand out
    /// already.
    ///
    /// - Returns: Whether it was kept (else resume it now).
    fileprivate mutating func park(_ continuation: CheckedContinuation<Void, Never>) -> Bool {
        if !awaitsSnapshot && (missed != nil || !buffer.isEmpty) { return false }
        waiter = continuation
        return true
    }

    /// Hands out the buffered events, if the subscriber may have them now; `spare` (empty)
    /// becomes the buffer.
    fileprivate mutating func takeBuffer(recycling spare: inout [SchedulerEvent]) -> Taken {
        if awaitsSnapshot { return .awaitsSnapshot }
        if missed != nil { return .lagged }
        if buffer.isEmpty { return .empty }
        var events = spare
        spare = []
        swap(&events, &buffer)
        outputBytes = 0
        defer { isCongested = false }
        return .events(events, wasCongested: isCongested)
    }

    /// Appends the events numbered from `first` straight into the buffer, no array of events
    /// built first and copied (a lagging subscriber only counts them).
    ///
    /// - Returns: `true` when this made a lossless subscriber congested.
    fileprivate mutating func deliver(
        _ kinds: [SchedulerEvent.Kind], from first: UInt64, time: SchedulerTime,
        into toResume: inout [CheckedContinuation<Void, Never>]
    ) -> Bool {
        if let missed {
            self.missed = missed + kinds.count
            return false
        }
        for index in kinds.indices {
            // (Matched in place: binding the line, or looping over copies, retained and released
            // every output line for a subscriber that takes none.)
            if case .output = kinds[index] {
                guard includeOutput else { continue }
                if case .output(_, let line) = kinds[index] { outputBytes += line.text.utf8.count }
            }
            buffer.append(SchedulerEvent(seq: first + UInt64(index), time: time, kind: kinds[index]))
        }
        var becameCongested = false
        if buffer.count > limit || outputBytes > EventBus.outputByteLimit {
            if isLossless {
                becameCongested = !isCongested
                isCongested = true
            } else {
                missed = buffer.count
                buffer = []
                outputBytes = 0
            }
        }
        if let waiter {
            self.waiter = nil
            toResume.append(waiter)
        }
        return becameCongested
    }
}

extension Dictionary {
    /// Changes every value in place.
    ///
    /// Looping over `keys` (or `values.indices`) while writing through a subscript keeps a
    /// second reference to the storage, so the first write copies the whole dictionary, and with
    /// it each value's buffers: a publish then cost O(events buffered) instead of O(new events).
    /// Plain indices hold no reference.
    fileprivate mutating func forEachInPlace(_ body: (inout Value) -> Void) {
        var index = startIndex
        while index != endIndex {
            body(&values[index])
            formIndex(after: &index)
        }
    }
}
