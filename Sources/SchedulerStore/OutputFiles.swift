import Foundation
import Scheduler
#if canImport(Glibc)
import Glibc
#endif

/// Each job's whole output in a file of its own (`output/<job id>.log`): every attempt's lines,
/// stdout and stderr as they came, a separator line before each attempt after the first (after a
/// newline of jobtop's own when the output before it did not end with one), and at most `cap`
/// bytes (then one line says the rest was not kept).
///
/// Written on a serial dispatch queue of its own (blocking file I/O never runs on the
/// cooperative pool).
final class OutputFiles: Sendable {
    private let directory: StateDirectory
    private let cap: Int
    private let queue = DispatchQueue(label: "jobtop.output-files")
    /// Per job, the bytes that could not be written (a full disk) since its file last took
    /// some, and why: the next write that succeeds puts a line saying so first, where they are
    /// missing (a reader saw lines of two places spliced into one, and no word of the hole).
    private let lost = Locked<[JobID: (bytes: Int, reason: String)]>([:])

    init(directory: StateDirectory, cap: Int) {
        self.directory = directory
        self.cap = cap
    }

    /// Appends the output lines and attempt separators of a batch of events, in their order.
    /// A job whose file cannot be written loses this batch's lines; the others' are written.
    ///
    /// - Returns: The jobs whose lines were lost, each with why.
    func write(events: [SchedulerEvent]) async -> [(JobID, StoreError)] {
        var pieces: [JobID: [UInt8]] = [:]
        var order: [JobID] = []
        // Jobs whose bytes in this batch begin with a separator: the file's last byte decides
        // whether a newline goes first.
        var startsLines: Set<JobID> = []
        // Jobs whose bytes in this batch begin with an attempt's header: left out if the file
        // already ends with it or with the worker-lost line (see `separator`).
        var leadingHeaders: [JobID: String] = [:]
        /// A separator line for `id`, on a line of its own. An attempt's header is not written
        /// again right after itself (an attempt held at its worker, never begun, that a restart
        /// handed back) or after the worker-lost line (a lost attempt runs again with its number,
        /// as that line says).
        /// The worker-lost line goes only after output of the lost attempt (see
        /// `OutputLine.workerLostLineIsEmpty`), checked the same way.
        func separator(_ text: String, for id: JobID, isHeader: Bool = false) {
            let isLeftOutIfRedundant = isHeader || text == OutputLine.workerLostSeparator
            if let bytes = pieces[id], !bytes.isEmpty {
                if isLeftOutIfRedundant, Self.isRedundant(text, after: bytes.lastLine, hasOutput: true) { return }
                if bytes.last != 0x0A { pieces[id]!.append(0x0A) }
            } else {
                if pieces[id] == nil { order.append(id) }
                startsLines.insert(id)
                if isLeftOutIfRedundant { leadingHeaders[id] = text }
            }
            pieces[id, default: []].append(contentsOf: Array((text + "\n").utf8))
        }
        for event in events {
            switch event.kind {
            case .output(let id, let line):
                if pieces[id] == nil { order.append(id) }
                pieces[id, default: []].append(contentsOf: line.bytes ?? Array(line.text.utf8))
                pieces[id, default: []].append(contentsOf: line.ending.bytes)
            case .started(let id, let attempt, let maxAttempts, _) where attempt > 1:
                separator(OutputLine.attemptSeparator(attempt, of: maxAttempts), for: id, isHeader: true)
            case .requeued(let id, let reason):
                // Its attempts count from 1 again (retried by hand), or the lost one runs again
                // with its number: the line marks where the new run begins.
                guard let text = OutputLine.requeueSeparator(reason) else { continue }
                separator(text, for: id)
            default:
                continue
            }
        }
        guard !order.isEmpty else { return [] }
        let work = order.map { ($0, pieces[$0]!, startsLines.contains($0), leadingHeaders[$0]) }
        return await withCheckedContinuation { continuation in
            queue.async {
                var lost: [(JobID, StoreError)] = []
                for (id, bytes, startsLine, header) in work {
                    if let error = self.append(bytes, to: id, startsLine: startsLine, header: header) { lost.append((id, error)) }
                }
                continuation.resume(returning: lost)
            }
        }
    }

