import DequeModule
import Dispatch

/// The one mailbox type: producers put elements in, one consumer takes everything there is at
/// once, waiting (asynchronously) while it is empty.
///
/// Taking whole batches makes a burst cost one wake-up. Putting never waits. A producer that
/// wants back-pressure waits for room first: on a thread of its own (a file reader) with
/// ``sendBlocking(contentsOf:)``, which blocks while the mailbox holds `capacity` elements or more
/// (never call that from Swift's cooperative pool); in a task with ``waitForRoom()``.
public final class Mailbox<Element: Sendable>: Sendable {
    private struct State {
        var items: Deque<Element> = []
        var waiter: CheckedContinuation<Void, Never>?
        var isFinished = false
        /// Threads blocked in `sendBlocking`, waiting for room.
        var blockedSenders = 0
        /// Tasks in `waitForRoom`.
        var roomWaiters = Waiters()
    }

    private let state = Locked(State())
    private let room = DispatchSemaphore(value: 0)
    /// The number of elements above which ``sendBlocking(contentsOf:)`` waits.
    public let capacity: Int

    /// Creates an empty mailbox.
    ///
    /// - Parameter capacity: How many elements ``sendBlocking(contentsOf:)`` lets pile up.
    public init(capacity: Int = .max) {
        self.capacity = max(1, capacity)
    }

    /// Puts elements in without waiting. Elements sent after ``finish()`` are dropped.
    ///
    /// - Returns: `false` when the mailbox was finished (nothing was put in).
    @discardableResult
    public func send(contentsOf elements: some Sequence<Element>) -> Bool {
        let (accepted, waiter) = state.withLock { state -> (Bool, CheckedContinuation<Void, Never>?) in
            guard !state.isFinished else { return (false, nil) }
            state.items.append(contentsOf: elements)
            if state.items.isEmpty { return (true, nil) }
            defer { state.waiter = nil }
            return (true, state.waiter)
        }
        waiter?.resume()
        return accepted
    }

    /// Puts one element in without waiting.
    @discardableResult
    public func send(_ element: Element) -> Bool {
        send(contentsOf: CollectionOfOne(element))
    }

    /// Puts elements in, first blocking the calling thread while the mailbox holds `capacity`
    /// elements or more. For producers on a thread of their own only.
    ///
    /// - Returns: `false` when the mailbox was finished (nothing was put in).
    @discardableResult
    public func sendBlocking(contentsOf elements: some Sequence<Element>) -> Bool {
        while true {
            let mustWait = state.withLock { state -> Bool in
                guard !state.isFinished, state.items.count >= capacity else { return false }
                state.blockedSenders += 1
                return true
            }
            guard mustWait else { break }
            room.wait()
        }
        return send(contentsOf: elements)
    }

    /// Takes every element there is, waiting while there is none.
    ///
    /// - Returns: The elements in the order they were put in; `nil` once the mailbox is finished
    ///   and empty, or when the waiting task is cancelled.
    public func take() async -> [Element]? {
        while true {
            let (ready, wake, roomWaiters) = state.withLock { state -> ([Element]??, Int, [CheckedContinuation<Void, Never>]) in
                if !state.items.isEmpty {
                    let items = Array(state.items)
                    state.items.removeAll(keepingCapacity: true)
                    defer { state.blockedSenders = 0 }
                    return (.some(items), state.blockedSenders, state.roomWaiters.takeAll())
                }
                return (state.isFinished ? .some(nil) : nil, 0, [])
            }
            for _ in 0..<wake { room.signal() }
            for waiter in roomWaiters { waiter.resume() }
            if let ready { return ready }
            if Task.isCancelled { return nil }
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let resumeNow = state.withLock { state -> Bool in
                        // Checked under the lock: a cancel that came before the waiter was stored
                        // found no waiter to resume.
                        if !state.items.isEmpty || state.isFinished || Task.isCancelled { return true }
                        state.waiter = continuation
                        return false
                    }
                    if resumeNow { continuation.resume() }
                }
            } onCancel: {
                let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                    defer { state.waiter = nil }
                    return state.waiter
                }
                waiter?.resume()
            }
        }
    }

    /// Waits (asynchronously) while the mailbox holds `capacity` elements or more: until the
    /// consumer takes them, the mailbox is finished or the waiting task is cancelled. A producer
    /// in a task calls it before it sends, for back-pressure.
    public func waitForRoom() async {
        let capacity = capacity
        await state.wait(in: \.roomWaiters) { $0.isFinished || $0.items.count < capacity }
    }

    /// Ends the mailbox: the consumer gets what is in it, then `nil`; senders are refused and
    /// blocked senders (and tasks waiting for room) let go.
    public func finish() {
        let (waiter, blocked, roomWaiters) = state.withLock { state -> (CheckedContinuation<Void, Never>?, Int, [CheckedContinuation<Void, Never>]) in
            state.isFinished = true
            defer {
                state.waiter = nil
                state.blockedSenders = 0
            }
            return (state.waiter, state.blockedSenders, state.roomWaiters.takeAll())
        }
        waiter?.resume()
        for _ in 0..<blocked { room.signal() }
        for waiter in roomWaiters { waiter.resume() }
    }
}
