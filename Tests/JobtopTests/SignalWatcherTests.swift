import Foundation
import Testing
@testable import jobtop

#if canImport(Glibc)
import Glibc
#endif

@Suite("Signal watcher", .timeLimit(.minutes(1)))
struct SignalWatcherTests {
    /// The run's watcher is made before anything starts, and a signal that comes right after
    /// must reach it. It set the signal to SIG_IGN and libdispatch registered the source later
    /// on its own thread: a signal in between was dropped, and a headless run interrupted as
    /// soon as it had started waited forever (a CI run).
    @Test("A signal that comes the moment the watcher is made reaches its handler")
    func signalRightAfterStart() async throws {
        let (stream, continuation) = AsyncStream<(Int32, Int)>.makeStream()
        // SIGUSR2: no other test sends it, and its default action (ending the test run) would
        // show a signal that was neither watched nor dropped.
        let watcher = SignalWatcher(signals: [SIGUSR2]) { number, count in continuation.yield((number, count)) }
        defer { watcher.stop() }
        #expect(kill(getpid(), SIGUSR2) == 0)
        var iterator = stream.makeAsyncIterator()
        let first = await iterator.next()
        #expect(first?.0 == SIGUSR2 && first?.1 == 1)
        #expect(watcher.firstSignal == SIGUSR2)
    }
}
