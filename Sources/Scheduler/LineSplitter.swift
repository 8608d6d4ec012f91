#if canImport(Glibc)
import Glibc
#endif

/// Splits one output stream of a job into lines, keeping every byte.
///
/// A line ends at `\n`, `\r\n` or a lone `\r` (so `\r`-style progress counters are seen as they
/// redraw). A line longer than ``maxLineBytes`` is handed on in pieces of at most that size, cut
/// between UTF-8 characters, each with ending ``OutputLine/Ending/none``; so are the last bytes
/// of a stream that does not end with a newline. Empty lines are lines too. Putting the pieces
/// back together (``OutputLine/rawBytes``) gives exactly the bytes the job wrote.
///
/// A `\r` that ends one read and a `\n` that starts the next are two pieces (an empty line with
/// ending `\n` follows the `\r` line): a line is handed on as soon as its end is read, never held
/// back waiting for the next read. `package`: the Slurm backend splits its output files the same way.
package struct LineSplitter {
    /// The longest piece handed on at once.
    static let maxLineBytes = 16 * 1024

    package let stream: OutputLine.Stream
    private var pending: [UInt8] = []

    package init(stream: OutputLine.Stream) {
        self.stream = stream
    }

    /// Splits `bytes`, the next bytes of the stream, and hands on every line they complete.
    package mutating func feed(_ bytes: UnsafeBufferPointer<UInt8>, _ emit: (OutputLine) -> Void) {
        var start = 0
        var index = 0
        let count = bytes.count
        while index < count {
            let byte = bytes[index]
            guard byte == 0x0A || byte == 0x0D else {
                index += 1
                continue
            }
            var ending = OutputLine.Ending.newline
            var next = index + 1
            if byte == 0x0D {
                if next < count, bytes[next] == 0x0A {
                    ending = .carriageReturnNewline
                    next += 1
                } else {
                    ending = .carriageReturn
                }
            }
            if pending.isEmpty && index - start <= Self.maxLineBytes {
                emit(Self.line(UnsafeBufferPointer(rebasing: bytes[start..<index]), stream, ending))
            } else {
                pending.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<index]))
                emitPieces(emit)
                pending.withUnsafeBufferPointer { emit(Self.line($0, stream, ending)) }
                pending.removeAll(keepingCapacity: true)
            }
            start = next
            index = next
        }
        guard start < count else { return }
        pending.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<count]))
        emitPieces(emit)
    }

    /// Hands on pieces of the pending line while more than ``maxLineBytes`` are pending.
    private mutating func emitPieces(_ emit: (OutputLine) -> Void) {
        var offset = 0
        while pending.count - offset > Self.maxLineBytes {
            let cut = pending.withUnsafeBufferPointer {
                Self.characterBoundary(in: UnsafeBufferPointer(rebasing: $0[offset...]), atMost: Self.maxLineBytes)
            }
            pending.withUnsafeBufferPointer { emit(Self.line(UnsafeBufferPointer(rebasing: $0[offset..<offset + cut]), stream, .none)) }
            offset += cut
        }
        if offset > 0 { pending.removeFirst(offset) }
    }

    /// Whether bytes after the last line end wait for the rest of their line.
    package var hasPartialLine: Bool { !pending.isEmpty }

    /// The job went quiet in the middle of a line: hands on the part read so far, as a piece
    /// with ending ``OutputLine/Ending/none`` (the rest of the line follows as the next piece,
    /// and the pieces put together are still the bytes written). Keeps back the first bytes of
    /// a UTF-8 character that a read cut off.
    package mutating func flushPartial(_ emit: (OutputLine) -> Void) {
        let cut = pending.withUnsafeBufferPointer { Self.wholeCharacters(in: $0) }
        guard cut > 0 else { return }
        pending.withUnsafeBufferPointer { emit(Self.line(UnsafeBufferPointer(rebasing: $0[0..<cut]), stream, .none)) }
        pending.removeFirst(cut)
    }

    /// How many of `bytes` remain once an unfinished UTF-8 character at their end is left out.
    static func wholeCharacters(in bytes: UnsafeBufferPointer<UInt8>) -> Int {
        // The last byte that is not a continuation byte (0b10xxxxxx) starts the last character.
        var start = bytes.count
        while start > 0, bytes.count - start < 4 {
            start -= 1
            if bytes[start] & 0xC0 != 0x80 { break }
        }
        guard start < bytes.count else { return bytes.count }
        let lead = bytes[start]
        let length = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1
        return bytes.count - start < length ? start : bytes.count
    }

    /// Whether the file open (for reading) at `fd` ends in the middle of a line: not empty, and
    /// its last byte is not a newline. What a separator line of jobtop's own checks before it is
    /// written, so that it starts a line of its own (serve's output files, `--output-dir`).
    package static func fileEndsMidLine(_ fd: Int32) -> Bool {
        var info = stat()
        var last: UInt8 = 0x0A
        return fstat(fd, &info) == 0 && info.st_size > 0 && pread(fd, &last, 1, info.st_size - 1) == 1 && last != 0x0A
    }

    /// The stream ended: hands on what is left, without a line end.
    package mutating func flush(_ emit: (OutputLine) -> Void) {
        guard !pending.isEmpty else { return }
        pending.withUnsafeBufferPointer { emit(Self.line($0, stream, .none)) }
        pending.removeAll()
    }

    /// The largest cut at most `limit` bytes into `bytes` that does not split a UTF-8 character
    /// (when the bytes look like UTF-8; otherwise `limit`).
    static func characterBoundary(in bytes: UnsafeBufferPointer<UInt8>, atMost limit: Int) -> Int {
        guard limit < bytes.count else { return limit }
        // A continuation byte is 0b10xxxxxx and a character has at most three of them: step back
        // over them to the byte that starts the character the cut would split.
        var cut = limit
        while cut > 0, limit - cut < 3, bytes[cut] & 0xC0 == 0x80 { cut -= 1 }
        return cut > 0 && bytes[cut] & 0xC0 != 0x80 ? cut : limit
    }

    /// A line from `bytes`: exact text when they are UTF-8, else the text with U+FFFD and the bytes.
    static func line(_ bytes: UnsafeBufferPointer<UInt8>, _ stream: OutputLine.Stream, _ ending: OutputLine.Ending) -> OutputLine {
        // ASCII, the common case, is UTF-8 as it is: `String(validating:as:)` is generic all the
        // way down and looked its metadata up at run time, a sixth of a job's cost that printed
        // short lines.
        if !bytes.contains(where: { $0 >= 0x80 }) {
            return OutputLine(stream: stream, text: String(decoding: bytes, as: UTF8.self), ending: ending)
        }
        if let text = String(validating: bytes, as: UTF8.self) {
            return OutputLine(stream: stream, text: text, ending: ending)
        }
        return OutputLine(stream: stream, text: String(decoding: bytes, as: UTF8.self), ending: ending, bytes: Array(bytes))
    }
}

extension OutputLine {
    /// The lines that `bytes` followed by `ending` make, cut exactly as a job's own output is
    /// (at `\n`, `\r\n` and a lone `\r`; pieces of at most 16 KiB): for output that arrives
    /// already split, from a peer that is not trusted to have split it right (a remote worker).
    ///
    /// - Parameters:
    ///   - bytes: One line's bytes, without its end.
    ///   - stream: The stream it came from.
    ///   - ending: How it ended.
    /// - Returns: The line, or the lines and pieces it holds; none when `bytes` is empty and
    ///   `ending` is ``Ending/none``. Their ``rawBytes`` put together are `bytes` and `ending`.
    public static func lines(of bytes: some Collection<UInt8>, stream: Stream, ending: Ending) -> [OutputLine] {
        var splitter = LineSplitter(stream: stream)
        var lines: [OutputLine] = []
        var all = Array(bytes)
        all.append(contentsOf: ending.bytes)
        all.withUnsafeBufferPointer { splitter.feed($0) { lines.append($0) } }
        splitter.flush { lines.append($0) }
        return lines
    }
}
