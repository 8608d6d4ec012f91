import Crypto
import Foundation
import GRPCNIOTransportHTTP2Posix
import NIOCore
import NIOSSL
import Scheduler
import SwiftASN1
import X509

/// TLS for jobtop's gRPC connections, one type for every listener and every client: the
/// coordinator and `jobtop worker`, and any other command that listens or connects.
///
/// The listening side (``Server``) shows a certificate and may ask its clients for one (mutual
/// TLS). The connecting side (``Client``) trusts the listener through a certificate authority's
/// file or through the SHA-256 fingerprint of the listener's own certificate (pinning: a
/// self-signed certificate then needs no CA at all), and may show a certificate of its own.
///
/// Files are read and checked when a value is made, so a wrong path, a file that is not PEM or
/// a key that does not belong to its certificate is reported before anything listens or
/// connects, naming the flag and the file.
///
/// ```swift
/// let server = try RemoteTLS.Server(certificateFile: "cert.pem", keyFile: "key.pem")
/// print(server.fingerprint)   // sha256:3f1c...: what a client pins
/// let client = try RemoteTLS.Client(trust: .fingerprint(server.fingerprint))
/// ```
public enum RemoteTLS {
    /// The flags a command that listens takes, named once so every command says the same.
    public enum Flag {
        public static let certificate = "--tls-cert"
        public static let key = "--tls-key"
        public static let clientCA = "--tls-client-ca"
        public static let certificateAuthority = "--tls-ca"
        public static let fingerprint = "--tls-fingerprint"
    }

    /// The loud line a listener on a non-loopback address without TLS prints, or `nil` when the
    /// address is loopback or TLS is on.
    ///
    /// - Parameters:
    ///   - address: Where it listens.
    ///   - hasTLS: Whether TLS is configured.
    ///   - program: The prefix of the line (`jobtop`).
    public static func plaintextWarning(listeningOn address: RemoteAddress, hasTLS: Bool, program: String = "jobtop") -> String? {
        guard !hasTLS, !address.isLoopback else { return nil }
        return "\(program): WARNING: listening on \(address) WITHOUT TLS: the token and every job's command, environment and output cross the network in the clear; use --tls-cert/--tls-key (a self-signed pair: see the README's TLS section), or a tunnel"
    }

    /// The SHA-256 fingerprint of a certificate's DER encoding, as `sha256:` and 64 lowercase
    /// hexadecimal digits.
    public static func fingerprint(der: [UInt8]) -> String {
        "sha256:" + SHA256.hash(data: der).map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }

    /// Reads a fingerprint: `sha256:` then 64 hexadecimal digits, upper or lower case, with or
    /// without colons between the bytes (as `openssl x509 -noout -fingerprint -sha256` prints them).
    ///
    /// - Returns: The fingerprint in the form ``fingerprint(der:)`` makes.
    /// - Throws: ``RemoteError`` (`.badTLS`) saying what is wrong.
    public static func parseFingerprint(_ text: String) throws(RemoteError) -> String {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        let lowered = trimmed.lowercased()
        guard lowered.hasPrefix("sha256:") else {
            throw RemoteError(
                .badTLS,
                "\(Flag.fingerprint) '\(PeerText.escaped(trimmed, limit: 80))': expected sha256: and 64 hexadecimal digits (the coordinator prints it at start)")
        }
        let digits = lowered.dropFirst("sha256:".count).filter { $0 != ":" }
        guard digits.count == 64, digits.allSatisfy({ $0.isHexDigit }) else {
            throw RemoteError(
                .badTLS,
                "\(Flag.fingerprint) '\(PeerText.escaped(trimmed, limit: 80))': a SHA-256 fingerprint has 64 hexadecimal digits, this one has \(digits.count) characters after sha256:")
        }
        return "sha256:" + digits
    }

    /// The TLS set-up of a command that listens.
    public struct Server: Sendable {
        /// The certificate file (PEM; the chain, leaf first).
        public let certificateFile: String
        /// The private key file (PEM).
        public let keyFile: String
        /// The CA file whose certificates clients must show one issued by (mutual TLS), or `nil`.
        public let clientCAFile: String?
        /// The SHA-256 fingerprint of the leaf certificate, for clients to pin.
        public let fingerprint: String
        private let chain: [UInt8]
        private let key: [UInt8]
        private let clientCA: [UInt8]?
        private let notValidBefore: Date
        private let notValidAfter: Date

