import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The built `jobtop` binary, run as a user runs it: posix_spawn, pipes for stdout and stderr,
/// stdin from a file or /dev/null.
///
/// The binary is found next to the running test executable, so it is the one built with the
/// same scratch path and configuration (debug, release, sanitizers) as the tests.
final class JobtopProcess: Sendable {
    /// How a run ended and what it printed.
    struct Outcome: Sendable {
        /// The exit status, or 128 + the signal when the process was killed.
        var status: Int32
        var stdout: String
        var stderr: String

        /// stdout split into lines, without the trailing empty one.
        var lines: [String] { stdout.split(separator: "\n", omittingEmptySubsequences: true).map(String.init) }
    }

    /// The process id.
    let pid: pid_t
    /// The write end of its stdin pipe, when it was started with `stdinPipe`.
    let stdinWriter: Int32?
    private let stdoutText = Collected()
    private let stderrText = Collected()
    private let lineStream: AsyncStream<String>
    private let readersDone = DispatchGroup()

    private static let spawnLock = Mutex(())

    /// The path of the binary under test.
    static let binary: String = {
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
    /// - Parameters:
    ///   - stdin: Text for standard input; `nil` gives it /dev/null.
    ///   - directory: The working directory.
    ///   - stdinPipe: Give it a pipe for stdin instead, written with ``writeStdin(_:)``.
    ///   - executable: Another program to run the same way (a shell running a pipeline with jobtop in it).
    init(
        _ arguments: [String], stdin: String? = nil, directory: String? = nil, stdinPipe: Bool = false,
        executable: String = JobtopProcess.binary
    ) throws {
        let (lines, continuation) = AsyncStream<String>.makeStream()
        lineStream = lines
        var inputPath = "/dev/null"
        if let stdin {
            inputPath = NSTemporaryDirectory() + "jobtop-stdin-\(UUID().uuidString)"
            try stdin.write(toFile: inputPath, atomically: true, encoding: .utf8)
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var input: [Int32] = [-1, -1]
        if !stdinPipe {
            posix_spawn_file_actions_addopen(&actions, 0, inputPath, O_RDONLY, 0)
        }
        // `env -C` starts it in `directory` (posix_spawn's addchdir is not visible from Swift here).
        let argv = directory.map { ["/usr/bin/env", "-C", $0, executable] } ?? [executable]
        var cArguments: [UnsafeMutablePointer<CChar>?] = (argv + arguments).map { strdup($0) } + [nil]
        defer { for pointer in cArguments { free(pointer) } }
        var child: pid_t = 0
        var out: [Int32] = [-1, -1]
        var err: [Int32] = [-1, -1]
        // Pipes are made close-on-exec and spawned under one lock, so no other test's child
        // inherits this one's write ends (which would hold its stdout open past its exit).
        let rc = Self.spawnLock.withLock { _ -> Int32 in
            guard pipe(&out) == 0 else { return errno }
            guard pipe(&err) == 0 else { return errno }
            if stdinPipe {
                guard pipe(&input) == 0 else { return errno }
                posix_spawn_file_actions_adddup2(&actions, input[0], 0)
            }
            for fd in out + err + input where fd >= 0 { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
            posix_spawn_file_actions_adddup2(&actions, out[1], 1)
            posix_spawn_file_actions_adddup2(&actions, err[1], 2)
            return posix_spawn(&child, argv[0], &actions, nil, &cArguments, environ)
        }
        if out[1] >= 0 { close(out[1]) }
        if err[1] >= 0 { close(err[1]) }
        if input[0] >= 0 { close(input[0]) }
        stdinWriter = stdinPipe ? input[1] : nil
        if stdin != nil { unlink(inputPath) }
        guard rc == 0 else {
            if out[0] >= 0 { close(out[0]) }
            if err[0] >= 0 { close(err[0]) }
            throw SpawnError(message: "cannot run \(Self.binary): \(String(cString: strerror(rc)))")
        }
        pid = child
        Self.read(out[0], into: stdoutText, lines: continuation, group: readersDone)
        Self.read(err[0], into: stderrText, lines: nil, group: readersDone)
    }

    /// Runs `jobtop arguments...` to its end.
    static func run(_ arguments: [String], stdin: String? = nil, directory: String? = nil) async throws -> Outcome {
        try await JobtopProcess(arguments, stdin: stdin, directory: directory).wait()
    }

    /// stdout, line by line, as it is written (one consumer).
    var stdoutLines: AsyncStream<String> { lineStream }

    /// Waits for the first stdout line that satisfies `predicate`; `nil` if stdout ends first.
    func firstLine(where predicate: (String) -> Bool) async -> String? {
        for await line in lineStream where predicate(line) { return line }
        return nil
    }

    /// Writes `text` to its stdin pipe.
    func writeStdin(_ text: String) {
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
    func closeStdin() {
        if let fd = stdinWriter { close(fd) }
    }

    /// Sends `signal` to the process.
    func send(_ signal: Int32) {
        kill(pid, signal)
    }

    /// Waits for the process to exit and its pipes to close.
    func wait() async -> Outcome {
        let pid = pid
        let group = readersDone
        let status = await withCheckedContinuation { (continuation: CheckedContinuation<Int32, Never>) in
            let thread = Thread {
                var status: Int32 = 0
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
                group.wait()
                let code = (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
                continuation.resume(returning: code)
            }
            thread.start()
        }
        return Outcome(status: status, stdout: stdoutText.value, stderr: stderrText.value)
    }

    private static func read(
        _ fd: Int32, into sink: Collected, lines: AsyncStream<String>.Continuation?, group: DispatchGroup
    ) {
        group.enter()
        let thread = Thread {
            var pending = [UInt8]()
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { break }
                sink.append(buffer[0..<count])
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
        private let bytes = Mutex<[UInt8]>([])
        var value: String { String(decoding: bytes.withLock { $0 }, as: UTF8.self) }
        func append(_ more: ArraySlice<UInt8>) { bytes.withLock { $0.append(contentsOf: more) } }
    }

    struct SpawnError: Error, CustomStringConvertible {
        let message: String
        var description: String { message }
    }
}
