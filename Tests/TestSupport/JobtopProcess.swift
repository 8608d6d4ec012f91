import CProcess
import Foundation
import Scheduler

#if canImport(Glibc)
import Glibc
#endif

/// The built `jobtop` binary, run as a user runs it: posix_spawn, pipes for stdout and stderr,
/// stdin from a file, a pipe or /dev/null; a coordinator, a `jobtop worker` or a plain run.
///
/// The binary is found next to the running test executable, so it is the one built with the
/// same scratch path and configuration (debug, release, sanitizers) as the tests;
/// `JOBTOP_TEST_BINARY` names another (a build from before a fix, say).
public final class JobtopProcess: Sendable {
    /// How a run ended and what it printed.
    public struct Outcome: Sendable {
        /// The exit status, or 128 + the signal when the process was killed.
        public var status: Int32
        public var stdout: String
        public var stderr: String

        /// stdout split into lines, without the trailing empty one.
        public var lines: [String] { stdout.split(separator: "\n", omittingEmptySubsequences: true).map(String.init) }
    }

    /// The process id.
    public let pid: pid_t
    /// The write end of its stdin pipe, when it was started with `stdinPipe`.
    public let stdinWriter: Int32?
    private let stdoutText = Collected()
    private let stderrText = Collected()
    /// Both streams in the order they were read.
    private let outputText = Collected()
    private let lineStream: AsyncStream<String>
    private let readersDone = DispatchGroup()
    /// Whether ``wait()`` reaped it (its pid may then belong to another process).
    private let reaped = Locked(false)
    /// Whether it leads a process group of its own.
    private let leadsGroup: Bool
    /// Its arguments, for the hang guard's message (a hung client said only its pid).
    private let arguments: [String]

