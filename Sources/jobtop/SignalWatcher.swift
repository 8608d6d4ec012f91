import Dispatch
import Foundation
import Scheduler


/// Watches signals with dispatch sources and tells a handler each one, numbered: the one
/// signal path of jobtop. Headless runs and `jobtop worker` decide what the first (a gentle
/// stop) and a second (a hard one) mean; under the dashboard the handler hands them to the
/// dashboard as a stream (SIGWINCH included), and the dashboard decides.
final class SignalWatcher {
    /// What the handlers share: the signals received, in order, and what to do with the next.
    private final class Received: Sendable {
        private struct State {
            var signals: [Int32] = []
            var handler: @Sendable (_ number: Int32, _ count: Int) -> Void
        }

        private let state: Locked<State>

        init(handler: @escaping @Sendable (_ number: Int32, _ count: Int) -> Void) {
            state = Locked(State(handler: handler))
        }

        /// The signal received as number `position` (from 1), if that many came.
        func signal(_ position: Int) -> Int32? {
            state.withLock { position <= $0.signals.count ? $0.signals[position - 1] : nil }
        }

        /// Records `number`; returns how many signals have come, this one included, and the
        /// handler to call.
        func record(_ number: Int32) -> (Int, @Sendable (Int32, Int) -> Void) {
            state.withLock { state in
                state.signals.append(number)
                return (state.signals.count, state.handler)
            }
        }

        func replaceHandler(_ handler: @escaping @Sendable (Int32, Int) -> Void) {
            state.withLock { $0.handler = handler }
        }
    }

    private let received: Received
    private let sources: [any DispatchSourceSignal]

    /// The first signal received, if any.
    var firstSignal: Int32? { received.signal(1) }

    /// The second signal received (the one that forced a hard stop), if any.
    var secondSignal: Int32? { received.signal(2) }

    /// Starts watching, and returns once every signal is watched: from then on each one reaches
    /// `onSignal` and none has its default action. (Until then a signal keeps its default
    /// action: jobtop ends of it before anything has started.)
    ///
    /// - Parameters:
    ///   - signals: The signals to watch.
    ///   - onSignal: Called on a private queue with each signal and how many have come so far.
    init(signals: [Int32], onSignal: @escaping @Sendable (_ number: Int32, _ count: Int) -> Void) {
        let queue = DispatchQueue(label: "jobtop.signals")
        let received = Received(handler: onSignal)
        self.received = received
        // On Linux a signal source is registered later, on libdispatch's manager thread, which
        // then installs its own handler for the signal (it re-raises the signal to the thread
        // that reads it from a signalfd). The signal was set to SIG_IGN here before: one that
        // came before the registration was dropped, and a run interrupted right after it
        // started waited forever (seen in CI). Now the default action stays until the handler
        // is in, and the registration is waited for: at most a few microseconds on the
        // manager thread and this private queue, neither of them a thread of the cooperative
        // pool, so the wait cannot deadlock.
        let registered = DispatchSemaphore(value: 0)
        sources = signals.map { number in
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler {
                let (count, handler) = received.record(number)
                handler(number, count)
            }
            source.setRegistrationHandler { registered.signal() }
            source.resume()
            return source
        }
        for _ in sources { registered.wait() }
    }

    /// Headless mode: the first of SIGINT, SIGTERM or SIGHUP calls `onFirst` (the caller cancels
    /// the run: SIGTERM to the process groups, SIGKILL after the grace period); a second kills
    /// every job's process group at once and calls `onAgain` (which ends what else is waited for).
    convenience init(onFirst: @escaping @Sendable (Int32) -> Void, onAgain: @escaping @Sendable () -> Void = {}) {
        // The first signal's number, for the second's message (SIGINT after SIGTERM is no "again").
        let first = Locked<Int32?>(nil)
        self.init(signals: [SIGINT, SIGTERM, SIGHUP]) { number, count in
            if count == 1 {
                first.withLock { $0 = number }
                StandardError.write(
                    "jobtop: \(signalName(number)): cancelling running jobs (another signal kills them at once)\n")
                onFirst(number)
            } else {
                let earlier = first.withLock { $0 }
                let which = earlier == number ? "\(signalName(number)) again" : "\(signalName(number)) after \(earlier.map(signalName) ?? "a signal")"
                StandardError.write("jobtop: \(which): killing every running job now\n")
                Scheduler.killAllJobProcessesNow()
                onAgain()
            }
        }
    }

    /// Makes `handler` what the signals received from now on do (a later phase of the run
    /// means something else by them). The count goes on from the signals already received.
    func replaceHandler(_ handler: @escaping @Sendable (_ number: Int32, _ count: Int) -> Void) {
        received.replaceHandler(handler)
    }

    /// Stops watching (the signals stay caught, and go nowhere: jobtop is about to exit).
    func stop() {
        for source in sources { source.cancel() }
    }
}
