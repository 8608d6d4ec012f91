import Foundation
import Scheduler

/// Writes log lines and job output files on a thread of its own, so a slow stdout (a pager, a
/// full pipe) or disk never blocks Swift's cooperative pool, and the scheduler never waits.
///
/// Each write is handed over at once. The thread writes what is queued, then lingers for
/// ``linger`` before it writes again: whatever comes meanwhile goes out in one `write(2)` per
/// file, and producers do not wake the thread for each line (only an idle thread, or one with
/// more than ``lingerLimit`` bytes waiting, is woken). A log line is at most ``linger`` late;
/// ``finish()`` writes at once. The queue is bounded: a producer that can wait calls
/// ``waitForRoom()``, which returns once fewer than ``capacity`` bytes are queued (the log's
/// events then wait in the scheduler, which slows the jobs down; see `EventDelivery.lossless`).
final class LogWriter: Sendable {
    /// Bytes queued above which ``waitForRoom()`` waits.
    static let capacity = 4 << 20
    /// How long the thread waits after a write before the next: with jobs ending every few
    /// hundred microseconds, waking it for each line cost a thread wake-up per job (2,000 shell
    /// jobs: ~2,000 of the run's ~20,000 context switches).
    static let linger: DispatchTimeInterval = .milliseconds(2)
    /// Queued bytes above which a producer wakes a lingering thread at once.
    static let lingerLimit = 1 << 18

    private enum Chunk {
        case write(Int32, [UInt8])
        /// Bytes that start a line of their own: a newline goes first if the file (opened for
        /// reading too) ends in the middle of one, as it is when they are written.
        case writeLine(Int32, [UInt8])
        case close(Int32)
    }

    private struct State {
        var chunks: [Chunk] = []
        var isFinished = false
        var hasStopped = false
        /// Bytes handed over and not written yet.
        var queuedBytes = 0
        /// The thread waits with nothing queued: the next write wakes it.
        var isIdle = false
        /// A producer woke the lingering thread already (over ``lingerLimit``).
        var isNudged = false
        var roomWaiters = Waiters()
        /// A second signal came (``stopWaitingForStdout()``): nothing waits for room any more.
        var isAbandoned = false

        var hasRoom: Bool { queuedBytes < LogWriter.capacity || hasStopped || isAbandoned }

        /// Whether a producer that just queued something must wake the thread.
        mutating func wake() -> Bool {
            if isIdle {
                isIdle = false
                return true
            }
            if queuedBytes >= LogWriter.lingerLimit && !isNudged {
                isNudged = true
                return true
            }
            return false
        }
    }

    private let state = Locked(State())
    /// Set once stdout broke (its reader went away), or was given up on: the rest of the log is
    /// dropped.
    private let broke = Locked(false)
    /// The run is stopping (a first signal): a broken stdout no longer says the jobs go on.
    private let stopping = Locked(false)
    /// Output files a write failed on (a full disk), until they are closed: the rest of their
    /// output is dropped, said once per file (it was said for every write, naming no file).
    private let failing = Locked<Set<Int32>>([])
    private let wakeup = DispatchSemaphore(value: 0)
    private let stopped = DispatchSemaphore(value: 0)

    /// Starts the thread.
    init() {
        let thread = Thread { [self] in self.loop() }
        thread.name = "jobtop-log"
        thread.start()
    }

    /// Queues `bytes` for `fd`.
    func write(_ bytes: [UInt8], to fd: Int32) {
        queue(.write(fd, bytes), bytes: bytes.count)
    }

    /// Queues `chunk`, which holds `bytes` bytes to write, and wakes the thread if it must.
    private func queue(_ chunk: Chunk, bytes: Int) {
        let wakes = state.withLock { state -> Bool in
            state.chunks.append(chunk)
            state.queuedBytes += bytes
            return state.wake()
        }
        if wakes { wakeup.signal() }
    }

    /// Waits until fewer than ``capacity`` bytes are queued.
    func waitForRoom() async {
        await state.wait(in: \.roomWaiters) { $0.hasRoom }
    }

    /// Whether fewer than ``capacity`` bytes are queued (or the thread has stopped).
    var hasRoom: Bool { state.withLock { $0.hasRoom } }

    /// Queues a line (a newline is added) for stdout.
    func line(_ text: String) {
        var bytes = Array(text.utf8)
        bytes.append(0x0A)
        write(bytes, to: STDOUT_FILENO)
    }

    /// Queues `bytes` for the file `fd` (opened for reading and writing) as the start of a line:
    /// after a newline of jobtop's own if what was written before them did not end with one.
    func writeStartingLine(_ bytes: [UInt8], to fd: Int32) {
        queue(.writeLine(fd, bytes), bytes: bytes.count)
    }

    /// Queues closing `fd` after what was queued for it.
    func close(_ fd: Int32) {
        queue(.close(fd), bytes: 0)
    }

    /// Whether stdout broke (`jobtop ... | head -1`): the log was cut short.
    var stdoutBroke: Bool { broke.withLock { $0 } }

