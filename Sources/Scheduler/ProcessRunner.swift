import CProcess
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Runs one process attempt to its end, blocking the calling thread.
///
/// The process gets its own session and process group, stdin from /dev/null and two pipes for
/// stdout and stderr, which are read line by line (a line is also ended by a carriage return, so
/// `\r`-style progress counters are seen) while a pidfd says when the process exits. A stop
/// request sends SIGTERM to the whole group, then SIGKILL after the grace period; once the
/// leader is gone, whatever is left of a stopped group is killed too. The leader is always
/// reaped: no zombies.
final class ProcessRunner {
    private var buffer = [UInt8](repeating: 0, count: 64 * 1024)
    private let wakeRead: Int32
    private let wakeWrite: Int32
    static let maxLineBytes = 16 * 1024

    init() {
        var fds: [Int32] = [-1, -1]
        _ = fds.withUnsafeMutableBufferPointer { jt_pipe($0.baseAddress, 1) }
        wakeRead = fds[0]
        wakeWrite = fds[1]
        _ = fcntl(wakeWrite, F_SETFL, fcntl(wakeWrite, F_GETFL) | O_NONBLOCK)
    }

    deinit {
        close(wakeRead)
        close(wakeWrite)
    }

    /// Runs the attempt and returns how it ended.
    func run(_ assignment: JobAssignment) -> Termination {
        let spec = assignment.spec
        let reporter = assignment.reporter
        let path: String
        let argv: [String]
        switch spec.work {
        case .shell(let command):
            path = "/bin/sh"
            argv = ["sh", "-c", command]
        case .argv(let arguments):
            guard let first = arguments.first, !first.isEmpty else { return .error("empty command") }
            guard let resolved = Self.resolve(first, environment: spec.environment) else {
                reporter.line("jobtop: \(first): command not found", stream: .stderr)
                return .exit(127)
            }
            path = resolved
            argv = arguments
        case .closure:
            return .error("a closure job cannot run as a process")
        }
        if let directory = spec.workingDirectory {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
                return .error("working directory '\(directory)' does not exist")
            }
        }
        if assignment.control.stopRequest != nil { return .signal(SIGTERM) }

        var outPipe: [Int32] = [-1, -1]
        var errPipe: [Int32] = [-1, -1]
        if outPipe.withUnsafeMutableBufferPointer({ jt_pipe($0.baseAddress, 1) }) != 0 {
            return .error("cannot create a pipe: \(String(cString: strerror(errno)))")
        }
        if errPipe.withUnsafeMutableBufferPointer({ jt_pipe($0.baseAddress, 1) }) != 0 {
            close(outPipe[0])
            close(outPipe[1])
            return .error("cannot create a pipe: \(String(cString: strerror(errno)))")
        }
        var pid: pid_t = 0
        let environment = spec.environment.isEmpty ? nil : Self.mergedEnvironment(spec.environment)
        let rc = Self.withCStrings(argv) { argvPointer in
            Self.withOptionalCStrings(environment) { envPointer in
                if let directory = spec.workingDirectory {
                    return jt_spawn(path, argvPointer, envPointer, directory, outPipe[1], errPipe[1], &pid)
                }
                return jt_spawn(path, argvPointer, envPointer, nil, outPipe[1], errPipe[1], &pid)
            }
        }
        close(outPipe[1])
        close(errPipe[1])
        guard rc == 0 else {
            close(outPipe[0])
            close(errPipe[0])
            let message = String(cString: strerror(rc))
            reporter.line("jobtop: cannot run \(argv[0]): \(message)", stream: .stderr)
            return rc == ENOENT || rc == EACCES ? .exit(rc == ENOENT ? 127 : 126) : .error("cannot run \(argv[0]): \(message)")
        }

        JobProcessGroups.started(pid)
        drainWakePipe()
        let pidfd = jt_pidfd_open(pid)
        let wake = wakeWrite
        let processGroup = pid
        assignment.control.onStop { _ in
            kill(-processGroup, SIGTERM)
            var byte: UInt8 = 1
            _ = write(wake, &byte, 1)
        }

