import Foundation
import JobtopTestSupport
import Scheduler
import Testing

@testable import SchedulerRemote

#if canImport(Glibc)
import Glibc
#endif

/// TLS between the coordinator and `jobtop worker`: real gRPC over loopback, certificates made
/// with openssl in each test's own directory.
@Suite("Remote workers over TLS", .serialized, .timeLimit(.minutes(3)))
struct RemoteTLSTests {
    @Test("A worker trusting the coordinator's CA joins over TLS and runs a job")
    func workerTrustingTheCAJoins() async throws {
        // Given a coordinator whose certificate a CA signed, and a worker trusting that CA.
        let files = try TLSFiles()
        let authority = try files.authority("ca")
        let server = try files.leaf("coordinator", signedBy: authority)
        let coordinator = try await Coordinator.start(
            tls: RemoteTLS.Server(certificateFile: server.certificate, keyFile: server.key))
        let worker = try JobtopProcess.worker(
            for: coordinator, slots: 1, name: "tls", arguments: ["--tls-ca", authority.certificate])

        // When it joins and is given a job.
        _ = await coordinator.joined(1)
        let end = try await coordinator.run(.shell("echo over-tls"))

        // Then the job succeeds, and the worker drains and exits 0.
        #expect(end.map { if case .succeeded = $0 { true } else { false } } == true)
        worker.send(SIGTERM)
        #expect(await worker.wait(atMost: .seconds(60))?.status == 0)
        await coordinator.stop()
    }

    @Test("A worker pinning the coordinator's fingerprint, pasted as openssl prints it, joins a self-signed coordinator")
    func workerPinningTheFingerprintJoins() async throws {
        // Given a self-signed coordinator (the README's openssl line) and its fingerprint from openssl.
        let files = try TLSFiles()
        let pair = try files.selfSigned("coordinator")
        let fingerprint = try files.fingerprint(pair)
        let tls = try RemoteTLS.Server(certificateFile: pair.certificate, keyFile: pair.key)
        #expect(try RemoteTLS.parseFingerprint(fingerprint) == tls.fingerprint)
        let coordinator = try await Coordinator.start(tls: tls)

        // When a worker pins it.
        let worker = try JobtopProcess.worker(
            for: coordinator, slots: 1, name: "pinned", arguments: ["--tls-fingerprint", fingerprint])

        // Then it joins and runs a job.
        _ = await coordinator.joined(1)
        let end = try await coordinator.run(.shell("true"))
        #expect(end.map { if case .succeeded = $0 { true } else { false } } == true)
        worker.send(SIGTERM)
        #expect(await worker.wait(atMost: .seconds(60))?.status == 0)
        await coordinator.stop()
    }

    @Test("A worker trusting another CA is refused: exit 1, says why, never joins")
    func workerWithTheWrongCAIsRefused() async throws {
        let files = try TLSFiles()
        let authority = try files.authority("ca")
        let stranger = try files.authority("other-ca")
        let server = try files.leaf("coordinator", signedBy: authority)
        let log = LogLines()
        let coordinator = try await Coordinator.start(
            log: log, tls: RemoteTLS.Server(certificateFile: server.certificate, keyFile: server.key))

        let worker = try JobtopProcess.worker(
            for: coordinator, slots: 1, name: "wrong-ca", arguments: ["--tls-ca", stranger.certificate])

        let outcome = try #require(await worker.wait(atMost: .seconds(60)))
        #expect(outcome.status == 1)
        #expect(outcome.stderr.contains("does not verify against --tls-ca \(stranger.certificate): not signed by it, or outside its validity dates"), "\(outcome.stderr)")
        #expect(outcome.stderr.contains("giving up (nothing was sent in the clear)"))
        #expect(!log.all.contains { $0.contains("joined") })
        await coordinator.stop()
    }

