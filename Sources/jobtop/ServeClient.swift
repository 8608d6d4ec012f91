import ArgumentParser
import Foundation
import Scheduler
import SchedulerRemote
import SchedulerService

/// Where a client command finds `jobtop serve`: the Unix socket by default, or TCP.
struct ConnectOptions: ParsableArguments {
    @Option(
        name: .customLong("connect"),
        help: ArgumentHelp("Talk to a serve on TCP (jobtop serve --listen) instead of this user's socket.", valueName: "host:port"))
    var connect: String?

    @Option(
        name: .customLong("token-file"),
        help: ArgumentHelp("The token the serve wants on TCP (default: $JOBTOP_TOKEN).", valueName: "path"))
    var tokenFile: String?

    /// `--tls-ca` or `--tls-fingerprint` (and `--tls-cert/--tls-key` for mutual TLS): how a
    /// serve listening with TLS is trusted.
    @OptionGroup var tls: ConnectTLSOptions

    func validate() throws {
        if connect == nil && tokenFile != nil { throw ValidationError("--token-file needs --connect HOST:PORT") }
        if connect == nil && tls.isSet { throw ValidationError("--tls-ca, --tls-fingerprint, --tls-cert and --tls-key need --connect HOST:PORT") }
        if let connect {
            do { _ = try RemoteAddress(parsing: connect) } catch { throw ValidationError("--connect: \(error)") }
            do { _ = try RemoteToken.load(file: tokenFile) } catch { throw ValidationError("\(error)") }
            if let warning = RemoteToken.permissionWarning(file: tokenFile) { StandardError.write("jobtop: \(warning)\n") }
        }
    }

    var endpoint: ControlEndpoint {
        get throws {
            guard let connect else { return .unixSocket(ControlSocket.path()) }
            do {
                return .tcp(try RemoteAddress(parsing: connect), token: try RemoteToken.load(file: tokenFile))
            } catch {
                throw ValidationError("\(error)")
            }
        }
    }

    /// Connects, or ends the command with one line and ``ExitStatus/noServe``.
    func client() async throws -> ControlClient {
        do {
            let security: RemoteTLS.Client?
            do { security = try tls.client() } catch { throw ValidationError(error.message) }
            let endpoint = try endpoint
            if security == nil, case .unixSocket(let path) = endpoint, let early = await EarlyConnection.take(path) {
                return early
            }
            return try ControlClient(endpoint: endpoint, tls: security)
        } catch let error as ControlError {
            throw ServeFailure(error)
        }
    }
}

/// A client command's connection to this user's socket, begun before ArgumentParser reads the
/// arguments, so that setting it up (the client and its transport's threads, then the socket and
/// the HTTP/2 handshake) runs on the other core while they are parsed rather than after: the
/// two took about as long, one after the other, before a `jobtop submit` reached the serve.
///
/// Taken only by a command that wants that very socket (no `--connect`, no TLS); otherwise left
/// unused. A socket no serve answers at fails the command's own call as it always did, with the
/// same explanation.
enum EarlyConnection {
    /// Whether `name` is a subcommand that talks to a serve: all but those that run a scheduler
    /// of their own.
    static func isClientCommand(_ name: String) -> Bool {
        Jobtop.subcommand(named: name)?.isClient ?? false
    }
    private static let pending = Locked<(path: String, task: Task<ControlClient?, Never>)?>(nil)

    /// Begins connecting when `arguments` (without the program name) name a client command of
    /// the default socket, and a socket is there.
    static func begin(for arguments: [String]) {
        guard let first = arguments.first, isClientCommand(first),
              !arguments.contains(where: { $0 == "--connect" || $0.hasPrefix("--connect=") || $0 == "--help" || $0 == "-h" })
        else { return }
        let path = ControlSocket.path()
        let task = Task.detached { () -> ControlClient? in
            guard let client = try? ControlClient(endpoint: .unixSocket(path)) else { return nil }
            // A channel connects for its first call: this one starts the connection now, and the
            // command's own call, made meanwhile, goes out as soon as it is up. (If it cannot get
            // through, neither can the command's, which then says why as it always did.)
            Task { try? await client.ping() }
            return client
        }
        pending.withLock { $0 = (path, task) }
    }

    /// The connection begun for `path`, if one was.
    static func take(_ path: String) async -> ControlClient? {
        guard let pending = pending.withLock({ value in defer { value = nil }; return value }), pending.path == path else {
            return nil
        }
        return await pending.task.value
    }
}

/// The serve could not be reached, refused us, or went away: one line and status 3.
struct ServeFailure: Error {
    let error: ControlError
    init(_ error: ControlError) { self.error = error }
}

/// Runs a client command's body, turning the serve's failures and refusals into one line and
/// the documented exit status.
func withServe<T>(_ options: ConnectOptions, _ body: (ControlClient) async throws -> T) async throws -> T {
    let client = try await options.client()
    do {
        let result = try await body(client)
        await client.close()
        return result
    } catch let error as ControlError {
        await client.close()
        throw ServeFailure(error)
    } catch {
        await client.close()
        throw error
    }
}

/// Sends `command`; a refusal ends the command with the scheduler's sentence and status 1.
func send(_ client: ControlClient, _ command: SchedulerCommand) async throws -> SchedulerReply {
    do {
        return try await client.send(command)
    } catch let error as SchedulerError {
        StandardError.write("jobtop: \(printable(error.message))\n")
        throw ExitCode(ExitStatus.someFailed)
    }
}

/// The jobs a serve lists, resolved from what the user typed.
func resolve(_ references: [String], with client: ControlClient) async throws -> [JobInfo] {
    guard !references.isEmpty else { return [] }
    return try JobReference.jobs(references, try await client.resolve(references))
}

