import Foundation
import JobtopTestSupport

#if canImport(Glibc)
import Glibc
#endif

/// `jobtop run --listen 127.0.0.1:0` with a token, headless, whose one job runs until ``go()``.
struct CoordinatorProcess {
    let process: JobtopProcess
    let port: Int
    /// Holds the token and go files.
    let scratch: Scratch

    var tokenFile: String { scratch.file("token") }
    var goFile: String { scratch.file("go") }

    /// - Parameter options: More options for `jobtop run`.
    static func start(_ options: [String] = []) async throws -> CoordinatorProcess {
        let scratch = try Scratch()
        let tokenFile = try scratch.write("token", "the-token\n")
        let process = try JobtopProcess(
            ["run", "--listen", "127.0.0.1:0", "--token-file", tokenFile, "-j", "1", "--headless"] + options + [
             "-c", "while [ ! -e '\(scratch.file("go"))' ]; do sleep 0.02; done"],
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
