/// Something that went wrong with remote workers, said so a person can act on it.
public struct RemoteError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of problem it is.
    public enum Code: String, Sendable, Equatable {
        /// `HOST:PORT` could not be read.
        case badAddress
        /// The token file could not be read or is empty.
        case badToken
        /// Listening on a non-loopback address needs a token.
        case tokenRequired
        /// The address could not be bound (in use, not local, no permission).
        case cannotListen
        /// The coordinator refused the worker (wrong token, other protocol version, ...).
        case refused
        /// A TLS file (certificate, key, CA) or fingerprint could not be used.
        case badTLS
        /// The TLS handshake failed: the peer's certificate is not the one trusted, or the peer
        /// does not speak TLS.
        case tlsFailed
    }

    /// What kind of problem it is.
    public let code: Code
    /// What happened, for people.
    public let message: String

    /// Creates an error.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
