
/// Hands attempts the scheduler decided to start to its run loop, which owns the task group.
///
/// Starts arrive in batches: the run loop takes everything pending at once, so a burst of
/// dispatches costs one wake-up.
final class Launcher: Sendable {
    private struct State {
        var pending: [JobAssignmentHandle] = []
        var waiter: CheckedContinuation<[JobAssignmentHandle]?, Never>?
        var isFinished = false
    }

    private let state = Locked(State())

    func submit(_ assignments: [JobAssignmentHandle]) {
        guard !assignments.isEmpty else { return }
        let resume = state.withLock { state -> (CheckedContinuation<[JobAssignmentHandle]?, Never>, [JobAssignmentHandle])? in
            if let waiter = state.waiter {
                state.waiter = nil
                let batch = state.pending + assignments
                state.pending = []
                return (waiter, batch)
            }
            state.pending.append(contentsOf: assignments)
            return nil
        }
        if let (waiter, batch) = resume { waiter.resume(returning: batch) }
    }

    /// No more starts: the run loop ends once it has taken what is pending.
    func finish() {
        let waiter = state.withLock { state -> CheckedContinuation<[JobAssignmentHandle]?, Never>? in
            state.isFinished = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: nil)
    }

    /// The next batch, or `nil` when finished.
    func next() async -> [JobAssignmentHandle]? {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> [JobAssignmentHandle]?? in
                if !state.pending.isEmpty {
                    defer { state.pending = [] }
                    return .some(state.pending)
                }
                if state.isFinished { return .some(nil) }
                state.waiter = continuation
                return .none
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}

/// An assignment with the worker that runs it.
struct JobAssignmentHandle: Sendable {
    let assignment: JobAssignment
    let worker: any Worker
}
