import Foundation

/// One local slot: an actor on its own thread that runs shell jobs in their own process groups.
///
/// Waiting for a process and reading its pipes block, so they run on this actor's dedicated
/// thread, never on the cooperative pool. Closure jobs are Swift async code and run on the
/// caller's task instead.
public actor LocalWorker: Worker {
    /// Where a worker's blocking process work runs.
    public enum ProcessExecution: Sendable {
        /// On the worker's own thread (the default): the cooperative pool is never blocked.
        case dedicatedThread
        /// On Swift's cooperative pool, blocking one of its few threads per running job. It
        /// exists only so that benchmarks can measure what the dedicated thread costs or saves.
        case cooperativePool
    }

    public nonisolated let descriptor: WorkerDescriptor
    private nonisolated let executor: ThreadExecutor
    private nonisolated let execution: ProcessExecution
    private let runner: ProcessRunner

    /// Creates a worker and starts its thread.
    public init(name: String, execution: ProcessExecution = .dedicatedThread) {
        descriptor = WorkerDescriptor(id: WorkerID(), name: name, kind: .local, slots: 1)
        executor = ThreadExecutor(name: "jobtop.\(name)")
        self.execution = execution
        runner = ProcessRunner()
    }

    public nonisolated var unownedExecutor: UnownedSerialExecutor {
        executor.asUnownedSerialExecutor()
    }

    public nonisolated func execute(_ assignment: JobAssignment) async -> Termination {
        switch assignment.spec.work {
        case .closure(let body):
            return await runClosure(body, assignment)
        case .shell, .argv:
            if execution == .cooperativePool { return Self.runOnPool(assignment) }
            return await runProcess(assignment)
        }
    }

    public nonisolated func leave() {
        executor.stop()
    }

    private func runProcess(_ assignment: JobAssignment) -> Termination {
        runner.run(assignment)
    }

    private nonisolated static func runOnPool(_ assignment: JobAssignment) -> Termination {
        ProcessRunner().run(assignment)
    }

    private nonisolated func runClosure(
        _ body: @escaping @Sendable (JobContext) async throws -> Void, _ assignment: JobAssignment
    ) async -> Termination {
        let context = JobContext(jobID: assignment.jobID, attempt: assignment.attempt, reporter: assignment.reporter)
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
        switch result {
        case .success: return .exit(0)
        case .failure(let error as CancellationError): return .error("cancelled: \(error)")
        case .failure(let error): return .error(String(describing: error))
        }
    }
}
