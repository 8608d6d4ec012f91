import Foundation
import JobtopTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The binary's local process layer: `-j` against the system's limits, processes a job leaves
/// behind, and `--output-dir` files that hold exactly what the jobs wrote.
@Suite("Local processes of the jobtop binary", .timeLimit(.minutes(2)))
struct LocalProcessTests {
    /// Runs `jobtop arguments...` under `ulimit -n files` (soft and hard), stdout and stderr into
    /// files of `scratch`.
    static func runLimited(
        files: Int, _ arguments: [String], in scratch: Scratch, environment: [String] = []
    ) async throws -> (status: Int32, stdout: String, stderr: String) {
        let command = environment.isEmpty ? [JobtopProcess.binary] : ["/usr/bin/env"] + environment + [JobtopProcess.binary]
        let argv = ["/bin/sh", "-c", "ulimit -n \(files) && exec \"$0\" \"$@\""] + command + arguments
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, scratch.file("stdout"), O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, scratch.file("stderr"), O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        var cArguments: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
        defer { for pointer in cArguments { free(pointer) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, argv[0], &actions, nil, &cArguments, environ)
        guard rc == 0 else { throw SpawnError(message: "cannot run /bin/sh: \(String(cString: strerror(rc)))") }
        let child = pid
        let status = await withCheckedContinuation { (continuation: CheckedContinuation<Int32, Never>) in
            Thread {
                var status: Int32 = 0
                while waitpid(child, &status, 0) < 0 && errno == EINTR {}
                continuation.resume(returning: (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F))
            }.start()
        }
        return (status, scratch.read("stdout") ?? "", scratch.read("stderr") ?? "")
    }

    @Test("-j beyond what the open-file limit holds is refused before anything starts, naming the limit")
    func jobsBeyondTheFileLimit() async throws {
        let scratch = try Scratch()
        // 400 descriptors: 64 kept free, 3 per job, fewer than 112 slots (fewer still for the
        // descriptors jobtop inherits from the test process, which it counts as in use).
        let refused = try await Self.runLimited(files: 400, ["-j", "200", "--headless", "-c", "touch \(scratch.file("ran"))"], in: scratch)
        #expect(refused.status == 2, "\(refused.stderr)")
        #expect(refused.stderr.contains("-j/--jobs 200") && refused.stderr.contains("RLIMIT_NOFILE"), "\(refused.stderr)")
        #expect(refused.stdout.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: scratch.file("ran")))

        let fits = try await Self.runLimited(files: 400, ["-j", "5", "--headless", "-c", "touch \(scratch.file("ran"))"], in: scratch)
        #expect(fits.status == 0, "\(fits.stderr)")
        #expect(FileManager.default.fileExists(atPath: scratch.file("ran")), "\(fits.stderr)")
    }

    @Test("Under an open-file limit with no room for a job, a run says so and names the limit, not a -j it was not given (it said '-j/--jobs 2 is more than…; use a smaller -j', and -j 1 was refused the same)")
    func noRoomForAnyJob() async throws {
        let scratch = try Scratch()
        let refused = try await Self.runLimited(files: 64, ["--headless", "-c", "touch \(scratch.file("ran"))"], in: scratch)
        #expect(refused.status == 2, "\(refused.stderr)")
        #expect(refused.stderr.hasPrefix("jobtop: this system has no room for a local job: ") && refused.stderr.hasSuffix("; raise RLIMIT_NOFILE\n"), "\(refused.stderr)")
        #expect(!refused.stderr.contains("-j"))
        #expect(!FileManager.default.fileExists(atPath: scratch.file("ran")))
    }

    @Test("serve -j beyond what the open-file limit holds is refused before it listens or makes its state directory (it was taken, and its jobs waited for descriptors, then failed)")
    func serveJobsBeyondTheFileLimit() async throws {
        let scratch = try Scratch()
        let environment = ["XDG_RUNTIME_DIR=\(scratch.file("run"))", "XDG_STATE_HOME=\(scratch.file("state"))"]
        let refused = try await Self.runLimited(files: 400, ["serve", "-j", "200"], in: scratch, environment: environment)
        #expect(refused.status == 2, "\(refused.stderr)")
        #expect(refused.stderr.hasPrefix("jobtop serve: -j/--jobs 200 is more than this system can run at once") && refused.stderr.contains("RLIMIT_NOFILE"), "\(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: scratch.file("state")), "a refused serve made its state directory")
        #expect(!FileManager.default.fileExists(atPath: scratch.file("run/jobtop/serve.sock")))
    }

    @Test("A process a job leaves in its group is stopped, and the log says so")
    func leftoverIsStopped() async throws {
        let scratch = try Scratch()
        let run = try await JobtopProcess.run(
            ["--headless", "-c", "sleep 1000 & echo $! > pid; echo done"], directory: scratch.path)
        #expect(run.status == 0, "\(run.stderr)")
        let leftover = try #require(Log.events("leftover", in: run.lines).first)
        #expect(leftover.hasSuffix("processes=1 stopped=true"), "\(leftover)")
        let pid = try #require(pids(in: scratch.file("pid")).first)
        #expect(!isRunning(pid), "sleep \(pid) outlived its job")
        let json = try await JobtopProcess.run(
            ["--headless", "--log-format", "json", "-c", "sleep 1000 & echo $! > pid2"], directory: scratch.path)
        let event = try #require(try Log.json(json.lines).first { $0["event"] as? String == "leftover" })
        #expect(event["processes"] as? Int == 1 && event["stopped"] as? Bool == true)
        #expect(!isRunning(try #require(pids(in: scratch.file("pid2")).first)))
    }

    @Test("keep_background = true leaves the process running and logs stopped=false")
    func keepBackground() async throws {
        let scratch = try Scratch()
        let file = try scratch.write("jobs.toml", """
            [[job]]
            name = "daemon"
            command = "sleep 1000 > /dev/null 2>&1 & echo $! > pid"
            keep_background = true
            """)
        let run = try await JobtopProcess.run([file, "--headless"], directory: scratch.path)
        #expect(run.status == 0, "\(run.stderr)")
        let pid = try #require(pids(in: scratch.file("pid")).first)
        defer { kill(pid, SIGKILL) }
        #expect(isRunning(pid))
        #expect(Log.events("leftover", in: run.lines).first?.hasSuffix("daemon processes=1 stopped=false") == true, "\(run.lines)")
        let wrong = try scratch.write("wrong.toml", "[[job]]\ncommand = \"true\"\nkeep_background = \"yes\"\n")
        let refused = try await JobtopProcess.run([wrong, "--headless"])
        #expect(refused.status == 2)
        #expect(refused.stderr.contains("'keep_background' must be true or false, not a string"), "\(refused.stderr)")
    }

    @Test("--output-dir files hold exactly the bytes each job wrote")
    func exactOutputFiles() async throws {
        let scratch = try Scratch()
        let file = try scratch.write("jobs.toml", #"""
            [[job]]
            name = "bytes"
            command = "printf 'a\\r\\nb\\rc\\n\\n\\377\\376\\n'; head -c 3000000 /dev/zero | tr '\\0' x; printf 'tail' >&2"
            [[job]]
            name = "again"
            command = "printf partial; test -f marker || { touch marker; exit 1; }"
            retries = 1
            backoff = "10ms"
            """#)
        let run = try await JobtopProcess.run([file, "--headless", "--output-dir", "out"], directory: scratch.path)
        #expect(run.status == 0, "\(run.stderr)")
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: scratch.file("out/bytes.log"))))
        let stdout = Array("a\r\nb\rc\n\n".utf8) + [0xFF, 0xFE, 0x0A] + [UInt8](repeating: UInt8(ascii: "x"), count: 3_000_000)
        // stdout and stderr are read separately: "tail" comes after or before the whole stdout
        // block, never inside a line.
        let tail = Array("tail".utf8)
        #expect(bytes == stdout + tail || bytes == tail + stdout, "\(bytes.count) bytes")
        #expect(scratch.read("out/again.log") == "partial\n--- jobtop: attempt 2 ---\npartial")
    }

    @Test("A job waiting for its retry holds no --output-dir file open")
    func noFileHeldBetweenAttempts() async throws {
        let scratch = try Scratch()
        let file = try scratch.write("jobs.toml", """
            [[job]]
            name = "again"
            command = "echo try; test -f marker || { touch marker; exit 1; }"
            retries = 1
            backoff = "1h"
            """)
        let process = try JobtopProcess([file, "--headless", "--output-dir", "out"], directory: scratch.path)
        // The retry line is logged when the first attempt has ended and the wait begins (an hour:
        // however slow this machine, the second attempt cannot have reopened the file when the
        // descriptors are listed; a 3 s backoff once let it in a loaded full run).
        _ = await process.firstLine { $0.split(separator: " ").dropFirst().first == "retry" }
        let open = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(process.pid)/fd")) ?? []).compactMap {
            try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(process.pid)/fd/\($0)")
        }
        #expect(!open.isEmpty, "the descriptors were not listed")
        #expect(!open.contains { $0.hasSuffix("out/again.log") }, "\(open)")
        // SIGTERM cancels the waiting retry; the file keeps the first attempt's output. (A retry
        // appending to the same file is tested above.)
        process.send(SIGTERM)
        let run = await process.wait()
        #expect(run.status == 128 + SIGTERM, "\(run.stderr)")
        #expect(run.lines.contains { $0.split(separator: " ").dropFirst().first == "cancelled" }, "\(run.stdout)")
        #expect(scratch.read("out/again.log") == "try\n")
    }
}
