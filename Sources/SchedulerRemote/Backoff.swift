/// The delays between a worker's attempts to reach its coordinator: doubling from `initial`,
/// never above `maximum`, each cut by a random part of up to `jitter` of itself.
///
/// The jitter spreads out workers that lost the same coordinator at the same moment, so they
/// do not all knock again in the same millisecond. A pure value: the caller sleeps.
struct Backoff: Sendable {
    /// The first delay.
    let initial: Duration
    /// The longest delay.
    let maximum: Duration
    /// The largest part of a delay the jitter may take away, from 0 (none) to 1.
    let jitter: Double
    /// The delay before jitter of the next attempt.
    private(set) var base: Duration

    init(initial: Duration, maximum: Duration, jitter: Double = 0.5) {
        self.initial = max(.milliseconds(1), initial)
        self.maximum = max(self.initial, maximum)
        self.jitter = min(1, max(0, jitter))
        base = self.initial
    }

    /// The delay before the next attempt; the one after is twice as long, up to `maximum`.
    mutating func next(using generator: inout some RandomNumberGenerator) -> Duration {
        let delay = base * (1 - jitter * Double.random(in: 0...1, using: &generator))
        base = base * 2 > maximum ? maximum : base * 2
        return delay
    }

    /// Starts again from `initial` (after the worker got in).
    mutating func reset() { base = initial }
}