    /// The run is stopping: what a broken stdout says no longer has the jobs going on.
    func noteStopping() {
        stopping.withLock { $0 = true }
    }

    /// For a user who asked twice to stop (a second signal): a reader that does not read
    /// (`jobtop list | less`, not scrolled) must not keep jobtop running. Nothing waits for room
    /// any more, and ``finish()`` waits for the thread only briefly: a stdout that is read gets
    /// the rest of the log and the summary as ever; one that is not is given up on then (the
    /// thread, blocked in its write, ends with the process), and output files queued behind that
    /// write may lose their last lines.
    func stopWaitingForStdout() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.isAbandoned = true
            return state.roomWaiters.takeAll()
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Writes everything queued, then ends the thread; returns when it is all written.
    func finish() {
        let already = state.withLock { state -> Bool in
            defer { state.isFinished = true }
            return state.isFinished
        }
        guard !already else { return }
        wakeup.signal()
        if state.withLock({ $0.isAbandoned }) {
            // The thread may be blocked on stdout for good: a moment to write what is queued
            // (it takes milliseconds when read), no more.
            if stopped.wait(timeout: .now() + .seconds(2)) == .timedOut {
                broke.withLock { $0 = true }
                StandardError.write("jobtop: stdout is not being read: the rest of the log is dropped\n")
            }
        } else {
            stopped.wait()
        }
    }

    private func loop() {
        while true {
            let (chunks, isFinished) = state.withLock { state -> ([Chunk], Bool) in
                defer { state.chunks = [] }
                // Nothing to write: wait until a producer (or `finish`) wakes the thread.
                state.isIdle = state.chunks.isEmpty && !state.isFinished
                return (state.chunks, state.isFinished)
            }
            if chunks.isEmpty && !isFinished {
                wakeup.wait()
                continue
            }
            perform(chunks)
            let written = chunks.reduce(0) { total, chunk in
                switch chunk {
                case .write(_, let bytes), .writeLine(_, let bytes): total + bytes.count
                case .close: total
                }
            }
            let (waiters, done) = state.withLock { state -> ([CheckedContinuation<Void, Never>], Bool) in
                state.queuedBytes -= written
                let done = isFinished && state.chunks.isEmpty
                if done { state.hasStopped = true }
                guard state.hasRoom || done else { return ([], done) }
                return (state.roomWaiters.takeAll(), done)
            }
            for waiter in waiters { waiter.resume() }
            if done {
                stopped.signal()
                return
            }
            // What comes in the next moment goes out with one write (`finish`, or a producer
            // with much queued, ends the wait early).
            if !isFinished { _ = wakeup.wait(timeout: .now() + Self.linger) }
            state.withLock { $0.isNudged = false }
        }
    }

    /// Writes runs of chunks for the same fd together: one system call for many lines.
    private func perform(_ chunks: [Chunk]) {
        var pendingFD: Int32 = -1
        var pending: [UInt8] = []
        func flush() {
            if pendingFD >= 0 && !pending.isEmpty { writeAll(pendingFD, pending) }
            pending.removeAll(keepingCapacity: true)
        }
        for chunk in chunks {
            switch chunk {
            case .write(let fd, let bytes):
                if fd != pendingFD {
                    flush()
                    pendingFD = fd
                }
                pending.append(contentsOf: bytes)
            case .writeLine(let fd, let bytes):
                flush()
                pendingFD = fd
                if LineSplitter.fileEndsMidLine(fd) { pending.append(0x0A) }
                pending.append(contentsOf: bytes)
            case .close(let fd):
                if fd == pendingFD { flush() }
                failing.withLock { _ = $0.remove(fd) }
                Glibc.close(fd)
                if fd == pendingFD { pendingFD = -1 }
            }
        }
        flush()
    }

    private func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
        if fd == STDOUT_FILENO ? broke.withLock({ $0 }) : failing.withLock({ $0.contains(fd) }) { return }
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                let reason = String(cString: strerror(errno))
                if fd == STDOUT_FILENO {
                    // Said once; the jobs are the work and go on, the summary goes to stderr.
                    let already = broke.withLock { broke -> Bool in
                        defer { broke = true }
                        return broke
                    }
                    let what = errno == EPIPE ? "stdout is closed (\(reason))" : "cannot write the log to stdout (\(reason))"
                    let jobs = stopping.withLock { $0 } ? "" : "; the jobs go on (Ctrl-C stops them)"
                    if !already { StandardError.write("jobtop: \(what): the rest of the log is dropped\(jobs)\n") }
                } else {
                    failing.withLock { _ = $0.insert(fd) }
                    StandardError.write("jobtop: cannot write \(Self.path(of: fd)) (\(reason)): the rest of this attempt's output there is lost\n")
                }
                return
            }
            offset += written
        }
    }

    /// The file `fd` is open on, as the kernel names it.
    private static func path(of fd: Int32) -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink("/proc/self/fd/\(fd)", &buffer, buffer.count - 1)
        guard count > 0 else { return "an output file" }
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
