import Foundation
import JobtopTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `jobtop serve --listen` with `--tls-cert/--tls-key`, and its client commands with
/// `--connect` and `--tls-ca`/`--tls-fingerprint`: real processes, real gRPC, certificates made
/// with openssl.
@Suite("serve --listen over TLS", .serialized, .timeLimit(.minutes(3)))
struct RemoteServeTLSTests {
    /// A `jobtop serve -j 1` of its own (its own socket and state) listening on TCP with TLS.
    struct Serve {
        let process: JobtopProcess
        let address: String
        let environment: [String: String]
        let scratch: Scratch
        var tokenFile: String { scratch.file("token") }

        static func start(certificate: String, key: String) async throws -> Serve {
            let scratch = try Scratch()
            try scratch.write("token", "serve-\(UUID().uuidString)\n")
            let environment = ["XDG_RUNTIME_DIR": scratch.file("run"), "XDG_STATE_HOME": scratch.file("state")]
            let process = try JobtopProcess(
                ["serve", "-j", "1", "--listen", "127.0.0.1:0", "--token-file", scratch.file("token"), "--tls-cert", certificate,
                 "--tls-key", key],
                directory: scratch.path, environment: environment, newSession: true)
            let ready = await eventually(within: .seconds(60)) { process.output.contains("listening on") }
            guard ready,
                let line = process.outputLines.first(where: { $0.contains("listening on") }),
                let address = line.split(separator: " ").first(where: { $0.hasPrefix("127.0.0.1:") })
            else {
                process.send(SIGKILL)
                throw SpawnError(message: "serve did not say where it listens: \(process.output)")
            }
            return Serve(process: process, address: String(address), environment: environment, scratch: scratch)
        }

        /// Runs a client command against it to its end (`--connect` to `port`, the serve's unless given).
        func run(_ arguments: [String], port: Int? = nil) async throws -> JobtopProcess.Outcome {
            let target = port.map { "127.0.0.1:\($0)" } ?? address
            return try await JobtopProcess(
                arguments + ["--connect", target, "--token-file", tokenFile], directory: scratch.path, environment: environment
            ).wait()
        }

        func stop() async {
            _ = try? await JobtopProcess(["shutdown"], environment: environment).wait()
            if await process.wait(atMost: .seconds(60)) == nil { Issue.record("serve did not stop") }
        }
    }

    @Test("Clients with --tls-ca or --tls-fingerprint get in; a wrong CA, a wrong pin and plaintext are refused; the token never crosses in the clear")
    func serveOverTLS() async throws {
        let files = try TLSFiles()
        let authority = try files.authority("ca")
        let pair = try files.leaf("serve", signedBy: authority)
        let stranger = try files.authority("stranger")
        let serve = try await Serve.start(certificate: pair.certificate, key: pair.key)
        // The serve says its certificate's fingerprint, as the coordinator does.
        let fingerprint = try files.fingerprint(pair)
        let hex = fingerprint.dropFirst("sha256:".count).lowercased().replacingOccurrences(of: ":", with: "")
        #expect(serve.process.output.contains("with TLS; certificate sha256:\(hex)"), "\(serve.process.output)")

        // A client trusting the CA submits through a relay that records every byte.
        let relay = try TCPRelay(upstream: Int(serve.address.split(separator: ":").last!)!)
        defer { relay.stop() }
        let marker = "marker-\(UUID().uuidString)"
        let submitted = try await serve.run(["submit", "--tls-ca", authority.certificate, "-c", "echo \(marker)"], port: relay.port)
        #expect(submitted.status == 0, "\(submitted.stderr)")
        // A client pinning the certificate lists the job.
        let pinned = try await serve.run(["status", "--all", "--json", "--tls-fingerprint", fingerprint])
        #expect(pinned.status == 0, "\(pinned.stderr)")
        #expect(pinned.stdout.contains(marker), "\(pinned.stdout)")

        // Then bytes crossed the relay, and neither the token nor the command among them.
        let token = try String(contentsOfFile: serve.tokenFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(relay.bytes.count > 1_000)
        #expect(!relay.sawInClear(token), "the token crossed in the clear")
        #expect(!relay.sawInClear(marker), "the command crossed in the clear")

        // A client trusting another CA is refused before it sends anything: one line, status 3.
        let wrongCA = try await serve.run(["status", "--tls-ca", stranger.certificate])
        #expect(wrongCA.status == 3, "\(wrongCA.stderr)")
        #expect(wrongCA.stderr.contains("does not verify against --tls-ca"), "\(wrongCA.stderr)")
        #expect(wrongCA.stderr.split(separator: "\n").count == 1, "\(wrongCA.stderr)")
        // A wrong pin likewise.
        let wrongPin = try await serve.run(["status", "--tls-fingerprint", "sha256:" + String(repeating: "ab", count: 32)])
        #expect(wrongPin.status == 3, "\(wrongPin.stderr)")
        #expect(wrongPin.stderr.contains("not the pinned --tls-fingerprint"), "\(wrongPin.stderr)")
        // A plaintext client does not get in.
        let plain = try await serve.run(["status"])
        #expect(plain.status == 3, "\(plain.stderr)")
        #expect(plain.stderr.contains("a serve with TLS needs --tls-ca or --tls-fingerprint"), "\(plain.stderr)")

        await serve.stop()
    }

    @Test("serve --tls-cert without --listen, or without --tls-key, is bad usage (status 2, nothing started)")
    func badFlags() async throws {
        let files = try TLSFiles()
        let pair = try files.selfSigned("serve")
        let scratch = try Scratch()
        let environment = ["XDG_RUNTIME_DIR": scratch.file("run"), "XDG_STATE_HOME": scratch.file("state")]
        let noListen = try await JobtopProcess(
            ["serve", "--tls-cert", pair.certificate, "--tls-key", pair.key], environment: environment).wait()
        #expect(noListen.status == 2, "\(noListen.stderr)")
        #expect(noListen.stderr.contains("--listen"), "\(noListen.stderr)")
        let noKey = try await JobtopProcess(
            ["serve", "--listen", "127.0.0.1:0", "--tls-cert", pair.certificate], environment: environment).wait()
        #expect(noKey.status == 2, "\(noKey.stderr)")
        #expect(noKey.stderr.contains("--tls-cert needs --tls-key"), "\(noKey.stderr)")
        #expect(!FileManager.default.fileExists(atPath: scratch.file("run") + "/jobtop/serve.sock"))
    }
}
