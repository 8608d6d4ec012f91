import Foundation
import SchedulerRemote

#if canImport(Glibc)
import Glibc
#endif

/// A failure to reach or set up the control socket, with a sentence for a human.
public struct ControlError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure.
    public enum Code: Sendable {
        /// No serve answers at the socket (none running, or it went away).
        case notRunning
        /// A serve already answers at the socket.
        case alreadyRunning
        /// The socket or its directory cannot be made or used.
        case cannotListen
        /// The serve refused us (wrong or missing token, another user).
        case refused
        /// The connection broke or the serve answered something unreadable.
        case connectionLost
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}

/// Where `jobtop serve` listens on this machine: `$XDG_RUNTIME_DIR/jobtop/serve.sock`, or
/// `/tmp/jobtop-UID/serve.sock` when `XDG_RUNTIME_DIR` is unset or empty. The directory is
/// the user's alone (0700), the socket too (0600).
public enum ControlSocket {
    /// The socket's file name in its directory.
    public static let fileName = "serve.sock"

    /// The directory of the socket.
    public static func directory(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty {
            return (runtime as NSString).appendingPathComponent("jobtop")
        }
        return "/tmp/jobtop-\(getuid())"
    }

    /// The path of the socket.
    public static func path(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        (directory(environment: environment) as NSString).appendingPathComponent(fileName)
    }

    /// Makes the socket's directory (0700) if it is missing; refuses one that is not a
    /// directory of this user's, and takes group and other permissions away from ours.
    static func prepareDirectory(_ directory: String) throws(ControlError) {
        if mkdir(directory, 0o700) != 0 && errno != EEXIST {
            // The parent may be missing (a fresh XDG_RUNTIME_DIR): make it, then ours.
            let parent = (directory as NSString).deletingLastPathComponent
            if errno == ENOENT, (try? FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)) != nil,
               mkdir(directory, 0o700) == 0 || errno == EEXIST {
                // Made.
            } else {
                throw ControlError(.cannotListen, "cannot make the socket directory \(directory): \(systemReason())")
            }
        }
        var info = stat()
        guard lstat(directory, &info) == 0 else {
            throw ControlError(.cannotListen, "cannot use the socket directory \(directory): \(systemReason())")
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw ControlError(.cannotListen, "\(directory) is not a directory (it should hold jobtop's socket)")
        }
        guard info.st_uid == getuid() else {
            throw ControlError(.cannotListen, "\(directory) belongs to uid \(info.st_uid), not to you (uid \(getuid())): refusing to put jobtop's socket there")
        }
        if info.st_mode & 0o077 != 0 {
            guard chmod(directory, 0o700) == 0 else {
                throw ControlError(.cannotListen, "cannot make \(directory) private (chmod 0700): \(systemReason())")
            }
        }
    }

    /// Binds and listens on a Unix domain socket at `path` (0600), replacing a stale socket
    /// file that no serve answers at, refusing if one does.
    ///
    /// - Returns: The listening descriptor, for the gRPC server to adopt.
    static func listen(at path: String) throws(ControlError) -> Int32 {
        try prepareDirectory((path as NSString).deletingLastPathComponent)
        if try isStale(path) {
            // A serve that died left it: nothing listens there any more.
            unlink(path)
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ControlError(.cannotListen, "cannot make a socket: \(systemReason())") }
        let bound = withSocketAddress(path) { address, length in bind(fd, address, length) }
        guard let bound, bound == 0 else {
            let reason = bound == nil ? "the path is too long for a socket (at most 107 bytes)" : systemReason()
            close(fd)
            throw ControlError(.cannotListen, "cannot listen on \(path): \(reason)")
        }
        // Before listen: nobody can connect until the mode is right.
        guard chmod(path, 0o600) == 0, Glibc.listen(fd, 128) == 0 else {
            let reason = systemReason()
            close(fd)
            unlink(path)
            throw ControlError(.cannotListen, "cannot listen on \(path): \(reason)")
        }
        return fd
    }

    /// Whether `path` is a socket file no serve answers at any more (false when nothing is
    /// there), refusing what must not be replaced: a socket a serve answers at, or a file that
    /// is not a socket.
    ///
    /// - Throws: ``ControlError`` `.alreadyRunning` or `.cannotListen`.
    static func isStale(_ path: String) throws(ControlError) -> Bool {
        var info = stat()
        guard lstat(path, &info) == 0 else { return false }
        guard info.st_mode & S_IFMT == S_IFSOCK else {
            throw ControlError(.cannotListen, "\(path) exists and is not a socket: move it away")
        }
        if probe(path) == .answers {
            throw ControlError(.alreadyRunning, "a jobtop serve is already running on \(path) (stop it with 'jobtop shutdown')")
        }
        return true
    }

    /// What answers at a socket path.
    enum Probe: Equatable {
        /// No socket file.
        case absent
        /// A socket file nobody listens on (ECONNREFUSED), or one we may not use.
        case refused
        /// Something accepted the connection.
        case answers
    }

    /// Connects to `path` and closes again at once.
    static func probe(_ path: String) -> Probe {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return .refused }
        defer { close(fd) }
        let result = withSocketAddress(path) { address, length in connect(fd, address, length) }
        if result == 0 { return .answers }
        return errno == ENOENT ? .absent : .refused
    }

    /// Whether anything (a socket, say) may be at `path`, without connecting to it: false only
    /// when nothing is there (a path we may not look into counts as there, so that connecting
    /// says why not).
    static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 || (errno != ENOENT && errno != ENOTDIR)
    }

    /// Whether something answers at `path`, with the reason when not: what clients check before
    /// they talk gRPC, so "no serve" is one clear line rather than a transport error.
    static func check(_ path: String) -> (Probe, String) {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return (.refused, systemReason()) }
        defer { close(fd) }
        let result = withSocketAddress(path) { address, length in connect(fd, address, length) }
        if result == 0 { return (.answers, "") }
        let code = errno
        return (code == ENOENT ? .absent : .refused, String(cString: strerror(code)).lowercased())
    }

    private static func withSocketAddress(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Int32) -> Int32? {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard bytes.count < capacity else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }

    static func systemReason() -> String {
        let reason = String(cString: strerror(errno))
        return reason.prefix(1).lowercased() + reason.dropFirst()
    }
}

extension ControlSocket {
    /// Checks, before anything else is made, that a serve could listen at `socketPath` and
    /// `tcp`: the socket's directory can be made (and is), no serve answers at the socket (and
    /// the path is a socket or nothing), and the TCP address can be bound.
    ///
    /// - Throws: ``ControlError`` as ``ControlServer/start(socketPath:)`` would.
    public static func checkCanListen(socketPath: String, tcp: RemoteAddress?) throws(ControlError) {
        // Its directory is made now (0700), as the listen would make it: one that cannot be made
        // is said before the state directory is.
        try prepareDirectory((socketPath as NSString).deletingLastPathComponent)
        _ = try isStale(socketPath)
        if let tcp {
            do throws(RemoteError) { try ListeningSocket.check(tcp) } catch { throw ControlError(.cannotListen, error.message) }
        }
    }
}
