import GRPCCore
import NIOSSL

extension RemoteTLS.Client {
    /// What a failed connection says about TLS, for a person: why the handshake failed, or `nil`
    /// when `error` is not a TLS failure (refused connection, timeout, ...).
    ///
    /// A TLS failure before the listener accepted the client is a set-up problem (wrong CA or
    /// fingerprint, a listener without TLS, a missing client certificate) that retrying does not
    /// mend, so clients stop and say this.
    ///
    /// - Parameters:
    ///   - error: What the connection or call failed with.
    ///   - address: Where the client connected, for the message.
    ///   - peer: What listens there, for the message (`the coordinator`, `jobtop serve`).
    ///   - client: What this side is, for the message (`worker`, `client`).
    public func handshakeFailure(
        in error: any Error, connectingTo address: RemoteAddress, peer: String = "the coordinator", client: String = "worker"
    ) -> String? {
        guard let ssl = Self.sslError(in: error), !Self.closedDuringHandshake(ssl) else { return nil }
        if let seen = lastRejectedFingerprint, case .fingerprint(let pin) = trust {
            return "\(peer) at \(address) showed a certificate with fingerprint \(seen), not the pinned \(RemoteTLS.Flag.fingerprint) \(pin)"
        }
        let text = String(describing: ssl)
        if text.contains("failedToValidateHostname") {
            return "\(peer) at \(address) showed a certificate that does not name \(address.host) (its subjectAltName must hold the host name or IP address \(client)s connect to)"
        }
        if text.contains("CERTIFICATE_VERIFY_FAILED") {
            switch trust {
            case .certificateAuthority(let file):
                return "\(peer) at \(address) showed a certificate that does not verify against \(RemoteTLS.Flag.certificateAuthority) \(file): not signed by it, or outside its validity dates (see 'openssl x509 -noout -dates')"
            case .fingerprint:
                return "\(peer) at \(address) showed a certificate that does not match \(RemoteTLS.Flag.fingerprint)"
            }
        }
        if text.contains("WRONG_VERSION_NUMBER") || text.contains("HTTP_REQUEST") || text.contains("PACKET_LENGTH") {
            return "\(peer) at \(address) does not speak TLS (was it started with \(RemoteTLS.Flag.certificate)/\(RemoteTLS.Flag.key)?)"
        }
        if text.contains("CERTIFICATE_REQUIRED") || text.contains("HANDSHAKE_FAILURE_ON_CLIENT_HELLO") {
            return "\(peer) at \(address) requires a client certificate (mutual TLS): pass \(RemoteTLS.Flag.certificate)/\(RemoteTLS.Flag.key)"
        }
        if text.contains("UNKNOWN_CA") || text.contains("BAD_CERTIFICATE") || text.contains("CERTIFICATE_UNKNOWN") {
            return "\(peer) at \(address) refused this \(client)'s certificate (not signed by its \(RemoteTLS.Flag.clientCA))"
        }
        return "TLS with \(peer) at \(address) failed: \(PeerText.escaped(text, limit: 300))"
    }

    /// Why the connection failed, for a person, when `error` is the listener closing it in the
    /// middle of the handshake with no TLS alert: what a listener with too many connections
    /// waiting does (and a restarting one), not a set-up problem (``handshakeFailure(in:connectingTo:peer:client:)``
    /// says nil for it). A client tries again, or says to. `nil` for any other error.
    public static func closedDuringHandshake(in error: any Error) -> String? {
        // Closed before TLS said anything (a busy machine: the close came before the client's
        // hello was out), gRPC tells it as a preface that never came: the same close.
        let closedEarly = String(describing: error).contains("closed the connection before completing the HTTP/2 connection preface")
        guard closedEarly || sslError(in: error).map(closedDuringHandshake) == true else { return nil }
        return "it closed the connection during the TLS handshake (too many connections waiting for a hello, or a restart; or what listens there does not speak TLS)"
    }

    private static func closedDuringHandshake(_ ssl: any Error) -> Bool {
        if let nio = ssl as? NIOSSLError, case .uncleanShutdown = nio { return true }
        return String(describing: ssl).contains("EOF during handshake")
    }

    /// The NIOSSL error inside `error` (a gRPC error's causes, followed down), if any.
    static func sslError(in error: any Error) -> (any Error)? {
        var next: (any Error)? = error
        for _ in 0..<8 {
            guard let current = next else { return nil }
            switch current {
            case is NIOSSLError, is BoringSSLError, is NIOSSLExtraError:
                return current
            case let rpc as RPCError:
                next = rpc.cause
            case let runtime as RuntimeError:
                next = runtime.cause
            default:
                return nil
            }
        }
        return nil
    }
}
