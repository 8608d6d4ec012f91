import CProcess
import Foundation

/// The one lock type of jobtop: a value that is only reached while a lock is held, a pthread mutex.
///
/// The standard library's `Synchronization.Mutex` is futex-based on Linux and ThreadSanitizer
/// (Swift 6.3.1) does not see it take the lock, so every access under it is reported as a race —
/// noise that would hide real races. A pthread mutex is what ThreadSanitizer models. The value
/// and its mutex live in one allocation (a `ManagedBuffer`, as swift-nio's `NIOLockedValueBox`
/// does), where `NSLock` would be an object of its own around a separately allocated mutex: a
/// scheduler makes one for every attempt it starts. Copies of a `Locked` share the one value and
/// lock. Measured uncontended cost: about 20 ns against `Mutex`'s 6 ns, far below a scheduling
/// decision.
public struct Locked<State: Sendable>: @unchecked Sendable {
    // Why `@unchecked Sendable` is safe: `storage` (a `ManagedBuffer`, which the standard
    // library marks not `Sendable`) is only reached through `withLock`, which holds its mutex for
    // the whole access to the value; `State` is itself `Sendable`, so whatever a body copies out
    // of it may cross threads. The mutex never moves (it is an element of the buffer) and is
    // destroyed only when the buffer is freed, when no thread can hold it.
    private let storage: Storage

    /// Wraps `initial`.
    public init(_ initial: State) {
        storage = Storage.make(initial)
    }

    /// Runs `body` with the lock held and the state borrowed for mutation, passing on what it
    /// throws. Not re-entrant.
    public func withLock<Result, Failure: Error>(_ body: (inout State) throws(Failure) -> Result) throws(Failure) -> Result {
        // (`withUnsafeMutablePointers` only rethrows untyped errors: the outcome is carried out.)
        let outcome = storage.withUnsafeMutablePointers { state, mutex -> Swift.Result<Result, Failure> in
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            do throws(Failure) {
                return .success(try body(&state.pointee))
            } catch {
                return .failure(error)
            }
        }
        return try outcome.get()
    }

    /// Runs `body` with the lock held, as ``withLock(_:)``, if the lock is free now; else returns
    /// `nil` at once.
    public func withLockIfFree<Result>(_ body: (inout State) -> Result) -> Result? {
        withLockIfFree(within: 1, body)
    }

    /// Runs `body` with the lock held, as ``withLockIfFree(_:)``, if the lock is free now or
    /// becomes free within `attempts` tries, a short spin apart; else returns `nil`.
    public func withLockIfFree<Result>(within attempts: Int, _ body: (inout State) -> Result) -> Result? {
        storage.withUnsafeMutablePointers { state, mutex -> Result? in
            var tries = 0
            while pthread_mutex_trylock(mutex) != 0 {
                tries += 1
                guard tries < attempts else { return nil }
                for _ in 0..<16 { jt_spin_pause() }
            }
            defer { pthread_mutex_unlock(mutex) }
            return body(&state.pointee)
        }
    }

    /// The value (the header) and its mutex (the one element), allocated together.
    private final class Storage: ManagedBuffer<State, pthread_mutex_t> {
        static func make(_ initial: State) -> Storage {
            let buffer = create(minimumCapacity: 1) { _ in initial }
            buffer.withUnsafeMutablePointerToElements { mutex in
                mutex.initialize(to: pthread_mutex_t())
                pthread_mutex_init(mutex, nil)
            }
            // `create` is declared to return the base class; it makes an instance of `Self`.
            return unsafeDowncast(buffer, to: Storage.self)
        }

        deinit {
            withUnsafeMutablePointerToElements { mutex in
                pthread_mutex_destroy(mutex)
                mutex.deinitialize(count: 1)
            }
        }
    }
}
