import CProcess
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// How one attempt's process is spawned: the executable, its arguments, environment and
/// directory, checked before anything is spawned.
///
/// The process gets its own session and process group (`POSIX_SPAWN_SETSID`: group id = pid, no
/// controlling terminal), stdin from /dev/null and two close-on-exec pipes for stdout and
/// stderr. The ``ProcessReactor`` then watches it.
struct ProcessCommand {
    /// Why an attempt ends without a process.
    struct Failure: Error {
        /// How the attempt ended.
        var termination: Termination
        /// A line for the job's stderr, as a shell would print it.
        var line: String?
    }

    /// What a spawn did.
    enum SpawnResult {
        /// The process runs; the read ends of its stdout and stderr pipes (non-blocking).
        case spawned(pid: pid_t, stdout: Int32, stderr: Int32)
        /// A resource of this process or the system ran out (file descriptors, processes,
        /// memory): the errno. Trying again later may work; it says nothing about the command.
        case lacking(Int32)
        /// The command cannot run.
        case failed(Failure)
    }

    let path: String
    let arguments: [String]
    let environment: [String]?
    let directory: String?

    /// The command of `assignment`, or why it cannot run.
    static func make(for assignment: JobAssignment) -> Result<ProcessCommand, Failure> {
        let spec = assignment.spec
        let path: String
        let arguments: [String]
        switch spec.work {
        case .shell(let command):
            path = "/bin/sh"
            arguments = ["sh", "-c", command]
        case .argv(let argv):
            guard let first = argv.first, !first.isEmpty else { return .failure(Failure(termination: .error("empty command"))) }
            guard let resolved = resolve(first, environment: spec.environment) else {
                return .failure(Failure(termination: .exit(127), line: "jobtop: \(first): command not found"))
            }
            path = resolved
            arguments = argv
        case .closure:
            return .failure(Failure(termination: .error("a closure job cannot run as a process")))
        }
        if let directory = spec.workingDirectory {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
                return .failure(Failure(termination: .error("working directory '\(directory)' does not exist")))
            }
        }
        var environment = spec.environment
        // The shell's `pwd` (and `$PWD`) name the directory as given, a symbolic link's path
        // included, as they do in the directory a user started from: an inherited PWD names
        // another directory, and the shell falls back to the physical path.
        if let directory = spec.workingDirectory, environment["PWD"] == nil, let plain = plainAbsolutePath(directory) {
            environment["PWD"] = plain
        }
        return .success(ProcessCommand(
            path: path, arguments: arguments,
            environment: environment.isEmpty ? nil : mergedEnvironment(environment),
            directory: spec.workingDirectory))
    }

    /// Spawns the process with its pipes: with `spawner` (its I/O thread's, which keeps the
    /// spawn's set-up and makes the next pipes ahead) unless the command has a working directory.
    func spawn(using spawner: OpaquePointer?) -> SpawnResult {
        guard let spawner, directory == nil else { return spawn() }
        var pid: pid_t = 0
        var recorded: Int32 = 0
        var out: Int32 = -1
        var err: Int32 = -1
        let rc = Self.withCStrings(arguments) { argv in
            Self.withOptionalCStrings(environment) { envp in
                jt_spawner_spawn(spawner, path, argv, envp, &pid, &recorded, &out, &err)
            }
        }
        guard rc == 0 else { return failure(rc) }
        JobProcessGroups.spawned(pid, recordedByTheGuard: recorded != 0)
        return .spawned(pid: pid, stdout: out, stderr: err)
    }

    /// Spawns the process with pipes of its own.
    func spawn() -> SpawnResult {
        var out: [Int32] = [-1, -1]
        var err: [Int32] = [-1, -1]
        var rc = out.withUnsafeMutableBufferPointer { jt_pipe($0.baseAddress, 1) }
        if rc == 0 {
            rc = err.withUnsafeMutableBufferPointer { jt_pipe($0.baseAddress, 1) }
            if rc != 0 {
                close(out[0])
                close(out[1])
            }
        }
        if rc != 0 {
            return Self.isLack(rc) ? .lacking(rc) : .failed(Failure(termination: .error("cannot create a pipe: \(String(cString: strerror(rc)))")))
        }
        var pid: pid_t = 0
        var recorded: Int32 = 0
        rc = Self.withCStrings(arguments) { argv in
            Self.withOptionalCStrings(environment) { envp in
                jt_spawn(path, argv, envp, directory, out[1], err[1], &pid, &recorded)
            }
        }
        if rc == 0 { JobProcessGroups.spawned(pid, recordedByTheGuard: recorded != 0) }
        close(out[1])
        close(err[1])
        guard rc == 0 else {
            close(out[0])
            close(err[0])
            return failure(rc)
        }
        return .spawned(pid: pid, stdout: out[0], stderr: err[0])
    }

    /// What a spawn that failed with `code` means.
    private func failure(_ code: Int32) -> SpawnResult {
        if Self.isLack(code) { return .lacking(code) }
        let message = String(cString: strerror(code))
        let line = "jobtop: cannot run \(arguments[0]): \(message)"
        switch code {
        case ENOENT: return .failed(Failure(termination: .exit(127), line: line))
        case EACCES: return .failed(Failure(termination: .exit(126), line: line))
        default: return .failed(Failure(termination: .error("cannot run \(arguments[0]): \(message)"), line: line))
        }
    }

    /// Whether `code` says a resource ran out rather than that the command is wrong.
    static func isLack(_ code: Int32) -> Bool {
        code == EMFILE || code == ENFILE || code == EAGAIN || code == ENOMEM
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

/// `path` as a shell takes it for `PWD`, if it is one it takes: absolute, with no `.`, `..` or
/// empty component; a trailing `/` is dropped (a shell's `pwd` would print it). `nil` for any
/// other path (a shell ignores such a `PWD` and works the directory's path out itself).
public func plainAbsolutePath(_ path: String) -> String? {
    guard path.hasPrefix("/") else { return nil }
    if path == "/" { return path }
    let trimmed = path.hasSuffix("/") ? String(path.dropLast()) : path
    let components = trimmed.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
    return components.contains { $0.isEmpty || $0 == "." || $0 == ".." } ? nil : trimmed
}
