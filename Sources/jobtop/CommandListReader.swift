import Foundation
import Scheduler

/// Reads a plain job list from a file descriptor on a thread of its own and hands its commands
/// over as they arrive: what one `read(2)` brings is submitted at once, so the first job of
/// `find / | jobtop` starts while `find` is still running, and a stdin that stays open keeps
/// feeding jobs until it closes.
///
/// Memory stays bounded however long the list: the thread blocks (``Mailbox`` back-pressure)
/// while a few read-worths of commands wait to be taken, and the session takes them only while
/// the scheduler has room for them.
final class CommandListReader: Sendable {
    /// What the reader hands over.
    enum Item: Sendable {
        /// The next commands, in order.
        case commands([String])
        /// The list cannot be read on: this line or the descriptor is bad. Nothing follows.
        case failed(JobInputError)
    }

    /// The list in messages.
    let source: String
    private let fd: Int32
    private let mailbox = Mailbox<Item>(capacity: 8)
    private let counted = Locked(0)
    private let stopped = Locked(false)

    /// Reads `fd` (which the reader closes when done).
    init(fd: Int32, source: String) {
        self.fd = fd
        self.source = source
    }

    /// The commands read so far.
    var commandCount: Int { counted.withLock { $0 } }

    /// Starts the reading thread.
    func start() {
        let thread = Thread { [self] in self.readAll() }
        thread.name = "jobtop-list"
        thread.start()
    }

    /// The next items, in order; `nil` at the end of the list.
    func next() async -> [Item]? {
        await mailbox.take()
    }

    /// Stops handing commands over (the run is ending): ``next()`` returns `nil` from now on,
    /// even while the list's writer keeps its end open; the thread ends at its next read.
    func stop() {
        stopped.withLock { $0 = true }
        mailbox.finish()
    }

    /// Whether ``stop()`` ended the list (rather than its end of file).
    var wasStopped: Bool { stopped.withLock { $0 } }

    private func readAll() {
        defer {
            close(fd)
            mailbox.finish()
        }
        var parser = CommandListParser(source: source)
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var commands: [String] = []
        do throws(JobInputError) {
            while true {
                let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
                if count < 0 {
                    if errno == EINTR { continue }
                    throw JobInputError(.unreadableFile, "cannot read \(source): \(String(cString: strerror(errno)))")
                }
                if count == 0 {
                    try parser.finish { commands.append($0) }
                    hand(&commands)
                    return
                }
                try buffer.withRawBytes { (raw) throws(JobInputError) in
                    try parser.feed(UnsafeRawBufferPointer(rebasing: raw[0..<count])) { commands.append($0) }
                }
                guard hand(&commands) else { return }
            }
        } catch {
            hand(&commands)
            mailbox.send(.failed(error))
        }
    }

    /// Hands `commands` over (waiting while enough are waiting already); `false` once stopped.
    @discardableResult
    private func hand(_ commands: inout [String]) -> Bool {
        guard !commands.isEmpty else { return true }
        let batch = commands
        commands.removeAll(keepingCapacity: true)
        counted.withLock { $0 += batch.count }
        return mailbox.sendBlocking(contentsOf: CollectionOfOne(.commands(batch)))
    }

    /// Reads a whole list file without keeping it, to refuse a bad line before anything starts,
    /// then puts the file offset back where it was.
    ///
    /// - Parameters:
    ///   - fd: A regular file, read from its current offset.
    ///   - source: The list in messages.
    /// - Returns: The number of commands in it.
    /// - Throws: ``JobInputError`` naming the file and the first bad line.
    static func check(fd: Int32, source: String) throws(JobInputError) -> Int {
        let start = lseek(fd, 0, SEEK_CUR)
        defer { if start >= 0 { lseek(fd, start, SEEK_SET) } }
        var parser = CommandListParser(source: source)
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw JobInputError(.unreadableFile, "cannot read \(source): \(String(cString: strerror(errno)))")
            }
            if count == 0 { break }
            try buffer.withRawBytes { (raw) throws(JobInputError) in
                try parser.feed(UnsafeRawBufferPointer(rebasing: raw[0..<count])) { _ in }
            }
        }
        try parser.finish { _ in }
        return parser.commandCount
    }

    /// Opens a list file for reading.
    ///
    /// - Throws: ``JobInputError`` `.unreadableFile` saying why it cannot be read.
    static func open(path: String) throws(JobInputError) -> Int32 {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw JobInputError(.unreadableFile, errno == ENOENT ? TextFile.missing(path) : "cannot read '\(path)': \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & S_IFMT != S_IFDIR else {
            throw JobInputError(.unreadableFile, "cannot read '\(path)': it is a directory")
        }
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw JobInputError(.unreadableFile, "cannot read '\(path)': \(String(cString: strerror(errno)))")
        }
        return fd
    }
}
