import Foundation
import JobtopTestSupport
import Scheduler

#if canImport(Glibc)
import Glibc
#endif

/// A TCP listener on loopback that records when each connection came and then closes it at
/// once or holds it open without a word: a port where a coordinator is not, or one that froze.
final class TCPListener: Sendable {
    enum Mode: Sendable {
        /// Accepts and closes at once.
        case closeAtOnce
        /// Accepts and never sends anything.
        case hold
    }

    private struct State {
        var accepts: [ContinuousClock.Instant] = []
        var held: [Int32] = []
        var waiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }

    let port: Int
    private let fd: Int32
    private let state = Locked(State())

    /// Listens on 127.0.0.1:`port` (0: any free port).
    init(port: Int = 0, mode: Mode) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var on: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        var address = RawTCP.loopback(port: port)
        var bound: Int32 = -1
        // Taking over a port another socket just left: in a parallel test run, some other
        // test's outgoing connection may hold it as its local port for a moment (EADDRINUSE).
        // Not a wait for the code under test, so a bounded retry is fine here.
        for attempt in 0..<100 {
            bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            if bound == 0 || port == 0 || errno != EADDRINUSE || attempt == 99 { break }
            usleep(20_000)
        }
        guard bound == 0, listen(fd, 64) == 0 else {
            let why = String(cString: strerror(errno))
            Glibc.close(fd)
            throw SpawnError(message: "listen on 127.0.0.1:\(port): \(why)")
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        self.fd = fd
        self.port = Int(UInt16(bigEndian: actual.sin_port))
        Thread.detachNewThread { [self] in acceptLoop(mode) }
    }

    /// When each connection was accepted, in order.
    var accepts: [ContinuousClock.Instant] { state.withLock { $0.accepts } }

    /// Waits until `count` connections have been accepted.
    func waitForAccepts(_ count: Int) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { state -> Bool in
                if state.accepts.count >= count { return true }
                state.waiters.append((count, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    /// Stops listening and closes the connections it holds.
    func close() {
        shutdown(fd, Int32(SHUT_RDWR))
        let held = state.withLock { state -> [Int32] in
            defer { state.held = [] }
            return state.held
        }
        for connection in held { Glibc.close(connection) }
    }

    private func acceptLoop(_ mode: Mode) {
        while true {
            let connection = accept(fd, nil, nil)
            if connection < 0 {
                if errno == EINTR { continue }
                Glibc.close(fd)
                return
            }
            let now = ContinuousClock.now
            // Counted before it is closed: whoever sees the close sees the count.
            let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
                state.accepts.append(now)
                if mode == .hold { state.held.append(connection) }
                let count = state.accepts.count
                defer { state.waiters.removeAll { $0.count <= count } }
                return state.waiters.filter { $0.count <= count }.map(\.continuation)
            }
            if mode == .closeAtOnce { Glibc.close(connection) }
            for waiter in ready { waiter.resume() }
        }
    }
}
