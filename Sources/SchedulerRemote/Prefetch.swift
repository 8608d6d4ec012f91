import Scheduler

/// How many assignments a remote worker may hold beyond its slots: they wait in the worker's
/// own queue and start the moment a slot frees there, without a round trip to the coordinator.
public enum Prefetch: Sendable, Equatable, CustomStringConvertible {
    /// Always this many (0: none; a slot that frees waits a round trip for its next job).
    case fixed(Int)
    /// Sized to each worker's link and jobs (``PrefetchDepth``): 1 to start with, then enough
    /// that a slot that frees finds its next job waiting, at most ``PrefetchDepth/limit(slots:)``.
    case automatic

    /// The depth a worker joins with.
    var initialDepth: Int {
        switch self {
        case .fixed(let depth): max(0, depth)
        case .automatic: 1
        }
    }

    public var description: String {
        switch self {
        case .fixed(let depth): "\(depth)"
        case .automatic: "auto"
        }
    }
}

/// The automatic prefetch depth of one worker (``Prefetch/automatic``).
///
/// A slot stays busy across a round trip only when the worker already holds its next job: a slot
/// runs `round trip / run time` jobs while one answer travels, so the worker should hold about
/// `slots × round trip / run time` beyond its slots. This keeps estimates of both (moving
/// averages: the round trip of each assignment to its acknowledgement, the run time each
/// `Finished` reports) and holds twice that, for the round trip's jitter and for a lost packet,
/// which stalls the stream for longer. At least 1, at most ``limit(slots:)``: long jobs or a
/// short link get the depth 1 a LAN needs, and a worker never hoards more than a bounded number
/// of jobs that another, idle worker could have run.
///
/// It grows at once and shrinks only to half or less of the depth it has, so noise in the
/// estimates does not resize the worker at every job.
struct PrefetchDepth: Sendable, Equatable {
    /// The worker's own slots.
    let slots: Int
    /// The most it may hold beyond them.
    let limit: Int
    /// What it holds now.
    private(set) var depth: Int
    private var roundTrip: Double?
    private var runTime: Double?

    /// The weight of a new sample in the moving averages.
    static let weight = 0.2

    /// The most a worker with `slots` slots holds automatically: 8 per slot, 64 in all.
    static func limit(slots: Int) -> Int { min(64, 8 * max(1, slots)) }

    init(slots: Int) {
        self.slots = max(1, slots)
        limit = Self.limit(slots: slots)
        depth = Prefetch.automatic.initialDepth
    }

    /// An assignment's round trip (sent → acknowledged). Returns the new depth when it changed.
    mutating func heard(roundTrip: Duration) -> Int? {
        roundTrip.seconds.map { Self.average(&self.roundTrip, $0) }
        return resize()
    }

    /// An attempt's run time on the worker. Returns the new depth when it changed.
    mutating func ran(for runTime: Duration) -> Int? {
        runTime.seconds.map { Self.average(&self.runTime, $0) }
        return resize()
    }

    private static func average(_ average: inout Double?, _ sample: Double) {
        average = average.map { $0 + weight * (sample - $0) } ?? sample
    }

    private mutating func resize() -> Int? {
        guard let roundTrip, let runTime else { return nil }
        let wanted = (2 * Double(slots) * roundTrip / max(runTime, 0.000_1)).rounded()
        let target = Int(min(Double(limit), max(1, wanted)))
        guard target > depth || target * 2 <= depth else { return nil }
        depth = target
        return target
    }
}

extension Duration {
    /// The duration in seconds, when it is not negative.
    fileprivate var seconds: Double? {
        let (seconds, attoseconds) = components
        let value = Double(seconds) + Double(attoseconds) / 1e18
        return value >= 0 ? value : nil
    }
}
