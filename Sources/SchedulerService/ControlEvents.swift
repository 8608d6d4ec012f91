import Scheduler

/// A subscription's events as they come from the serve, read from the socket only as fast as
/// they are consumed.
///
/// At most ``EventPipe/limit`` events wait here unread; while they do, the call is not read
/// either, so HTTP/2's flow control holds the serve's writer, and the serve's subscription does
/// what it does for any slow subscriber: a `latest` one is marked lagged and skips ahead to a
/// fresh snapshot, a `lossless` one slows the jobs down. Before, the client read everything into
/// an unbounded buffer: a dashboard that fell behind grew without limit instead.
public struct ControlEvents: AsyncSequence, Sendable {
    public typealias Element = SchedulerEvent
    public typealias Failure = Never

    let pipe: EventPipe

    public struct AsyncIterator: AsyncIteratorProtocol {
        let pipe: EventPipe

        public mutating func next() async -> SchedulerEvent? { await pipe.take() }

        public mutating func next(isolation actor: isolated (any Actor)?) async -> SchedulerEvent? { await pipe.take() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(pipe: pipe) }
}

/// The hand-over between the task reading the call and the consumer: a buffer of at most
/// `limit` events; the reader waits while it is full, the consumer while it is empty.
final class EventPipe: Sendable {
    private struct State {
        var buffer: [SchedulerEvent] = []
        var head = 0
        var consumer: CheckedContinuation<SchedulerEvent?, Never>?
        var producer: CheckedContinuation<Void, Never>?
        var isFinished = false

        var count: Int { buffer.count - head }

        mutating func popFirst() -> SchedulerEvent? {
            guard head < buffer.count else { return nil }
            let event = buffer[head]
            head += 1
            if head >= 1_024 && head * 2 >= buffer.count {
                buffer.removeFirst(head)
                head = 0
            }
            return event
        }
    }

    let limit: Int
    private let state = Locked(State())
    /// Called once when the consumer stops waiting because its task was cancelled.
    private let onCancel: @Sendable () -> Void

    init(limit: Int, onCancel: @escaping @Sendable () -> Void) {
        precondition(limit > 0)
        self.limit = limit
        self.onCancel = onCancel
    }

    /// Hands `event` over; waits while `limit` events are unread.
    func put(_ event: SchedulerEvent) async {
        let (consumer, mustWait) = state.withLock { state -> (CheckedContinuation<SchedulerEvent?, Never>?, Bool) in
            if state.isFinished { return (nil, false) }
            if let consumer = state.consumer {
                state.consumer = nil
                return (consumer, false)
            }
            state.buffer.append(event)
            return (nil, state.count >= limit)
        }
        if let consumer { return consumer.resume(returning: event) }
        guard mustWait else { return }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    guard state.count >= limit, !state.isFinished, !Task.isCancelled else { return true }
                    state.producer = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            // The reader is being stopped (``ControlClient/close()``): let it go.
            let producer = state.withLock { state -> CheckedContinuation<Void, Never>? in
                defer { state.producer = nil }
                return state.producer
            }
            producer?.resume()
        }
    }

    /// The next event, waiting for it; `nil` once the call has ended and everything was taken,
    /// or when the consumer's task is cancelled.
    func take() async -> SchedulerEvent? {
        let (event, producer) = state.withLock { state -> (SchedulerEvent?, CheckedContinuation<Void, Never>?) in
            let event = state.popFirst()
            guard event != nil, state.count < limit, let producer = state.producer else { return (event, nil) }
            state.producer = nil
            return (event, producer)
        }
        producer?.resume()
        if let event { return event }
        if Task.isCancelled { return nil }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<SchedulerEvent?, Never>) in
                let ready = state.withLock { state -> SchedulerEvent?? in
                    if let event = state.popFirst() { return .some(event) }
                    if state.isFinished || Task.isCancelled { return .some(nil) }
                    state.consumer = continuation
                    return .none
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            let consumer = state.withLock { state -> CheckedContinuation<SchedulerEvent?, Never>? in
                defer { state.consumer = nil }
                return state.consumer
            }
            consumer?.resume(returning: nil)
            onCancel()
        }
    }

    /// The call has ended: the consumer gets what is left, then `nil`; a waiting reader goes on.
    func finish() {
        let (consumer, producer) = state.withLock { state -> (CheckedContinuation<SchedulerEvent?, Never>?, CheckedContinuation<Void, Never>?) in
            state.isFinished = true
            defer { state.consumer = nil; state.producer = nil }
            return (state.count == 0 ? state.consumer : nil, state.producer)
        }
        consumer?.resume(returning: nil)
        producer?.resume()
    }
}
