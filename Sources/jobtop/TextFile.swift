import Foundation

/// Reads a whole text file (or standard input) as UTF-8, with errors a user can act on.
enum TextFile {
    /// Reads the file at `path`.
    ///
    /// - Throws: ``JobInputError`` `.unreadableFile` naming the file and the reason.
    static func read(_ path: String) throws(JobInputError) -> String {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw JobInputError(.unreadableFile, "cannot read '\(path)': no such file")
        }
        guard !isDirectory.boolValue else {
            throw JobInputError(.unreadableFile, "cannot read '\(path)': it is a directory")
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw JobInputError(.unreadableFile, "cannot read '\(path)': permission denied or I/O error")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw JobInputError(.unreadableFile, "cannot read '\(path)': it is not UTF-8 text")
        }
        return text
    }

    /// Reads standard input to its end.
    ///
    /// - Throws: ``JobInputError`` `.unreadableFile` when it is not UTF-8.
    static func readStandardInput() throws(JobInputError) -> String {
        let data = FileHandle.standardInput.readDataToEndOfFile()
        guard let text = String(data: data, encoding: .utf8) else {
            throw JobInputError(.unreadableFile, "cannot read standard input: it is not UTF-8 text")
        }
        return text
    }
}
