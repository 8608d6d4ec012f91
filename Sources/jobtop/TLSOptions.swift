import ArgumentParser
import SchedulerRemote

/// The TLS flags of a command that listens (`jobtop run --listen`, and any other): its
/// certificate and key, and for mutual TLS the CA its clients' certificates must chain to.
struct ListenTLSOptions: ParsableArguments {
    @Option(
        name: .customLong("tls-cert"),
        help: ArgumentHelp(
            "Listen with TLS: this certificate (PEM, leaf first; needs --tls-key); the README shows the openssl line for a self-signed one.",
            valueName: "path"))
    var certificate: String?

    @Option(name: .customLong("tls-key"), help: ArgumentHelp("The certificate's private key (PEM).", valueName: "path"))
    var key: String?

    @Option(
        name: .customLong("tls-client-ca"),
        help: ArgumentHelp(
            "Mutual TLS: clients must show a certificate signed by a CA in this file (PEM).", valueName: "path"))
    var clientCA: String?

    var isSet: Bool { certificate != nil || key != nil || clientCA != nil }

    func validate() throws {
        do {
            _ = try server()
        } catch {
            throw ValidationError(error.message)
        }
    }

    /// The TLS set-up, or `nil` when no TLS flag was given.
    ///
    /// - Throws: ``RemoteError`` (`.badTLS`) for a missing partner flag or a file that cannot be used.
    func server() throws(RemoteError) -> RemoteTLS.Server? {
        switch (certificate, key) {
        case (nil, nil):
            if clientCA != nil { throw RemoteError(.badTLS, "--tls-client-ca needs --tls-cert and --tls-key (mutual TLS is TLS first)") }
            return nil
        case (_?, nil):
            throw RemoteError(.badTLS, "--tls-cert needs --tls-key (the certificate's private key)")
        case (nil, _?):
            throw RemoteError(.badTLS, "--tls-key needs --tls-cert (the certificate it belongs to)")
        case (let certificate?, let key?):
            return try RemoteTLS.Server(certificateFile: certificate, keyFile: key, clientCAFile: clientCA)
        }
    }
}

/// The TLS flags of a command that connects (`jobtop worker --connect`, and any other): how the
/// listener is trusted, and for mutual TLS the client's own certificate.
struct ConnectTLSOptions: ParsableArguments {
    @Option(
        name: .customLong("tls-ca"),
        help: ArgumentHelp(
            "Connect with TLS, trusting a listener whose certificate is signed by a CA in this file (PEM) and names the host connected to.",
            valueName: "path"))
    var certificateAuthority: String?

    @Option(
        name: .customLong("tls-fingerprint"),
        help: ArgumentHelp(
            "Connect with TLS, trusting only the listener certificate with this SHA-256 fingerprint (the coordinator prints it at start).",
            valueName: "sha256:hex"))
    var fingerprint: String?

    @Option(
        name: .customLong("tls-cert"),
        help: ArgumentHelp("Mutual TLS: show this certificate (PEM; needs --tls-key).", valueName: "path"))
    var certificate: String?

    @Option(name: .customLong("tls-key"), help: ArgumentHelp("Mutual TLS: the certificate's private key (PEM).", valueName: "path"))
    var key: String?

    var isSet: Bool { certificateAuthority != nil || fingerprint != nil || certificate != nil || key != nil }

    func validate() throws {
        do {
            _ = try client()
        } catch {
            throw ValidationError(error.message)
        }
    }

    /// The TLS set-up, or `nil` when no TLS flag was given.
    ///
    /// - Throws: ``RemoteError`` (`.badTLS`) for flags that do not go together or a file that
    ///   cannot be used.
    func client() throws(RemoteError) -> RemoteTLS.Client? {
        let trust: RemoteTLS.Client.Trust
        switch (certificateAuthority, fingerprint) {
        case (nil, nil):
            if certificate != nil || key != nil {
                throw RemoteError(.badTLS, "--tls-cert/--tls-key need --tls-ca or --tls-fingerprint (how this side trusts the listener)")
            }
            return nil
        case (_?, _?):
            throw RemoteError(.badTLS, "--tls-ca and --tls-fingerprint are two ways to trust the listener: give one")
        case (let file?, nil):
            trust = .certificateAuthority(file: file)
        case (nil, let fingerprint?):
            trust = .fingerprint(fingerprint)
        }
        return try RemoteTLS.Client(trust: trust, certificateFile: certificate, keyFile: key)
    }
}
