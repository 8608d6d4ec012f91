/// An assignment with the worker that runs it.
struct JobAssignmentHandle: Sendable {
    let assignment: JobAssignment
    let worker: any Worker
}
