/// The scheduler's view of a clock: the time since it started, and a way to sleep until then.
///
/// Any `Clock` with `Duration` steps fits, so tests pass a manual clock and advance it instead of
/// sleeping.
public struct SchedulerClock: Sendable {
    /// The time since the clock was wrapped.
    public let now: @Sendable () -> SchedulerTime
    /// Sleeps until the given time since start; throws `CancellationError` when cancelled.
    public let sleep: @Sendable (SchedulerTime) async throws -> Void

    /// Wraps `clock`, taking its present as time zero.
    public init<C: Clock>(_ clock: C) where C.Duration == Duration {
        let epoch = clock.now
        now = { epoch.duration(to: clock.now) }
        sleep = { deadline in try await clock.sleep(until: epoch.advanced(by: deadline), tolerance: nil) }
    }
}
