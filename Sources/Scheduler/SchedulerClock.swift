import struct Foundation.Date

/// The scheduler's view of a clock: the time since it started, and a way to sleep until then.
///
/// Any `Clock` with `Duration` steps fits, so tests pass a manual clock and advance it instead of
/// sleeping.
public struct SchedulerClock: Sendable {
    /// The time since the clock was wrapped.
    public let now: @Sendable () -> SchedulerTime
    /// Sleeps until the given time since start; throws `CancellationError` when cancelled.
    public let sleep: @Sendable (SchedulerTime) async throws -> Void
    /// The wall-clock time at time zero: a job's start time given as a date (``JobSpec/StartTime/date(_:)``)
    /// is that far from it on this clock.
    public let wallClockEpoch: Date

    /// Wraps `clock`, taking its present as time zero and `wallClockEpoch` (now, by default) as
    /// the wall-clock time then.
    public init<C: Clock>(_ clock: C, wallClockEpoch: Date = Date()) where C.Duration == Duration {
        self.wallClockEpoch = wallClockEpoch
        let epoch = clock.now
        now = { epoch.duration(to: clock.now) }
        sleep = { deadline in try await clock.sleep(until: epoch.advanced(by: deadline), tolerance: nil) }
    }
}
