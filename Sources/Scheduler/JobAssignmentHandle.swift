/// An assignment with the worker that runs it.
struct JobAssignmentHandle: Sendable {
    let assignment: JobAssignment
    let worker: any Worker
    /// The job's place in the core, for reporting its end without a hashed lookup.
    let job: JobHandle
}
