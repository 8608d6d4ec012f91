/// Says whether producers of events may go on: closed while a lossless subscriber has more
/// unread events than its limit, open again once it has taken them.
///
/// The scheduler never waits for a subscriber. A lossless subscriber instead slows the producers
/// down at their source: while the gate is closed the engine starts no new job, and the process
/// reactor stops reading job output, so the jobs block on their full pipes as they would writing
/// to a slow terminal. Nothing is dropped and nothing grows without bound.
final class FlowGate: Sendable {
    private struct State {
        var isClosed = false
        var generation: UInt64 = 0
        var whenOpen: [@Sendable () -> Void] = []
        var observer: (@Sendable () -> Void)?
    }

    private let state = Locked(State())

    /// Whether producers may go on.
    var isOpen: Bool { state.withLock { !$0.isClosed } }

    /// Calls `action` once the gate is open: at once (on this thread) when it is, else on the
    /// thread that opens it.
    func whenOpen(_ action: @escaping @Sendable () -> Void) {
        let now = state.withLock { state -> Bool in
            guard state.isClosed else { return true }
            state.whenOpen.append(action)
            return false
        }
        if now { action() }
    }

    /// Calls `observer` after every change of the gate (it reads ``isOpen`` for the present state:
    /// calls from two threads may arrive out of order).
    func observe(_ observer: @escaping @Sendable () -> Void) {
        state.withLock { $0.observer = observer }
    }

    /// Closes or opens the gate; opening runs what waited for it.
    ///
    /// - Parameter generation: Increases with every change the caller decided (under its own
    ///   lock); a change that arrives after a newer one is ignored, so that two threads setting
    ///   the gate at once cannot leave it in the older state.
    func set(closed: Bool, generation: UInt64) {
        let (waiting, observer) = state.withLock { state -> ([@Sendable () -> Void], (@Sendable () -> Void)?) in
            guard generation > state.generation else { return ([], nil) }
            state.generation = generation
            state.isClosed = closed
            guard !closed else { return ([], state.observer) }
            defer { state.whenOpen = [] }
            return (state.whenOpen, state.observer)
        }
        observer?()
        for action in waiting { action() }
    }
}
