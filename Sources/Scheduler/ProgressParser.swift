import Foundation

/// Reads progress from output lines.
///
/// The default takes a trailing percentage (`... 42%`, `12.5 %`); a ``ProgressPattern``
/// replaces it with a regular expression whose one group is a percentage or whose two groups are
/// done and total. `package`: the Slurm backend reads the same progress from its output files.
package struct ProgressParser {
    private let regex: NSRegularExpression?

    package init(pattern: ProgressPattern?) {
        regex = pattern.flatMap { try? NSRegularExpression(pattern: $0.pattern) }
    }

    /// The fraction (0...1) a line reports, if any.
    package func fraction(in line: String) -> Double? {
        if let regex { return Self.fraction(in: line, regex: regex) }
        return Self.trailingPercent(in: line)
    }

    /// A trailing `NN%` or `NN.N%` (spaces allowed before the sign and at the end).
    static func trailingPercent(in line: String) -> Double? {
        // Read in place (a native string's bytes are contiguous): through the `UTF8View`'s
        // indices this was a tenth of the time a job printing short lines cost.
        if let found = line.utf8.withContiguousStorageIfAvailable({ trailingPercent(in: $0) }) { return found }
        return Array(line.utf8).withUnsafeBufferPointer { trailingPercent(in: $0) }
    }

    private static func trailingPercent(in bytes: UnsafeBufferPointer<UInt8>) -> Double? {
        var end = bytes.count
        while end > 0, bytes[end - 1] == 0x20 || bytes[end - 1] == 0x09 || bytes[end - 1] == 0x0D { end -= 1 }
        guard end > 0, bytes[end - 1] == UInt8(ascii: "%") else { return nil }
        end -= 1
        while end > 0, bytes[end - 1] == 0x20 { end -= 1 }
        var start = end
        var sawDot = false
        var digits = 0
        while start > 0 {
            let byte = bytes[start - 1]
            if byte >= 0x30 && byte <= 0x39 {
                digits += 1
            } else if byte == UInt8(ascii: ".") && !sawDot && digits > 0 {
                sawDot = true
            } else {
                break
            }
            start -= 1
        }
        // "…v1.5%" would read as 1.5; a number glued to a letter is not a percentage, nor a
        // negative one ("change: -5%" read as 5% done).
        if start > 0 {
            let before = bytes[start - 1]
            if (before >= 0x41 && before <= 0x5A) || (before >= 0x61 && before <= 0x7A) || before == UInt8(ascii: "-") { return nil }
        }
        if start < end, bytes[start] == UInt8(ascii: ".") { start += 1 }
        guard digits > 0, start < end else { return nil }
        if bytes[end - 1] == UInt8(ascii: ".") { end -= 1 }
        guard let value = Double(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)), value <= 100 else { return nil }
        return value / 100
    }

    static func fraction(in line: String, regex: NSRegularExpression) -> Double? {
        let range = NSRange(line.startIndex..<line.endIndex, in: line)
        guard let match = regex.matches(in: line, range: range).last else { return nil }
        func number(_ group: Int) -> Double? {
            guard let r = Range(match.range(at: group), in: line) else { return nil }
            return Double(line[r].trimmingCharacters(in: .whitespaces))
        }
        if match.numberOfRanges >= 3 {
            guard let done = number(1), let total = number(2), total > 0 else { return nil }
            return min(max(done / total, 0), 1)
        }
        guard let percent = number(1) else { return nil }
        return min(max(percent / 100, 0), 1)
    }
}
