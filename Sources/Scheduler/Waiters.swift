/// Tasks suspended until something happens to a `Locked` state: a mailbox gets room, a grace
/// period is cut short. Kept inside that state; ``Locked/wait(in:unless:)`` suspends a task,
/// whoever makes the thing happen takes them all (under the lock) and resumes them (after it).
public struct Waiters: Sendable {
    private var continuations: [Int: CheckedContinuation<Void, Never>] = [:]
    private var nextID = 0

    public init() {}

    /// Removes every waiting task; resume them once the lock is released.
    public mutating func takeAll() -> [CheckedContinuation<Void, Never>] {
        defer { continuations = [:] }
        return Array(continuations.values)
    }

    fileprivate mutating func reserveID() -> Int {
        defer { nextID += 1 }
        return nextID
    }

    fileprivate mutating func add(_ continuation: CheckedContinuation<Void, Never>, as id: Int) {
        continuations[id] = continuation
    }

    fileprivate mutating func remove(_ id: Int) -> CheckedContinuation<Void, Never>? {
        continuations.removeValue(forKey: id)
    }
}

extension Locked {
    /// Suspends the calling task until it is resumed through `waiters` (see
    /// ``Waiters/takeAll()``) or cancelled; returns at once when `isDone` holds now.
    ///
    /// `isDone` is checked under the lock in the same step that stores the waiter, so a change
    /// made (or a cancel that came) just before cannot be missed.
    ///
    /// When `isDone` holds already, it returns without a continuation (resuming one in its own
    /// closure still suspends the task and queues it again) and without making the key path:
    /// in a generic `State` each use of a key path literal builds one at run time, demangling
    /// its type, so `waiters` is only evaluated when the task has to wait.
    public func wait(in waiters: @autoclosure () -> WritableKeyPath<State, Waiters> & Sendable, unless isDone: (State) -> Bool) async {
        if withLock({ isDone($0) }) { return }
        let waiters = waiters()
        guard let id = withLock({ isDone($0) ? nil : $0[keyPath: waiters].reserveID() }) else { return }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = withLock { state -> Bool in
                    if isDone(state) || Task.isCancelled { return true }
                    state[keyPath: waiters].add(continuation, as: id)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = withLock { $0[keyPath: waiters].remove(id) }
            waiter?.resume()
        }
    }
}
