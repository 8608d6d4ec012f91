import Foundation
import JobtopTestSupport

/// Certificates and keys made with `openssl` in a test's own scratch directory: CAs, leaves
/// they sign, self-signed pairs. Every test makes its own, so no two tests share a key.
struct TLSFiles {
    /// A certificate file and its key file.
    struct Pair {
        let certificate: String
        let key: String
    }

    let scratch: Scratch

    init() throws {
        scratch = try Scratch()
    }

    /// A CA: self-signed, `CA:TRUE`.
    func authority(_ name: String) throws -> Pair {
        let pair = Pair(certificate: scratch.file("\(name).pem"), key: scratch.file("\(name).key"))
        try openssl([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
            "-subj", "/CN=\(name)", "-keyout", pair.key, "-out", pair.certificate,
        ])
        return pair
    }

    /// A leaf signed by `authority`, naming `names` (subjectAltName, like `IP:127.0.0.1`).
    func leaf(_ name: String, signedBy authority: Pair, names: String = "IP:127.0.0.1,DNS:localhost") throws -> Pair {
        let pair = Pair(certificate: scratch.file("\(name).pem"), key: scratch.file("\(name).key"))
        let request = scratch.file("\(name).csr")
        try openssl([
            "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-subj", "/CN=\(name)", "-keyout", pair.key, "-out", request,
        ])
        let extensions = try scratch.write(
            "\(name).ext", "subjectAltName=\(names)\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth,clientAuth\n")
        try openssl([
            "x509", "-req", "-in", request, "-CA", authority.certificate, "-CAkey", authority.key, "-days", "2",
            "-out", pair.certificate, "-extfile", extensions,
        ])
        return pair
    }

    /// A self-signed pair, as the README's openssl line makes it.
    func selfSigned(_ name: String, names: String = "IP:127.0.0.1,DNS:localhost") throws -> Pair {
        let pair = Pair(certificate: scratch.file("\(name).pem"), key: scratch.file("\(name).key"))
        try openssl([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
            "-subj", "/CN=\(name)", "-addext", "subjectAltName=\(names)", "-keyout", pair.key, "-out", pair.certificate,
        ])
        return pair
    }

    /// `openssl x509 -noout -fingerprint -sha256` of a certificate: `sha256:AB:CD:...`.
    func fingerprint(_ pair: Pair) throws -> String {
        let text = try openssl(["x509", "-in", pair.certificate, "-noout", "-fingerprint", "-sha256"])
        guard let equals = text.firstIndex(of: "=") else { throw SpawnError(message: "openssl printed no fingerprint: \(text)") }
        return "sha256:" + text[text.index(after: equals)...].trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @discardableResult
    private func openssl(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["openssl"] + arguments
        process.currentDirectoryURL = URL(fileURLWithPath: scratch.path)
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            throw SpawnError(message: "cannot run openssl (apt-get install openssl): \(error)")
        }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        guard process.terminationStatus == 0 else {
            throw SpawnError(message: "openssl \(arguments.joined(separator: " ")) failed (\(process.terminationStatus)): \(text)")
        }
        return text
    }
}