    @Test("A worker pinning another fingerprint is refused: exit 1, names both fingerprints, never joins")
    func workerWithTheWrongFingerprintIsRefused() async throws {
        let files = try TLSFiles()
        let pair = try files.selfSigned("coordinator")
        let other = try files.selfSigned("impostor")
        let tls = try RemoteTLS.Server(certificateFile: pair.certificate, keyFile: pair.key)
        let log = LogLines()
        let coordinator = try await Coordinator.start(log: log, tls: tls)
        let wrong = try files.fingerprint(other)

        let worker = try JobtopProcess.worker(
            for: coordinator, slots: 1, name: "wrong-pin", arguments: ["--tls-fingerprint", wrong])

        let outcome = try #require(await worker.wait(atMost: .seconds(60)))
        #expect(outcome.status == 1)
        #expect(outcome.stderr.contains("fingerprint \(tls.fingerprint), not the pinned --tls-fingerprint \(try RemoteTLS.parseFingerprint(wrong))"), "\(outcome.stderr)")
        #expect(!log.all.contains { $0.contains("joined") })
        await coordinator.stop()
    }

    @Test("A plaintext worker against a TLS listener never gets in, and a TLS worker against a plaintext one is told so")
    func plaintextAndTLSDoNotMix() async throws {
        // Given a TLS coordinator and a worker agent without TLS.
        let files = try TLSFiles()
        let pair = try files.selfSigned("coordinator")
        let log = LogLines()
        let coordinator = try await Coordinator.start(
            log: log, tls: RemoteTLS.Server(certificateFile: pair.certificate, keyFile: pair.key))
        let agent = WorkerAgent(configuration: .init(
            coordinator: coordinator.address, name: "plain", slots: 1, token: coordinator.token, log: { _ in }))
        let events = agent.events
        let running = Task { try? await agent.run() }

        // When it tries to join: its attempt ends unreachable, and it is never admitted.
        var first: WorkerAgent.Event?
        for await event in events {
            first = event
            break
        }
        agent.stop()
        await running.value
        guard case .unreachable = first else {
            Issue.record("expected the plaintext attempt to fail, got \(String(describing: first))")
            return
        }
        #expect(!log.all.contains { $0.contains("joined") })
        await coordinator.stop()

        // And a TLS worker against a plaintext coordinator exits 1 saying it does not speak TLS.
        let plain = try await Coordinator.start()
        let worker = try JobtopProcess.worker(
            for: plain, slots: 1, name: "tls-to-plain", arguments: ["--tls-fingerprint", try files.fingerprint(pair)])
        let outcome = try #require(await worker.wait(atMost: .seconds(60)))
        #expect(outcome.status == 1)
        #expect(outcome.stderr.contains("does not speak TLS"), "\(outcome.stderr)")
        await plain.stop()
    }

    @Test("A listener that closes the connection during the handshake (a coordinator with too many waiting) is retried, not given up on")
    func closedDuringTheHandshakeIsRetried() async throws {
        // Given a port whose listener closes every connection as soon as it has it, and a TLS
        // worker agent (it exited 1 on the first, as if its CA were wrong).
        let files = try TLSFiles()
        let authority = try files.authority("ca")
        let closer = try ClosingListener()
        defer { closer.stop() }
        let agent = WorkerAgent(configuration: .init(
            coordinator: RemoteAddress(host: "127.0.0.1", port: closer.port), name: "tls", slots: 1, token: "t",
            tls: try RemoteTLS.Client(trust: .certificateAuthority(file: authority.certificate)), log: { _ in }))
        let events = agent.events
        let running = Task { () -> String? in
            do throws(RemoteError) { try await agent.run() } catch { return error.message }
            return nil
        }
        // When it tries twice
        var seen: [WorkerAgent.Event] = []
        for await event in events {
            seen.append(event)
            if seen.filter({ if case .unreachable = $0 { true } else { false } }).count == 2 { break }
        }
        agent.stop()
        // Then each try was unreachable, said so plainly, and the agent never gave up.
        guard case .unreachable(let why)? = seen.first else {
            Issue.record("\(seen)")
            return
        }
        // (On a loaded machine the close can come before the hello is out: a reset, retried too.)
        #expect(why.contains("closed the connection during the TLS handshake") || why.contains("reset"), "\(why)")
        let error = await running.value
        #expect(error == nil, "\(String(describing: error))")
    }

