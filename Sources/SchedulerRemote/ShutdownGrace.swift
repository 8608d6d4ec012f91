import Scheduler

/// The time ``WorkerListener/stop()`` gives workers to close their connections after the
/// goodbye, which a signal may cut short (``cut()``) before or while it runs.
final class ShutdownGrace: Sendable {
    /// How a wait ended.
    enum Ending: Sendable, Equatable {
        /// The whole grace passed.
        case expired
        /// ``ShutdownGrace/cut()`` was called.
        case cut
    }

    private struct State {
        var isCut = false
        var waiters = Waiters()
    }

    private let state = Locked(State())

    /// Ends every wait under way, and makes later ones end at once. Safe from any thread.
    func cut() {
        let waiters = state.withLock { state in
            state.isCut = true
            return state.waiters.takeAll()
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Whether ``cut()`` was called.
    var isCut: Bool { state.withLock { $0.isCut } }

    /// Waits `duration` on `clock`, or until ``cut()``.
    ///
    /// - Returns: How the wait ended; `nil` when the calling task was cancelled first (there
    ///   was nothing left to wait for).
    func wait(_ duration: Duration, on clock: SchedulerClock) async -> Ending? {
        await withTaskGroup(of: Ending?.self) { group in
            group.addTask {
                do {
                    try await clock.sleep(clock.now() + duration)
                    return .expired
                } catch {
                    return nil
                }
            }
            group.addTask {
                await self.cutOrCancelled()
                return Task.isCancelled ? nil : .cut
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }

    /// Returns once ``cut()`` was called or the calling task is cancelled.
    private func cutOrCancelled() async {
        await state.wait(in: \.waiters) { $0.isCut }
    }
}
