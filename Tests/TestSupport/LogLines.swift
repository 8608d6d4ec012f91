import Scheduler

/// Lines a listener, an agent or a server logged, for tests that read them.
public final class LogLines: Sendable {
    private struct State {
        var lines: [String] = []
        var waiters: [(predicate: @Sendable ([String]) -> Bool, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state = Locked(State())

    public init() {}

    /// What the code under test logs to.
    public var sink: @Sendable (String) -> Void {
        { line in
            let ready = self.state.withLock { state -> [CheckedContinuation<Void, Never>] in
                state.lines.append(line)
                let lines = state.lines
                let (ready, waiting) = (state.waiters.filter { $0.predicate(lines) }, state.waiters.filter { !$0.predicate(lines) })
                state.waiters = waiting
                return ready.map(\.continuation)
            }
            for continuation in ready { continuation.resume() }
        }
    }

    /// Every line so far.
    public var all: [String] { state.withLock { $0.lines } }

    /// Returns once the lines logged so far satisfy `predicate` (at once if they do now).
    public func waitUntil(_ predicate: @escaping @Sendable ([String]) -> Bool) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                if predicate(state.lines) { return true }
                state.waiters.append((predicate, continuation))
                return false
            }
            if now { continuation.resume() }
        }
    }
}