    @Test("A control client whose serve closes the connection mid-handshake is told to try again (status 3), not that TLS failed")
    func controlClientClosedDuringTheHandshake() async throws {
        let closer = try ClosingListener()
        defer { closer.stop() }
        let pin = "sha256:" + String(repeating: "ab", count: 32)
        let status = try await JobtopProcess(["status", "--connect", "127.0.0.1:\(closer.port)", "--tls-fingerprint", pin]).wait()
        #expect(status.status == 3, "\(status.stderr)")
        // (On a loaded machine the close can come before the hello is out: a reset.)
        #expect(status.stderr.contains("closed the connection during the TLS handshake") || status.stderr.contains("reset"), "\(status.stderr)")
        #expect(!status.stderr.contains("handshakeFailed"), "\(status.stderr)")
    }

    @Test("A listener whose certificate is outside its validity dates says so at start (clients only see that it does not verify)")
    func validityWarning() throws {
        let files = try TLSFiles()
        let pair = try files.selfSigned("coordinator")
        let server = try RemoteTLS.Server(certificateFile: pair.certificate, keyFile: pair.key)
        #expect(server.validityWarning() == nil)
        let expired = try #require(server.validityWarning(at: Date().addingTimeInterval(200 * 365 * 86_400), program: "jobtop serve"))
        #expect(expired.hasPrefix("jobtop serve: warning: the certificate in \(pair.certificate) expired on "), "\(expired)")
        let early = try #require(server.validityWarning(at: Date(timeIntervalSince1970: 0)))
        #expect(early.contains("is not valid until"), "\(early)")
    }

    @Test("Mutual TLS: a worker without a certificate, or with one of another CA, is refused; one the client CA signed joins")
    func mutualTLS() async throws {
        // Given a coordinator that wants client certificates signed by its client CA.
        let files = try TLSFiles()
        let authority = try files.authority("ca")
        let clients = try files.authority("clients")
        let strangers = try files.authority("strangers")
        let server = try files.leaf("coordinator", signedBy: authority)
        let good = try files.leaf("good-worker", signedBy: clients)
        let bad = try files.leaf("bad-worker", signedBy: strangers)
        let log = LogLines()
        let coordinator = try await Coordinator.start(
            log: log,
            tls: RemoteTLS.Server(certificateFile: server.certificate, keyFile: server.key, clientCAFile: clients.certificate))
        let trust = ["--tls-ca", authority.certificate]

        // When a worker comes without a certificate: refused, exit 1, saying one is wanted.
        let without = try JobtopProcess.worker(for: coordinator, slots: 1, name: "no-cert", arguments: trust)
        let withoutOutcome = try #require(await without.wait(atMost: .seconds(60)))
        #expect(withoutOutcome.status == 1)
        #expect(withoutOutcome.stderr.contains("certificate"), "\(withoutOutcome.stderr)")

        // When one comes with a certificate of another CA: refused too.
        let stranger = try JobtopProcess.worker(
            for: coordinator, slots: 1, name: "stranger", arguments: trust + ["--tls-cert", bad.certificate, "--tls-key", bad.key])
        let strangerOutcome = try #require(await stranger.wait(atMost: .seconds(60)))
        #expect(strangerOutcome.status == 1)
        #expect(!log.all.contains { $0.contains("joined") })

        // Then one with a certificate the client CA signed joins and runs a job.
        let member = try JobtopProcess.worker(
            for: coordinator, slots: 1, name: "member", arguments: trust + ["--tls-cert", good.certificate, "--tls-key", good.key])
        let joined = await coordinator.joined(1)
        #expect(joined.map(\.name) == ["member"])
        let end = try await coordinator.run(.shell("true"))
        #expect(end.map { if case .succeeded = $0 { true } else { false } } == true)
        member.send(SIGTERM)
        #expect(await member.wait(atMost: .seconds(60))?.status == 0)
        await coordinator.stop()
    }