        var out = LineSplitter(stream: .stdout)
        var err = LineSplitter(stream: .stderr)
        let parser = ProgressParser(pattern: spec.progressPattern)
        let emit: (OutputLine.Stream, String) -> Void = { stream, text in
            reporter.line(text, stream: stream)
            if let fraction = parser.fraction(in: text) { reporter.progress(fraction) }
        }

        var fds = [
            pollfd(fd: outPipe[0], events: Int16(POLLIN), revents: 0),
            pollfd(fd: errPipe[0], events: Int16(POLLIN), revents: 0),
            pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0),
            pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0),
        ]
        var exited = false
        var termSentAt: ContinuousClock.Instant?
        var killSent = false
        while !exited {
            var timeout: Int32 = -1
            if let request = assignment.control.stopRequest, !killSent {
                let sentAt = termSentAt ?? .now
                termSentAt = sentAt
                let remaining = sentAt.advanced(by: request.grace) - .now
                if remaining <= .zero {
                    kill(-pid, SIGKILL)
                    killSent = true
                } else {
                    timeout = Int32(min(remaining.seconds * 1000 + 1, 60_000))
                }
            }
            if pidfd < 0 { timeout = timeout < 0 ? 20 : min(timeout, 20) }
            let ready = poll(&fds, nfds_t(fds.count), timeout)
            if ready < 0 {
                if errno == EINTR { continue }
                break
            }
            for index in 0..<2 where fds[index].fd >= 0 && fds[index].revents != 0 {
                let open = index == 0 ? read(fds[index].fd, into: &out, emit: emit) : read(fds[index].fd, into: &err, emit: emit)
                if !open {
                    close(fds[index].fd)
                    fds[index].fd = -1
                }
            }
            if pidfd >= 0 {
                if fds[2].revents != 0 { exited = true }
            } else {
                exited = Self.hasExited(pid)
            }
            if fds[3].revents != 0 { drainWakePipe() }
        }

        // From here on a stop request reaches nothing: the attempt ended on its own.
        if exited { assignment.control.workEnded() }

        // What the process wrote before it exited is still in the pipes. A grandchild may keep
        // them open, so read only what is there now (bounded), then let go.
        for index in 0..<2 where fds[index].fd >= 0 {
            _ = index == 0
                ? read(fds[index].fd, into: &out, emit: emit, limit: 1 << 20)
                : read(fds[index].fd, into: &err, emit: emit, limit: 1 << 20)
            close(fds[index].fd)
        }
        out.flush(emit)
        err.flush(emit)
        assignment.control.onStop(nil)
        if assignment.control.stopRequest != nil {
            // The leader is a zombie until reaped, so its pid (= the group id) cannot be reused
            // yet: killing the group now reaches only what is left of this job. Then wait until
            // nothing of it runs, so that "cancelled" is only reported once the job has ended.
            kill(-pid, SIGKILL)
            Self.waitUntilGroupIsGone(pid, leader: pid, limit: .seconds(5))
        }
        JobProcessGroups.ended(pid)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        if pidfd >= 0 { close(pidfd) }
        if jt_wifexited(status) != 0 { return .exit(jt_wexitstatus(status)) }
        if jt_wifsignaled(status) != 0 { return .signal(jt_wtermsig(status)) }
        return .error("unknown wait status \(status)")
    }

    /// Reads what `fd` has now; returns false at end of file.
    private func read(_ fd: Int32, into splitter: inout LineSplitter, emit: (OutputLine.Stream, String) -> Void, limit: Int = .max) -> Bool {
        var total = 0
        while total < limit {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count > 0 {
                total += count
                buffer.withUnsafeBufferPointer { splitter.feed(UnsafeBufferPointer(rebasing: $0[0..<count]), emit) }
                continue
            }
            if count == 0 { return false }
            if errno == EINTR { continue }
            return errno == EAGAIN || errno == EWOULDBLOCK
        }
        return true
    }

    private func drainWakePipe() {
        var scratch = [UInt8](repeating: 0, count: 64)
        while scratch.withUnsafeMutableBytes({ Glibc.read(wakeRead, $0.baseAddress, $0.count) }) > 0 {}
    }

    private static func hasExited(_ pid: pid_t) -> Bool {
        var info = siginfo_t()
        info._sifields._sigchld.si_pid = 0
        let rc = waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT)
        return rc == 0 && info._sifields._sigchld.si_pid == pid
    }

    /// Waits (bounded) until no process of group `group` other than the unreaped `leader` is
    /// alive. Killed orphans are reaped by init, so this watches /proc rather than waiting.
    static func waitUntilGroupIsGone(_ group: pid_t, leader: pid_t, limit: Duration) {
        let deadline = ContinuousClock.now.advanced(by: limit)
        while ContinuousClock.now < deadline {
            let members = liveMembers(ofGroup: group).filter { $0 != leader }
            if members.isEmpty { return }
            for member in members { kill(member, SIGKILL) }  // a member that left the group by setpgid
            usleep(2_000)
        }
    }

    /// The pids of group `group` that are not zombies, read from /proc.
    static func liveMembers(ofGroup group: pid_t) -> [pid_t] {
        guard let directory = opendir("/proc") else { return [] }
        defer { closedir(directory) }
        var result: [pid_t] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard let pid = pid_t(name), let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { continue }
            // After "(comm)": state ppid pgrp ...
            let fields = stat[stat.index(after: close)...].split(separator: " ", maxSplits: 4)
            guard fields.count >= 3, fields[0] != "Z", pid_t(fields[2]) == group else { continue }
            result.append(pid)
        }
        return result
    }

    /// Finds `command` in `PATH` as `execvp` would.
    static func resolve(_ command: String, environment: [String: String]) -> String? {
        if command.contains("/") { return command }
        let searchPath = environment["PATH"] ?? ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        for directory in searchPath.split(separator: ":", omittingEmptySubsequences: false) {
            let candidate = (directory.isEmpty ? "." : String(directory)) + "/" + command
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }

    static func mergedEnvironment(_ extra: [String: String]) -> [String] {
        var merged = ProcessInfo.processInfo.environment
        merged.merge(extra) { _, new in new }
        return merged.map { "\($0.key)=\($0.value)" }
    }

    private static func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> R) -> R {
        var pointers: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
        pointers.append(nil)
        defer { for pointer in pointers { free(pointer) } }
        return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
    }

    private static func withOptionalCStrings<R>(_ strings: [String]?, _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>?) -> R) -> R {
        guard let strings else { return body(nil) }
        return withCStrings(strings) { body($0) }
    }
}

/// Splits a byte stream into lines at `\n` or `\r`, holding at most one partial line.
struct LineSplitter {
    let stream: OutputLine.Stream
    private var pending: [UInt8] = []

    init(stream: OutputLine.Stream) {
        self.stream = stream
    }

    mutating func feed(_ bytes: UnsafeBufferPointer<UInt8>, _ emit: (OutputLine.Stream, String) -> Void) {
        var start = 0
        for index in 0..<bytes.count where bytes[index] == 0x0A || bytes[index] == 0x0D {
            if pending.isEmpty {
                if index > start { emit(stream, String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)) }
            } else {
                pending.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<index]))
                emit(stream, String(decoding: pending, as: UTF8.self))
                pending.removeAll(keepingCapacity: true)
            }
            start = index + 1
        }
        if start < bytes.count {
            pending.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<bytes.count]))
            if pending.count >= ProcessRunner.maxLineBytes {
                emit(stream, String(decoding: pending, as: UTF8.self))
                pending.removeAll(keepingCapacity: true)
            }
        }
    }

    mutating func flush(_ emit: (OutputLine.Stream, String) -> Void) {
        if !pending.isEmpty {
            emit(stream, String(decoding: pending, as: UTF8.self))
            pending.removeAll()
        }
    }
}
