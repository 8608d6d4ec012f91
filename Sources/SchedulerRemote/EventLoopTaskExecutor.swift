import NIOCore

/// Runs tasks on one NIO event loop: the thread that also reads and writes a connection.
///
/// A worker's session runs with it as its tasks' executor preference, so a message read from
/// the connection is handled, and its answer written, on the thread that read it: no hand-over
/// to the cooperative pool and back (each a thread wake-up, several per job) between the
/// connection and the loop that runs the jobs. What the session's code awaits elsewhere (a
/// process reaped on an I/O thread) comes back by one `execute`. Nothing in that code blocks:
/// the same rule as for the cooperative pool (blocking work has threads of its own).
final class EventLoopTaskExecutor: TaskExecutor {
    let loop: any EventLoop

    init(_ loop: any EventLoop) {
        self.loop = loop
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        loop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
