import Foundation
import JobtopTestSupport
import SchedulerRemote
import Testing

/// `--token-file`: what it reads, and how it says what is wrong with the file.
@Suite("Token files")
struct RemoteTokenTests {
    @Test("A token file others can read is warned about (echo > file leaves it 0644); 0600 is not")
    func permissionWarning() throws {
        let scratch = try Scratch()
        let file = try scratch.write("token", "secret\n")
        chmod(file, 0o644)
        #expect(RemoteToken.permissionWarning(file: file) == "warning: --token-file \(file) can be read by other users (mode 644): 'chmod 600 \(file)'")
        chmod(file, 0o600)
        #expect(RemoteToken.permissionWarning(file: file) == nil)
        #expect(RemoteToken.permissionWarning(file: nil) == nil)
    }

    @Test("a token file is read trimmed; an empty one (or /dev/null), an endless one and a missing one are named with the problem")
    func tokenFiles() throws {
        let scratch = try Scratch()
        let file = try scratch.write("token", "  secret-token\n")
        #expect(try RemoteToken.load(file: file, environment: [:]) == "secret-token")
        for (path, problem) in [
            ("/dev/null", "the file is empty"), ("/dev/zero", "longer than 64 KiB"), (scratch.file("none"), "cannot read it"),
        ] {
            #expect {
                _ = try RemoteToken.load(file: path, environment: [:])
            } throws: { error in
                "\(error)".contains("--token-file \(path): \(problem)")
            }
        }
    }

    @Test("a worker's negative --slots gets its range error (it got 'Missing value'), and status 2", arguments: ["-1", "0", "5000"])
    func slotsOutOfRange(slots: String) async throws {
        let worker = try JobtopProcess(["worker", "--connect", "127.0.0.1:1", "--slots", slots])
        let outcome = await worker.wait()
        #expect(outcome.status == 2)
        #expect(outcome.stderr.contains("--slots must be from 1 to 4096, not \(slots)"), "\(outcome.stderr)")
    }
}
