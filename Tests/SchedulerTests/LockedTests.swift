import Foundation
import Testing

@testable import Scheduler

/// The one lock type: its try-variants, which a slot uses so that it never sleeps on the
/// scheduler's lock.
@Suite(.timeLimit(.minutes(1)))
struct LockedTests {
    @Test("A try with retries gives up while another thread holds the lock, and runs once it is free")
    func retriesGiveUpWhileHeld() {
        let locked = Locked(0)
        let held = DispatchSemaphore(value: 0)
        let letGo = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        // A thread, not a task: it blocks while it holds the lock.
        Thread {
            locked.withLock { value in
                value = 1
                held.signal()
                letGo.wait()
            }
            done.signal()
        }.start()
        held.wait()

        // While the thread holds it, every try fails: nothing runs, nil comes back.
        #expect(locked.withLockIfFree(within: 50) { value -> Int in
            value += 10
            return value
        } == nil)
        #expect(locked.withLockIfFree { $0 } == nil)

        letGo.signal()
        done.wait()
        // Once it is free, the first try takes it.
        #expect(locked.withLockIfFree(within: 50) { value -> Int in
            value += 10
            return value
        } == 11)
        #expect(locked.withLock { $0 } == 11)
    }
}
