import Foundation

/// A plain job list: one shell command per line; blank lines and lines starting with `#` are
/// skipped.
enum CommandList {
    /// The commands in `text`, in order.
    static func commands(in text: String) -> [String] {
        var commands: [String] = []
        text.enumerateLines { line, _ in
            let command = line.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !command.isEmpty, !command.hasPrefix("#") else { return }
            commands.append(command)
        }
        return commands
    }
}
