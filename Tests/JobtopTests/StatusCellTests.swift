import Foundation
import Scheduler
import Testing
@testable import jobtop

@Suite("jobtop status: a job's state cell")
struct StatusCellTests {
    private func cell(_ state: JobState, maxAttempts: Int = 1, attempts: Int = 0, placement: String? = nil, now: SchedulerTime = .zero) -> String {
        let job = JobInfo(id: JobID(uuid: UUID()), command: "make", state: state, attempts: attempts, maxAttempts: maxAttempts)
        return Jobtop.Status.stateCell(of: job, placement: placement, now: now)
    }

    @Test("A job with one attempt says nothing of attempts")
    func singleAttempt() {
        #expect(cell(.queued) == "queued")
        #expect(cell(.succeeded(attempts: 1)) == "succeeded")
        #expect(cell(.failed(reason: .exitStatus(3), attempts: 1)) == "failed (exit 3)")
        #expect(cell(.running(worker: WorkerID(), attempt: 1, since: .zero, stopping: nil)) == "running")
        #expect(cell(.running(worker: WorkerID(), attempt: 1, since: .zero, stopping: nil), maxAttempts: 3) == "running (attempt 1 of 3)")
    }

    @Test("A retried job names its attempt, with the other notes in the same parenthesis")
    func retried() {
        #expect(cell(.running(worker: WorkerID(), attempt: 2, since: .zero, stopping: nil), maxAttempts: 3, placement: "slurm job 41")
            == "running (slurm job 41; attempt 2 of 3)")
        #expect(cell(.waitingForRetry(until: .seconds(30), failedAttempt: 1, reason: .exitStatus(1)), maxAttempts: 3, now: .seconds(4))
            == "waiting (in 26s; attempt 2 of 3 next)")
        #expect(cell(.failed(reason: .exitStatus(3), attempts: 3), maxAttempts: 3) == "failed (exit 3; 3 attempts)")
        #expect(cell(.succeeded(attempts: 2), maxAttempts: 3) == "succeeded (2 attempts)")
        #expect(cell(.scheduled(until: .seconds(90)), now: .seconds(30)) == "scheduled (in 1m)")
    }

    @Test("A job its worker holds and has not begun says 'sent', with its placement or else where it waits; one being stopped says 'stopping' and why, as the dashboard does")
    func sent() {
        let job = JobInfo(id: JobID(uuid: UUID()), command: "make", state: .running(worker: WorkerID(), attempt: 1, since: .zero, stopping: nil), maxAttempts: 3)
        #expect(Jobtop.Status.stateCell(of: job, placement: nil, sent: true, now: .zero) == "sent (waiting at its worker; attempt 1 of 3)")
        #expect(Jobtop.Status.stateCell(of: job, placement: "1234 Priority", sent: true, now: .zero) == "sent (1234 Priority; attempt 1 of 3)")
        var stopping = job
        stopping.state = .running(worker: WorkerID(), attempt: 1, since: .zero, stopping: .cancel)
        #expect(Jobtop.Status.stateCell(of: stopping, placement: nil, sent: true, now: .zero) == "stopping (cancelled; attempt 1 of 3)")
        stopping.state = .running(worker: WorkerID(), attempt: 2, since: .zero, stopping: .timeout)
        #expect(Jobtop.Status.stateCell(of: stopping, placement: nil, now: .zero) == "stopping (timed out; attempt 2 of 3)")
    }

    @Test("A cancelled job's failure is named as an earlier attempt's, not as what the cancel did")
    func cancelledAfterAFailure() {
        var job = JobInfo(id: JobID(uuid: UUID()), command: "make", state: .cancelled, attempts: 2, maxAttempts: 3)
        job.history.lastFailure = .exitStatus(1)
        #expect(Jobtop.Status.stateCell(of: job, placement: nil, now: .zero) == "cancelled (an earlier attempt: exit 1; 2 attempts)")
    }
}
