import CProcess
import Foundation
import Scheduler
import SchedulerRemote
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The directory holding the built products (the test bundle's own directory).
func productsDirectory() -> URL {
    let bundle = Bundle.main.bundleURL
    for candidate in [bundle, bundle.deletingLastPathComponent()] {
        if FileManager.default.isExecutableFile(atPath: candidate.appendingPathComponent("jobtop").path) { return candidate }
    }
    return bundle.deletingLastPathComponent()
}

/// The `jobtop` binary built next to the tests, or `JOBTOP_TEST_BINARY` (to run the end-to-end
/// tests against another build, such as one from before a fix).
func jobtopBinary() -> String {
    ProcessInfo.processInfo.environment["JOBTOP_TEST_BINARY"]
        ?? productsDirectory().appendingPathComponent("jobtop").path
}

/// The command that starts a worker process.
func workerCommand() -> [String] { [jobtopBinary(), "worker"] }

/// A fresh temporary directory.
func temporaryDirectory() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("jobtop-remote-\(UUID().uuidString.prefix(8))")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

/// A `jobtop worker` child process; its stdout and stderr go to a file.
typealias WorkerProcess = JobtopProcess

/// A `jobtop` child process; its stdout and stderr go to a file.
final class JobtopProcess: Sendable {
    let pid: pid_t
    let logPath: String

    /// Starts `jobtop worker` for `address`.
    convenience init(
        connect address: RemoteAddress, slots: Int = 2, name: String, environment extra: [String: String] = [:]
    ) throws {
        try self.init(
            ["worker", "--connect", "127.0.0.1:\(address.port)", "--slots", "\(slots)", "--name", name],
            logName: "worker", environment: extra)
    }

    /// Starts `jobtop` with `arguments`.
    init(_ arguments: [String], logName: String, directory: URL? = nil, environment extra: [String: String] = [:]) throws {
        let directory = try directory ?? temporaryDirectory()
        logPath = directory.appendingPathComponent("\(logName).log").path
        let fd = open(logPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        precondition(fd >= 0)
        defer { close(fd) }
        let arguments = [jobtopBinary()] + arguments
        var environment = ProcessInfo.processInfo.environment
        environment.removeValue(forKey: RemoteToken.environmentVariable)
        for (key, value) in extra { environment[key] = value }
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let status = jt_spawn(arguments[0], argv, envp, nil, fd, fd, &pid, nil)
        guard status == 0 else {
            throw SpawnError(message: "cannot start \(arguments[0]): \(String(cString: strerror(status)))")
        }
        self.pid = pid
    }

    func signal(_ number: Int32) { kill(pid, number) }

    /// Waits for the process to end: its exit status, or 128 + the signal that killed it.
    func wait() async -> Int32 {
        let pid = self.pid
        return await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                var status: Int32 = 0
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
                continuation.resume(returning: jt_wifexited(status) != 0 ? jt_wexitstatus(status) : 128 + jt_wtermsig(status))
            }
        }
    }

    /// Waits for the process to end, at most `limit` (a hang guard): its status, or `nil` when
    /// it was still running (it is then killed with SIGKILL and reaped).
    func wait(atMost limit: Duration) async -> Int32? {
        let done = await eventually(within: limit) { isGone(self.pid) }
        if !done { signal(SIGKILL) }
        let status = await wait()
        return done ? status : nil
    }

    /// What it wrote so far.
    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// The lines it wrote so far.
    var lines: [String] { log.split(separator: "\n").map(String.init) }
}

/// Lines a listener or an agent logged, for tests that read them.
final class LogLines: Sendable {
    private let lines = Mutex<[String]>([])

    var sink: @Sendable (String) -> Void { { line in self.lines.withLock { $0.append(line) } } }
    var all: [String] { lines.withLock { $0 } }
}

struct SpawnError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

/// An in-process coordinator: a scheduler with no local slots and a listener on loopback.
struct Coordinator {
    let scheduler: Scheduler
    let listener: WorkerListener
    let address: RemoteAddress
    let listenerEvents: AsyncStream<WorkerListener.Event>
    let running: Task<Void, Never>

    /// Starts one on `clock` (the scheduler's, which the listener shares).
    static func start(
        port: Int = 0, token: String? = nil, heartbeat: Duration = .seconds(1), localSlots: Int = 0,
        clock: ManualClock? = nil, helloDeadline: Duration = .seconds(5), maxPendingConnections: Int = 32,
        shutdownGrace: Duration = .seconds(2), log: LogLines? = nil
    ) async throws -> Coordinator {
        let configuration = Scheduler.Configuration(localSlots: localSlots, gracePeriod: .seconds(2))
        let scheduler: Scheduler
        if let clock {
            scheduler = Scheduler(configuration: configuration, clock: clock)
        } else {
            scheduler = Scheduler(configuration: configuration)
        }
        let running = Task { await scheduler.run() }
        var sink: @Sendable (String) -> Void = { _ in }
        if let lines = log { sink = lines.sink }
        let listener = try WorkerListener(
            scheduler: scheduler,
            configuration: .init(
                address: RemoteAddress(host: "127.0.0.1", port: port), token: token, heartbeatInterval: heartbeat,
                helloDeadline: helloDeadline, maxPendingConnections: maxPendingConnections, shutdownGrace: shutdownGrace,
                log: sink))
        let events = listener.events
        let address = try await listener.start()
        return Coordinator(scheduler: scheduler, listener: listener, address: address, listenerEvents: events, running: running)
    }

    /// Waits until `count` workers have joined; returns them.
    func joined(_ count: Int) async -> [WorkerDescriptor] {
        var descriptors: [WorkerDescriptor] = []
        for await event in listenerEvents {
            if case .joined(let descriptor) = event { descriptors.append(descriptor) }
            if descriptors.count == count { break }
        }
        return descriptors
    }

    /// Waits for the next listener event that `predicate` accepts.
    func next(where predicate: (WorkerListener.Event) -> Bool) async -> WorkerListener.Event? {
        for await event in listenerEvents where predicate(event) { return event }
        return nil
    }

    func stop() async {
        await listener.stop()
        await scheduler.shutdown(.cancelRunning)
        await running.value
    }
}

/// Whether `pid` is gone (no such process, or a zombie waiting for its reaper).
func isGone(_ pid: pid_t) -> Bool {
    if kill(pid, 0) != 0 { return errno == ESRCH }
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let close = stat.lastIndex(of: ")")
    else { return true }
    let state = stat[stat.index(close, offsetBy: 2)]
    return state == "Z" || state == "X"
}

/// Polls `condition` until it holds or `limit` passes: a hang guard, not a way to wait for
/// something that has an event.
func eventually(within limit: Duration = .seconds(20), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + limit
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return condition()
}