    @Test("Under TLS neither the token nor a job's command or output crosses the socket in the clear (plaintext, as a control, shows them)")
    func nothingCrossesInTheClear() async throws {
        let files = try TLSFiles()
        let pair = try files.selfSigned("coordinator")
        let marker = "marker-\(UUID().uuidString)"

        // Given, as a control, a plaintext coordinator reached through a recording relay: the
        // token and the job's output are there to be read.
        let plain = try await Coordinator.start()
        let plainRelay = try TCPRelay(upstream: plain.address.port)
        defer { plainRelay.stop() }
        let plainWorker = try JobtopProcess.worker(for: plain, slots: 1, name: "plain", port: plainRelay.port)
        _ = await plain.joined(1)
        _ = try await plain.run(.shell("echo \(marker)"))
        #expect(plainRelay.sawInClear(plain.token))
        #expect(plainRelay.sawInClear(marker))
        plainWorker.send(SIGTERM)
        _ = await plainWorker.wait(atMost: .seconds(60))
        await plain.stop()

        // When the same runs over TLS through another relay.
        let secure = try await Coordinator.start(tls: RemoteTLS.Server(certificateFile: pair.certificate, keyFile: pair.key))
        let relay = try TCPRelay(upstream: secure.address.port)
        defer { relay.stop() }
        let worker = try JobtopProcess.worker(
            for: secure, slots: 1, name: "secure", port: relay.port, arguments: ["--tls-ca", pair.certificate])
        _ = await secure.joined(1)
        let end = try await secure.run(.shell("echo \(marker)"))
        #expect(end.map { if case .succeeded = $0 { true } else { false } } == true)
        worker.send(SIGTERM)
        #expect(await worker.wait(atMost: .seconds(60))?.status == 0)
        await secure.stop()

        // Then bytes crossed (a TLS session), and none of them is the token, the command or its output.
        #expect(relay.bytes.count > 1_000)
        #expect(relay.bytes.first == 0x16)  // a TLS handshake record, not the HTTP/2 preface
        #expect(!relay.sawInClear(secure.token))
        #expect(!relay.sawInClear(marker))
        #expect(!relay.sawInClear("PRI * HTTP/2.0"))
    }

    // MARK: - Files and flags

