import Synchronization

/// Messages waiting to be written to one stream, in order.
///
/// Any thread may `send`; one writer loop takes everything queued at once with ``next()`` and
/// writes it with a single `write(contentsOf:)`, so writes never overlap and a busy stream pays
/// one wake-up and one flush per batch instead of per message. Unbounded: the messages are
/// small, and a stream that stops draining is soon declared lost by the heartbeat watchdog.
final class Outbox<Message: Sendable>: Sendable {
    private struct State {
        var queue: [Message] = []
        var waiter: CheckedContinuation<[Message]?, Never>?
        var isFinished = false
    }

    private let state = Mutex(State())

    init() {}

    /// Queues a message; dropped once the outbox is finished.
    func send(_ message: Message) {
        let waiter = state.withLock { state -> CheckedContinuation<[Message]?, Never>? in
            guard !state.isFinished else { return nil }
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.queue.append(message)
            return nil
        }
        waiter?.resume(returning: [message])
    }

    /// Ends the stream after the messages already queued.
    func finish() {
        let waiter = state.withLock { state -> CheckedContinuation<[Message]?, Never>? in
            state.isFinished = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: nil)
    }

    /// Everything queued, waiting for at least one message; `nil` once finished and empty, or
    /// when the calling task is cancelled. One caller at a time.
    func next() async -> [Message]? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ready = state.withLock { state -> [Message]?? in
                    if !state.queue.isEmpty {
                        defer { state.queue.removeAll(keepingCapacity: true) }
                        return .some(state.queue)
                    }
                    if state.isFinished || Task.isCancelled { return .some(nil) }
                    state.waiter = continuation
                    return .none
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<[Message]?, Never>? in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(returning: nil)
        }
    }
}
