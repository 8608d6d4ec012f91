/// Messages waiting to be written to one stream, in order.
///
/// Any thread may `send`; one writer loop drains `messages` into the gRPC writer, so writes to
/// the stream never overlap. Unbounded: the messages are small and a stream that stops
/// draining is soon declared lost by the heartbeat watchdog.
final class Outbox<Message: Sendable>: Sendable {
    let messages: AsyncStream<Message>
    private let continuation: AsyncStream<Message>.Continuation

    init() {
        (messages, continuation) = AsyncStream.makeStream(of: Message.self, bufferingPolicy: .unbounded)
    }

    /// Queues a message; dropped once the outbox is finished.
    func send(_ message: Message) {
        continuation.yield(message)
    }

    /// Ends the stream after the messages already queued.
    func finish() {
        continuation.finish()
    }
}
