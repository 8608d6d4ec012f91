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