    /// The path of the binary under test.
    public static let binary: String = {
        if let path = ProcessInfo.processInfo.environment["JOBTOP_TEST_BINARY"] { return path }
        var candidates: [URL] = []
        if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            candidates.append(URL(fileURLWithPath: exe).deletingLastPathComponent())
        }
        candidates.append(Bundle.main.bundleURL.deletingLastPathComponent())
        candidates.append(Bundle.main.bundleURL)
        for directory in candidates {
            for candidate in [directory, directory.deletingLastPathComponent()] {
                let path = candidate.appendingPathComponent("jobtop").path
                if FileManager.default.isExecutableFile(atPath: path) { return path }
            }
        }
        return candidates[0].appendingPathComponent("jobtop").path
    }()

    /// Starts `jobtop arguments...`.
    ///
    /// The child gets no descriptor of the test process but its stdin, stdout and stderr (the
    /// tests' own gRPC sockets are not close-on-exec), and never `JOBTOP_TOKEN` from the test's
    /// environment.
    ///
    /// - Parameters:
    ///   - stdin: Text for standard input; `nil` gives it /dev/null.
    ///   - directory: The working directory.
    ///   - stdinPipe: Give it a pipe for stdin instead, written with ``writeStdin(_:)``.
    ///   - environment: Variables to add or replace.
    ///   - newSession: Start it in a session (and process group) of its own.
    ///   - executable: Another program to run the same way (a shell running a pipeline with jobtop in it).
    public init(
        _ arguments: [String], stdin: String? = nil, directory: String? = nil, stdinPipe: Bool = false,
        environment extra: [String: String] = [:], newSession: Bool = false, executable: String = JobtopProcess.binary
    ) throws {
        let (lines, continuation) = AsyncStream<String>.makeStream()
        lineStream = lines
        var environment = ProcessInfo.processInfo.environment
        environment.removeValue(forKey: "JOBTOP_TOKEN")
        for (key, value) in extra { environment[key] = value }
        let argv = [executable] + arguments
        let cArguments: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
        let cEnvironment: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in cArguments + cEnvironment { free(pointer) } }

        // Close-on-exec from the start (jt_pipe), and the child closes everything above 2 anyway.
        var out: [Int32] = [-1, -1]
        var err: [Int32] = [-1, -1]
        var input: [Int32] = [-1, -1]
        func closeAll() { for fd in out + err + input where fd >= 0 { close(fd) } }
        if let stdin {
            let path = NSTemporaryDirectory() + "jobtop-stdin-\(UUID().uuidString)"
            try stdin.write(toFile: path, atomically: true, encoding: .utf8)
            input[0] = open(path, O_RDONLY | O_CLOEXEC)
            unlink(path)
        }
        guard jt_pipe(&out, 0) == 0, jt_pipe(&err, 0) == 0, !stdinPipe || jt_pipe(&input, 0) == 0, stdin == nil || input[0] >= 0 else {
            let why = String(cString: strerror(errno))
            closeAll()
            throw SpawnError(message: "cannot make pipes: \(why)")
        }
        var child: pid_t = 0
        let rc = jt_spawn_io(
            executable, cArguments, cEnvironment, directory, input[0], out[1], err[1], newSession ? 1 : 0, &child, nil)
        close(out[1])
        close(err[1])
        if input[0] >= 0 { close(input[0]) }
        stdinWriter = stdinPipe ? input[1] : nil
        guard rc == 0 else {
            close(out[0])
            close(err[0])
            if input[1] >= 0 { close(input[1]) }
            throw SpawnError(message: "cannot run \(executable): \(String(cString: strerror(rc)))")
        }
        pid = child
        leadsGroup = newSession
        self.arguments = arguments
        Self.read(out[0], into: [stdoutText, outputText], lines: continuation, group: readersDone)
        Self.read(err[0], into: [stderrText, outputText], lines: nil, group: readersDone)
    }

    /// A process the test let go of without waiting for it (a test that failed half-way) is killed
    /// with its group and reaped, so it cannot live on and join another test's coordinator.
    deinit {
        guard !reaped.withLock({ $0 }) else { return }
        let pid = pid
        kill(pid, SIGKILL)
        if leadsGroup { kill(-pid, SIGKILL) }
        Thread {
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        }.start()
    }

    /// Runs `jobtop arguments...` to its end.
    public static func run(_ arguments: [String], stdin: String? = nil, directory: String? = nil) async throws -> Outcome {
        try await JobtopProcess(arguments, stdin: stdin, directory: directory).wait()
    }

    /// stdout, line by line, as it is written (one consumer).
    public var stdoutLines: AsyncStream<String> { lineStream }

    /// Waits for the first stdout line that satisfies `predicate`; `nil` if stdout ends first.
    public func firstLine(where predicate: (String) -> Bool) async -> String? {
        for await line in lineStream where predicate(line) { return line }
        return nil
    }

    /// What it wrote so far on stdout and stderr, in the order it was read.
    public var output: String { outputText.value }

    /// ``output`` as lines.
    public var outputLines: [String] { output.split(separator: "\n").map(String.init) }

    /// Writes `text` to its stdin pipe.
    public func writeStdin(_ text: String) {
        guard let fd = stdinWriter else { return }
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if written <= 0 { return }
            offset += written
        }
    }

    /// Closes its stdin pipe: the end of the list.
    public func closeStdin() {
        if let fd = stdinWriter { close(fd) }
    }

    /// Sends `signal` to the process.
    public func send(_ signal: Int32) {
        kill(pid, signal)
    }

    /// How long ``wait()`` waits before it kills the process: a hang guard, so that a process
    /// that never ends fails its test instead of hanging the whole run (a test process waiting
    /// here cannot be cancelled by a time limit).
    public static let hangGuard: Duration = .seconds(240)

    /// Waits for the process to exit and its pipes to close; after ``hangGuard`` it kills it
    /// (its group too, when it leads one) with SIGKILL and says so on stderr.
    public func wait() async -> Outcome {
        let pid = pid
        let group = readersDone
        let reaped = reaped
        let leadsGroup = leadsGroup
        let command = arguments.joined(separator: " ").prefix(200)
        let status = await withCheckedContinuation { (continuation: CheckedContinuation<Int32, Never>) in
            let thread = Thread {
                var status: Int32 = 0
                let pidfd = jt_pidfd_open(pid)
                if pidfd >= 0 {
                    var descriptor = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
                    let limit = Int32(Self.hangGuard.components.seconds * 1000)
                    var ready: Int32 = -1
                    repeat { ready = poll(&descriptor, 1, limit) } while ready < 0 && errno == EINTR
                    close(pidfd)
                    if ready == 0 {
                        FileHandle.standardError.write(Data("JobtopProcess: pid \(pid) (jobtop \(command)) still running after \(Self.hangGuard); killing it\n".utf8))
                        kill(leadsGroup ? -pid : pid, SIGKILL)
                    }
                }
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
                reaped.withLock { $0 = true }
                if group.wait(timeout: .now() + .seconds(Int(Self.hangGuard.components.seconds))) == .timedOut {
                    FileHandle.standardError.write(Data("JobtopProcess: pid \(pid)'s output pipes still open \(Self.hangGuard) after it ended\n".utf8))
                }
                continuation.resume(returning: jt_wifexited(status) != 0 ? jt_wexitstatus(status) : 128 + jt_wtermsig(status))
            }
            thread.start()
        }
        return Outcome(status: status, stdout: stdoutText.value, stderr: stderrText.value)
    }

    /// Waits for the process to end, at most `limit` (a hang guard): how it ended, or `nil` when
    /// it was still running (it is then killed with SIGKILL and reaped).
    public func wait(atMost limit: Duration) async -> Outcome? {
        let done = await eventually(within: limit) { !isRunning(self.pid) }
        if !done { send(SIGKILL) }
        let outcome = await wait()
        return done ? outcome : nil
    }

    private static func read(
        _ fd: Int32, into sinks: [Collected], lines: AsyncStream<String>.Continuation?, group: DispatchGroup
    ) {
        group.enter()
        let thread = Thread {
            var pending = [UInt8]()
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { break }
                for sink in sinks { sink.append(buffer[0..<count]) }
                guard let lines else { continue }
                pending.append(contentsOf: buffer[0..<count])
                while let newline = pending.firstIndex(of: 0x0A) {
                    lines.yield(String(decoding: pending[..<newline], as: UTF8.self))
                    pending.removeSubrange(...newline)
                }
            }
            close(fd)
            lines?.finish()
            group.leave()
        }
        thread.start()
    }

    /// Text a reader thread collects.
    final class Collected: Sendable {
        private let bytes = Locked<[UInt8]>([])
        var value: String { String(decoding: bytes.withLock { $0 }, as: UTF8.self) }
        func append(_ more: ArraySlice<UInt8>) { bytes.withLock { $0.append(contentsOf: more) } }
    }
}

/// A child process that could not be started, or a test precondition that did not hold.
public struct SpawnError: Error, CustomStringConvertible {
    public let message: String
    public init(message: String) { self.message = message }
    public var description: String { message }
}
