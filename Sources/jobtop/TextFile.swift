import Foundation

/// Reads a whole text file (or standard input) as UTF-8, with errors a user can act on.
enum TextFile {
    /// What a file that is not there gets: for a bare word (`jobtop stauts`), that it is no
    /// command either (it read as a file and said only "no such file").
    static func missing(_ path: String) -> String {
        let isWord = !path.isEmpty && path.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }
        return "cannot read '\(path)': no such file" + (isWord ? " (and no jobtop command is called that: see 'jobtop --help')" : "")
    }

    /// Reads the file at `path`.
    ///
    /// - Throws: ``JobInputError`` `.unreadableFile` naming the file and the reason.
    static func read(_ path: String) throws(JobInputError) -> String {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw JobInputError(.unreadableFile, missing(path))
        }
        guard !isDirectory.boolValue else {
            throw JobInputError(.unreadableFile, "cannot read '\(path)': it is a directory")
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw JobInputError(.unreadableFile, "cannot read '\(path)': permission denied or I/O error")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw JobInputError(.unreadableFile, "'\(path)':\(firstBadLine(data)): not UTF-8 text")
        }
        return text
    }

    /// The line (from 1) of the first byte sequence in `data` that is not UTF-8.
    static func firstBadLine(_ data: Data) -> Int {
        var line = 1
        var start = data.startIndex
        for index in data.indices where data[index] == UInt8(ascii: "\n") {
            if String(data: data[start..<index], encoding: .utf8) == nil { return line }
            line += 1
            start = index + 1
        }
        return line
    }

    /// Reads standard input to its end.
    ///
    /// - Throws: ``JobInputError`` `.unreadableFile` when it is not UTF-8.
    static func readStandardInput() throws(JobInputError) -> String {
        let data = FileHandle.standardInput.readDataToEndOfFile()
        guard let text = String(data: data, encoding: .utf8) else {
            throw JobInputError(.unreadableFile, "standard input:\(firstBadLine(data)): not UTF-8 text")
        }
        return text
    }
}