    /// - Parameters:
    ///   - startsLine: `bytes` begin a line: a newline goes first if the file ends in the middle
    ///     of one.
    ///   - header: `bytes` begin with this separator line (an attempt's header, the worker-lost
    ///     line), which is left out when what the file ends with makes it say nothing
    ///     (`isRedundant`).
    private func append(_ bytes: [UInt8], to id: JobID, startsLine: Bool, header: String? = nil) -> StoreError? {
        let path = directory.outputFile(of: id.description).path
        let fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let reason = String(cString: strerror(errno))
            noteLost(bytes.count, of: id, reason: reason)
            return StoreError("cannot write \(path): \(reason)")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { return StoreError("cannot read \(path): \(String(cString: strerror(errno)))") }
        let size = Int(info.st_size)
        // Past the cap the note has been written (it ends the file beyond the cap); at the cap
        // exactly the output so far fit, and these bytes are the first that do not.
        guard size <= cap else { return nil }
        var chunk = bytes
        if let header, Self.isRedundant(header, after: Self.lastLine(of: fd, size: size), hasOutput: size > 0) {
            chunk.removeFirst(min(chunk.count, header.utf8.count + 1))
            if chunk.isEmpty { return nil }
        }
        // The bytes of the line about missing output at the chunk's start, if it has one.
        var noteLength = 0
        if let (missing, reason) = lost.withLock({ $0[id] }) {
            // Where bytes are missing: a line of its own (after a newline of jobtop's own when
            // the file ends in the middle of a line), before what comes now.
            var note = Array("[jobtop: \(missing) bytes of output are missing here: they could not be written (\(reason))]\n".utf8)
            if LineSplitter.fileEndsMidLine(fd) { note.insert(0x0A, at: 0) }
            chunk.insert(contentsOf: note, at: 0)
            noteLength = note.count
        } else if startsLine && LineSplitter.fileEndsMidLine(fd) {
            chunk.insert(0x0A, at: 0)
        }
        if size + chunk.count > cap {
            chunk = Array(chunk.prefix(cap - size))
            let endsMidLine = chunk.last.map { $0 != 0x0A } ?? LineSplitter.fileEndsMidLine(fd)
            chunk.append(contentsOf: Array("\(endsMidLine ? "\n" : "")[jobtop: output beyond \(cap >> 20) MiB is not kept]\n".utf8))
        }
        var offset = 0
        while offset < chunk.count {
            let written = chunk[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR { continue }
                let reason = String(cString: strerror(errno))
                let unwritten = chunk.count - max(offset, noteLength)
                if noteLength > 0 && offset >= noteLength {
                    // The line about the earlier hole is in: a new one begins after it.
                    lost.withLock { $0[id] = (unwritten, reason) }
                } else {
                    noteLost(unwritten, of: id, reason: reason)
                }
                return StoreError("cannot write \(path): \(reason)")
            }
            offset += written
        }
        if noteLength > 0 { lost.withLock { $0[id] = nil } }
        return nil
    }

    /// Counts `count` bytes of `id`'s output as not written, for the line the next write puts.
    private func noteLost(_ count: Int, of id: JobID, reason: String) {
        lost.withLock { $0[id] = (($0[id]?.bytes ?? 0) + count, reason) }
    }

    /// Whether separator line `text` says nothing after output whose last line is `lastLine`
    /// (nil: none, or not a short whole line): an attempt's header right after itself or after
    /// the worker-lost line; the worker-lost line after no output of the lost attempt.
    private static func isRedundant(_ text: String, after lastLine: String?, hasOutput: Bool) -> Bool {
        if text == OutputLine.workerLostSeparator { return OutputLine.workerLostLineIsEmpty(after: lastLine, hasOutput: hasOutput) }
        return lastLine.map { OutputLine.headerRepeats(text, after: $0) } ?? false
    }

    /// The last line of the file open at `fd` (`size` bytes), if it ends with a newline and is
    /// short (a separator's length): what a header about to be written is checked against.
    private static func lastLine(of fd: Int32, size: Int) -> String? {
        let length = min(size, 256)
        guard length > 1 else { return nil }
        var tail = [UInt8](repeating: 0, count: length)
        guard pread(fd, &tail, length, off_t(size - length)) == length, tail.last == 0x0A else { return nil }
        tail.removeLast()
        let start = tail.lastIndex(of: 0x0A).map { $0 + 1 } ?? (length == size ? 0 : nil)
        guard let start else { return nil }
        return String(decoding: tail[start...], as: UTF8.self)
    }
}

extension [UInt8] {
    /// The last line of these bytes, when they end with its newline.
    fileprivate var lastLine: String? {
        guard last == 0x0A else { return nil }
        let body = dropLast()
        let start = body.lastIndex(of: 0x0A).map { $0 + 1 } ?? body.startIndex
        return String(decoding: body[start...], as: UTF8.self)
    }
}
