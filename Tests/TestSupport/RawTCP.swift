import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Raw TCP on loopback: a client that says nothing, which no `jobtop worker` would be.
public enum RawTCP {
    /// Connects to 127.0.0.1:`port`; returns the socket.
    public static func connect(port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SpawnError(message: "socket: \(String(cString: strerror(errno)))") }
        var address = loopback(port: port)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            let why = String(cString: strerror(errno))
            close(fd)
            throw SpawnError(message: "connect to 127.0.0.1:\(port): \(why)")
        }
        return fd
    }

    /// Reads and discards what the peer sends until it closes the connection: `true`; `false`
    /// when `limit` passes first (a hang guard, not a wait for something).
    public static func waitForClose(_ fd: Int32, limit: Duration = .seconds(30)) async -> Bool {
        var timeout = timeval(tv_sec: Int(limit.components.seconds), tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        return await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                var buffer = [UInt8](repeating: 0, count: 4096)
                while true {
                    let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                    if count > 0 { continue }
                    if count < 0 && errno == EINTR { continue }
                    // 0: closed; ECONNRESET: closed hard; EAGAIN: the hang guard ran out.
                    continuation.resume(returning: count == 0 || errno == ECONNRESET)
                    return
                }
            }
        }
    }

    public static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }
}

/// A loopback TCP listener that is not jobtop: it answers every connection with an HTTP/1.0
/// error and closes it (what a client pointed at the wrong port meets).
public final class ForeignListener: Sendable {
    /// The port it listens on.
    public let port: Int
    private let fd: Int32

    public init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SpawnError(message: "socket: \(String(cString: strerror(errno)))") }
        self.fd = fd
        var address = RawTCP.loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && listen(fd, 16) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound else {
            close(fd)
            throw SpawnError(message: "listen: \(String(cString: strerror(errno)))")
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        let listening = fd
        Thread.detachNewThread {
            let answer = Array("HTTP/1.0 400 Bad Request\r\nContent-Length: 0\r\n\r\n".utf8)
            while true {
                let connection = accept(listening, nil, nil)
                if connection < 0 {
                    if errno == EINTR { continue }
                    return  // closed by stop()
                }
                _ = answer.withUnsafeBytes { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                close(connection)
            }
        }
    }

    /// Stops listening (the accepting thread ends).
    public func stop() {
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
    }
}
