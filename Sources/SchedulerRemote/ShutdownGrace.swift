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
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var nextID = 0
    }

    private let state = Locked(State())

    /// Ends every wait under way, and makes later ones end at once. Safe from any thread.
    func cut() {
        let waiters = state.withLock { state in
            state.isCut = true
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
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
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    // Checked under the lock: a cut or a cancel that came before the waiter was
                    // stored found nothing to resume.
                    if state.isCut || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume()
        }
    }
}
