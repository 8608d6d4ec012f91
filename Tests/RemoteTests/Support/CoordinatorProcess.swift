import Foundation
import JobtopTestSupport

#if canImport(Glibc)
import Glibc
#endif

/// `jobtop run --listen 127.0.0.1:0` with a token, headless, whose one job runs until ``go()``
/// (or is the command given).
struct CoordinatorProcess {
    let process: JobtopProcess
    let port: Int
    /// Holds the token and go files.
    let scratch: Scratch

    var tokenFile: String { scratch.file("token") }
    var goFile: String { scratch.file("go") }

    /// - Parameters:
    ///   - options: More options for `jobtop run`.
    ///   - localSlots: Its own slots (`-j`; 0: remote workers only).
    ///   - command: The job, given the scratch directory (default: it waits for ``go()``).
    static func start(
        _ options: [String] = [], localSlots: Int = 1, command: ((Scratch) -> String)? = nil
    ) async throws -> CoordinatorProcess {
        let scratch = try Scratch()
        let tokenFile = try scratch.write("token", "the-token\n")
        let job = command?(scratch) ?? "while [ ! -e '\(scratch.file("go"))' ]; do sleep 0.02; done"
        let process = try JobtopProcess(
            ["run", "--listen", "127.0.0.1:0", "--token-file", tokenFile, "-j", "\(localSlots)", "--headless"] + options + ["-c", job],
            directory: scratch.path, newSession: true)
        let marker = "accepting workers on 127.0.0.1:"
        guard await eventually({ process.output.contains(marker) }),
            let line = process.outputLines.first(where: { $0.contains(marker) }),
            let port = Int(line[line.range(of: marker)!.upperBound...].prefix { $0.isNumber })
        else {
            process.send(SIGKILL)
            throw SpawnError(message: "the coordinator did not say where it listens:\n\(process.output)")
        }
        return CoordinatorProcess(process: process, port: port, scratch: scratch)
    }

    /// A `jobtop worker` with this coordinator's token.
    func worker(name: String) throws -> JobtopProcess {
        try JobtopProcess(
            ["worker", "--connect", "127.0.0.1:\(port)", "--slots", "1", "--name", name, "--token-file", tokenFile],
            newSession: true)
    }

    /// Lets the job end, and with it the run.
    func go() throws {
        try scratch.write("go", "")
    }
}
