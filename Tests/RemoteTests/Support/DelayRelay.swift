import Foundation
import JobtopTestSupport
import Scheduler

#if canImport(Glibc)
import Glibc
#endif

/// A TCP relay that adds latency: it listens on `host` (a veth's address), forwards each
/// connection to 127.0.0.1:`upstream`, and holds every piece it reads for `delay` ± `jitter`
/// before writing it on, in order, both ways. With `delay` d each way the round trip grows by 2d.
///
/// It stands in for `tc qdisc ... netem delay` where the kernel has no netem
/// (CONFIG_NET_SCH_NETEM): the bytes arrive late exactly as a long link delivers them, while
/// the packets themselves cross a real veth (where nftables drops some, for loss).
final class DelayRelay: Sendable {
    /// The port to connect to (on `host`) instead of the upstream one.
    let port: Int
    private let listener: Int32
    private let open = Locked<[Int32]>([])

    init(host: String, upstream: Int, delay: Duration, jitter: Duration) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SpawnError(message: "socket: \(String(cString: strerror(errno)))") }
        var reuse: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr(host)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 128) == 0 else {
            let why = String(cString: strerror(errno))
            close(fd)
            throw SpawnError(message: "delay relay bind/listen on \(host): \(why)")
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        listener = fd
        port = Int(UInt16(bigEndian: actual.sin_port))
        let open = open
        Thread.detachNewThread {
            while true {
                let client = accept(fd, nil, nil)
                if client < 0 {
                    if errno == EINTR { continue }
                    return  // the listener was shut down
                }
                _ = fcntl(client, F_SETFD, FD_CLOEXEC)
                guard let server = try? RawTCP.connect(port: upstream) else {
                    close(client)
                    continue
                }
                var one: Int32 = 1
                for socket in [client, server] {
                    _ = setsockopt(socket, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                }
                open.withLock { $0 += [client, server] }
                let remaining = Locked(4)
                let finish: @Sendable () -> Void = {
                    // The last of the four threads closes both sockets.
                    if remaining.withLock({ count -> Bool in
                        count -= 1
                        return count == 0
                    }) {
                        open.withLock { $0.removeAll { $0 == client || $0 == server } }
                        close(client)
                        close(server)
                    }
                }
                for (from, to) in [(client, server), (server, client)] {
                    let line = DelayLine(delay: delay, jitter: jitter)
                    Thread.detachNewThread {
                        Self.read(from, into: line)
                        finish()
                    }
                    Thread.detachNewThread {
                        Self.write(line, to: to)
                        finish()
                    }
                }
            }
        }
    }

    /// Stops accepting and cuts every relayed connection.
    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        for fd in open.withLock({ $0 }) { shutdown(fd, Int32(SHUT_RDWR)) }
    }

    private static func read(_ from: Int32, into line: DelayLine) {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(from, $0.baseAddress, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            line.put(Array(buffer[0..<count]))
        }
        line.close()
    }

    private static func write(_ line: DelayLine, to: Int32) {
        while let piece = line.take() {
            var sent = 0
            while sent < piece.count {
                let wrote = piece[sent...].withUnsafeBytes { send(to, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if wrote < 0 && errno == EINTR { continue }
                guard wrote > 0 else {
                    line.close()
                    shutdown(to, Int32(SHUT_RDWR))
                    return
                }
                sent += wrote
            }
        }
        shutdown(to, Int32(SHUT_WR))
    }
}

/// One direction's pieces, each due `delay` ± `jitter` after it was read; never earlier than the
/// one before it (a byte stream keeps its order).
private final class DelayLine: @unchecked Sendable {
    // Safe: every stored property is read and written only while `condition` is locked.
    private let condition = NSCondition()
    private var pieces: [(due: ContinuousClock.Instant, bytes: [UInt8])] = []
    private var isClosed = false
    private var lastDue = ContinuousClock.now
    private let delay: Duration
    private let jitter: Duration

    init(delay: Duration, jitter: Duration) {
        self.delay = delay
        self.jitter = jitter
    }

    func put(_ bytes: [UInt8]) {
        let spread = Double(jitter.components.attoseconds) / 1e18 + Double(jitter.components.seconds)
        let offset = Duration.seconds(spread == 0 ? 0 : Double.random(in: -spread...spread))
        condition.lock()
        let due = max(lastDue, ContinuousClock.now + delay + offset)
        lastDue = due
        pieces.append((due, bytes))
        condition.signal()
        condition.unlock()
    }

    func close() {
        condition.lock()
        isClosed = true
        condition.broadcast()
        condition.unlock()
    }

    /// The next piece once it is due; `nil` when closed and empty.
    func take() -> [UInt8]? {
        condition.lock()
        defer { condition.unlock() }
        while true {
            if let first = pieces.first {
                let now = ContinuousClock.now
                if first.due <= now {
                    pieces.removeFirst()
                    return first.bytes
                }
                // The emulated link's delay: wait until the piece is due (or something changes).
                let wait = now.duration(to: first.due)
                _ = condition.wait(until: Date(timeIntervalSinceNow: Double(wait.components.attoseconds) / 1e18 + Double(wait.components.seconds)))
            } else if isClosed {
                return nil
            } else {
                condition.wait()
            }
        }
    }
}
