import ArgumentParser
import Foundation
import Scheduler
import SchedulerRemote

/// `jobtop run`'s remote worker flags: where to accept workers and the token they must show.
struct RemoteOptions: ParsableArguments {
    @Option(
        name: .customLong("listen"),
        help: ArgumentHelp(
            "Accept remote workers ('jobtop worker --connect HOST:PORT') on this address; a non-loopback one (like 0.0.0.0:7070) needs a token.",
            valueName: "host:port"))
    var listen: String?

    @Option(
        name: .customLong("token-file"),
        help: ArgumentHelp("The token remote workers must show (default: $JOBTOP_TOKEN).", valueName: "path"))
    var tokenFile: String?

    @Option(
        name: .customLong("prefetch"),
        help: ArgumentHelp(
            "Jobs each remote worker may hold beyond its slots, so a slot that frees starts the next one without a round trip (default: \(WorkerListener.defaultPrefetch); 0: off).",
            valueName: "n"))
    var prefetch: Int?

    @OptionGroup
    var tls: ListenTLSOptions

    func validate() throws {
        guard let listen else {
            if tokenFile != nil { throw ValidationError("--token-file needs --listen HOST:PORT") }
            if tls.isSet { throw ValidationError("--tls-cert/--tls-key/--tls-client-ca need --listen HOST:PORT") }
            if prefetch != nil { throw ValidationError("--prefetch needs --listen HOST:PORT") }
            return
        }
        if let prefetch, !(0...1024).contains(prefetch) {
            throw ValidationError("--prefetch must be from 0 to 1024, not \(prefetch)")
        }
        do {
            let address = try RemoteAddress(parsing: listen)
            let token = try RemoteToken.load(file: tokenFile)
            if !address.isLoopback && token == nil {
                throw RemoteError(
                    .tokenRequired,
                    "--listen \(listen): a non-loopback address needs a token (--token-file PATH or JOBTOP_TOKEN), or anyone who can reach it could run commands here")
            }
        } catch {
            throw ValidationError("\(error)")
        }
    }

    /// Starts accepting workers into `scheduler`, or does nothing without `--listen`.
    ///
    /// - Parameters:
    ///   - scheduler: The pool workers join.
    ///   - logs: Whether joins, refusals and losses are written to stderr (not under the
    ///     dashboard, which shows workers itself and owns the terminal).
    /// - Returns: The listener, to ``WorkerListener/stop()`` when the run ends.
    /// - Throws: ``JobInputError`` when the address cannot be bound: nothing has started.
    func startListener(scheduler: Scheduler, logs: Bool) async throws -> WorkerListener? {
        guard let listen else { return nil }
        do {
            let address = try RemoteAddress(parsing: listen)
            let log: @Sendable (String) -> Void
            if logs {
                log = { StandardError.write($0 + "\n") }
            } else {
                log = { _ in }
            }
            let tls = try tls.server()
            let listener = try WorkerListener(
                scheduler: scheduler,
                configuration: .init(address: address, token: try RemoteToken.load(file: tokenFile), tls: tls,
                    prefetch: prefetch ?? WorkerListener.defaultPrefetch, log: log))
            let bound = try await listener.start()
            // Loud whatever the presenter: under the dashboard the log is off.
            if let warning = RemoteTLS.plaintextWarning(listeningOn: bound, hasTLS: tls != nil) {
                StandardError.write(warning + "\n")
            }
            if let tls {
                log("jobtop: accepting workers on \(bound) with TLS\(tls.isMutual ? " (mutual: workers need a certificate)" : ""); certificate \(tls.fingerprint) ('jobtop worker --connect \(bound) --tls-fingerprint \(tls.fingerprint)' or --tls-ca)")
            } else {
                log("jobtop: accepting workers on \(bound) ('jobtop worker --connect \(bound)')")
            }
            return listener
        } catch {
            throw JobInputError(.invalidValue, "--listen \(listen): \(error.message)")
        }
    }
}
