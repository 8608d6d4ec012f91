/// The task in which one slot runs attempts one after another, so that a closure job runs in it
/// directly (no task of its own) and a stop can still cancel that one attempt.
///
/// A closure job is stopped by cancelling the task it runs in. Giving every attempt its own task
/// costs a task creation and two hops per job; instead the slot's attempts share one task, and a
/// stop cancels it only while the attempt that asked is the one running (a stale stop, for an
/// attempt that has ended, reaches nothing). A cancelled slot task runs nothing more: the driver
/// reports the attempt and hands the slot's next attempt to a fresh task.
///
/// Order of calls, all from the driver except ``cancel(_:)``: ``attach(_:)`` once the task
/// exists, ``waitUntilAttached()`` at the top of the task (so no attempt starts before a stop
/// can reach it), then per attempt ``begin()`` ... ``end()``.
final class SlotTask: Sendable {
    /// Which attempt of the slot a stop was meant for.
    struct Attempt: Sendable, Equatable {
        fileprivate let number: UInt64
    }

    private struct State {
        var task: Task<Void, Never>?
        var attachWaiter: CheckedContinuation<Void, Never>?
        var isAttached = false
        var current: Attempt?
        var nextNumber: UInt64 = 0
        /// A stop cancelled (or will cancel, once attached) the task.
        var isCancelled = false
    }

    private let state = Locked(State())

    /// Says which task this is; a stop that came earlier cancels it now.
    func attach(_ task: Task<Void, Never>) {
        let (waiter, cancel) = state.withLock { state -> (CheckedContinuation<Void, Never>?, Bool) in
            state.task = task
            state.isAttached = true
            defer { state.attachWaiter = nil }
            return (state.attachWaiter, state.isCancelled)
        }
        if cancel { task.cancel() }
        waiter?.resume()
    }

    /// Returns once ``attach(_:)`` has run.
    func waitUntilAttached() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { state -> Bool in
                if state.isAttached { return true }
                state.attachWaiter = continuation
                return false
            }
            if ready { continuation.resume() }
        }
    }

    /// An attempt starts running in the task; stops name it.
    func begin() -> Attempt {
        state.withLock { state in
            let attempt = Attempt(number: state.nextNumber)
            state.nextNumber &+= 1
            state.current = attempt
            return attempt
        }
    }

    /// The attempt ended. Returns whether the task was cancelled (by a stop of this attempt, or
    /// because its owner was): then it must run nothing more.
    func end() -> Bool {
        let cancelled = state.withLock { state -> Bool in
            state.current = nil
            return state.isCancelled
        }
        return cancelled || Task.isCancelled
    }

    /// Cancels the task if `attempt` is still the one running in it.
    func cancel(_ attempt: Attempt) {
        let task = state.withLock { state -> Task<Void, Never>? in
            guard state.current == attempt, !state.isCancelled else { return nil }
            state.isCancelled = true
            return state.task
        }
        task?.cancel()
    }
}
