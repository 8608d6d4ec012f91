import Scheduler

/// Collects assign → ack round trips (for the benchmark): the time from queueing an `Assign`
/// on the coordinator to reading the worker's `Ack`, which the worker sends before it spawns.
public final class RoundTripRecorder: Sendable {
    private let samples = Locked<[Duration]>([])

    /// Creates an empty recorder.
    public init() {}

    func record(_ duration: Duration) {
        samples.withLock { $0.append(duration) }
    }

    /// Every round trip recorded so far.
    public var all: [Duration] { samples.withLock { $0 } }
}
