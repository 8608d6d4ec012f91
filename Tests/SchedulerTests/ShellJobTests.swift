import Foundation
import JobtopTestSupport
import Testing
@testable import Scheduler

/// Real shell jobs in real process groups: exit codes, signals, progress, bounded output, and
/// cancel/timeout that take the grandchildren with them.
@Suite(.timeLimit(.minutes(2)))
struct ShellJobTests {
    /// Runs `body` with a real scheduler and a subscriber that sees every event.
    static func withScheduler(
        slots: Int = 2, grace: Duration = .seconds(5), clock: some Clock<Duration> = ContinuousClock(),
        _ body: (Scheduler, inout EventReader) async throws -> Void
    ) async throws {
        let scheduler = Scheduler(configuration: .init(localSlots: slots, gracePeriod: grace, seed: 11), clock: clock)
        async let running: Void = scheduler.run()
        var reader = EventReader(await scheduler.events())
        do {
            try await body(scheduler, &reader)
        } catch {
            await scheduler.shutdown(.cancelRunning)
            await running
            throw error
        }
        await scheduler.shutdown(.cancelRunning)
        await running
    }

    static func temporaryFile(_ name: String) -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("jobtop-tests-\(UUID().uuidString.prefix(8))")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory.appendingPathComponent(name).path
    }

    /// Whether a process with this pid runs (a zombie has ended: it only waits to be reaped).
    static func isAlive(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return false }
        return !stat[stat.index(after: close)...].hasPrefix(" Z")
    }

    /// Reads pids a job wrote, one per line, once the file holds `count` of them.
    static func pids(in path: String, count: Int, reader: inout EventReader, job: JobID) async -> [pid_t] {
        // The job prints "ready" after writing its pids; the event is the gate. Its end stops the
        // wait too, so a job that ended first fails the count below instead of hanging.
        await reader.next { kind in
            if case .output(job, let line) = kind { return line.text == "ready" }
            return kind.isFinal && kind.jobID == job
        }
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        let pids = text.split(separator: "\n").compactMap { pid_t($0) }
        #expect(pids.count == count)
        return pids
    }

    @Test func exitCodesSignalsAndMissingCommandsEndAsTheyShould() async throws {
        try await Self.withScheduler { scheduler, reader in
            let ok = try await scheduler.submit(.shell("exit 0"))
            let three = try await scheduler.submit(.shell("exit 3"))
            let killed = try await scheduler.submit(.shell("kill -9 $$"))
            let missing = try await scheduler.submit(.shell("no-such-command-jobtop"))
            let argvMissing = try await scheduler.submit(JobSpec(work: .argv(["no-such-binary-jobtop", "x"])))
            #expect(await reader.final(of: ok)?.name == "succeeded")
            guard case .failed(_, .exitStatus(3), 1)? = await reader.final(of: three) else { Issue.record("exit 3"); return }
            guard case .failed(_, .signal(9), 1)? = await reader.final(of: killed) else { Issue.record("SIGKILL"); return }
            guard case .failed(_, let reason, 1)? = await reader.final(of: missing), reason == .exitStatus(127) else {
                Issue.record("command not found")
                return
            }
            #expect(reason.description == "exit 127 (command not found)")
            let stderr = await scheduler.output(of: missing).lines.filter { $0.stream == .stderr }.map(\.text)
            #expect(stderr.contains { $0.contains("not found") })
            guard case .failed(_, .exitStatus(127), 1)? = await reader.final(of: argvMissing) else { Issue.record("argv 127"); return }
        }
    }

    @Test func environmentAndWorkingDirectoryReachTheJob() async throws {
        try await Self.withScheduler { scheduler, reader in
            let directory = FileManager.default.temporaryDirectory.path
            let id = try await scheduler.submit(JobSpec(
                work: .shell("echo \"$JOBTOP_TEST_VAR $(pwd)\""), environment: ["JOBTOP_TEST_VAR": "hello"],
                workingDirectory: directory))
            #expect(await reader.final(of: id)?.name == "succeeded")
            // As given (without its trailing slash), a symbolic link in it or not.
            let given = directory.hasSuffix("/") ? String(directory.dropLast()) : directory
            #expect(await scheduler.output(of: id).lines.map(\.text) == ["hello \(given)"])
        }
    }

    @Test("A job in a directory given through a symbolic link: its pwd prints that path, as the user's shell would (it printed the physical one)")
    func workingDirectoryThroughALinkKeepsItsPath() async throws {
        let scratch = try Scratch()
        let real = scratch.file("real")
        try FileManager.default.createDirectory(atPath: real, withIntermediateDirectories: true)
        let link = scratch.file("link")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: real)
        try await Self.withScheduler { scheduler, reader in
            let plain = try await scheduler.submit(JobSpec(work: .shell("pwd; echo \"$PWD\""), workingDirectory: link))
            let slash = try await scheduler.submit(JobSpec(work: .shell("pwd"), workingDirectory: link + "/"))
            // A PWD the spec sets is the job's own business (a shell would not believe this one:
            // what the process is given is read without one).
            let own = try await scheduler.submit(JobSpec(work: .argv(["printenv", "PWD"]), environment: ["PWD": "/elsewhere"], workingDirectory: link))
            for id in [plain, slash, own] { #expect(await reader.final(of: id)?.name == "succeeded") }
            #expect(await scheduler.output(of: plain).lines.map(\.text) == [link, link])
            #expect(await scheduler.output(of: slash).lines.map(\.text) == [link])
            #expect(await scheduler.output(of: own).lines.map(\.text) == ["/elsewhere"])
        }
    }

    @Test("Only a path a shell takes as PWD is given as one")
    func plainAbsolutePaths() {
        #expect(plainAbsolutePath("/") == "/")
        #expect(plainAbsolutePath("/a/b") == "/a/b")
        #expect(plainAbsolutePath("/a/b/") == "/a/b")
        for path in ["a/b", "", "/a//b", "/a/./b", "/a/../b", "/a/b/..", "//a"] { #expect(plainAbsolutePath(path) == nil, "\(path)") }
    }

    @Test func outputIsStreamedLineByLineFromBothStreams() async throws {
        try await Self.withScheduler { scheduler, reader in
            let id = try await scheduler.submit(.shell("echo one; echo two >&2; printf 'three'"))
            #expect(await reader.final(of: id)?.name == "succeeded")
            let lines = reader.seen.compactMap { if case .output(id, let line) = $0.kind { line } else { nil } }
            #expect(lines.contains(OutputLine(stream: .stdout, text: "one")))
            #expect(lines.contains(OutputLine(stream: .stderr, text: "two")))
            #expect(lines.contains(OutputLine(stream: .stdout, text: "three", ending: .none)))
            // Started comes before the first line.
            let startIndex = reader.seen.firstIndex { $0.kind.isStarted(id) }!
            let firstLine = reader.seen.firstIndex { if case .output(id, _) = $0.kind { true } else { false } }!
            #expect(startIndex < firstLine)
        }
    }

    /// A job that goes quiet in the middle of a line shows that part at once (it waited for the
    /// line's end: `printf 'Downloading... '; sleep 60` showed nothing for a minute); the rest
    /// follows as the next piece, and the pieces together are the bytes written.
    @Test func aPartialLineIsHandedOnWhenTheJobGoesQuiet() async throws {
        let fifo = Self.temporaryFile("gate")
        #expect(mkfifo(fifo, 0o600) == 0)
        try await Self.withScheduler { scheduler, reader in
            // `read` holds the job (and its line) until the test writes to the FIFO.
            let id = try await scheduler.submit(.shell("printf 'Downloading… '; read x < '\(fifo)'; printf 'done\\n'"))
            let partial = await reader.next { kind in
                if case .output(id, _) = kind { return true }
                return kind.isFinal && kind.jobID == id
            }
            guard case .output(_, let first)? = partial?.kind else {
                Issue.record("no output before the job ended: \(String(describing: partial))")
                return
            }
            #expect(first == OutputLine(stream: .stdout, text: "Downloading… ", ending: .none))
            let writer = FileHandle(forWritingAtPath: fifo)
            try writer?.write(contentsOf: Data("go\n".utf8))
            try writer?.close()
            #expect(await reader.final(of: id)?.name == "succeeded")
            let lines = reader.seen.compactMap { if case .output(id, let line) = $0.kind { line } else { nil } }
            #expect(lines.map(\.text) == ["Downloading… ", "done"])
            #expect(lines.flatMap(\.rawBytes) == Array("Downloading… done\n".utf8))
        }
    }

    @Test func aPartialLineKeepsBackACharacterThatAReadCut() {
        var splitter = LineSplitter(stream: .stdout)
        var lines: [OutputLine] = []
        let bytes = Array("ab€".utf8)  // € is three bytes: the read stopped after its first two
        bytes[0..<4].withUnsafeBufferPointer { splitter.feed($0) { lines.append($0) } }
        splitter.flushPartial { lines.append($0) }
        #expect(lines == [OutputLine(stream: .stdout, text: "ab", ending: .none)])
        #expect(splitter.hasPartialLine)
        bytes[4...].withUnsafeBufferPointer { splitter.feed($0) { lines.append($0) } }
        splitter.flushPartial { lines.append($0) }
        #expect(lines.last == OutputLine(stream: .stdout, text: "€", ending: .none))
        #expect(!splitter.hasPartialLine)
        splitter.flushPartial { lines.append($0) }
        #expect(lines.count == 2)
    }

    @Test func progressIsParsedFromTrailingPercentagesAndFromACustomPattern() async throws {
        try await Self.withScheduler { scheduler, reader in
            let byPercent = try await scheduler.submit(.shell("echo 'step 12%'; echo 'step 37.5 %'; echo done"))
            #expect(await reader.final(of: byPercent)?.name == "succeeded")
            var spec = JobSpec.shell("echo 'file 3/4'")
            spec.progressPattern = try ProgressPattern(#"(\d+)/(\d+)"#)
            let byPattern = try await scheduler.submit(spec)
            #expect(await reader.final(of: byPattern)?.name == "succeeded")
            let progress = reader.seen.compactMap { if case .progress(let id, let p) = $0.kind { (id, p) } else { nil } }
            #expect(progress.filter { $0.0 == byPercent }.map(\.1) == [0.12, 0.375])
            #expect(progress.filter { $0.0 == byPattern }.map(\.1) == [0.75])
        }
    }

    @Test func progressParserTable() throws {
        #expect(ProgressParser.trailingPercent(in: "45%") == 0.45)
        #expect(ProgressParser.trailingPercent(in: "copying… 99.5%  ") == 0.995)
        #expect(ProgressParser.trailingPercent(in: "100 %") == 1)
        #expect(ProgressParser.trailingPercent(in: "v1.5%") == nil)
        #expect(ProgressParser.trailingPercent(in: "change: -5%") == nil)
        #expect(ProgressParser.trailingPercent(in: "150%") == nil)
        #expect(ProgressParser.trailingPercent(in: "50% done") == nil)
        #expect(ProgressParser.trailingPercent(in: "%") == nil)
        #expect(ProgressParser.trailingPercent(in: "") == nil)
        #expect(ProgressParser.trailingPercent(in: "   ") == nil)
        #expect(ProgressParser.trailingPercent(in: "étape 7 %\t\r") == 0.07)
        #expect(ProgressParser.trailingPercent(in: "→12.25%") == 0.1225)
        #expect(throws: ProgressPatternError.self) { try ProgressPattern("(") }
        #expect(throws: ProgressPatternError.self) { try ProgressPattern("no groups") }
        let pattern = try ProgressPattern(#"(\d+) of (\d+)"#)
        #expect(ProgressParser(pattern: pattern).fraction(in: "7 of 28") == 0.25)
    }

    @Test func cancelKillsTheWholeProcessGroupGrandchildrenIncluded() async throws {
        let pidFile = Self.temporaryFile("pids")
        try await Self.withScheduler { scheduler, reader in
            let id = try await scheduler.submit(.shell("sleep 1000 & echo $! > \(pidFile); echo $$ >> \(pidFile); echo ready; wait"))
            let pids = await Self.pids(in: pidFile, count: 2, reader: &reader, job: id)
            #expect(pids.allSatisfy(Self.isAlive))
            try await scheduler.cancel(id)
            #expect(await reader.final(of: id)?.name == "cancelled")
            for pid in pids { #expect(!Self.isAlive(pid), "pid \(pid) survived the cancel") }
            #expect(await scheduler.snapshot().count(.failed) == 0)
        }
    }

    @Test("Cancelling a stopped job (SIGSTOP) lets its SIGTERM trap run: SIGCONT follows the SIGTERM (it waited out the grace and was killed, its trap never run)")
    func cancelOfAStoppedJobRunsItsTrap() async throws {
        let pidFile = Self.temporaryFile("pids")
        // A grace longer than the test: only a SIGTERM the job sees ends it in time.
        //
        // Nothing of the job is between a fork and its exec when the signals come: dash starts a
        // command with vfork, and a SIGSTOP to the group that lands there stops the child before
        // its exec while the shell waits for that exec in state D, never T (a loop of
        // `sleep 0.05` stayed so 20 s in CI); and a child forked and not yet exec'd still has
        // the shell's trap, which takes the cancel's SIGTERM, so the `sleep` it becomes lives on
        // and the stop waits out the grace. So the shell says "ready" only once its one child is
        // `sleep` (`read` from /proc is a builtin: the wait forks nothing).
        try await Self.withScheduler(grace: .seconds(600)) { scheduler, reader in
            let id = try await scheduler.submit(.shell(
                "trap 'echo got-term; exit 0' TERM; echo $$ > \(pidFile); sleep 1000 & "
                    + "until read comm < /proc/$!/comm && [ \"$comm\" = sleep ]; do :; done; echo ready; wait"))
            let pids = await Self.pids(in: pidFile, count: 1, reader: &reader, job: id)
            guard let pid = pids.first else { return }
            try await scheduler.signal(id, SIGSTOP)
            #expect(await eventually { Self.isStopped(pid) }, "the job did not stop")
            try await scheduler.cancel(id)
            var lines: [String] = []
            let end = await reader.next { kind in
                if case .output(id, let line) = kind { lines.append(line.text) }
                return kind.isFinal && kind.jobID == id
            }
            #expect(end?.kind.name == "cancelled")
            #expect(lines.contains("got-term"), "\(lines)")
        }
    }

    /// Whether the process with this pid is stopped (state T).
    static func isStopped(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return false }
        return stat[stat.index(after: close)...].hasPrefix(" T")
    }

    @Test func aGrandchildThatCleansUpOnSIGTERMKeepsTheGracePeriodAfterTheMainProcessDied() async throws {
        let pidFile = Self.temporaryFile("pids")
        let gate = Self.temporaryFile("gate")
        let marker = Self.temporaryFile("cleaned")
        // A long grace: the grandchild's cleanup waits for the test's gate, which opens only
        // once the main process is gone.
        try await Self.withScheduler(grace: .seconds(60)) { scheduler, reader in
            let cleanup = "while [ ! -e \(gate) ]; do sleep 0.05; done; echo cleaned > \(marker); exit 0"
            let id = try await scheduler.submit(.shell(
                "echo $$ > \(pidFile); sh -c 'trap \"\(cleanup)\" TERM; echo $$ >> \(pidFile); echo ready; while :; do sleep 0.1; done' & wait"))
            let pids = await Self.pids(in: pidFile, count: 2, reader: &reader, job: id)
            guard pids.count == 2 else { return }
            try await scheduler.cancel(id)
            // The main shell dies of the SIGTERM; its grandchild runs its trap.
            #expect(await eventually { !Self.isAlive(pids[0]) })
            #expect(Self.isAlive(pids[1]), "the grandchild was killed when the main process died, inside its grace period")
            _ = FileManager.default.createFile(atPath: gate, contents: nil)
            #expect(await reader.final(of: id)?.name == "cancelled")
            #expect((try? String(contentsOfFile: marker, encoding: .utf8)) == "cleaned\n")
            #expect(!Self.isAlive(pids[1]))
        }
    }

    @Test func aTimeoutKillsTheGroupAndAGrandchildThatIgnoresSIGTERMGetsSIGKILL() async throws {
        let pidFile = Self.temporaryFile("pids")
        // The timeout runs on a manual clock: it fires once the grandchild is ready, however
        // slowly the shells start on a loaded machine.
        let clock = ManualClock()
        try await Self.withScheduler(grace: .milliseconds(300), clock: clock) { scheduler, reader in
            // The grandchild says "ready" itself once its pid is written and its trap set.
            var spec = JobSpec.shell("sh -c 'trap \"\" TERM; echo $$ > \(pidFile); echo ready; while :; do sleep 1; done' & wait")
            spec.timeout = .seconds(3)
            let id = try await scheduler.submit(spec)
            let pids = await Self.pids(in: pidFile, count: 1, reader: &reader, job: id)
            clock.advance(by: .seconds(3))
            guard case .failed(_, .timeout(.seconds(3)), 1)? = await reader.final(of: id) else {
                Issue.record("expected a timeout failure")
                return
            }
            for pid in pids { #expect(!Self.isAlive(pid), "the TERM-ignoring grandchild \(pid) survived") }
        }
    }

    @Test func finishedJobsLeaveNoZombies() async throws {
        try await Self.withScheduler(slots: 4) { scheduler, reader in
            // Each job prints its shell's pid; once its end is reported, that process must be
            // reaped. (Only these pids: other suites in this process have children of their own.)
            let ids = try await scheduler.submit(contentsOf: (0..<50).map { _ in .shell("echo $$") })
            await reader.finals(of: ids)
            let pids = reader.seen.compactMap { if case .output(_, let line) = $0.kind { Int(line.text) } else { nil } }
            #expect(pids.count == 50)
            let zombies = Self.childZombies().filter(pids.contains)
            #expect(zombies.isEmpty, "unreaped jobs: \(zombies)")
        }
    }

    /// Children of this process in state Z.
    static func childZombies() -> [Int] {
        let me = getpid()
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { entry -> Int? in
            guard let pid = Int(entry), let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { return nil }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 1, fields[0] == "Z", Int32(fields[1]) == me else { return nil }
            return pid
        }
    }
}
