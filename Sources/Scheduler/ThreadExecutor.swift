import DequeModule
import Dispatch
import Foundation

/// A serial executor backed by one dedicated thread.
///
/// An actor that uses it can block (wait for a child process, poll its pipes) without taking a
/// thread from Swift's cooperative pool, which has only as many threads as cores.
final class ThreadExecutor: SerialExecutor {
    private let queue = Locked<(jobs: Deque<UnownedJob>, isStopped: Bool)>(([], false))
    private let wakeup = DispatchSemaphore(value: 0)

    init(name: String) {
        let thread = Thread { [self] in self.loop() }
        thread.name = name
        thread.stackSize = 1 << 20
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.withLock { $0.jobs.append(job) }
        wakeup.signal()
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    /// Ends the thread once the jobs already enqueued have run.
    func stop() {
        queue.withLock { $0.isStopped = true }
        wakeup.signal()
    }

    private func loop() {
        while true {
            wakeup.wait()
            let next = queue.withLock { state -> UnownedJob?? in
                if let job = state.jobs.popFirst() { return .some(job) }
                return state.isStopped ? .none : .some(nil)
            }
            switch next {
            case .none: return
            case .some(nil): continue
            case .some(let job?): job.runSynchronously(on: asUnownedSerialExecutor())
            }
        }
    }
}
