import Foundation
import Scheduler

/// `--output-dir`: one file per job that ran, `DIR/<name-or-id>.log`, with everything it printed
/// on stdout and stderr, every attempt, in order.
final class OutputDirectory {
    /// The directory.
    let path: String
    private var fileNames: [JobID: String] = [:]
    private var usedNames: Set<String> = []
    private var open: [JobID: Int32] = [:]
    /// Jobs whose file was made by an earlier attempt: a retry appends to it.
    private var made: Set<JobID> = []
    /// Jobs retried by hand whose next attempt has not started: it appends, after a marker.
    /// The marker line each requeued job's next run begins with (retried by hand, worker lost).
    private var requeueMarkers: [JobID: String] = [:]
    /// Jobs whose running attempt has printed something: a lost attempt that has not (or never
    /// began: one its worker held) gets no worker-lost line, and its run again no second header.
    private var printed: Set<JobID> = []
    /// Jobs whose attempt was lost before it printed: its header is the file's last line, and
    /// its run again (with its number) writes none.
    private var headerStands: Set<JobID> = []

    /// Writes into `path`, which ``prepare(_:)`` has made.
    init(path: String) {
        self.path = path
    }

    /// Makes the directory if it is missing and checks that it can be written.
    ///
    /// - Throws: ``JobInputError`` `.outputDirectory` when it cannot be made or is not a directory.
    static func prepare(_ path: String) throws(JobInputError) {
        // mkdir -p, one component at a time, so that a failure names the component and the
        // system's reason ("'afile' is not a directory"), not a Foundation error domain.
        var prefix = path.hasPrefix("/") ? "/" : ""
        for component in path.split(separator: "/") {
            prefix += (prefix.isEmpty || prefix.hasSuffix("/") ? "" : "/") + component
            var info = stat()
            if stat(prefix, &info) == 0 {
                guard info.st_mode & S_IFMT == S_IFDIR else {
                    throw JobInputError(.outputDirectory, "--output-dir '\(path)': '\(prefix)' is a file, not a directory")
                }
                continue
            }
            guard errno == ENOENT else {
                throw JobInputError(.outputDirectory, "--output-dir '\(path)': cannot reach '\(prefix)': \(String(cString: strerror(errno)))")
            }
            if mkdir(prefix, 0o777) != 0 && errno != EEXIST {
                throw JobInputError(.outputDirectory, "--output-dir '\(path)': cannot make '\(prefix)': \(String(cString: strerror(errno)))")
            }
        }
        guard access(path, W_OK) == 0 else {
            throw JobInputError(.outputDirectory, "--output-dir '\(path)' is not writable")
        }
    }

    /// Learns a job's file name: its name made safe for a file name, or its id.
    ///
    /// Only named jobs are remembered (a job without a name is written under its id), so a
    /// streamed list of millions of unnamed jobs costs nothing here.
    func jobSubmitted(_ info: JobInfo) {
        guard let given = info.name, fileNames[info.id] == nil else { return }
        var name = Self.safeFileName(given)
        // Nothing left of the name (`..`): its id, as for a job without one (not `-ID`, which a
        // shell would take for an option).
        if name.isEmpty { return }
        if usedNames.contains(name) { name += "-\(info.id.short)" }
        usedNames.insert(name)
        fileNames[info.id] = name
    }

    /// Opens (or reopens, for a retry) the job's file; a retry gets a marker line.
    func attemptStarted(_ id: JobID, attempt: Int, writer: LogWriter) {
        if open[id] == nil {
            let name = fileNames[id] ?? id.description
            let file = URL(fileURLWithPath: path).appendingPathComponent("\(name).log").path
            // Readable too: a marker line looks at the file's last byte (LogWriter.writeStartingLine).
            // Never through a symbolic link: one left in DIR under the job's file name had the
            // job's output written over whatever it pointed at, outside DIR. The link is replaced
            // by the job's own file, as a file of an earlier run is.
            let flags = O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | (made.contains(id) ? O_APPEND : O_TRUNC)
            var fd = Glibc.open(file, flags, 0o644)
            if fd < 0 && errno == ELOOP && unlink(file) == 0 { fd = Glibc.open(file, flags | O_EXCL, 0o644) }
            guard fd >= 0 else {
                StandardError.write("jobtop: cannot write \(file): \(String(cString: strerror(errno)))\n")
                return
            }
            open[id] = fd
            made.insert(id)
        }
        printed.remove(id)
        let requeueMarker = requeueMarkers.removeValue(forKey: id)
        let headerStands = headerStands.remove(id) != nil
        if (attempt > 1 && !headerStands) || requeueMarker != nil, let fd = open[id] {
            // The marker is a line of its own, also after output that ended without a newline
            // (the file's last byte says, as it is written: also after a retry by hand of a job
            // that ended in the middle of a line). A retry by hand counts its attempts from 1
            // again, and a lost attempt runs again with its number: their own markers say so.
            let marker = requeueMarker ?? "--- jobtop: attempt \(attempt) ---"
            writer.writeStartingLine(Array("\(marker)\n".utf8), to: fd)
        }
    }

    /// Appends a line the job printed, byte for byte as it wrote it.
    func output(_ id: JobID, _ line: OutputLine, writer: LogWriter) {
        guard let fd = open[id] else { return }
        printed.insert(id)
        writer.write(line.rawBytes, to: fd)
    }

    /// An attempt ended and another may follow (a retry after a delay, a requeue): the file is
    /// closed meanwhile, so that jobs waiting to be retried hold no descriptor.
    func attemptEnded(_ id: JobID, writer: LogWriter) {
        if let fd = open.removeValue(forKey: id) { writer.close(fd) }
    }

    /// The job went back to the queue (retried by hand after it had ended, or its worker lost):
    /// its next run appends to the file its earlier ones wrote (if they wrote one), after
    /// `marker`.
    func requeued(_ id: JobID, marker: String) {
        let name = fileNames[id] ?? id.description
        guard FileManager.default.fileExists(atPath: URL(fileURLWithPath: path).appendingPathComponent("\(name).log").path) else { return }
        made.insert(id)
        if marker == OutputLine.workerLostSeparator && !printed.contains(id) {
            // The lost attempt left no output to mark the end of (see
            // `OutputLine.workerLostLineIsEmpty`).
            headerStands.insert(id)
            return
        }
        requeueMarkers[id] = marker
    }

    /// Closes the job's file once it has ended for good.
    func jobEnded(_ id: JobID, writer: LogWriter) {
        made.remove(id)
        if let fd = open.removeValue(forKey: id) { writer.close(fd) }
    }

    /// Closes every file still open.
    func closeAll(writer: LogWriter) {
        for fd in open.values { writer.close(fd) }
        open = [:]
    }

    /// `name` with `/`, NUL and control characters replaced, and no leading dot, at most 100 bytes.
    static func safeFileName(_ name: String) -> String {
        var result = String(name.unicodeScalars.map { scalar -> Character in
            if scalar == "/" || scalar == "\\" || scalar.value < 0x20 || scalar.value == 0x7F { return "_" }
            return Character(scalar)
        })
        while result.hasPrefix(".") { result.removeFirst() }
        while result.utf8.count > 100 { result.removeLast() }
        return result
    }
}
