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
/// `slots × round trip / run time` beyond its slots. This keeps estimates of both and holds twice
/// that, for the round trip's jitter and for a lost packet, which stalls the stream for longer.
/// The round trip is the least of the last ``roundTripWindow`` assignments' (sent →
/// acknowledged): an acknowledgement also waits behind the assignments sent before it, so the
/// typical round trip grows with the depth itself, and the least one is the link's (as TCP's
/// BBR takes its minimum RTT). The run time is a moving average of what each `Finished`
/// reports. At least 1, at most ``limit(slots:)``: long jobs or a
/// short link get the depth 1 a LAN needs, and a worker never hoards more than a bounded number
/// of jobs that another, idle worker could have run.
///
/// It grows at once and shrinks only when it wants less than half of the depth it has, so noise
/// in the estimates does not resize the worker at every job; it first moves after
/// ``firstRunTimes`` run times and round trips.
struct PrefetchDepth: Sendable {
    /// The worker's own slots.
    let slots: Int
    /// The most it may hold beyond them.
    let limit: Int
    /// What it holds now.
    private(set) var depth: Int
    /// The last round trips, oldest overwritten first.
    private var roundTrips: [Double] = []
    private var nextRoundTrip = 0
    private var runTime: Double?
    private var runTimes = 0

    /// Run times (and round trips) heard before the depth first moves: the first few alone
    /// made it jump up and down while a run started (the first assignments go out in one burst,
    /// so their acknowledgements all wait).
    static let firstRunTimes = 8
    /// The weight of a new run time in its moving average.
    static let weight = 0.2
    /// How many of the last round trips the least is taken from.
    static let roundTripWindow = 32

    /// The most a worker with `slots` slots holds automatically: 8 per slot, 64 in all.
    static func limit(slots: Int) -> Int { min(64, 8 * max(1, slots)) }

    init(slots: Int) {
        self.slots = max(1, slots)
        limit = Self.limit(slots: slots)
        depth = Prefetch.automatic.initialDepth
    }

    /// An assignment's round trip (sent → acknowledged). Returns the new depth when it changed.
    mutating func heard(roundTrip: Duration) -> Int? {
        let sample = roundTrip.seconds
        guard sample >= 0 else { return nil }
        if roundTrips.count < Self.roundTripWindow {
            roundTrips.append(sample)
        } else {
            roundTrips[nextRoundTrip] = sample
            nextRoundTrip = (nextRoundTrip + 1) % Self.roundTripWindow
        }
        return resize()
    }

    /// An attempt's run time on the worker. Returns the new depth when it changed.
    mutating func ran(for runTime: Duration) -> Int? {
        let sample = runTime.seconds
        guard sample >= 0 else { return nil }
        Self.average(&self.runTime, sample)
        runTimes += 1
        return resize()
    }

    private static func average(_ average: inout Double?, _ sample: Double) {
        average = average.map { $0 + weight * (sample - $0) } ?? sample
    }

    private mutating func resize() -> Int? {
        guard runTimes >= Self.firstRunTimes, roundTrips.count >= Self.firstRunTimes, let roundTrip = roundTrips.min(),
            let runTime
        else { return nil }
        let wanted = 2 * Double(slots) * roundTrip / max(runTime, 0.000_1)
        let target = Int(min(Double(limit), max(1, wanted.rounded())))
        // Up at once; down only below half of what it holds (so a want near 1.5 does not flip
        // between 1 and 2 at every job).
        guard target != depth, target > depth || wanted < Double(depth) / 2 else { return nil }
        depth = target
        return target
    }
}
