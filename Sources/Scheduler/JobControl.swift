
/// How a stop request reaches a running attempt, whichever worker runs it.
///
/// The scheduler asks for a stop; the worker running the attempt installs a handler that does
/// it (signal a process group, cancel a task, tell a remote worker). A request that comes before
/// the handler is installed is delivered the moment it is.
public final class JobControl: Sendable {
    /// A request to stop.
    public struct StopRequest: Sendable, Equatable {
        /// Why.
        public var reason: StopReason
        /// How long after SIGTERM to send SIGKILL.
        public var grace: Duration
    }

    private struct State {
        var request: StopRequest?
        var handler: (@Sendable (StopRequest) -> Void)?
        /// The work ended (its process exited, its task returned): later requests reach nothing.
        var hasEnded = false
        /// The first request came after the work had ended.
        var cameTooLate = false
        /// Delivers a signal to the work's processes (local process jobs only).
        var signalHandler: (@Sendable (Int32) -> Void)?
    }

    private let state = Locked(State())

    /// A control with no stop requested.
    public init() {}

    /// The stop requested, if any.
    public var stopRequest: StopRequest? { state.withLock { $0.request } }

    /// Installs the handler that stops the work; runs it at once if a stop was already
    /// requested. Pass `nil` to remove it when the work has ended.
    public func onStop(_ handler: (@Sendable (StopRequest) -> Void)?) {
        let pending = state.withLock { state -> StopRequest? in
            state.handler = state.hasEnded ? nil : handler
            guard handler != nil, !state.hasEnded else { return nil }
            return state.request
        }
        if let pending, let handler { handler(pending) }
    }

    /// Says that the work has ended by itself (its process exited, its closure returned): a stop
    /// requested from now on reaches nothing and does not change how the attempt ended.
    ///
    /// Workers call it the moment they see the end, before collecting what is left (the rest of
    /// the output, leftover processes).
    public func workEnded() {
        state.withLock { state in
            state.hasEnded = true
            state.handler = nil
            state.signalHandler = nil
        }
    }

    /// Says that the stop requested reached the work only after it had ended by itself (a
    /// worker that acts on stops later than it is asked finds the process already exited): the
    /// attempt keeps its own outcome.
    public func stopCameTooLate() {
        guard !Self.everyGroupWasKilled else { return }
        state.withLock { $0.cameTooLate = true }
    }

    /// After a kill of every job's process group (a second Ctrl-C, which may beat the first
    /// one's stops to the processes), an attempt that ended was killed, not done: a stop that
    /// reaches it late still took effect, and it counts as cancelled, not failed.
    private static var everyGroupWasKilled: Bool { JobProcessGroups.wereAllKilled.withLock { $0 } }

    /// Whether a stop was requested before the work ended (so it may have been what ended it).
    /// When the only request came after ``workEnded()``, the attempt ended on its own and keeps
    /// its own outcome: a job that ran to its end is never reported cancelled.
    public var stopTookEffect: Bool { state.withLock { $0.request != nil && !$0.cameTooLate } }

    /// Installs what sends a signal to the work's processes (a local worker's process group);
    /// `nil` removes it. A worker that installs none cannot be signalled.
    public func onSignal(_ handler: (@Sendable (Int32) -> Void)?) {
        state.withLock { state in state.signalHandler = state.hasEnded ? nil : handler }
    }

    /// Sends `signal` to the work's processes.
    ///
    /// - Returns: Whether the worker takes signals (`false`: a remote or Slurm worker, or work
    ///   that has ended).
    public func sendSignal(_ signal: Int32) -> Bool {
        let handler = state.withLock { $0.hasEnded ? nil : $0.signalHandler }
        handler?(signal)
        return handler != nil
    }

    /// Asks the work to stop. Later requests only change the recorded reason, but for one with
    /// no grace after one with some (a second Ctrl-C: kill now), which is delivered too.
    public func requestStop(_ reason: StopReason, grace: Duration) {
        let request = StopRequest(reason: reason, grace: grace)
        let handler = state.withLock { state -> (@Sendable (StopRequest) -> Void)? in
            let first = state.request == nil
            let hurries = !first && grace == .zero && state.request!.grace > .zero
            state.request = request
            if first && state.hasEnded && !Self.everyGroupWasKilled { state.cameTooLate = true }
            return first || hurries ? state.handler : nil
        }
        handler?(request)
    }
}
