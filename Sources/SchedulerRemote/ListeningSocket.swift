#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A bound, listening TCP socket with `SO_REUSEADDR`, for the gRPC server to adopt.
///
/// `SO_REUSEADDR` lets a coordinator restarted on its port listen while the old connections
/// wait out their close (the transport's own bind sets it too, in the version used now);
/// accepted connections inherit `TCP_NODELAY`; and a bind that fails is said in one line.
public enum ListeningSocket {
    /// Creates the socket; the caller hands the descriptor to the transport, which owns it.
    ///
    /// - Throws: ``RemoteError`` (`.cannotListen`) with the system's reason.
    public static func make(_ address: RemoteAddress) throws(RemoteError) -> Int32 {
        let host = address.host == "localhost" ? "127.0.0.1" : address.host
        let family = address.isIPv6 ? AF_INET6 : AF_INET
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw failure(address, "socket") }
        var on: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        // Accepted connections inherit it: small messages (an Assign, an Ack) leave at once.
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
        let bound: Int32
        if address.isIPv6 {
            var socketAddress = sockaddr_in6()
            socketAddress.sin6_family = sa_family_t(AF_INET6)
            socketAddress.sin6_port = in_port_t(UInt16(address.port).bigEndian)
            guard inet_pton(AF_INET6, host, &socketAddress.sin6_addr) == 1 else {
                close(fd)
                throw RemoteError(.cannotListen, "cannot listen on \(address): '\(host)' is not an IPv6 address")
            }
            bound = withUnsafePointer(to: &socketAddress) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
            }
        } else {
            var socketAddress = sockaddr_in()
            socketAddress.sin_family = sa_family_t(AF_INET)
            socketAddress.sin_port = in_port_t(UInt16(address.port).bigEndian)
            guard inet_pton(AF_INET, host, &socketAddress.sin_addr) == 1 else {
                close(fd)
                throw RemoteError(.cannotListen, "cannot listen on \(address): '\(host)' is not an IPv4 address (use an address, like 0.0.0.0 or 127.0.0.1)")
            }
            bound = withUnsafePointer(to: &socketAddress) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
        }
        guard bound == 0 else {
            let error = failure(address, "bind")
            close(fd)
            throw error
        }
        guard listen(fd, 128) == 0 else {
            let error = failure(address, "listen")
            close(fd)
            throw error
        }
        return fd
    }

    /// Whether `address` can be listened on now: binds it and lets go at once. For a program
    /// that must not make anything (a state directory) when it cannot listen, before it does.
    /// (Another program may take the port in between; the real listen then still says so.)
    ///
    /// - Throws: ``RemoteError`` (`.cannotListen`) as ``make(_:)`` would.
    public static func check(_ address: RemoteAddress) throws(RemoteError) {
        close(try make(address))
    }

    private static func failure(_ address: RemoteAddress, _ call: String) -> RemoteError {
        let reason = String(cString: strerror(errno))
        return RemoteError(.cannotListen, "cannot listen on \(address): \(reason.prefix(1).lowercased() + reason.dropFirst())")
    }
}
