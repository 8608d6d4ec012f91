/// Local slots: runs jobs on this machine, shell and argv jobs in their own process groups.
///
/// A slot costs no thread, and one worker may have any number of them (its attempts run
/// concurrently; ``execute(_:)`` keeps no state between them). A process job is handed to one of the few I/O threads of the
/// ``ProcessReactor``, which spawns and watches every local process of this process, and the
/// attempt awaits its end there; nothing blocks the cooperative pool. Closure jobs are Swift
/// async code and run on the caller's task.
public final class LocalWorker: Worker {
    public let descriptor: WorkerDescriptor
    private let gracePeriod: Duration
    private let reactor: ProcessReactor

    /// Creates a worker.
    ///
    /// - Parameters:
    ///   - name: Its name (`local-1`).
    ///   - slots: How many jobs it runs at once.
    ///   - gracePeriod: Between SIGTERM and SIGKILL for processes a job leaves in its process
    ///     group when its main process ends (a stop request brings its own).
    public convenience init(name: String, slots: Int = 1, gracePeriod: Duration = .seconds(5)) {
        self.init(name: name, slots: slots, gracePeriod: gracePeriod, reactor: .shared)
    }

    init(name: String, slots: Int = 1, gracePeriod: Duration, reactor: ProcessReactor) {
        descriptor = WorkerDescriptor(id: WorkerID(), name: name, kind: .local, slots: slots)
        self.gracePeriod = gracePeriod
        self.reactor = reactor
    }

    public func execute(_ assignment: JobAssignment) async -> Termination {
        switch assignment.submitted.spec.work {
        case .closure(let body):
            return await runClosure(body, assignment)
        case .shell, .argv:
            return await reactor.run(assignment, grace: gracePeriod)
        }
    }

    public func leave() {}

    private func runClosure(
        _ body: @escaping @Sendable (JobContext) async throws -> Void, _ assignment: JobAssignment
    ) async -> Termination {
        let context = JobContext(jobID: assignment.jobID, attempt: assignment.attempt, reporter: assignment.reporter)
        if let (slot, attempt) = assignment.slotTask {
            // The slot's task is this attempt's alone while it runs: run the closure right here
            // (no task per job); a stop cancels the slot's task, which then runs nothing more.
            assignment.control.onStop { _ in slot.cancel(attempt) }
            let result: Result<Void, any Error>
            do {
                try await body(context)
                result = .success(())
            } catch {
                result = .failure(error)
            }
            assignment.control.workEnded()
            assignment.control.onStop(nil)
            return Self.termination(result)
        }
        // An unstructured task so that a stop can cancel this job alone; it is awaited right
        // here, and a cancel of the scheduler's task group reaches it through the handler.
        let task = Task { try await body(context) }
        assignment.control.onStop { _ in task.cancel() }
        defer { assignment.control.onStop(nil) }
        let result = await withTaskCancellationHandler {
            await task.result
        } onCancel: {
            task.cancel()
        }
        assignment.control.workEnded()
        return Self.termination(result)
    }

    private static func termination(_ result: Result<Void, any Error>) -> Termination {
        switch result {
        case .success: .exit(0)
        case .failure(let error as CancellationError): .error("cancelled: \(error)")
        case .failure(let error): .error(String(describing: error))
        }
    }
}
