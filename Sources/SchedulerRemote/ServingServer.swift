import GRPCCore
import GRPCNIOTransportHTTP2Posix
import Scheduler

/// A gRPC server serving in a task of its own, once it listens: what the worker listener and
/// serve's control service both start.
public struct ServingServer: Sendable {
    /// The server.
    public let server: GRPCServer<HTTP2ServerTransport.Posix>
    /// The task that runs it (ends when the server has shut down).
    public let task: Task<Void, Never>
    /// The address it listens on (`nil` for a Unix socket).
    public let bound: RemoteAddress?

    /// Why a server could not listen.
    public struct Failure: Error, Sendable {
        /// The server's own words (or the listening error's).
        public let reason: String
    }

    /// Starts `server` and waits until it listens; if it cannot, it is shut down first.
    public static func start(_ server: GRPCServer<HTTP2ServerTransport.Posix>) async throws(Failure) -> ServingServer {
        let failure = Locked<String?>(nil)
        let task = Task {
            do {
                try await server.serve()
            } catch {
                failure.withLock { $0 = String(describing: error) }
            }
        }
        do {
            let address = try await server.listeningAddress
            let bound: RemoteAddress? = if let ipv4 = address?.ipv4 {
                RemoteAddress(host: ipv4.host, port: ipv4.port)
            } else if let ipv6 = address?.ipv6 {
                RemoteAddress(host: ipv6.host, port: ipv6.port)
            } else {
                nil
            }
            return ServingServer(server: server, task: task, bound: bound)
        } catch {
            server.beginGracefulShutdown()
            await task.value
            throw Failure(reason: failure.withLock { $0 } ?? String(describing: error))
        }
    }
}
