/// One subscriber's view of the scheduler's events: a snapshot first, then every event in
/// order.
///
/// Each subscription has its own bounded buffer. If the subscriber falls so far behind that the
/// buffer fills, the scheduler drops what is buffered rather than wait or grow; the stream then
/// yields ``SchedulerEvent/Kind/lagged(missed:)`` and a fresh snapshot, and goes on from there.
/// Iteration ends when the scheduler has shut down or the consuming task is cancelled; the
/// subscription ends when the stream and its iterators are released.
public struct EventStream: AsyncSequence, Sendable {
    public typealias Element = SchedulerEvent

    final class Subscription: Sendable {
        let bus: EventBus
        let token: Int
        let resync: @Sendable (Int) async -> Void

        init(bus: EventBus, token: Int, resync: @escaping @Sendable (Int) async -> Void) {
            self.bus = bus
            self.token = token
            self.resync = resync
        }

        deinit { bus.unsubscribe(token) }
    }

    let subscription: Subscription

    public func makeAsyncIterator() -> Iterator {
        Iterator(subscription: subscription)
    }

    /// Yields the events of one subscription.
    public struct Iterator: AsyncIteratorProtocol {
        let subscription: Subscription
        private var batch: [SchedulerEvent] = []
        private var index = 0
        private var yieldBudget = EventBus.YieldBudget()
        /// The most events a batch's storage holds and still goes back to the bus for reuse.
        private static let largestRecycled = 4_096

        init(subscription: Subscription) {
            self.subscription = subscription
        }

        /// The events available now, at least one (waiting for it if need be): what a consumer
        /// that writes in batches (a journal) takes at once; `nil` once the stream has ended.
        public mutating func nextBatch() async -> [SchedulerEvent]? {
            if index < batch.count {
                defer { batch = []; index = 0 }
                return index == 0 ? batch : Array(batch[index...])
            }
            guard let first = await next() else { return nil }
            var result = [first]
            if index < batch.count {
                result.append(contentsOf: batch[index...])
                batch = []
                index = 0
            }
            return result
        }

        public mutating func next() async -> SchedulerEvent? {
            while true {
                if index < batch.count {
                    defer { index += 1 }
                    return batch[index]
                }
                // The batch read is emptied here, outside the bus's lock, and its storage
                // handed back for the next one (unless a burst made it big: not kept for good).
                if batch.capacity > Self.largestRecycled { batch = [] } else { batch.removeAll(keepingCapacity: true) }
                index = 0
                switch await subscription.bus.pull(subscription.token, budget: &yieldBudget, recycling: &batch) {
                case .events(let events):
                    batch = events
                case .lagged:
                    await subscription.resync(subscription.token)
                case .finished:
                    return nil
                }
            }
        }

    }
}
