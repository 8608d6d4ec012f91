import Scheduler

/// A clock that moves only when a test advances it, so backoff, timeouts, heartbeats and
/// deadlines are tested without sleeping. Sleepers whose deadline is reached are resumed by
/// ``advance(by:)``. A test waits for something to sleep on it (``waitForSleepers(_:)``,
/// ``waitForSleeper(until:)``) before it moves time on; those waits end early when the waiting
/// task is cancelled.
public final class ManualClock: Clock, Sendable {
    /// A point on the clock: the time since it was made.
    public struct Instant: InstantProtocol {
        /// The time since the clock was made.
        public var offset: Duration
        /// The instant `offset` after the clock was made.
        public init(offset: Duration) { self.offset = offset }
        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (a: Instant, b: Instant) -> Bool { a.offset < b.offset }
    }

    fileprivate struct Sleeper {
        var deadline: Instant
        var continuation: CheckedContinuation<Void, any Error>
    }

    fileprivate struct Waiter {
        var predicate: @Sendable (State) -> Bool
        var continuation: CheckedContinuation<Void, Never>
    }

    fileprivate struct State {
        var now = Instant(offset: .zero)
        var sleepers: [Int: Sleeper] = [:]
        var nextToken = 0
        var waiters: [Int: Waiter] = [:]
    }

    private let state = Locked(State())

    /// A clock at zero.
    public init() {}

    public var now: Instant { state.withLock { $0.now } }
    public var minimumResolution: Duration { .zero }

    /// The number of tasks sleeping on this clock.
    public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    /// The number of tasks sleeping until exactly `deadline`.
    public func sleeperCount(until deadline: Instant) -> Int {
        state.withLock { $0.sleepers.values.count { $0.deadline == deadline } }
    }

    public func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        let token = state.withLock { state -> Int in
            defer { state.nextToken += 1 }
            return state.nextToken
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let (resumeNow, ready) = state.withLock { state -> (Bool, [CheckedContinuation<Void, Never>]) in
                    if Task.isCancelled { return (true, []) }
                    if deadline <= state.now { return (true, []) }
                    state.sleepers[token] = Sleeper(deadline: deadline, continuation: continuation)
                    return (false, state.takeReadyWaiters())
                }
                for waiter in ready { waiter.resume() }
                if resumeNow {
                    if Task.isCancelled { continuation.resume(throwing: CancellationError()) } else { continuation.resume() }
                }
            }
        } onCancel: {
            let sleeper = state.withLock { $0.sleepers.removeValue(forKey: token) }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves time forward and wakes every sleeper whose deadline has come.
    public func advance(by duration: Duration) {
        let due = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            state.now = state.now.advanced(by: duration)
            let now = state.now
            let ready = state.sleepers.filter { $0.value.deadline <= now }
            for token in ready.keys { state.sleepers[token] = nil }
            return ready.values.sorted { $0.deadline < $1.deadline }.map(\.continuation)
        }
        for continuation in due { continuation.resume() }
    }

    /// Waits until at least `count` tasks sleep on the clock (a gate, not a timed wait).
    public func waitForSleepers(_ count: Int = 1) async {
        await waitUntil { state in state.sleepers.count >= count }
    }

    /// Waits until a task sleeps until exactly `deadline`: tells one sleeper from others that
    /// come and go. Ends early when the waiting task is cancelled.
    public func waitForSleeper(until deadline: Instant) async {
        await waitUntil { state in state.sleepers.values.contains { $0.deadline == deadline } }
    }

    /// Runs `body` while moving time on by `step` each time something sleeps until one step
    /// from now (a heartbeat, say), however many steps `body` takes to finish.
    public func ticking<Result: Sendable>(by step: Duration, _ body: @Sendable () async -> Result) async -> Result {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                while !Task.isCancelled {
                    await self.waitForSleeper(until: self.now.advanced(by: step))
                    if Task.isCancelled { return }
                    self.advance(by: step)
                }
            }
            let result = await body()
            group.cancelAll()
            return result
        }
    }

    private func waitUntil(_ predicate: @escaping @Sendable (State) -> Bool) async {
        let token = state.withLock { state -> Int in
            defer { state.nextToken += 1 }
            return state.nextToken
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready = state.withLock { state -> Bool in
                    if Task.isCancelled || predicate(state) { return true }
                    state.waiters[token] = Waiter(predicate: predicate, continuation: continuation)
                    return false
                }
                if ready { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: token) }
            waiter?.continuation.resume()
        }
    }
}

extension ManualClock.State {
    fileprivate mutating func takeReadyWaiters() -> [CheckedContinuation<Void, Never>] {
        let ready = waiters.filter { $0.value.predicate(self) }
        for token in ready.keys { waiters[token] = nil }
        return ready.values.map(\.continuation)
    }
}
