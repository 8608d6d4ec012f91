import Foundation

/// Splits a plain job list into commands as its bytes arrive: one shell command per line;
/// blank lines and lines starting with `#` are skipped; spaces, tabs and a `\r` around a
/// command are trimmed, and a UTF-8 byte order mark at the start of the list is dropped.
///
/// It holds at most one partial line, and that is bounded: a line longer than the kernel lets a
/// command be is refused as soon as it is seen, not read to its end. Every refusal names the
/// source and the line.
struct CommandListParser {
    /// The list in messages: `'list.txt'` or `standard input`.
    let source: String
    /// Lines seen so far (the partial one not included).
    private(set) var lineNumber = 0
    /// Commands found so far.
    private(set) var commandCount = 0
    private var partial: [UInt8] = []

    init(source: String) {
        self.source = source
    }

    /// Feeds the next bytes of the list; `emit` gets each command in order.
    ///
    /// - Throws: ``JobInputError`` for the first line that cannot be a command.
    mutating func feed(_ bytes: UnsafeRawBufferPointer, emit: (String) -> Void) throws(JobInputError) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        var start = 0
        while start < bytes.count {
            guard let found = memchr(base + start, 0x0A, bytes.count - start) else {
                partial.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start...]))
                if partial.count > CommandLimits.maxArgumentBytes + 1024 {
                    throw JobInputError(
                        .invalidValue,
                        "\(source):\(lineNumber + 1): the command is over \(CommandLimits.grouped(CommandLimits.maxArgumentBytes - 1)) bytes, the kernel's limit for one argument (put it in a script file)")
                }
                return
            }
            let end = base.distance(to: found)
            if partial.isEmpty {
                try line(UnsafeRawBufferPointer(rebasing: bytes[start..<end]), emit: emit)
            } else {
                partial.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start..<end]))
                let whole = partial
                partial.removeAll(keepingCapacity: true)
                try whole.withRawBytes { (raw) throws(JobInputError) in try line(raw, emit: emit) }
            }
            start = end + 1
        }
    }

    /// The list has ended: a last line without a newline is a command too.
    ///
    /// - Throws: ``JobInputError`` when that line cannot be a command.
    mutating func finish(emit: (String) -> Void) throws(JobInputError) {
        guard !partial.isEmpty else { return }
        let whole = partial
        partial = []
        try whole.withRawBytes { (raw) throws(JobInputError) in try line(raw, emit: emit) }
    }

    private mutating func line(_ raw: UnsafeRawBufferPointer, emit: (String) -> Void) throws(JobInputError) {
        lineNumber += 1
        var low = 0
        var high = raw.count
        // A UTF-8 byte order mark (an editor's, on Windows) starts the list, not its first command.
        if lineNumber == 1, high >= 3, raw[0] == 0xEF, raw[1] == 0xBB, raw[2] == 0xBF { low = 3 }
        while low < high, Self.isBlank(raw[low]) { low += 1 }
        while high > low, Self.isBlank(raw[high - 1]) { high -= 1 }
        guard low < high, raw[low] != UInt8(ascii: "#") else { return }
        let bytes = UnsafeRawBufferPointer(rebasing: raw[low..<high])
        if memchr(bytes.baseAddress!, 0, bytes.count) != nil {
            throw JobInputError(
                .invalidValue, "\(source):\(lineNumber): the command contains a NUL byte (the shell would see only what comes before it)")
        }
        guard let command = String(validating: bytes, as: UTF8.self) else {
            throw JobInputError(.unreadableFile, "\(source):\(lineNumber): not UTF-8 text")
        }
        if let problem = CommandLimits.problem(with: command) {
            throw JobInputError(.invalidValue, "\(source):\(lineNumber): the command \(problem)")
        }
        if commandCount == 0, Self.isTableHeader(command) {
            // A job file given as a list (`jobtop < jobs.toml`, a file not named .toml): each of
            // its lines ran as a command and failed (exit 127).
            throw JobInputError(
                .invalidValue,
                "\(source):\(lineNumber): '\(command)' is a job file's table, not a command: a list runs each line as a shell command; give the job file by a path that ends in .toml")
        }
        commandCount += 1
        emit(command)
    }

    /// Whether `line` is a TOML table header (`[[job]]`, `[slurm]`, `[groups.build]`): no
    /// command looks like that (a shell test is `[[ -f x ]]`, with spaces).
    static func isTableHeader(_ line: String) -> Bool {
        let inner: Substring
        if line.hasPrefix("[["), line.hasSuffix("]]"), line.count > 4 {
            inner = line.dropFirst(2).dropLast(2)
        } else if line.hasPrefix("["), line.hasSuffix("]"), line.count > 2 {
            inner = line.dropFirst().dropLast()
        } else {
            return false
        }
        return inner.allSatisfy { $0.isLetter || $0.isNumber || "_-.\"".contains($0) } && inner.first?.isLetter == true
    }

    private static func isBlank(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0B || byte == 0x0C
    }

    /// The commands in `text`, in order (for tests and small inputs).
    ///
    /// - Throws: ``JobInputError`` for the first line that cannot be a command.
    static func commands(in text: String, source: String = "the list") throws(JobInputError) -> [String] {
        try commands(in: Array(text.utf8), source: source)
    }

    /// The commands in the whole list `bytes` (which need not be UTF-8: a line that is not is
    /// refused by its number), in order.
    ///
    /// - Throws: ``JobInputError`` for the first line that cannot be a command.
    static func commands(in bytes: [UInt8], source: String) throws(JobInputError) -> [String] {
        var parser = CommandListParser(source: source)
        var commands: [String] = []
        try bytes.withRawBytes { (raw) throws(JobInputError) in
            try parser.feed(raw) { commands.append($0) }
        }
        try parser.finish { commands.append($0) }
        return commands
    }
}

extension Array where Element == UInt8 {
    /// `withUnsafeBytes` for a body with typed throws (`withUnsafeBytes` rethrows `any Error`).
    func withRawBytes<R>(_ body: (UnsafeRawBufferPointer) throws(JobInputError) -> R) throws(JobInputError) -> R {
        let result = withUnsafeBytes { raw in Result { () throws(JobInputError) -> R in try body(raw) } }
        return try result.get()
    }
}
