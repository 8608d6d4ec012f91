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

    @OptionGroup
    var pool: WorkerPoolOptions

    @OptionGroup
    var tls: ListenTLSOptions

    func validate() throws {
        guard let listen else {
            if tokenFile != nil { throw ValidationError("--token-file needs --listen HOST:PORT") }
            if tls.isSet { throw ValidationError("--tls-cert/--tls-key/--tls-client-ca need --listen HOST:PORT") }
            try pool.requireListener("--listen HOST:PORT")
            return
        }
        do {
            let address = try RemoteAddress(parsing: listen)
            let token = try RemoteToken.load(file: tokenFile)
            if let warning = RemoteToken.permissionWarning(file: tokenFile) { StandardError.write("jobtop: \(warning)\n") }
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
            let log: @Sendable (String) -> Void
            if logs {
                log = { StandardError.write($0 + "\n") }
            } else {
                log = { _ in }
            }
            return try await pool.startListener(
                on: listen, scheduler: scheduler, token: try RemoteToken.load(file: tokenFile), tls: try tls.server(),
                program: "jobtop", log: log)
        } catch let error as ValidationError {
            throw error
        } catch {
            throw JobInputError(.invalidValue, "--listen \(listen): \((error as? RemoteError)?.message ?? "\(error)")")
        }
    }
}

/// How a coordinator treats the remote workers it accepts (`jobtop run --listen`, `jobtop serve
/// --workers`): `--prefetch`, `--heartbeat` and `--goodbye-grace`, and starting the listener
/// with them.
struct WorkerPoolOptions: ParsableArguments {
    @Option(
        name: .customLong("prefetch"), parsing: .unconditional,
        help: ArgumentHelp(
            "Jobs each remote worker may hold beyond its slots, so a slot that frees starts the next one without a round trip: 'auto' (the default) sizes it to each worker's link and jobs, from 1 to 8 per slot; a number fixes it (0: off).",
            valueName: "auto|n"))
    var prefetch: String?

    /// `--prefetch`, checked.
    static func prefetch(_ text: String) throws(ValidationError) -> Prefetch {
        if text == "auto" { return .automatic }
        guard let depth = Int(text), (0...1024).contains(depth) else {
            throw ValidationError("--prefetch must be 'auto' or a number from 0 to 1024, not '\(text)'")
        }
        return .fixed(depth)
    }

    @Option(
        name: .customLong("heartbeat"), parsing: .unconditional,
        help: ArgumentHelp(
            "How often the coordinator and each worker say they are alive (default 1s, from 100ms to 60s). A worker silent for 5 of them plus --grace is lost; a worker gives up on a coordinator silent for 3. Longer: less idle CPU with many workers, slower to notice a cut link.",
            valueName: "duration"))
    var heartbeat: String?

    /// `--heartbeat`, checked.
    static func heartbeatInterval(_ text: String) throws(ValidationError) -> Duration {
        try DurationParser.option(text, "--heartbeat", within: .milliseconds(100) ... .seconds(60), range: "from 100ms to 60s")
    }

    @Option(
        name: .customLong("goodbye-grace"), parsing: .unconditional,
        help: ArgumentHelp(
            "How long, at the end, the coordinator waits for remote workers to close their connections after saying goodbye (default 2s, up to 10m); a worker that has not by then (stopped, cut off) has its connection dropped. Ctrl-C ends the wait at once.",
            valueName: "duration"))
    var goodbyeGrace: String?

    /// `--goodbye-grace`, checked.
    static func goodbyeGrace(_ text: String) throws(ValidationError) -> Duration {
        try DurationParser.option(text, "--goodbye-grace", within: .zero ... .seconds(600), range: "at most 10m")
    }

    func validate() throws {
        if let goodbyeGrace { _ = try Self.goodbyeGrace(goodbyeGrace) }
        if let heartbeat { _ = try Self.heartbeatInterval(heartbeat) }
        if let prefetch { _ = try Self.prefetch(prefetch) }
    }

    /// Refuses these flags when no workers are accepted: `flag` is what turns that on.
    func requireListener(_ flag: String) throws(ValidationError) {
        if prefetch != nil { throw ValidationError("--prefetch needs \(flag)") }
        if heartbeat != nil { throw ValidationError("--heartbeat needs \(flag)") }
        if goodbyeGrace != nil { throw ValidationError("--goodbye-grace needs \(flag)") }
    }

    /// Starts accepting workers into `scheduler` on `text` (a `HOST:PORT` already checked).
    /// Warns on stderr, whatever `log` does, when a non-loopback address has no TLS; says where
    /// it listens through `log`.
    func startListener(
        on text: String, scheduler: Scheduler, token: String?, tls: RemoteTLS.Server?, program: String,
        log: @escaping @Sendable (String) -> Void
    ) async throws -> WorkerListener {
        let interval = try heartbeat.map { text throws(ValidationError) in try Self.heartbeatInterval(text) } ?? .seconds(1)
        let listener = try WorkerListener(
            scheduler: scheduler,
            configuration: .init(
                address: try RemoteAddress(parsing: text), token: token, tls: tls,
                prefetch: try prefetch.map { text throws(ValidationError) in try Self.prefetch(text) } ?? WorkerListener.defaultPrefetch,
                heartbeatInterval: interval,
                shutdownGrace: try goodbyeGrace.map { text throws(ValidationError) in try Self.goodbyeGrace(text) } ?? .seconds(2),
                log: log))
        let bound = try await listener.start()
        // Loud whatever the presenter: under the dashboard the log is off.
        if let warning = RemoteTLS.plaintextWarning(listeningOn: bound, hasTLS: tls != nil, program: program) {
            StandardError.write(warning + "\n")
        }
        if let warning = tls?.validityWarning(program: program) { StandardError.write(warning + "\n") }
        if let tls {
            log("\(program): accepting workers on \(bound) with TLS\(tls.isMutual ? " (mutual: workers need a certificate)" : ""); certificate \(tls.fingerprint) ('jobtop worker --connect \(bound) --tls-fingerprint \(tls.fingerprint)' or --tls-ca)")
        } else {
            log("\(program): accepting workers on \(bound) ('jobtop worker --connect \(bound)')")
        }
        return listener
    }
}
