@testable import Scheduler

/// A worker that holds each attempt until the test releases it, and tells the test which
/// attempts it was given. A stop request ends the attempt as if the process died of SIGTERM.
final class GatedWorker: Worker {
    let descriptor: WorkerDescriptor
    /// Every attempt handed to this worker, in order.
    let starts: AsyncStream<JobAssignment>
    private let startContinuation: AsyncStream<JobAssignment>.Continuation

    private struct State {
        var held: [JobID: CheckedContinuation<Termination, Never>] = [:]
        var early: [JobID: Termination] = [:]
    }

    private let state = Locked(State())

    init(name: String = "gated", slots: Int = 1, kind: WorkerKind = .local) {
        descriptor = WorkerDescriptor(id: WorkerID(), name: name, kind: kind, slots: slots)
        (starts, startContinuation) = AsyncStream.makeStream()
    }

    func execute(_ assignment: JobAssignment) async -> Termination {
        let id = assignment.jobID
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Termination, Never>) in
            let early = state.withLock { state -> Termination? in
                if let early = state.early.removeValue(forKey: id) { return early }
                state.held[id] = continuation
                return nil
            }
            if let early {
                continuation.resume(returning: early)
            } else {
                assignment.control.onStop { [weak self] _ in self?.stopHeld(id) }
            }
            startContinuation.yield(assignment)
        }
        assignment.control.onStop(nil)
        return result
    }

    /// Ends the held attempt of `id` with `termination` (or ends it that way as soon as it starts).
    func release(_ id: JobID, with termination: Termination = .exit(0)) {
        let held = state.withLock { state -> CheckedContinuation<Termination, Never>? in
            if let held = state.held.removeValue(forKey: id) { return held }
            state.early[id] = termination
            return nil
        }
        held?.resume(returning: termination)
    }

    private func stopHeld(_ id: JobID) {
        let held = state.withLock { $0.held.removeValue(forKey: id) }
        held?.resume(returning: .signal(15))
    }

    func leave() {
        startContinuation.finish()
    }
}