    @Test("Unusable TLS files are refused before anything starts, naming the flag and the file")
    func unusableFilesAreRefused() throws {
        let files = try TLSFiles()
        let pair = try files.selfSigned("coordinator")
        let other = try files.selfSigned("other")
        let text = try files.scratch.write("not-pem.txt", "hello\n")
        let missing = files.scratch.file("missing.pem")
        let fingerprint = try files.fingerprint(pair)

        func message(_ body: () throws -> Void) -> String? {
            do {
                try body()
                return nil
            } catch let error as RemoteError {
                #expect(error.code == .badTLS)
                return error.message
            } catch {
                return "\(error)"
            }
        }
        #expect(message { _ = try RemoteTLS.Server(certificateFile: missing, keyFile: pair.key) }
            == "--tls-cert \(missing): cannot read it (no such file)")
        #expect(message { _ = try RemoteTLS.Server(certificateFile: text, keyFile: pair.key) }?
            .hasPrefix("--tls-cert \(text): not a PEM certificate") == true)
        #expect(message { _ = try RemoteTLS.Server(certificateFile: pair.certificate, keyFile: text) }?
            .hasPrefix("--tls-key \(text): not a PEM private key") == true)
        #expect(message { _ = try RemoteTLS.Server(certificateFile: pair.certificate, keyFile: other.key) }
            == "--tls-key \(other.key): this key does not belong to the certificate in \(pair.certificate)")
        #expect(message { _ = try RemoteTLS.Client(trust: .certificateAuthority(file: missing)) }
            == "--tls-ca \(missing): cannot read it (no such file)")
        #expect(message { _ = try RemoteTLS.Client(trust: .fingerprint(fingerprint), certificateFile: pair.certificate) }
            == "--tls-cert needs --tls-key (the certificate's private key)")
    }

    @Test(
        "Fingerprints are read in either form and anything else is refused",
        arguments: [
            ("sha256:" + String(repeating: "ab", count: 32), "sha256:" + String(repeating: "ab", count: 32)),
            ("SHA256:" + Array(repeating: "AB", count: 32).joined(separator: ":"), "sha256:" + String(repeating: "ab", count: 32)),
            ("sha256:abc", nil),
            (String(repeating: "ab", count: 32), nil),
            ("sha256:" + String(repeating: "zz", count: 32), nil),
        ] as [(String, String?)])
    func fingerprints(text: String, expected: String?) {
        #expect((try? RemoteTLS.parseFingerprint(text)) == expected)
    }

    @Test("jobtop refuses bad TLS flags with exit status 2 and one line, and warns loudly about a plaintext non-loopback listen")
    func commandLine() async throws {
        let files = try TLSFiles()
        let pair = try files.selfSigned("coordinator")
        let token = try files.scratch.write("token", "a-token-\(UUID().uuidString)\n")

        let missingCA = try await JobtopProcess.run(["worker", "--connect", "127.0.0.1:1", "--tls-ca", files.scratch.file("nope.pem")])
        #expect(missingCA.status == 2)
        #expect(missingCA.stderr.contains("--tls-ca \(files.scratch.file("nope.pem")): cannot read it (no such file)"), "\(missingCA.stderr)")

        let both = try await JobtopProcess.run([
            "worker", "--connect", "127.0.0.1:1", "--tls-ca", pair.certificate, "--tls-fingerprint", "sha256:00",
        ])
        #expect(both.status == 2)
        #expect(both.stderr.contains("--tls-ca and --tls-fingerprint are two ways to trust the listener: give one"))

        let keyless = try await JobtopProcess.run(["-c", "true", "--listen", "127.0.0.1:0", "--tls-cert", pair.certificate])
        #expect(keyless.status == 2)
        #expect(keyless.stderr.contains("--tls-cert needs --tls-key"), "\(keyless.stderr)")

        let noListen = try await JobtopProcess.run(["-c", "true", "--headless", "--tls-cert", pair.certificate, "--tls-key", pair.key])
        #expect(noListen.status == 2)
        #expect(noListen.stderr.contains("need --listen"), "\(noListen.stderr)")

        // A coordinator on every interface without TLS says so loudly; with TLS it prints its fingerprint.
        let plain = try await JobtopProcess.run(["-c", "true", "--headless", "--listen", "0.0.0.0:0", "--token-file", token])
        #expect(plain.status == 0)
        #expect(plain.stderr.contains("WARNING: listening on 0.0.0.0:"), "\(plain.stderr)")
        let secure = try await JobtopProcess.run([
            "-c", "true", "--headless", "--listen", "0.0.0.0:0", "--token-file", token,
            "--tls-cert", pair.certificate, "--tls-key", pair.key,
        ])
        #expect(secure.status == 0)
        #expect(!secure.stderr.contains("WARNING"))
        let fingerprint = try RemoteTLS.parseFingerprint(files.fingerprint(pair))
        #expect(secure.stderr.contains("with TLS; certificate \(fingerprint)"), "\(secure.stderr)")
    }
}

/// A TCP listener on loopback that closes each connection as soon as it accepts it.
final class ClosingListener: Sendable {
    let port: Int
    private let fd: Int32

    init() throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(descriptor, 64) == 0 else { throw SpawnError(message: "cannot listen: \(errno)") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        fd = descriptor
        Thread.detachNewThread {
            while true {
                let connection = accept(descriptor, nil, nil)
                if connection < 0 { return }
                close(connection)
            }
        }
    }

    /// Stops accepting (the thread's accept fails once the socket is shut down).
    func stop() {
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
    }
}
