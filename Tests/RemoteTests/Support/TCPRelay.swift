import Foundation
import JobtopTestSupport
import Scheduler

#if canImport(Glibc)
import Glibc
#endif

/// A byte-level TCP relay on loopback: it accepts connections on a port of its own, forwards
/// each to 127.0.0.1:`upstream`, and records every byte that crosses it, both ways: what a
/// capture of the network would see.
final class TCPRelay: Sendable {
    /// The port to connect to instead of the upstream one.
    let port: Int
    private let listener: Int32
    private let recorded = Locked<[UInt8]>([])
    private let open = Locked<[Int32]>([])

    /// Starts relaying to 127.0.0.1:`upstream`.
    init(upstream: Int) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SpawnError(message: "socket: \(String(cString: strerror(errno)))") }
        var address = RawTCP.loopback(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 16) == 0 else {
            close(fd)
            throw SpawnError(message: "relay bind/listen: \(String(cString: strerror(errno)))")
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        listener = fd
        port = Int(UInt16(bigEndian: actual.sin_port))
        let (recorded, open) = (recorded, open)
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
                open.withLock { $0 += [client, server] }
                let remaining = Locked(2)
                for (from, to) in [(client, server), (server, client)] {
                    Thread.detachNewThread {
                        Self.pump(from: from, to: to, recording: recorded)
                        // The second pump to finish closes both (the first only half-closed).
                        let isLast = remaining.withLock { count -> Bool in
                            count -= 1
                            return count == 0
                        }
                        if isLast {
                            open.withLock { $0.removeAll { $0 == client || $0 == server } }
                            close(client)
                            close(server)
                        }
                    }
                }
            }
        }
    }

    /// Every byte that crossed the relay so far, both directions interleaved as read.
    var bytes: [UInt8] { recorded.withLock { $0 } }

    /// Whether `text`'s UTF-8 bytes crossed the relay as one run.
    func sawInClear(_ text: String) -> Bool {
        let needle = Array(text.utf8)
        let haystack = bytes
        guard !needle.isEmpty, haystack.count >= needle.count else { return false }
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            if haystack[start..<(start + needle.count)].elementsEqual(needle) { return true }
        }
        return false
    }

    /// Stops accepting and cuts every relayed connection.
    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        for fd in open.withLock({ $0 }) { shutdown(fd, Int32(SHUT_RDWR)) }
    }

    private static func pump(from: Int32, to: Int32, recording: Locked<[UInt8]>) {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(from, $0.baseAddress, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            recording.withLock { $0.append(contentsOf: buffer[0..<count]) }
            var sent = 0
            while sent < count {
                let wrote = buffer[sent..<count].withUnsafeBytes { send(to, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if wrote < 0 && errno == EINTR { continue }
                guard wrote > 0 else { break }
                sent += wrote
            }
            if sent < count { break }
        }
        shutdown(to, Int32(SHUT_WR))
    }
}
