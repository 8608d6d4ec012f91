import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Where `jobtop serve` keeps its state, and the lock that lets only one serve use it.
///
/// ```
/// $XDG_STATE_HOME/jobtop/      (default ~/.local/state/jobtop/), mode 0700
///   jobtop.db, jobtop.db-wal, jobtop.db-shm   the jobs, their attempts, groups, settings (SQLite, WAL)
///   lock                                      held (flock) by the serve that uses the directory
///   output/<job id>.log                       each job's whole output, every attempt
/// ```
public struct StateDirectory: Sendable {
    /// The directory.
    public let url: URL

    /// The directory given, or the default one.
    public init(path: String? = nil, environment: [String: String] = ProcessInfo.processInfo.environment) {
        if let path {
            url = URL(fileURLWithPath: path, isDirectory: true)
        } else {
            url = Self.defaultURL(environment: environment)
        }
    }

    /// `$XDG_STATE_HOME/jobtop`, else `$HOME/.local/state/jobtop`.
    public static func defaultURL(environment: [String: String]) -> URL {
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") {
            return URL(fileURLWithPath: state, isDirectory: true).appendingPathComponent("jobtop", isDirectory: true)
        }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        return URL(fileURLWithPath: home, isDirectory: true)
            .appendingPathComponent(".local/state/jobtop", isDirectory: true)
    }

    /// The database file.
    public var database: URL { url.appendingPathComponent("jobtop.db") }
    /// The lock file.
    public var lockFile: URL { url.appendingPathComponent("lock") }
    /// The directory of the jobs' output files.
    public var outputDirectory: URL { url.appendingPathComponent("output", isDirectory: true) }

    /// A job's output file.
    public func outputFile(of id: String) -> URL {
        outputDirectory.appendingPathComponent("\(id).log")
    }

    /// Makes the directories (0700) if they are missing.
    func create() throws(StoreError) {
        for directory in [url, outputDirectory] {
            do {
                try FileManager.default.createDirectory(
                    at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw StoreError("cannot make the state directory \(directory.path): \(Self.reason(making: directory, error))")
            }
        }
    }

    /// Makes what holds every job's command, environment and output this user's alone, in a
    /// directory given that others may read (`--state-dir` of an existing 0755 one): the output
    /// directory 0700, the database and its WAL files 0600 (made so before SQLite makes it with
    /// the umask's 0644; SQLite gives the WAL files the database's mode). The directory itself
    /// is the user's choice and stays as it is.
    func makePrivate() {
        var info = stat()
        if stat(outputDirectory.path, &info) == 0, info.st_mode & 0o077 != 0 { chmod(outputDirectory.path, 0o700) }
        let fd = open(database.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        if fd >= 0 { close(fd) }
        for file in [database.path, database.path + "-wal", database.path + "-shm"] {
            if stat(file, &info) == 0, info.st_mode & 0o077 != 0 { chmod(file, 0o600) }
        }
    }

    /// Why `url` could not be made, in words (Foundation's say "The operation could not be
    /// completed. (NSCocoaErrorDomain error 512.)" for a path under a file).
    private static func reason(making url: URL, _ error: any Error) -> String {
        var path = ""
        for component in url.standardizedFileURL.pathComponents.dropFirst() {
            path += "/" + component
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { break }
            if !isDirectory.boolValue { return "\(path) is a file, not a directory" }
        }
        if let underlying = (error as NSError).userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain {
            return String(cString: strerror(Int32(underlying.code)))
        }
        return error.localizedDescription
    }
}

/// Why the state could not be opened or written.
public struct StoreError: Error, Sendable, CustomStringConvertible {
    /// A sentence for a human, naming the file.
    public let message: String

    init(_ message: String) { self.message = message }

    public var description: String { message }
}

/// An exclusive `flock` on the state directory itself and on its lock file, held for the life
/// of the process (the kernel lets go of them when the process ends, however it ends: a `kill -9`
/// leaves no stale lock). The directory's lock is the one that counts: a lock file can be removed
/// (`rm lock`) while a serve holds it, and a second serve then locked a new one and took over the
/// directory — killing the first one's running jobs as leftovers. The file holds the holder's pid,
/// for the message a second serve prints (and is locked too, for a serve of an older version).
final class StateLock: Sendable {
    /// The descriptors of the directory and of the lock file while the lock is held; -1 once
    /// released.
    private let descriptors: Mutex<(directory: Int32, file: Int32)>

    init(_ file: URL) throws(StoreError) {
        let directoryPath = file.deletingLastPathComponent().path
        let directory = open(directoryPath, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directory >= 0 else {
            throw StoreError("cannot open the state directory \(directoryPath): \(String(cString: strerror(errno)))")
        }
        let fd = open(file.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let code = errno
            close(directory)
            throw StoreError("cannot open the lock file \(file.path): \(String(cString: strerror(code)))")
        }
        for (descriptor, path) in [(directory, directoryPath), (fd, file.path)] {
            guard let code = Self.lock(descriptor) else { continue }
            var holder = ""
            if let text = try? String(contentsOf: file, encoding: .utf8) {
                let pid = text.trimmingCharacters(in: .whitespacesAndNewlines)
                if !pid.isEmpty { holder = " (pid \(pid))" }
            }
            close(fd)
            close(directory)
            if code == EWOULDBLOCK {
                throw StoreError("another jobtop serve\(holder) uses the state directory \(directoryPath)")
            }
            throw StoreError("cannot lock \(path): \(String(cString: strerror(code)))")
        }
        let pid = "\(getpid())\n"
        _ = ftruncate(fd, 0)
        _ = pid.withCString { pwrite(fd, $0, strlen($0), 0) }
        descriptors = Mutex((directory, fd))
    }

    /// Takes the exclusive lock on `descriptor`; returns `nil`, or the error if it cannot.
    ///
    /// A process this one is spawning holds a copy of every descriptor from its fork to its
    /// exec (close-on-exec): a lock just released may look held for that long. Tries for a
    /// second before saying another serve holds it.
    private static func lock(_ descriptor: Int32) -> Int32? {
        var tries = 0
        while flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            guard code == EWOULDBLOCK, tries < 50 else { return code }
            tries += 1
            usleep(20_000)
        }
        return nil
    }

    /// Lets go of the lock (closing the descriptors lets go of the flocks).
    func release() {
        descriptors.withLock { held in
            if held.file >= 0 { close(held.file) }
            if held.directory >= 0 { close(held.directory) }
            held = (-1, -1)
        }
    }

    deinit { release() }
}