        /// Reads and checks the files.
        ///
        /// - Parameters:
        ///   - certificateFile: The certificate chain (PEM, leaf first).
        ///   - keyFile: The leaf's private key (PEM).
        ///   - clientCAFile: For mutual TLS: the CA certificates (PEM) a client's certificate must
        ///     chain to; a client without one is refused during the handshake.
        /// - Throws: ``RemoteError`` (`.badTLS`) naming the flag and the file.
        public init(certificateFile: String, keyFile: String, clientCAFile: String? = nil) throws(RemoteError) {
            let (chain, leaf) = try RemoteTLS.readCertificates(certificateFile, flag: Flag.certificate)
            let key = try RemoteTLS.readKey(keyFile, flag: Flag.key, for: leaf, certificateFile: certificateFile)
            self.certificateFile = certificateFile
            self.keyFile = keyFile
            self.clientCAFile = clientCAFile
            self.chain = chain
            self.key = key
            clientCA = try clientCAFile.map { file throws(RemoteError) in try RemoteTLS.readCertificates(file, flag: Flag.clientCA).pem }
            fingerprint = RemoteTLS.fingerprint(der: leaf.der)
            notValidBefore = leaf.certificate.notValidBefore
            notValidAfter = leaf.certificate.notValidAfter
        }

        /// Whether clients must show a certificate.
        public var isMutual: Bool { clientCA != nil }

        /// When the certificate is outside its validity dates at `now`, what to say: every
        /// client refuses it (and can only say it did not verify), so the listener says why.
        public func validityWarning(at now: Date = Date(), program: String = "jobtop") -> String? {
            let formatter = ISO8601DateFormatter()
            if now > notValidAfter {
                return "\(program): warning: the certificate in \(certificateFile) expired on \(formatter.string(from: notValidAfter)): every client will refuse it"
            }
            if now < notValidBefore {
                return "\(program): warning: the certificate in \(certificateFile) is not valid until \(formatter.string(from: notValidBefore)): every client will refuse it"
            }
            return nil
        }

        /// The gRPC server transport's security for this set-up.
        public var transportSecurity: HTTP2ServerTransport.Posix.TransportSecurity {
            let chain: [TLSConfig.CertificateSource] = [.bytes(chain, format: .pem)]
            let key: TLSConfig.PrivateKeySource = .bytes(key, format: .pem)
            guard let clientCA else { return .tls(certificateChain: chain, privateKey: key) }
            return .mTLS(certificateChain: chain, privateKey: key) { config in
                config.trustRoots = .certificates([.bytes(clientCA, format: .pem)])
                // A worker connects from any address: its certificate is checked against the
                // CA, not against a host name.
                config.clientCertificateVerification = .noHostnameVerification
            }
        }
    }

    /// The TLS set-up of a command that connects.
    public struct Client: Sendable {
        /// How the client decides the listener is the right one.
        public enum Trust: Sendable, Equatable {
            /// The listener's certificate must chain to a certificate in this PEM file and name the
            /// host (or IP address) connected to.
            case certificateAuthority(file: String)
            /// The listener's own certificate must have this SHA-256 fingerprint (pinned); host
            /// names are not checked, the pin is the identity.
            case fingerprint(String)
        }

        /// How the listener is trusted.
        public let trust: Trust
        /// The client's own certificate file (mutual TLS), or `nil`.
        public let certificateFile: String?
        private let authority: [UInt8]?
        private let pin: String?
        private let identity: (chain: [UInt8], key: [UInt8])?
        private let lastMismatch = Locked<String?>(nil)

        /// Reads and checks the files.
        ///
        /// - Parameters:
        ///   - trust: A CA file, or the listener's certificate fingerprint (``RemoteTLS/parseFingerprint(_:)``).
        ///   - certificateFile: For mutual TLS: the client's certificate (PEM); needs `keyFile`.
        ///   - keyFile: Its private key (PEM).
        /// - Throws: ``RemoteError`` (`.badTLS`) naming the flag and the file.
        public init(trust: Trust, certificateFile: String? = nil, keyFile: String? = nil) throws(RemoteError) {
            switch trust {
            case .certificateAuthority(let file):
                authority = try RemoteTLS.readCertificates(file, flag: Flag.certificateAuthority).pem
                pin = nil
                self.trust = trust
            case .fingerprint(let text):
                let parsed = try RemoteTLS.parseFingerprint(text)
                authority = nil
                pin = parsed
                self.trust = .fingerprint(parsed)
            }
            switch (certificateFile, keyFile) {
            case (nil, nil):
                identity = nil
            case (let certificateFile?, let keyFile?):
                let (chain, leaf) = try RemoteTLS.readCertificates(certificateFile, flag: Flag.certificate)
                let key = try RemoteTLS.readKey(keyFile, flag: Flag.key, for: leaf, certificateFile: certificateFile)
                identity = (chain, key)
            case (_?, nil):
                throw RemoteError(.badTLS, "\(Flag.certificate) needs \(Flag.key) (the certificate's private key)")
            case (nil, _?):
                throw RemoteError(.badTLS, "\(Flag.key) needs \(Flag.certificate) (the certificate it belongs to)")
            }
            self.certificateFile = certificateFile
        }

