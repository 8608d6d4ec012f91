import Scheduler

/// The subscribers to a side channel of events (a listener's joins and losses, an agent's
/// connection changes): each subscriber gets every event published after it subscribed, in
/// one order for all, on a stream of its own.
///
/// These events are rare (a few per worker connection, one per reconnect attempt), so a
/// subscriber's stream keeps up to ``limit`` unread events; past that the oldest unread ones are
/// dropped rather than letting a subscriber that stopped reading grow without end. A subscriber
/// leaves when its stream is dropped or its reading task is cancelled.
final class Subscribers<Event: Sendable>: Sendable {
    private struct State {
        var continuations: [Int: AsyncStream<Event>.Continuation] = [:]
        var nextID = 0
    }

    private let state = Locked(State())
    /// The unread events a subscriber's stream keeps at most.
    let limit: Int

    init(limit: Int = 1_024) {
        self.limit = max(1, limit)
    }

    /// A stream of every event published from now on.
    func subscribe() -> AsyncStream<Event> {
        let (stream, continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .bufferingNewest(limit))
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            state.continuations[state.nextID] = continuation
            return state.nextID
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.continuations.removeValue(forKey: id) }
        }
        return stream
    }

    /// Hands `event` to every subscriber.
    func publish(_ event: Event) {
        // Under the lock, so that events published from two threads reach every subscriber in
        // the same order. A yield only queues the event (and wakes a waiting reader); it never
        // calls back into this type.
        state.withLock { state in
            for continuation in state.continuations.values { continuation.yield(event) }
        }
    }
}