/// An optional field of a JSON report, written as null when it has no value: the synthesized
/// encoding leaves a nil out, and a script that reads a key the README lists would find none
/// (`status --json` had no `limit` for a group without one).
@propertyWrapper
struct NullWhenAbsent<Value: Encodable>: Encodable {
    var wrappedValue: Value?

    init(wrappedValue: Value?) {
        self.wrappedValue = wrappedValue
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        if let wrappedValue { try container.encode(wrappedValue) } else { try container.encodeNil() }
    }
}

/// Writes a value as one line of JSON on stdout.
func printJSON(_ value: some Encodable) {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    guard let data = try? encoder.encode(value), let text = String(data: data, encoding: .utf8) else { return }
    print(text)
}

/// A job as `status --json` and `submit --json` print it: plain fields for scripts.
struct JobRecord: Encodable {
    // Every field the README lists is written, a missing one as null: a script finds every key.
    var id: String
    var short: String
    @NullWhenAbsent var name: String?
    var command: String
    var state: String
    var priority: Int
    var group: String
    var attempts: Int
    var maxAttempts: Int
    var after: [String]
    @NullWhenAbsent var failure: String?
    @NullWhenAbsent var worker: String?
    /// Where the worker placed it (Slurm: the job id, and the reason while it waits).
    @NullWhenAbsent var placement: String?
    /// Running, but sent to a worker that holds it and has not begun it.
    var sent = false
    /// A running job being stopped: why (`cancel`, `timeout`).
    @NullWhenAbsent var stopping: String?
    /// When a scheduled job starts, or a job waiting for its retry retries (RFC 3339, UTC).
    @NullWhenAbsent var due: String?

    /// `job` as of the snapshot's time `now`, which is the wall clock's `wallNow` (a due time
    /// is said as a date).
    init(
        _ job: JobInfo, workers: [WorkerID: String] = [:], placements: [JobID: String] = [:], sent: Set<JobID> = [],
        now: SchedulerTime = .zero, wallNow: Date = Date()
    ) {
        id = job.id.description
        short = job.id.short
        name = job.name
        command = job.command
        state = job.state.name
        priority = job.priority
        group = job.group
        attempts = job.attempts
        maxAttempts = job.maxAttempts
        after = job.dependencies.map(\.description)
        failure = job.lastFailure?.description
        if case .running(let worker, _, _, let stopping) = job.state {
            self.worker = workers[worker] ?? worker.short
            placement = placements[job.id]
            self.sent = sent.contains(job.id)
            self.stopping = stopping?.rawValue
        }
        if case .skipped(let reason) = job.state { failure = reason.description }
        // (Only the text said when: "scheduled (in 4m)", "waiting (in 2s, attempt 2 of 3 next)".)
        let until: SchedulerTime? = switch job.state {
        case .scheduled(let until), .waitingForRetry(let until, _, _): until
        default: nil
        }
        if let until {
            due = wallNow.addingTimeInterval(max(.zero, until - now).seconds).formatted(.iso8601)
        }
    }
}

extension JobReference {
    /// The jobs `texts` name, or why one cannot be found: nothing is done unless all are.
    static func jobs(_ texts: [String], _ resolutions: [Resolution]) throws(JobInputError) -> [JobInfo] {
        var found: [JobInfo] = []
        for (text, resolution) in zip(texts, resolutions) {
            switch resolution {
            case .found(let job): found.append(job)
            case .unknown:
                throw JobInputError(.invalidValue, "no job '\(text)' (give its id, a unique prefix of it, or its name; see 'jobtop status --all')")
            case .ambiguous(let candidates, let count):
                let shown = candidates.map { "\($0.id.short) (\($0.displayName))" }.joined(separator: ", ")
                let more = count > candidates.count ? ", and \(count - candidates.count) more" : ""
                throw JobInputError(.invalidValue, "'\(text)' matches \(count) jobs: \(shown)\(more); give more of the id")
            }
        }
        return found
    }
}

extension JobID {
    /// The short form of each of `ids` (its first 8 hex digits), made longer where two of them
    /// share it, until each names one of them: `submit` of 100,000 jobs printed two alike, which
    /// named nothing (`'b91caa5a' matches 2 jobs`). (A job submitted earlier may still share one:
    /// `--json` gives the whole ids.)
    ///
    /// An id given twice (a job that joined another with its key) is one job: its short form
    /// stays short (it was printed whole, as if it clashed with itself).
    static func distinctShortForms(of ids: [JobID]) -> [String] {
        let texts = Array(Set(ids)).map { Array($0.description.utf8) }.sorted { $0.lexicographicallyPrecedes($1) }
        var length = Array(repeating: 8, count: texts.count)
        for (a, b) in zip(texts.indices, texts.indices.dropFirst()) {
            var common = 0
            while common < texts[a].count, common < texts[b].count, texts[a][common] == texts[b][common] { common += 1 }
            guard common >= 8 else { continue }
            // One past what they share, and not ending on a dash.
            var needed = common + 1
            if needed < texts[a].count, texts[a][needed - 1] == UInt8(ascii: "-") { needed += 1 }
            length[a] = max(length[a], needed)
            length[b] = max(length[b], needed)
        }
        var shortForms: [String: String] = [:]
        for (text, count) in zip(texts, length) {
            let whole = String(decoding: text, as: UTF8.self)
            shortForms[whole] = String(decoding: text.prefix(count), as: UTF8.self)
        }
        return ids.map { shortForms[$0.description]! }
    }
}