        /// The fingerprint of the last listener certificate that did not match the pin, for
        /// saying why a handshake failed; `nil` when none did.
        public var lastRejectedFingerprint: String? { lastMismatch.withLock { $0 } }

        /// Forgets the last rejected fingerprint (a new connection attempt begins).
        public func forgetRejected() { lastMismatch.withLock { $0 = nil } }

        /// The gRPC client transport's security for this set-up.
        public var transportSecurity: HTTP2ClientTransport.Posix.TransportSecurity {
            let (authority, pin, identity, lastMismatch) = (authority, pin, identity, lastMismatch)
            return .tls { config in
                if let identity {
                    config.certificateChain = [.bytes(identity.chain, format: .pem)]
                    config.privateKey = .bytes(identity.key, format: .pem)
                }
                if let authority {
                    config.trustRoots = .certificates([.bytes(authority, format: .pem)])
                    config.serverCertificateVerification = .fullVerification
                }
                if let pin {
                    // The callback replaces the chain check: the pinned certificate is the
                    // identity, whoever issued it and whatever names it holds.
                    config.serverCertificateVerification = .noHostnameVerification
                    config.customVerificationCallback = { certificates, promise in
                        let seen = certificates.first.flatMap { try? $0.toDERBytes() }.map { RemoteTLS.fingerprint(der: $0) }
                        if let seen, seen == pin {
                            promise.succeed(.certificateVerified(VerificationMetadata(nil)))
                        } else {
                            lastMismatch.withLock { $0 = seen ?? "no certificate" }
                            promise.succeed(.failed)
                        }
                    }
                }
            }
        }
    }

    // MARK: - Reading files

    /// A certificate file's PEM bytes and its first (leaf) certificate.
    static func readCertificates(_ file: String, flag: String) throws(RemoteError) -> (pem: [UInt8], leaf: (certificate: Certificate, der: [UInt8])) {
        let bytes = try read(file, flag: flag)
        let certificates: [NIOSSLCertificate]
        do {
            certificates = try NIOSSLCertificate.fromPEMBytes(bytes)
        } catch {
            throw RemoteError(.badTLS, "\(flag) \(file): not a PEM certificate (expected -----BEGIN CERTIFICATE-----)")
        }
        guard let first = certificates.first, let der = try? first.toDERBytes(),
            let leaf = try? Certificate(derEncoded: der)
        else {
            throw RemoteError(.badTLS, "\(flag) \(file): no PEM certificate in it (expected -----BEGIN CERTIFICATE-----)")
        }
        return (bytes, (leaf, der))
    }

    /// A key file's PEM bytes, checked to belong to `leaf`.
    static func readKey(
        _ file: String, flag: String, for leaf: (certificate: Certificate, der: [UInt8]), certificateFile: String
    ) throws(RemoteError) -> [UInt8] {
        let bytes = try read(file, flag: flag)
        guard (try? NIOSSLPrivateKey(bytes: bytes, format: .pem)) != nil else {
            throw RemoteError(.badTLS, "\(flag) \(file): not a PEM private key (expected -----BEGIN PRIVATE KEY----- or an RSA/EC one; encrypted keys are not supported)")
        }
        // X509 reads RSA, EC and Ed25519 keys; another kind NIOSSL took is left for the handshake.
        if let text = String(bytes: bytes, encoding: .utf8), let key = try? Certificate.PrivateKey(pemEncoded: text),
            key.publicKey != leaf.certificate.publicKey
        {
            throw RemoteError(.badTLS, "\(flag) \(file): this key does not belong to the certificate in \(certificateFile)")
        }
        return bytes
    }

    private static func read(_ file: String, flag: String) throws(RemoteError) -> [UInt8] {
        do {
            return Array(try Data(contentsOf: URL(fileURLWithPath: file)))
        } catch {
            let nsError = error as NSError
            let why: String
            if nsError.code == NSFileReadNoSuchFileError {
                why = "no such file"
            } else if nsError.code == NSFileReadNoPermissionError {
                why = "permission denied"
            } else {
                why = nsError.localizedDescription
            }
            throw RemoteError(.badTLS, "\(flag) \(file): cannot read it (\(why))")
        }
    }
}
