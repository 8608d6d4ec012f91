import Dispatch
import Foundation
import Scheduler
import Synchronization

/// Headless mode's SIGINT, SIGTERM and SIGHUP handling.
///
/// The first signal calls `onFirst` (the caller cancels the run: process groups get SIGTERM,
/// then SIGKILL after the grace period). A second one kills every job's process group at once.
/// Under the dashboard these are not installed: the dashboard owns the signals.
final class SignalWatcher {
    /// What the handlers share: which signal came first and how many came.
    private final class Received: Sendable {
        private struct State {
            var first: Int32?
            var count = 0
        }

        private let state = Mutex(State())

        var first: Int32? { state.withLock { $0.first } }

        /// Records `number`; returns how many signals have come, this one included.
        func record(_ number: Int32) -> Int {
            state.withLock { state in
                if state.first == nil { state.first = number }
                state.count += 1
                return state.count
            }
        }
    }

    private let received = Received()
    private let sources: [any DispatchSourceSignal]

    /// The first signal received, if any.
    var firstSignal: Int32? { received.first }

    /// Starts watching; the default actions of the signals stay off from now on.
    init(signals: [Int32] = [SIGINT, SIGTERM, SIGHUP], onFirst: @escaping @Sendable (Int32) -> Void) {
        let queue = DispatchQueue(label: "jobtop.signals")
        let received = received
        sources = signals.map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { SignalWatcher.handle(number, received: received, onFirst: onFirst) }
            source.resume()
            return source
        }
    }

    /// Stops watching (the signals stay ignored: jobtop is about to exit).
    func stop() {
        for source in sources { source.cancel() }
    }

    private static func handle(_ number: Int32, received: Received, onFirst: @Sendable (Int32) -> Void) {
        if received.record(number) == 1 {
            StandardError.write(
                "jobtop: \(signalName(number)): cancelling running jobs (\(signalName(number)) again kills them at once)\n")
            onFirst(number)
        } else {
            StandardError.write("jobtop: \(signalName(number)) again: killing every running job now\n")
            Scheduler.killAllJobProcessesNow()
        }
    }
}
