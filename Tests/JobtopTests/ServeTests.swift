import Foundation
import JobtopTestSupport
import Scheduler
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A `jobtop serve` of one test: its own XDG_RUNTIME_DIR and XDG_STATE_HOME (so its own
/// socket), stopped and reaped when the test ends.
final class ServeFixture: Sendable {
    let scratch: Scratch
    let environment: [String: String]
    let serve: JobtopProcess

    var runtimeDirectory: String { environment["XDG_RUNTIME_DIR"]! }
    var socketPath: String { runtimeDirectory + "/jobtop/serve.sock" }

    init(_ arguments: [String] = ["-j", "2"], files: [String: String] = [:], extraEnvironment: [String: String] = [:]) async throws {
        scratch = try Scratch()
        for (name, text) in files { try scratch.write(name, text) }
        environment = ["XDG_RUNTIME_DIR": scratch.file("run"), "XDG_STATE_HOME": scratch.file("state")]
        serve = try JobtopProcess(
            ["serve"] + arguments, directory: scratch.path, environment: environment.merging(extraEnvironment) { $1 }, newSession: true)
        let serve = serve
        let ready = await eventually(within: .seconds(60)) { serve.output.contains("listening on") }
        try #require(ready, "serve did not start: \(serve.output)")
    }

    /// The TCP address (`127.0.0.1:PORT`) serve printed on the line that has `marker`
    /// (`listening on` for --listen, `accepting workers on` for --workers).
    func address(printedWith marker: String) throws -> String {
        let line = try #require(serve.output.split(separator: "\n").first { $0.contains(marker) })
        return try #require(line.split(separator: " ").first { $0.hasPrefix("127.0.0.1:") }.map(String.init))
    }

    /// Runs a client command to its end.
    func run(_ arguments: [String], stdin: String? = nil) async throws -> JobtopProcess.Outcome {
        try await JobtopProcess(arguments, stdin: stdin, directory: scratch.path, environment: environment).wait()
    }

    /// Starts a client command.
    func start(_ arguments: [String]) throws -> JobtopProcess {
        try JobtopProcess(arguments, directory: scratch.path, environment: environment)
    }

    /// What `status --json` (with `options`) prints, parsed.
    func report(_ options: [String] = []) async throws -> [String: Any] {
        let outcome = try await run(["status", "--json"] + options)
        try #require(outcome.status == 0, "status failed: \(outcome.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(outcome.stdout.utf8)) as? [String: Any], "\(outcome.stdout)")
    }

    /// Group `name` as `status --json` lists it, if it does.
    func group(_ name: String) async throws -> [String: Any]? {
        let groups = try #require(try await report()["groups"] as? [[String: Any]])
        return groups.first { ($0["name"] as? String) == name }
    }

    /// What `status` prints, or nothing when it fails (for a condition polled until it holds).
    func statusText() async -> String {
        (try? await run(["status"]))?.stdout ?? ""
    }

    /// The serve's jobs as `status --all --json` lists them.
    func jobs() async throws -> [[String: Any]] {
        try #require(try await report(["--all"])["jobs"] as? [[String: Any]])
    }

    func state(of id: String) async throws -> String? {
        try await jobs().first { ($0["short"] as? String) == id || ($0["id"] as? String) == id }?["state"] as? String
    }

    /// Polls until the job is in `state`.
    func waitFor(_ id: String, _ state: String) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while try await self.state(of: id) != state {
            guard ContinuousClock.now < deadline else {
                Issue.record("job \(id) never reached \(state): \(try await self.state(of: id) ?? "gone")")
                return
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Shuts the serve down and waits for it (`nil`: it did not stop and was killed).
    @discardableResult
    func stop() async throws -> JobtopProcess.Outcome? {
        _ = try await run(["shutdown"])
        guard let outcome = await serve.wait(atMost: .seconds(60)) else {
            serve.send(SIGKILL)
            _ = await serve.wait()
            return nil
        }
        return outcome
    }
}

@Suite("jobtop serve and its client commands", .timeLimit(.minutes(3)))
struct ServeTests {
    @Test("submit, status (text and JSON), log, clean and shutdown")
    func lifecycle() async throws {
        let fixture = try await ServeFixture()
        let submitted = try await fixture.run(["submit", "-c", "echo hello; echo world >&2", "-c", "exit 3"])
        #expect(submitted.status == 0, "\(submitted.stderr)")
        #expect(submitted.lines.count == 2)
        let (hello, failing) = (submitted.lines[0], submitted.lines[1])
        #expect(hello.count == 8)
        try await fixture.waitFor(hello, "succeeded")
        try await fixture.waitFor(failing, "failed")
        // It printed nothing: its log says how it failed (a Slurm job refused before it ran said nothing at all)
        let silentLog = try await fixture.run(["log", failing])
        #expect(silentLog.status == 0 && silentLog.stdout.isEmpty)
        #expect(silentLog.stderr.contains("job \(failing) printed nothing; it failed: exit"), "\(silentLog.stderr)")

        let status = try await fixture.run(["status", "--all"])
        #expect(status.status == 0)
        #expect(status.stdout.contains("1 succeeded, 1 failed"), "\(status.stdout)")
        #expect(status.lines.contains { $0.hasPrefix(failing) && $0.contains("failed (exit 3)") })
        // The columns line up, however long a job's state is ("failed (exit 3)" is wider than
        // the header's STATE): in every row each column starts where its header does.
        let table = status.lines.drop { !$0.hasPrefix("ID ") }.map { Array($0) }
        let header = try #require(table.first)
        let starts = ["STATE", "PRIO", "GROUP", "JOB"].compactMap { column in
            (1..<header.count).first { header[$0 - 1] == " " && String(header[$0...]).hasPrefix(column) }
        }
        #expect(starts.count == 4, "header: \(String(header))")
        for row in table.dropFirst() {
            for start in starts {
                #expect(row.count > start && row[start - 1] == " " && row[start] != " ", "the column at \(start) of: \(String(row))")
            }
        }
        let active = try await fixture.run(["status"])
        #expect(!active.stdout.contains(hello), "finished jobs are listed only with --all")
        // Every key the README lists is there, null when it has no value.
        let report: [String: Any]? = try await fixture.report(["--all"])
        #expect(report?["shuttingDown"] is NSNull)
        let listed = try #require(report?["jobs"] as? [[String: Any]])
        #expect(listed.allSatisfy { Set($0.keys).isSuperset(of: ["name", "failure", "worker", "placement", "sent"]) })

        let log = try await fixture.run(["log", hello])
        #expect(log.status == 0)
        #expect(log.stdout.contains("hello\n") && log.stdout.contains("world\n"))

        let clean = try await fixture.run(["clean"])
        #expect(clean.stdout == "forgot 2 finished jobs\n")
        #expect(try await fixture.jobs().isEmpty)

        let stopped = try await fixture.stop()
        #expect(stopped?.status == 0)
        #expect(!FileManager.default.fileExists(atPath: fixture.socketPath), "the socket is removed")
    }

    @Test("submit --name, --retries, --backoff, --timeout, --delay and --at; --after by the name given")
    func submitOptions() async throws {
        let fixture = try await ServeFixture()
        let first = try await fixture.run(["submit", "--name", "first", "-c", "true"])
        #expect(first.status == 0, "\(first.stderr)")
        let second = try await fixture.run([
            "submit", "--after", "first", "--name", "second", "--retries", "2", "--backoff", "10ms", "--timeout", "30s", "-c", "exit 4",
        ])
        #expect(second.status == 0, "\(second.stderr)")
        let later = try await fixture.run(["submit", "--delay", "1h", "-c", "true"])
        #expect(later.status == 0, "\(later.stderr)")
        let (firstID, secondID, laterID) = (first.lines.first ?? "", second.lines.first ?? "", later.lines.first ?? "")
        try await fixture.waitFor(secondID, "failed")

        let jobs = try await fixture.jobs()
        func job(_ short: String) -> [String: Any]? { jobs.first { ($0["short"] as? String) == short } }
        #expect(job(firstID)?["name"] as? String == "first")
        #expect(job(firstID)?["state"] as? String == "succeeded")
        let failed = try #require(job(secondID))
        #expect(failed["name"] as? String == "second")
        #expect(failed["maxAttempts"] as? Int == 3)
        #expect(failed["attempts"] as? Int == 3, "every retry ran: \(failed)")
        #expect((failed["after"] as? [String])?.first?.hasPrefix(firstID) == true, "it waited for 'first': \(failed)")
        #expect(job(laterID)?["state"] as? String == "scheduled")
        let table = try await fixture.run(["status"])
        #expect(table.lines.contains { $0.hasPrefix(laterID) && ($0.contains("scheduled (in 59m") || $0.contains("scheduled (in 1h)")) }, "\(table.stdout)")
        // A job that waits for the failed one is skipped, and the table says why.
        let third = try await fixture.run(["submit", "--after", "second", "-c", "true"])
        let thirdID = third.lines.first ?? ""
        try await fixture.waitFor(thirdID, "skipped")
        let all = try await fixture.run(["status", "--all"])
        #expect(all.lines.contains { $0.hasPrefix(thirdID) && $0.contains("skipped (dependency 'second' failed)") }, "\(all.stdout)")
        // A command's escape sequence is shown, not sent to the terminal (it cleared it)
        let escaping = try await fixture.run(["submit", "-c", "true; : \u{1B}[2J"]).lines.first ?? ""
        try await fixture.waitFor(escaping, "succeeded")
        let shown = try await fixture.run(["status", "--all"])
        #expect(!shown.stdout.contains("\u{1B}") && shown.stdout.contains("true; : \\u{1B}[2J"), "\(shown.stdout)")
        // Its log has nothing to print, and says why rather than print nothing.
        let log = try await fixture.run(["log", thirdID])
        #expect(log.status == 0 && log.stdout.isEmpty)
        #expect(log.stderr.contains("has no output: it has not run (it was skipped: dependency 'second' failed)"), "\(log.stderr)")

        // A name for several jobs, or a bad value: refused, nothing submitted.
        for arguments in [["--name", "x", "-c", "a", "-c", "b"], ["--name", "", "-c", "a"], ["--delay", "-1s", "-c", "a"], ["--retries", "1001", "-c", "a"]] {
            let refused = try await fixture.run(["submit"] + arguments)
            #expect(refused.status == 2, "\(arguments): \(refused.stderr)")
        }
        let refusedName = try await fixture.run(["submit", "--name", "x", "-c", "a", "-c", "b"])
        #expect(refusedName.stderr.contains("--name names one job"), "\(refusedName.stderr)")
        // Options for -c and list jobs on a job file alone: refused, not ignored (its job ran at
        // once though the job named by --after had failed).
        try fixture.scratch.write("one.toml", "[[job]]\nname = \"sfa\"\ncommand = \"true\"\n")
        for arguments in [["--after", "second"], ["--group", "g", "--priority", "5"]] {
            let refused = try await fixture.run(["submit", "one.toml"] + arguments)
            #expect(refused.status == 2 && (refused.stderr.contains("apply to -c and list jobs") || refused.stderr.contains("applies to -c and list jobs")), "\(arguments): \(refused.stderr)")
        }
        #expect(try await fixture.jobs().count == 5)
        _ = try await fixture.run(["cancel", laterID])

        // --at: a moment (RFC 3339) three days and a bit ahead; status counts in days.
        let moment = Date().addingTimeInterval(3 * 86_400 + 600)
        let stamp = ISO8601DateFormatter().string(from: moment)
        let atMoment = try await fixture.run(["submit", "--at", stamp, "-c", "true"])
        #expect(atMoment.status == 0, "\(atMoment.stderr)")
        let atID = atMoment.lines.first ?? ""
        let scheduled = try await fixture.run(["status"])
        #expect(scheduled.lines.contains { $0.hasPrefix(atID) && $0.contains("scheduled (in 3d)") }, "\(scheduled.stdout)")
        // A past moment, a time of day that does not exist, --at with --delay: refused, nothing submitted.
        for arguments in [["--at", "2020-01-01T00:00:00Z"], ["--at", "25:00"], ["--at", "02:00", "--delay", "1m"], ["--at", "tomorrow"]] {
            let refused = try await fixture.run(["submit"] + arguments + ["-c", "true"])
            #expect(refused.status == 2, "\(arguments): \(refused.stderr)")
            #expect(refused.stderr.contains("--at"), "\(arguments): \(refused.stderr)")
        }
        #expect(try await fixture.jobs().count == 6)
        _ = try await fixture.run(["cancel", atID])
        _ = try await fixture.stop()
    }

    @Test("log prints the whole output from the serve's file, beyond the tail it keeps in memory")
    func wholeLog() async throws {
        let fixture = try await ServeFixture()
        let id = try await fixture.run(["submit", "-c", "seq 1 20000"]).lines[0]
        try await fixture.waitFor(id, "succeeded")
        let log = try await fixture.run(["log", id])
        #expect(log.status == 0)
        #expect(log.lines.count == 20000)
        #expect(log.lines.first == "1" && log.lines.last == "20000")
        try await fixture.stop()
    }

    @Test("a submitted job runs in the directory submit was run in (it ran in the serve's); a relative cwd is taken from there")
    func jobsRunWhereSubmitted() async throws {
        let fixture = try await ServeFixture()
        let here = fixture.scratch.file("sub")
        try FileManager.default.createDirectory(atPath: here + "/deeper", withIntermediateDirectories: true)
        let submit = try await JobtopProcess(
            ["submit", "-c", "pwd", "-c", "pwd"], directory: here, environment: fixture.environment).wait()
        #expect(submit.status == 0, "\(submit.stderr)")
        let real = URL(fileURLWithPath: here).resolvingSymlinksInPath().path
        for id in submit.lines {
            try await fixture.waitFor(id, "succeeded")
            #expect(try await fixture.run(["log", id]).lines == [real])
        }
        let file = try fixture.scratch.write("sub/jobs.toml", """
            [[job]]
            name = "in-deeper"
            cwd = "deeper"
            command = "pwd"
            """)
        let id = try await JobtopProcess(["submit", file], directory: here, environment: fixture.environment).wait().lines[0]
        try await fixture.waitFor(id, "succeeded")
        #expect(try await fixture.run(["log", id]).lines == [real + "/deeper"])
        try await fixture.stop()
    }

    @Test("submitted from a directory reached through a symbolic link, a job's pwd prints the link's path, as the user's shell did (it printed the physical one)")
    func jobsRunWhereSubmittedThroughALink() async throws {
        let fixture = try await ServeFixture()
        let real = fixture.scratch.file("real")
        try FileManager.default.createDirectory(atPath: real + "/deeper", withIntermediateDirectories: true)
        let link = fixture.scratch.file("link")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: real)
        _ = try fixture.scratch.write("real/jobs.toml", """
            [[job]]
            name = "in-deeper"
            cwd = "deeper"
            command = "pwd"
            """)
        var environment = fixture.environment
        environment["PWD"] = link
        let plain = try await JobtopProcess(["submit", "-c", "pwd"], directory: link, environment: environment).wait()
        let file = try await JobtopProcess(["submit", "jobs.toml"], directory: link, environment: environment).wait()
        // A PWD that names another directory is not believed: the physical path.
        environment["PWD"] = fixture.scratch.file("")
        let stale = try await JobtopProcess(["submit", "-c", "pwd"], directory: link, environment: environment).wait()
        for (submit, expected) in [(plain, link), (file, link + "/deeper"), (stale, URL(fileURLWithPath: real).resolvingSymlinksInPath().path)] {
            #expect(submit.status == 0, "\(submit.stderr)")
            try await fixture.waitFor(submit.lines[0], "succeeded")
            #expect(try await fixture.run(["log", submit.lines[0]]).lines == [expected])
        }
        try await fixture.stop()
    }

    @Test("status --json says when a scheduled job starts and a waiting one retries (due), why a job is stopping, and counts both waiting ones as held")
    func statusSaysDueTimes() async throws {
        let fixture = try await ServeFixture()
        let before = Date()
        let scheduled = try await fixture.run(["submit", "--delay", "1h", "-c", "true"]).lines[0]
        let flaky = try await fixture.run(["submit", "--retries", "1", "--backoff", "10m", "-c", "exit 3"]).lines[0]
        try await fixture.waitFor(flaky, "waiting")
        let report = try await fixture.report()
        let jobs = try #require(report["jobs"] as? [[String: Any]])
        func due(_ id: String) throws -> Date {
            let job = try #require(jobs.first { ($0["short"] as? String) == id }, "\(id) not listed: \(jobs)")
            #expect(job["stopping"] is NSNull)
            let text = try #require(job["due"] as? String, "no due: \(job)")
            return try #require(ISO8601DateFormatter().date(from: text), "not RFC 3339: \(text)")
        }
        let start = try due(scheduled).timeIntervalSince(before)
        #expect(start > 3_500 && start < 3_700, "starts in \(start) s")
        // Ten minutes, up to a fifth less (jitter): not cut to the 60 s cap of later retries.
        let retry = try due(flaky).timeIntervalSince(before)
        #expect(retry > 470 && retry < 660, "retries in \(retry) s")
        let groups = try #require(report["groups"] as? [[String: Any]])
        #expect(groups.first { ($0["name"] as? String) == "default" }?["held"] as? Int == 2, "\(groups)")
        // Every key the README lists, a group's missing limit as null (it was left out).
        #expect(groups.allSatisfy { $0.keys.sorted() == ["held", "limit", "name", "paused", "queued", "running", "sent"] }, "\(groups)")
        #expect(groups.first { ($0["name"] as? String) == "default" }?["limit"] is NSNull, "\(groups)")
        #expect(report["shuttingDown"] is NSNull && jobs.allSatisfy { $0["name"] != nil && $0["worker"] != nil }, "\(report)")
        try await fixture.stop()
    }

    @Test("a job file's [groups] table without parallel leaves the limit set with 'jobtop limit'; one with parallel sets it")
    func fileGroupsKeepTheServesLimit() async throws {
        let fixture = try await ServeFixture()
        #expect(try await fixture.run(["limit", "lg", "1"]).status == 0)
        let plain = try fixture.scratch.write("plain.toml", """
            [groups.lg]
            [[job]]
            group = "lg"
            command = "true"
            """)
        #expect(try await fixture.run(["submit", plain]).status == 0)
        /// The group's limit as `status --json` says it.
        func limit() async throws -> Int? { try await fixture.group("lg")?["limit"] as? Int }
        // It lifted the limit.
        #expect(try await limit() == 1)
        let three = try fixture.scratch.write("three.toml", """
            [groups.lg]
            parallel = 3
            [[job]]
            group = "lg"
            command = "true"
            """)
        #expect(try await fixture.run(["submit", three]).status == 0)
        #expect(try await limit() == 3)
        try await fixture.stop()
    }

    @Test("a job file's [groups] table with paused = false resumes the group paused in the serve; one that does not say leaves it paused")
    func fileGroupsResumeWhenTheySaySo() async throws {
        let fixture = try await ServeFixture()
        #expect(try await fixture.run(["pause", "--group", "pg"]).status == 0)
        /// Whether the group is paused, as `status --json` says.
        func isPaused() async throws -> Bool? { try await fixture.group("pg")?["paused"] as? Bool }
        /// A job file with one job in group pg, whose table has `setting`.
        func file(_ name: String, _ setting: String) throws -> String {
            try fixture.scratch.write(name, "[groups.pg]\n\(setting)\n[[job]]\ngroup = \"pg\"\ncommand = \"true\"\n")
        }
        #expect(try await fixture.run(["submit", try file("silent.toml", "parallel = 2")]).status == 0)
        #expect(try await isPaused() == true)
        let resumes = try file("resumes.toml", "paused = false")
        let submitted = try await fixture.run(["submit", resumes])
        #expect(submitted.status == 0, "\(submitted.stderr)")
        let isResumed = try await isPaused() == false
        #expect(isResumed)
        // And its jobs run (waited for only then: paused, `wait` would not return).
        if isResumed {
            let waited = try await fixture.run(["wait"])
            #expect(waited.status == 0, "\(waited.stderr)")
        }
        try await fixture.stop()
    }

    @Test("the queue survives a restart of serve: queued and paused jobs come back, ids unchanged")
    func restart() async throws {
        let fixture = try await ServeFixture()
        _ = try await fixture.run(["pause"])
        let ids = try await fixture.run(["submit", "-c", "echo one", "-c", "echo two"]).lines
        #expect(try await fixture.stop()?.status == 0)
        let again = try JobtopProcess(["serve"], environment: fixture.environment, newSession: true)
        #expect(await eventually(within: .seconds(60)) { again.output.contains("listening on") })
        #expect(again.output.contains("restored 2 jobs"), "\(again.output)")
        let status = try await fixture.run(["status"])
        #expect(status.stdout.contains("2 queued") && status.stdout.contains("paused"), "\(status.stdout)")
        _ = try await fixture.run(["resume"])
        for id in ids { try await fixture.waitFor(id, "succeeded") }
        _ = try await fixture.run(["shutdown"])
        #expect(await again.wait(atMost: .seconds(60))?.status == 0)
    }

    @Test("clean forgets the groups left with no job and no setting, and a restart does not bring them back; one with a limit stays")
    func cleanForgetsEmptyGroups() async throws {
        let fixture = try await ServeFixture()
        #expect(try await fixture.run(["limit", "kept", "2"]).status == 0)
        let ids = try await fixture.run(["submit", "--group", "tmp", "-c", "true"]).lines
        try await fixture.waitFor(ids[0], "succeeded")
        func names() async throws -> [String] {
            try #require(try await fixture.report()["groups"] as? [[String: Any]]).compactMap { $0["name"] as? String }
        }
        #expect(try await names() == ["default", "kept", "tmp"])
        #expect(try await fixture.run(["clean"]).status == 0)
        #expect(try await names() == ["default", "kept"])
        #expect(try await fixture.stop()?.status == 0)
        let again = try JobtopProcess(["serve"], environment: fixture.environment, newSession: true)
        #expect(await eventually(within: .seconds(60)) { again.output.contains("listening on") })
        #expect(try await names() == ["default", "kept"])
        _ = try await fixture.run(["shutdown"])
        #expect(await again.wait(atMost: .seconds(60))?.status == 0)
    }

    @Test("cancel stops the job's whole process group; retry queues it again")
    func cancelAndRetry() async throws {
        let fixture = try await ServeFixture()
        let pidFile = fixture.scratch.file("child.pid")
        let submitted = try await fixture.run(["submit", "-c", "sleep 300 & echo $! > \(pidFile); wait"])
        let id = submitted.lines[0]
        try await fixture.waitFor(id, "running")
        #expect(await eventually { !pids(in: pidFile).isEmpty })
        let child = try #require(pids(in: pidFile).first)
        #expect(isRunning(child))

        let cancel = try await fixture.run(["cancel", id])
        #expect(cancel.status == 0, "\(cancel.stderr)")
        try await fixture.waitFor(id, "cancelled")
        #expect(await eventually { !isRunning(child) }, "the background sleep of the job's group ended too")

        let again = try await fixture.run(["cancel", id])
        #expect(again.status == 1)
        #expect(again.stderr.contains("has already ended"))

        let retry = try await fixture.run(["retry", id])
        #expect(retry.status == 0)
        try await fixture.waitFor(id, "running")
        _ = try await fixture.run(["cancel", id])
        try await fixture.stop()
    }

    @Test("cancel of a running job and the queued ones behind it starts none of those in the slot it frees")
    func cancelSeveral() async throws {
        let fixture = try await ServeFixture(["-j", "1"])
        let (b, c) = (fixture.scratch.file("b-ran"), fixture.scratch.file("c-ran"))
        let ids = try await fixture.run(["submit", "-c", "sleep 100", "-c", "touch \(b); sleep 100", "-c", "touch \(c); sleep 100"]).lines
        try await fixture.waitFor(ids[0], "running")
        let cancel = try await fixture.run(["cancel"] + ids)
        #expect(cancel.status == 0, "\(cancel.stderr)")
        for id in ids { try await fixture.waitFor(id, "cancelled") }
        #expect(!FileManager.default.fileExists(atPath: b) && !FileManager.default.fileExists(atPath: c), "a cancelled queued job ran")
        // Ended ones are refused by name, the others still cancelled: exit 1.
        let later = try await fixture.run(["submit", "-c", "sleep 100"]).lines[0]
        let mixed = try await fixture.run(["cancel", ids[1], later])
        // The message names the job once ("jobtop: 1f2e3d4c: job 1f2e3d4c has ..." said it twice).
        #expect(mixed.status == 1 && mixed.stderr.contains("jobtop: job \(String(ids[1].prefix(8))) has already ended"), "\(mixed.stderr)")
        try await fixture.waitFor(later, "cancelled")
        // A named job's name goes first: the user may have typed it.
        let named = try await fixture.run(["submit", "--name", "nap", "-c", "true"]).lines[0]
        try await fixture.waitFor(named, "succeeded")
        let byName = try await fixture.run(["cancel", "nap"])
        #expect(byName.status == 1 && byName.stderr == "jobtop: nap: job \(String(named.prefix(8))) has already ended (succeeded)\n", "\(byName.stderr)")
        try await fixture.stop()
    }

    @Test("cancel, wait and retry of a long list of ids (parsed apart from the rest): every id counts, a bad one deep in the list is named")
    func longListsOfIds() async throws {
        let fixture = try await ServeFixture(["-j", "1"])
        #expect(try await fixture.run(["pause"]).status == 0)
        try fixture.scratch.write("list", (0..<300).map { "true #\($0)\n" }.joined())
        let ids = try await fixture.run(["submit", "list"]).lines
        try #require(ids.count == 300)
        // One unknown id near the end: nothing is done, and it is named.
        var wrong = ids
        wrong[290] = "nosuchjob"
        let refused = try await fixture.run(["cancel"] + wrong)
        #expect(refused.status == 2 && refused.stderr.contains("no job 'nosuchjob'"), "\(refused.stderr)")
        #expect(try await fixture.jobs().filter { ($0["state"] as? String) == "queued" }.count == 300)
        // All of them, by their short forms.
        let short = ids.map { String($0.prefix(8)) }
        let cancel = try await fixture.run(["cancel"] + short)
        #expect(cancel.status == 0, "\(cancel.stderr)")
        let states = try await fixture.jobs().map { $0["state"] as? String }
        #expect(states.count == 300 && states.allSatisfy { $0 == "cancelled" }, "\(states)")
        // wait of all of them: cancelled, so 1; and it waited for no job it was not given.
        let wait = try await fixture.run(["wait"] + short)
        #expect(wait.status == 1, "\(wait.stderr)")
        #expect(try await fixture.run(["retry"] + ids).status == 0)
        #expect(try await fixture.jobs().filter { ($0["state"] as? String) == "queued" }.count == 300)
        try await fixture.stop()
    }

    @Test("log of a job retried by hand: a marker line where the new run begins (its attempts count from 1 again)")
    func retriedByHandInTheLog() async throws {
        let fixture = try await ServeFixture()
        let id = try await fixture.run(["submit", "-c", "echo run; exit 1"]).lines[0]
        try await fixture.waitFor(id, "failed")
        #expect(try await fixture.run(["retry", id]).status == 0)
        // The second run has ended once the log has its line (the job is failed again).
        var log = try await fixture.run(["log", id])
        _ = await eventually {
            log = (try? await fixture.run(["log", id])) ?? log
            return log.lines.count >= 3
        }
        #expect(log.lines == ["run", "--- jobtop: retried by hand ---", "run"], "\(log.stdout)")
        try await fixture.waitFor(id, "failed")
        try await fixture.stop()
    }

    @Test("shutdown --drain of a paused serve says what it waits for (and a scheduled job's time); resume lets the drain end")
    func drainWhilePaused() async throws {
        let fixture = try await ServeFixture()
        _ = try await fixture.run(["pause"])
        #expect(try await fixture.run(["submit", "-c", "true"]).status == 0)
        let later = try await fixture.run(["submit", "--delay", "1h", "-c", "true"]).lines[0]
        let drain = try fixture.start(["shutdown", "--drain"])
        #expect(await eventually { drain.output.contains("the serve is paused: the drain waits until 'jobtop resume'") }, "\(drain.output)")
        // A scheduled job is waited for too: said, with how long (it waited an hour silently).
        // An hour less the moments since the submit: "59m59s", or "1h" once rounded (a fast machine).
        #expect(await eventually {
            drain.output.contains("the drain also runs 1 scheduled job at its time (the last in 59m")
                || drain.output.contains("the drain also runs 1 scheduled job at its time (the last in 1h)")
        }, "\(drain.output)")
        _ = try await fixture.run(["cancel", later])
        _ = try await fixture.run(["resume"])
        let stopped = await drain.wait()
        #expect(stopped.status == 0, "\(stopped.stderr)")
        #expect(fixture.serve.output.contains("stopped"))
    }

    @Test("prio reorders the queue; pause and resume hold and release it")
    func prioPauseResume() async throws {
        let fixture = try await ServeFixture(["-j", "1"])
        let blocker = try await fixture.run(["submit", "-c", "sleep 300"]).lines[0]
        try await fixture.waitFor(blocker, "running")
        let ids = try await fixture.run(["submit", "-c", "echo first", "-c", "echo second"]).lines
        let prio = try await fixture.run(["prio", ids[1], "10"])
        #expect(prio.status == 0, "\(prio.stderr)")
        let queued = try await fixture.jobs().filter { ($0["state"] as? String) == "queued" }.compactMap { $0["short"] as? String }
        #expect(queued == [ids[1], ids[0]])
        // A negative priority is a value, not an option (with or without `--`).
        for arguments in [["prio", ids[1], "-5"], ["prio", ids[1], "--", "-5"]] {
            let lowered = try await fixture.run(arguments)
            #expect(lowered.status == 0, "\(arguments): \(lowered.stderr)")
        }
        #expect(try await fixture.jobs().first { ($0["short"] as? String) == ids[1] }?["priority"] as? Int == -5)
        // `+5` reads as a change but would set 5: refused, saying so.
        let plus = try await fixture.run(["prio", ids[1], "+5"])
        #expect(plus.status == 2)
        #expect(plus.stderr.contains("the priority is the new value, not a change: '+5' would set 5"), "\(plus.stderr)")
        _ = try await fixture.run(["prio", ids[1], "10"])

        let pause = try await fixture.run(["pause"])
        #expect(pause.status == 0)
        #expect(try await fixture.run(["status"]).stdout.contains("paused"))
        _ = try await fixture.run(["cancel", blocker])
        try await fixture.waitFor(blocker, "cancelled")
        #expect(try await fixture.state(of: ids[0]) == "queued", "nothing starts while paused")
        _ = try await fixture.run(["resume"])
        try await fixture.waitFor(ids[0], "succeeded")
        try await fixture.waitFor(ids[1], "succeeded")

        let pausedNew = try await fixture.run(["pause", "--group", "slow"])
        #expect(pausedNew.status == 0)
        #expect(pausedNew.stderr.contains("group 'slow' is new"), "a group no job is in may be a typo: \(pausedNew.stderr)")
        for arguments in [["pause", "--group", ""], ["submit", "-c", "true", "--group", "a b"]] {
            let refused = try await fixture.run(arguments)
            #expect(refused.status == 2, "\(arguments): bad usage, \(refused.stderr)")
        }
        let grouped = try await fixture.run(["submit", "--group", "slow", "-c", "true"]).lines[0]
        // A group the serve has (paused above) is not new; a misspelt one is said to be.
        let misspelt = try await fixture.run(["submit", "--group", "slwo", "-c", "true"])
        #expect(misspelt.stderr.contains("group 'slwo' is new (no job was in it before); no limit or pause of its own"), "\(misspelt.stderr)")
        #expect(try await fixture.run(["submit", "--group", "slwo", "-c", "true"]).stderr.isEmpty)
        let other = try await fixture.run(["submit", "-c", "true"]).lines[0]
        try await fixture.waitFor(other, "succeeded")
        #expect(try await fixture.state(of: grouped) == "queued")
        _ = try await fixture.run(["resume", "--group", "slow"])
        try await fixture.waitFor(grouped, "succeeded")
        try await fixture.stop()
    }

    @Test("limit holds a group to N jobs at once and 'none' lifts it; bad input exits 2")
    func groupLimit() async throws {
        let fixture = try await ServeFixture(["-j", "3"])
        let go = fixture.scratch.file("go")
        let set = try await fixture.run(["limit", "g", "1"])
        #expect(set.status == 0, "\(set.stderr)")
        #expect(set.stdout == "group g: limit 1; 0 running, 0 queued, 0 held\n")
        #expect(set.stderr.contains("group 'g' is new (no job was in it before)"), "\(set.stderr)")
        // The group exists now, with no job in it: a new limit is not said to make it (it was,
        // every time).
        let again = try await fixture.run(["limit", "g", "1"])
        #expect(again.status == 0 && again.stderr.isEmpty, "\(again.stderr)")
        let ids = try await fixture.run([
            "submit", "--group", "g", "-c", "while [ ! -f \(go) ]; do sleep 0.02; done", "-c", "while [ ! -f \(go) ]; do sleep 0.02; done",
        ]).lines
        try await fixture.waitFor(ids[0], "running")
        // Three free slots, one dispatch for both: without the limit the second runs already.
        #expect(try await fixture.state(of: ids[1]) == "queued")
        #expect(try await fixture.run(["status"]).stdout.contains("group g: limit 1; 1 running, 1 queued"))

        let lift = try await fixture.run(["limit", "g", "none"])
        #expect(lift.status == 0, "\(lift.stderr)")
        #expect(lift.stdout.hasPrefix("group g: no limit;") && lift.stderr.isEmpty, "\(lift.stdout)\(lift.stderr)")
        try await fixture.waitFor(ids[1], "running")
        #expect(try await fixture.run(["status"]).stdout.contains("group g: no limit; 2 running"))

        for (arguments, message) in [
            (["limit", "g", "0"], "at least 1, or 'none', not '0'"), (["limit", "g", "two"], "not 'two'"), (["limit", "g", "-1"], "not '-1'"),
            (["limit", "", "2"], "a group name cannot be empty"), (["limit", "g"], "Missing expected argument '<n>'"),
        ] {
            let refused = try await fixture.run(arguments)
            #expect(refused.status == 2, "\(arguments)")
            #expect(refused.stderr.contains(message), "\(arguments): \(refused.stderr)")
        }
        try Data().write(to: URL(fileURLWithPath: go))
        for id in ids { try await fixture.waitFor(id, "succeeded") }
        try await fixture.stop()
    }

    @Test("wait ends when the jobs named end, or every job not ended yet; 1 when one of them failed")
    func waitForJobs() async throws {
        let fixture = try await ServeFixture(["-j", "2"])
        let nothing = try await fixture.run(["wait"])
        #expect(nothing.status == 0 && nothing.stdout.isEmpty, "\(nothing.stderr)")
        let go = fixture.scratch.file("go")
        let gate = "while [ ! -f \(go) ]; do sleep 0.02; done"
        let good = try await fixture.run(["submit", "-c", gate]).lines[0]
        let bad = try await fixture.run(["submit", "-c", "\(gate); exit 4"]).lines[0]
        let waitGood = try fixture.start(["wait", good])
        let waitBoth = try fixture.start(["wait", good, bad])
        let waitAll = try fixture.start(["wait"])
        // Each is listening (and the no-id one has taken the two jobs) before the jobs can end.
        for waiter in [waitGood, waitBoth, waitAll] { _ = await waiter.firstLine { $0.hasPrefix("waiting for") } }
        #expect(waitAll.output.contains("waiting for 2 jobs"))
        try Data().write(to: URL(fileURLWithPath: go))
        let (goodEnd, bothEnd, allEnd) = (await waitGood.wait(), await waitBoth.wait(), await waitAll.wait())
        #expect(goodEnd.status == 0, "\(goodEnd.stderr)")
        #expect(bothEnd.status == 1, "\(bothEnd.stderr)")
        #expect(allEnd.status == 1, "\(allEnd.stderr)")
        #expect(try await fixture.state(of: good) == "succeeded")
        // Already ended: settled at once, with the job's outcome; an unknown id is bad usage.
        let ended = try await fixture.run(["wait", bad])
        #expect(ended.status == 1 && ended.stdout.isEmpty, "\(ended.stdout)")
        #expect(try await fixture.run(["wait", "nosuchjob"]).status == 2)
        // An ended job named beside one still to end is not counted as waited for.
        let third = try await fixture.run(["submit", "-c", "while [ ! -f \(go)2 ]; do sleep 0.02; done"]).lines[0]
        let mixed = try fixture.start(["wait", good, third])
        let said = await mixed.firstLine { $0.hasPrefix("waiting for") }
        #expect(said == "waiting for 1 job (1 already ended)", "\(said ?? "nothing")")
        try Data().write(to: URL(fileURLWithPath: go + "2"))
        #expect(await mixed.wait().status == 0)
        try await fixture.stop()
    }

    @Test("edit gives a waiting job a new command, retries a failed one with it, and refuses a running one")
    func editCommand() async throws {
        let fixture = try await ServeFixture(["-j", "1"])
        let go = fixture.scratch.file("go")
        let blocker = try await fixture.run(["submit", "-c", "while [ ! -f \(go) ]; do sleep 0.02; done"]).lines[0]
        try await fixture.waitFor(blocker, "running")
        let queued = try await fixture.run(["submit", "--name", "later", "-c", "echo old"]).lines[0]
        let edit = try await fixture.run(["edit", "later", "echo new"])
        #expect(edit.status == 0, "\(edit.stderr)")
        let running = try await fixture.run(["edit", blocker, "true"])
        #expect(running.status == 1 && running.stderr.contains("cancel it first"), "\(running.stderr)")
        #expect(try await fixture.run(["edit", queued, " "]).status == 2)
        try Data().write(to: URL(fileURLWithPath: go))
        #expect(try await fixture.run(["wait", queued]).status == 0)
        #expect(try await fixture.run(["log", queued]).stdout == "new\n")

        let failed = try await fixture.run(["submit", "-c", "exit 3"]).lines[0]
        #expect(try await fixture.run(["wait", failed]).status == 1)
        #expect(try await fixture.run(["edit", failed, "echo fixed"]).status == 0)
        #expect(try await fixture.run(["wait", failed]).status == 0)
        #expect(try await fixture.run(["log", failed]).stdout.hasSuffix("fixed\n"))
        try await fixture.stop()
    }

    @Test("follow prints the output from the start, then as it comes, exactly once, and exits with the job's outcome")
    func follow() async throws {
        let fixture = try await ServeFixture()
        let go = fixture.scratch.file("go")
        let id = try await fixture.run([
            "submit", "-c", "echo early; while [ ! -f \(go) ]; do echo tick; sleep 0.05; done; echo last-line; exit 4",
        ]).lines[0]
        // The first line is written before follow starts: follow must show it (the past part).
        var logged = ""
        for _ in 0..<1_000 where !logged.hasPrefix("early\ntick\n") {
            logged = try await fixture.run(["log", id]).stdout
        }
        #expect(logged.hasPrefix("early\ntick\n"))
        let follower = try fixture.start(["follow", id])
        let ticked = await follower.firstLine { $0 == "tick" }
        #expect(ticked != nil)
        _ = FileManager.default.createFile(atPath: go, contents: nil)
        let outcome = try #require(await follower.wait(atMost: .seconds(60)))
        #expect(outcome.status == 1)
        #expect(outcome.stdout.hasPrefix("early\ntick\n"))
        #expect(outcome.stdout.hasSuffix("tick\nlast-line\n"))
        let log = try await fixture.run(["log", id]).stdout
        #expect(outcome.stdout == log, "follow showed every line once: what the log holds")

        let done = try await fixture.run(["follow", id])
        #expect(done.status == 1, "a job that has ended: its outcome at once")
        #expect(done.stdout == log, "and its whole output")
        #expect(done.stderr == "jobtop: \(id) failed\n", "its end said on stderr")
        // A skipped job has no output: stderr says why it ended (it said nothing).
        let dependent = try await fixture.run(["submit", "--after", id, "-c", "true"]).lines[0]
        let skipped = try await fixture.run(["follow", dependent])
        #expect(skipped.status == 1)
        #expect(skipped.stderr == "jobtop: \(dependent) was skipped ('jobtop log \(dependent)' says why)\n", "\(skipped.stderr)")
        let unknown = try await fixture.run(["follow", "zzzz"])
        #expect(unknown.status == 2)
        // A job that has not begun: why nothing comes is said (it printed nothing for as long
        // as it waited).
        _ = try await fixture.run(["pause"])
        let waiting = try await fixture.run(["submit", "-c", "echo at-last"]).lines[0]
        let patient = try fixture.start(["follow", waiting])
        #expect(await eventually(within: .seconds(60)) { patient.output.contains("jobtop: \(waiting) is queued; its output follows once it runs") }, "\(patient.output)")
        _ = try await fixture.run(["resume"])
        let followed = try #require(await patient.wait(atMost: .seconds(60)))
        #expect(followed.status == 0 && followed.stdout == "at-last\n", "\(followed.stdout)")
        // An id with an escape sequence and a newline is echoed as one line, escaped (it was
        // written raw: the terminal acted on it).
        for command in ["log", "cancel"] {
            let odd = try await fixture.run([command, "ab\u{1B}[2J\ncd"])
            #expect(odd.status == 2)
            #expect(odd.stderr == "jobtop: no job 'ab\\u{1B}[2J\\ncd' (give its id, a unique prefix of it, or its name; see 'jobtop status --all')\n", "\(odd.stderr)")
        }
        try await fixture.stop()
    }

    @Test("submit --wait and --after; job names resolve; an ambiguous prefix lists the candidates")
    func referencesAndWait() async throws {
        let fixture = try await ServeFixture()
        let file = try fixture.scratch.write("jobs.toml", """
            [[job]]
            name = "build"
            command = "true"
            """)
        let named = try await fixture.run(["submit", file, "--json"])
        #expect(named.status == 0, "\(named.stderr)")
        // Every key, a missing name as null (it was left out).
        let unnamed = try await fixture.run(["submit", "--json", "-c", "true"])
        let record = try #require((try JSONSerialization.jsonObject(with: Data(unnamed.stdout.utf8)) as? [[String: Any]])?.first)
        #expect(Set(record.keys) == ["id", "short", "name"] && record["name"] is NSNull, "\(unnamed.stdout)")
        let waited = try await fixture.run(["submit", "--after", "build", "--wait", "-c", "exit 0"])
        #expect(waited.status == 0, "\(waited.stderr)")
        let failed = try await fixture.run(["submit", "--wait", "-c", "exit 5"])
        #expect(failed.status == 1)
        // Which one, and how (it exited 1 without a word).
        #expect(failed.stderr.contains("jobtop: 1 job did not succeed: \(failed.lines[0]) (failed: exit 5)"), "\(failed.stderr)")
        // wait names it too, ended before it began.
        let waitedFailed = try await fixture.run(["wait", failed.lines[0]])
        #expect(waitedFailed.status == 1 && waitedFailed.stderr.contains("did not succeed: \(failed.lines[0]) (failed: exit 5)"), "\(waitedFailed.stderr)")

        // 20 jobs: two of them share a first hex digit.
        let many = try await fixture.run(["submit"] + (0..<20).flatMap { ["-c", "true # \($0)"] })
        var byFirst: [Character: Int] = [:]
        for id in many.lines { byFirst[id.first!, default: 0] += 1 }
        let shared = try #require(byFirst.first { $0.value > 1 }?.key)
        let ambiguous = try await fixture.run(["cancel", String(shared)])
        #expect(ambiguous.status == 2)
        #expect(ambiguous.stderr.contains("'\(shared)' matches"), "\(ambiguous.stderr)")
        let unknown = try await fixture.run(["log", "nosuchjob"])
        #expect(unknown.status == 2)
        #expect(unknown.stderr.contains("no job 'nosuchjob'"))
        let byName = try await fixture.run(["log", "build"])
        #expect(byName.status == 0)
        try await fixture.stop()
    }

    @Test("submit - refuses on a pipe what it refuses from a file: a NUL byte, an over-long command; nothing is submitted")
    func submitFromAPipeChecksEveryLine() async throws {
        let fixture = try await ServeFixture()
        let long = String(repeating: "x", count: 140_000)
        for (list, message) in [
            ("echo a\nec\u{0}ho b\n", "standard input:2: the command contains a NUL byte"),
            ("echo zz\u{0}\n", "standard input:1: the command contains a NUL byte"),
            ("echo a\necho \(long)\n", "standard input:2: the command is 140,005 bytes"),
        ] {
            let client = try JobtopProcess(["submit", "-"], directory: fixture.scratch.path, stdinPipe: true, environment: fixture.environment)
            client.writeStdin(list)
            client.closeStdin()
            let outcome = await client.wait()
            #expect(outcome.status == 2, "\(outcome.stderr)")
            #expect(outcome.stderr.contains(message), "\(outcome.stderr)")
        }
        #expect(try await fixture.jobs().isEmpty, "nothing was submitted")
        try await fixture.stop()
    }

    @Test("without a serve, a client says so in one line and exits 3")
    func noServe() async throws {
        let scratch = try Scratch()
        let outcome = try await JobtopProcess(["status"], environment: ["XDG_RUNTIME_DIR": scratch.file("run")]).wait()
        #expect(outcome.status == 3)
        #expect(outcome.stderr.split(separator: "\n").count == 1)
        #expect(outcome.stderr.contains("no jobtop serve is running") && outcome.stderr.contains("jobtop serve"))
    }

    @Test("a socket no serve answers at (a stale one): the client says so, with the reason, and exits 3")
    func staleSocket() async throws {
        let scratch = try Scratch()
        let directory = scratch.file("run/jobtop")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // Bound but never listening: what a serve killed with -9 leaves behind.
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let path = Array((directory + "/serve.sock").utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: path + [0]) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        try #require(bound == 0)
        let outcome = try await JobtopProcess(["submit", "-c", "true"], environment: ["XDG_RUNTIME_DIR": scratch.file("run")]).wait()
        #expect(outcome.status == 3)
        #expect(outcome.stderr == "jobtop: no jobtop serve answers at \(directory)/serve.sock (connection refused); start one with 'jobtop serve'\n")
    }

    @Test("a second serve on the same socket is refused before it makes a state directory; a stale socket is replaced")
    func secondServe() async throws {
        let fixture = try await ServeFixture()
        let second = try await JobtopProcess(["serve"], environment: fixture.environment).wait()
        #expect(second.status == 1)
        #expect(second.stderr.contains("already running"), "the socket: \(second.stderr)")
        let otherState = try await JobtopProcess(
            ["serve", "--state-dir", fixture.scratch.file("other-state")], environment: fixture.environment).wait()
        #expect(otherState.status == 1)
        #expect(otherState.stderr.contains("already running"), "the socket: \(otherState.stderr)")
        #expect(!FileManager.default.fileExists(atPath: fixture.scratch.file("other-state")), "a refused serve made its state directory")
        // On another socket, the state directory's lock refuses it.
        var otherSocket = fixture.environment
        otherSocket["XDG_RUNTIME_DIR"] = fixture.scratch.file("run-2")
        let sameState = try await JobtopProcess(["serve"], environment: otherSocket).wait()
        #expect(sameState.status == 1)
        #expect(sameState.stderr.contains("another jobtop serve"), "the state directory's lock: \(sameState.stderr)")
        #expect(try await fixture.run(["status"]).status == 0, "the first one still serves")

        fixture.serve.send(SIGKILL)
        _ = await fixture.serve.wait()
        #expect(FileManager.default.fileExists(atPath: fixture.socketPath), "a killed serve leaves its socket")
        let replacement = try JobtopProcess(["serve"], environment: fixture.environment, newSession: true)
        #expect(await eventually(within: .seconds(60)) { replacement.output.contains("listening on") })
        #expect(try await fixture.run(["status"]).status == 0)
        _ = try await fixture.run(["shutdown"])
        #expect(await replacement.wait(atMost: .seconds(60))?.status == 0)
    }

    @Test("SIGHUP leaves serve running; SIGTERM lets the running job finish, then serve exits 0")
    func signals() async throws {
        let fixture = try await ServeFixture()
        let go = fixture.scratch.file("go")
        let id = try await fixture.run(["submit", "-c", "while [ ! -f \(go) ]; do sleep 0.05; done"]).lines[0]
        try await fixture.waitFor(id, "running")
        fixture.serve.send(SIGHUP)
        #expect(try await fixture.run(["status"]).status == 0, "still serving after SIGHUP")
        fixture.serve.send(SIGTERM)
        #expect(await eventually { fixture.serve.output.contains("starting nothing new") })
        #expect(try await fixture.state(of: id) == "running", "the running job goes on")
        _ = FileManager.default.createFile(atPath: go, contents: nil)
        let outcome = await fixture.serve.wait(atMost: .seconds(60))
        #expect(outcome?.status == 0)
        #expect(!FileManager.default.fileExists(atPath: fixture.socketPath))
    }

    @Test("wait, submit --wait and follow say the serve went away (3) when a second SIGINT stops it: its cancel is not the job's end (they said 1 for a job its next start then ran)")
    func waitThroughAServeStoppedTwice() async throws {
        let fixture = try await ServeFixture()
        let id = try await fixture.run(["submit", "-c", "echo begun; sleep 300"]).lines[0]
        try await fixture.waitFor(id, "running")
        let wait = try fixture.start(["wait", id])
        let follow = try fixture.start(["follow", id])
        let submitWait = try fixture.start(["submit", "--wait", "-c", "sleep 300"])
        #expect(await eventually { wait.output.contains("waiting for 1 job") })
        #expect(await eventually { follow.output.contains("begun") })
        // Both jobs running (the second submitted and waited for).
        #expect(await eventually { ((try? await fixture.jobs()) ?? []).filter { $0["state"] as? String == "running" }.count == 2 })
        fixture.serve.send(SIGINT)
        #expect(await eventually { fixture.serve.output.contains("starting nothing new") })
        fixture.serve.send(SIGINT)
        for client in [wait, submitWait] {
            let outcome = await client.wait()
            #expect(outcome.status == 3, "\(outcome.stderr)")
            #expect(outcome.stderr.contains("jobtop serve went away before the jobs ended"), "\(outcome.stderr)")
        }
        let followed = await follow.wait()
        #expect(followed.status == 3, "\(followed.stderr)")
        #expect(followed.stderr.contains("jobtop serve went away before \(id.prefix(8)) ended"), "\(followed.stderr)")
        _ = await fixture.serve.wait(atMost: .seconds(60))
    }

    @Test("shutdown --now stops the running job's process group at once and keeps the queue: the next serve runs it again (the stopped attempt uncounted: it failed a job with no retries for good); --drain with --now is refused")
    func shutdownNow() async throws {
        let fixture = try await ServeFixture(["-j", "1"])
        let both = try await fixture.run(["shutdown", "--drain", "--now"])
        #expect(both.status == 2 && both.stderr.contains("give one of them"), "\(both.stderr)")
        let pidFile = fixture.scratch.file("pid")
        // The shell and its sleep write their pids; the second attempt succeeds at once.
        let command = "[ -e '\(pidFile)' ] && { echo again; exit 0; }; echo first; echo $$ > '\(pidFile)'; sleep 300 & echo $! >> '\(pidFile)'; wait"
        let long = try await fixture.run(["submit", "-c", command]).lines[0]
        let queued = try await fixture.run(["submit", "-c", "true"]).lines[0]
        #expect(await eventually(within: .seconds(60)) { JobtopTestSupport.pids(in: pidFile).count == 2 })
        let stopped = try await fixture.run(["shutdown", "--now"])
        #expect(stopped.status == 0, "\(stopped.stderr)")
        #expect(await fixture.serve.wait(atMost: .seconds(60))?.status == 0)
        // Its whole process group is gone, the sleep with the shell.
        let pids = JobtopTestSupport.pids(in: pidFile)
        #expect(await eventually(within: .seconds(60)) { pids.allSatisfy { !isRunning($0) } })

        let again = try JobtopProcess(["serve", "-j", "1"], directory: fixture.scratch.path, environment: fixture.environment, newSession: true)
        defer { again.send(SIGKILL) }
        #expect(await eventually(within: .seconds(60)) { again.output.contains("listening on") })
        #expect(again.output.contains("restored 2 jobs"), "\(again.output)")
        let waited = try await fixture.run(["wait", long, queued])
        #expect(waited.status == 0, "\(waited.stderr)")
        let report = try await fixture.report(["--all"])
        let jobs = try #require(report["jobs"] as? [[String: Any]])
        let record = try #require(jobs.first { ($0["short"] as? String) == long })
        #expect(record["attempts"] as? Int == 1, "\(record)")
        #expect(record["state"] as? String == "succeeded", "\(record)")
        // Its output file marks where the run after the stop begins (it had no mark between the two)
        let log = try await fixture.run(["log", long])
        #expect(log.lines == ["first", OutputLine.shutdownStopSeparator, "again"], "\(log.stdout)")
        _ = try await fixture.run(["shutdown"])
        #expect(await again.wait(atMost: .seconds(60))?.status == 0)
    }

    @Test("submit says which jobs joined a job with the same key instead of being made (the joined job's id was printed as if new, without a word)")
    func submitSaysWhatJoined() async throws {
        let fixture = try await ServeFixture(["-j", "1"])
        try fixture.scratch.write("first.toml", "[[job]]\nname = \"k1\"\nkey = \"x\"\ncommand = \"sleep 300\"\n")
        try fixture.scratch.write("second.toml", """
            [[job]]
            name = "k2"
            key = "x"
            command = "true"

            [[job]]
            name = "k3"
            key = "y"
            command = "true"

            [[job]]
            name = "k4"
            key = "y"
            command = "true"
            """)
        let first = try await fixture.run(["submit", "first.toml"])
        try await fixture.waitFor(first.lines[0], "running")
        let second = try await fixture.run(["submit", "second.toml"])
        #expect(second.status == 0, "\(second.stderr)")
        #expect(second.lines.count == 3 && second.lines[0] == first.lines[0] && second.lines[1] == second.lines[2], "\(second.stdout)")
        #expect(second.stderr.contains("jobtop: job 1 (k2) has the key 'x' of \(first.lines[0]) (k1), running: it joined that job, whose id is printed"), "\(second.stderr)")
        #expect(second.stderr.contains("jobtop: job 3 (k4) has the key 'y' of job 2 of this submission: it joined it (\(second.lines[1]))"), "\(second.stderr)")
        #expect(second.lines[1].count == 8, "one job given twice is printed short (it was printed whole): \(second.stdout)")
        #expect(!second.stderr.contains("job 2 (k3)"), "\(second.stderr)")
        _ = try await fixture.run(["shutdown", "--now"])
        _ = await fixture.serve.wait(atMost: .seconds(60))
    }

    @Test("shutdown --drain while a plain shutdown is under way says it changes nothing and exits 1 once the serve stops (it promised to run the scheduled job, which never ran)")
    func weakerShutdownSaysSo() async throws {
        let fixture = try await ServeFixture(["-j", "1"])
        let go = fixture.scratch.file("go")
        let running = try await fixture.run(["submit", "-c", "while [ ! -e '\(go)' ]; do sleep 0.05; done"]).lines[0]
        _ = try await fixture.run(["submit", "--delay", "1h", "-c", "echo later"])
        try await fixture.waitFor(running, "running")
        // A plain shutdown, as SIGTERM asks it.
        fixture.serve.send(SIGTERM)
        #expect(await eventually(within: .seconds(60)) { fixture.serve.output.contains("starting nothing new") }, "\(fixture.serve.output)")
        // The drain waits for the serve's end, the running job's, which may end once it is told.
        let drain = try JobtopProcess(["shutdown", "--drain"], directory: fixture.scratch.path, environment: fixture.environment)
        #expect(await eventually(within: .seconds(60)) { drain.output.contains("under way") }, "\(drain.output)")
        _ = FileManager.default.createFile(atPath: go, contents: nil)
        let second = await drain.wait()
        #expect(second.status == 1, "\(second.stderr)")
        #expect(second.stderr.contains("a shutdown is under way already (running jobs finish), and it goes on as it is"), "\(second.stderr)")
        #expect(!second.stderr.contains("the drain also runs"), "\(second.stderr)")
        _ = await fixture.serve.wait(atMost: .seconds(60))
    }

    @Test("What a job prints while a second SIGTERM stops the serve (its trap's last words) is in its output after the restart (it was lost)")
    func outputWhileStoppedTwiceIsKept() async throws {
        let fixture = try await ServeFixture()
        let id = try await fixture.run(["submit", "-c", "trap 'echo bye; exit 1' TERM; echo hi; sleep 300 & wait"]).lines[0]
        try await fixture.waitFor(id, "running")
        #expect(await eventually { ((try? await fixture.run(["log", id]))?.stdout ?? "").contains("hi") })
        fixture.serve.send(SIGTERM)
        #expect(await eventually { fixture.serve.output.contains("starting nothing new") })
        fixture.serve.send(SIGTERM)
        _ = await fixture.serve.wait(atMost: .seconds(60))
        let again = try JobtopProcess(["serve", "-j", "1"], environment: fixture.environment, newSession: true)
        defer { again.send(SIGKILL) }
        #expect(await eventually(within: .seconds(60)) { again.output.contains("listening on") })
        // (It runs again there, as its attempt was stopped: its first words come after.)
        let log = try await fixture.run(["log", id])
        #expect(log.stdout.hasPrefix("hi\nbye\n"), "\(log.stdout)")
        _ = try await fixture.run(["cancel", id])
        _ = try await fixture.run(["shutdown"])
        #expect(await again.wait(atMost: .seconds(60))?.status == 0)
    }

    @Test("the socket is private: 0700 directory, 0600 socket; another user cannot connect")
    func otherUserRefused() async throws {
        let fixture = try await ServeFixture()
        var info = stat()
        #expect(stat(fixture.runtimeDirectory + "/jobtop", &info) == 0 && info.st_mode & 0o777 == 0o700)
        #expect(stat(fixture.socketPath, &info) == 0 && info.st_mode & 0o777 == 0o600)
        // The test directory must be reachable by nobody for the refusal to be the socket's.
        chmod(fixture.scratch.path, 0o755)
        chmod(fixture.runtimeDirectory, 0o755)
        let asNobody = ["--reuid=nobody", "--regid=nogroup", "--clear-groups", JobtopProcess.binary, "status"]
        let refused = try await JobtopProcess(asNobody, environment: fixture.environment, executable: "/usr/bin/setpriv").wait()
        #expect(refused.status == 3, "\(refused.stderr)")
        #expect(refused.stderr.contains("permission denied"), "\(refused.stderr)")

        // Even with the modes opened up, the serve checks the peer's uid.
        chmod(fixture.runtimeDirectory + "/jobtop", 0o777)
        chmod(fixture.socketPath, 0o777)
        let peerChecked = try await JobtopProcess(asNobody, environment: fixture.environment, executable: "/usr/bin/setpriv").wait()
        #expect(peerChecked.status == 3, "\(peerChecked.stdout) \(peerChecked.stderr)")
        #expect(try await fixture.run(["status"]).status == 0, "its own user still gets in")
        try await fixture.stop()
    }

    @Test("--listen serves the same on TCP behind the token")
    func tcpWithToken() async throws {
        let fixture = try await ServeFixture(
            ["-j", "1", "--listen", "127.0.0.1:0", "--token-file", "token"], files: ["token": "sesame-\(UUID())\n", "wrong": "nope\n"])
        let address = try fixture.address(printedWith: "listening on")
        let viaTCP = try await fixture.run(["submit", "--connect", address, "--token-file", fixture.scratch.file("token"), "-c", "true"])
        #expect(viaTCP.status == 0, "\(viaTCP.stderr)")
        let wrong = try await fixture.run(["status", "--connect", address, "--token-file", fixture.scratch.file("wrong")])
        #expect(wrong.status == 3)
        #expect(wrong.stderr.contains("wrong token"), "\(wrong.stderr)")
        let none = try await fixture.run(["status", "--connect", address])
        #expect(none.status == 3)
        #expect(none.stderr.contains("requires a token"), "\(none.stderr)")
        try await fixture.stop()
    }

    @Test("A client given the workers' port, and a worker given the control port, each say which port it is in one line (a transport's words, and a worker that retried forever)")
    func wrongPorts() async throws {
        let fixture = try await ServeFixture(["-j", "1", "--listen", "127.0.0.1:0", "--workers", "127.0.0.1:0"])
        let control = try fixture.address(printedWith: "listening on")
        let workers = try fixture.address(printedWith: "accepting workers on")
        let client = try await fixture.run(["status", "--connect", workers])
        #expect(client.status == 3)
        #expect(client.stderr == "jobtop: what answers at \(workers) is not a jobtop serve's control port (a workers port, for 'jobtop worker --connect'? the serve's own is its --listen)\n", "\(client.stderr)")
        let worker = try await fixture.run(["worker", "--connect", control])
        #expect(worker.status == 1)
        #expect(worker.stderr.contains("what answers there is not a workers port"), "\(worker.stderr)")
        try await fixture.stop()
    }

    @Test("status counts a worker's own slots and its prefetch apart (a 2-slot worker with a prefetch of 1 showed as 3 slots), and a draining worker's neither (its prefetch was taken off again)")
    func statusSlotsAndPrefetch() async throws {
        let fixture = try await ServeFixture(["-j", "0", "--workers", "127.0.0.1:0", "--prefetch", "1"])
        let address = try fixture.address(printedWith: "accepting workers on")
        let worker = try fixture.start(["worker", "--connect", address, "--slots", "2", "--name", "w1"])
        #expect(await eventually { await fixture.statusText().contains("w1") })
        let text = try await fixture.run(["status"])
        #expect(text.lines.first?.hasSuffix("; 2 slots (+1 prefetched)") == true, "\(text.stdout)")
        let report = try await fixture.report()
        #expect(report["slots"] as? Int == 2 && report["prefetch"] as? Int == 1, "\(report)")
        let workers = try #require(report["workers"] as? [[String: Any]])
        #expect(workers.first?["slots"] as? Int == 2 && workers.first?["prefetch"] as? Int == 1, "\(workers)")
        #expect(workers.first?["draining"] as? Bool == false, "\(workers)")

        // When it drains with a job running, its slots leave the serve's, and its prefetch with
        // them (taken off twice, the serve's 0 slots read -1).
        let go = fixture.scratch.file("go")
        let submitted = try await fixture.run(["submit", "-c", "while [ ! -e '\(go)' ]; do sleep 0.05; done"])
        try #require(submitted.status == 0, "\(submitted.stderr)")
        #expect(await eventually { await fixture.statusText().contains("1 running") })
        worker.send(SIGTERM)
        #expect(await eventually { await fixture.statusText().contains("w1 draining (") })
        let draining = try await fixture.run(["status"])
        #expect(draining.lines.first?.hasSuffix("; 0 slots") == true, "\(draining.stdout)")
        let drained = try await fixture.report()
        #expect(drained["slots"] as? Int == 0 && drained["prefetch"] as? Int == 0, "\(drained)")
        #expect((drained["workers"] as? [[String: Any]])?.first?["draining"] as? Bool == true, "\(drained)")
        _ = FileManager.default.createFile(atPath: go, contents: nil)
        _ = await worker.wait()
        try await fixture.stop()
    }

    @Test("status says a job its worker holds is sent, not running, in the group's line and the JSON counts as in the header (the group line said 2 running, counts.running 2, for 1 running and 1 sent)")
    func statusCountsSentJobsApart() async throws {
        let fixture = try await ServeFixture(["-j", "0", "--workers", "127.0.0.1:0", "--prefetch", "1"])
        let address = try fixture.address(printedWith: "accepting workers on")
        let worker = try fixture.start(["worker", "--connect", address, "--slots", "1", "--name", "w1"])
        #expect(await eventually { await fixture.statusText().contains("w1") })
        let go = fixture.scratch.file("go")
        let submitted = try await fixture.run([
            "submit", "--group", "g", "-c", "while [ ! -e '\(go)' ]; do sleep 0.05; done", "-c", "echo second",
        ])
        try #require(submitted.status == 0, "\(submitted.stderr)")
        #expect(await eventually { await fixture.statusText().contains("1 running, 1 sent") })
        let text = try await fixture.run(["status"])
        #expect(text.lines.contains("group g: no limit; 1 running, 1 sent, 0 queued, 0 held"), "\(text.stdout)")
        let report = try await fixture.report()
        let counts = try #require(report["counts"] as? [String: Int])
        #expect(counts["running"] == 1 && counts["sent"] == 1, "\(counts)")
        let groups = try #require(report["groups"] as? [[String: Any]])
        let group = try #require(groups.first { $0["name"] as? String == "g" })
        #expect(group["running"] as? Int == 1 && group["sent"] as? Int == 1, "\(group)")
        let limited = try await fixture.run(["limit", "g", "2"])
        #expect(limited.stdout == "group g: limit 2; 1 running, 1 sent, 0 queued, 0 held\n", "\(limited.stdout)")
        _ = FileManager.default.createFile(atPath: go, contents: nil)
        let waited = try await fixture.run(["wait"])
        #expect(waited.status == 0, "\(waited.stderr)")
        worker.send(SIGTERM)
        _ = await worker.wait()
        try await fixture.stop()
    }

    @Test("A serve whose socket directory cannot be made, or given an empty --state-dir, makes no state directory")
    func refusedBeforeTheStateDirectory() async throws {
        let scratch = try Scratch()
        try scratch.write("runtime-file", "")
        let noSocket = try await JobtopProcess(
            ["serve", "--state-dir", scratch.file("state")], directory: scratch.path,
            environment: ["XDG_RUNTIME_DIR": scratch.file("runtime-file"), "XDG_STATE_HOME": scratch.file("xdg-state")]).wait()
        #expect(noSocket.status == 1)
        #expect(noSocket.stderr.contains("cannot make the socket directory \(scratch.file("runtime-file"))/jobtop: not a directory"), "\(noSocket.stderr)")
        #expect(!FileManager.default.fileExists(atPath: scratch.file("state")))
        let empty = try await JobtopProcess(
            ["serve", "--state-dir", ""], directory: scratch.path,
            environment: ["XDG_RUNTIME_DIR": scratch.file("run"), "XDG_STATE_HOME": scratch.file("xdg-state")]).wait()
        #expect(empty.status == 2)
        #expect(empty.stderr.contains("--state-dir needs a directory, not an empty path"), "\(empty.stderr)")
        #expect(!FileManager.default.fileExists(atPath: scratch.file("jobtop.db")), "the state went into the current directory")
    }

    @Test("A serve whose --listen port is taken says so in one line and makes nothing; one restarted on its port while a connection was open listens again")
    func tcpPortTakenAndReused() async throws {
        // A port no socket bound to port 0 is handed between this serve and the next.
        let fixture = try await ServeFixture(["-j", "1", "--listen", "127.0.0.1:\(try reusablePort())"])
        let address = try fixture.address(printedWith: "listening on")
        let port = try #require(address.split(separator: ":").last.flatMap { UInt16($0) })

        // Given the port taken, on another socket and state directory
        var elsewhere = fixture.environment
        elsewhere["XDG_RUNTIME_DIR"] = fixture.scratch.file("run-2")
        elsewhere["XDG_STATE_HOME"] = fixture.scratch.file("state-2")
        let taken = try await JobtopProcess(["serve", "--listen", address], environment: elsewhere).wait()
        #expect(taken.status == 1)
        #expect(taken.stderr == "jobtop serve: cannot listen on \(address): address already in use\n", "\(taken.stderr)")
        #expect(!FileManager.default.fileExists(atPath: fixture.scratch.file("state-2")), "a refused serve made its state directory")
        #expect(!FileManager.default.fileExists(atPath: fixture.scratch.file("run-2/jobtop/serve.sock")))

        // When a connection is open as the serve stops (serve closes it, and its end waits in
        // FIN-WAIT-2 for the peer's), a serve started on the same port at once still listens
        // there (SO_REUSEADDR).
        let connection = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(connection) }
        var peer = sockaddr_in()
        peer.sin_family = sa_family_t(AF_INET)
        peer.sin_addr.s_addr = inet_addr("127.0.0.1")
        peer.sin_port = port.bigEndian
        let connected = withUnsafePointer(to: &peer) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(connection, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try #require(connected == 0)
        #expect(try await fixture.stop()?.status == 0)
        let again = try JobtopProcess(["serve", "--listen", address], environment: fixture.environment, newSession: true)
        let listening = await eventually(within: .seconds(60)) { again.output.contains("listening on") || again.output.contains("cannot listen") }
        #expect(listening && again.output.contains("listening on"), "\(again.output)")
        _ = try await fixture.run(["shutdown"])
        #expect(await again.wait(atMost: .seconds(60))?.status == 0)
    }
}

@Suite("jobtop follow and log into a closed pipe", .timeLimit(.minutes(3)))
struct ClosedPipeClientTests {
    @Test("`follow ID | head -2` of a job that keeps writing ends once head has its lines (status 141), as `tail -f | head` does; so does `log ID | head -1` of a long output")
    func followIntoHead() async throws {
        let fixture = try await ServeFixture()
        let submitted = try await fixture.run(["submit", "-c", "while :; do echo tick; sleep 0.05; done", "-c", "seq 1 200000"])
        try #require(submitted.status == 0, "\(submitted.stderr)")
        let (ticking, long) = (submitted.lines[0], submitted.lines[1])
        try await fixture.waitFor(long, "succeeded")
        for (command, lines) in [("follow \(ticking)", 2), ("log \(long)", 1)] {
            let script = "\(JobtopProcess.binary) \(command) | head -\(lines); echo \"status=${PIPESTATUS[0]}\" >&2"
            let client = try JobtopProcess(["-c", script], directory: fixture.scratch.path, environment: fixture.environment, executable: "/bin/bash")
            // (Before: follow went on, blocked, until the job ended: never, for this one.)
            let outcome = try #require(await client.wait(atMost: .seconds(60)), "\(command) | head did not end")
            #expect(outcome.stderr.contains("status=141"), "\(command): \(outcome.stderr)")
            #expect(outcome.lines.count == lines, "\(command): \(outcome.stdout)")
        }
        #expect(try await fixture.run(["cancel", ticking]).status == 0)
        try await fixture.stop()
    }
}

@Suite("jobtop shutdown, then a serve at once", .timeLimit(.minutes(5)))
struct ShutdownRestartTests {
    @Test("Once `jobtop shutdown` returns, the state directory is free: a serve started at once opens it and has every job (three rounds, 3,000 queued jobs; a trial's release build failed 'database is locked' in 2 of 5)")
    func restartAtOnce() async throws {
        // (Each serve takes half a second more to close after its jobs have ended.)
        let fixture = try await ServeFixture(["-j", "2"], extraEnvironment: ["JOBTOP_TEST_CLOSE_PAUSE_MS": "500"])
        #expect(try await fixture.run(["pause"]).status == 0)
        let list = String(repeating: "true\n", count: 3_000)
        let submitted = try await fixture.run(["submit", "-"], stdin: list)
        try #require(submitted.status == 0, "\(submitted.stderr)")
        var serve = fixture.serve
        for round in 1...3 {
            let shutdown = try await fixture.run(["shutdown"])
            #expect(shutdown.status == 0, "round \(round): \(shutdown.stderr)")
            // The serve has let go of its state directory (it held it for a moment more: it
            // said stopped once its jobs had ended, before it closed its database)
            #expect(Self.isFree(fixture.scratch.file("state") + "/jobtop/lock"), "round \(round): the state directory is still locked")
            let next = try JobtopProcess(
                ["serve", "-j", "2"], directory: fixture.scratch.path,
                environment: fixture.environment.merging(["JOBTOP_TEST_CLOSE_PAUSE_MS": "500"]) { $1 }, newSession: true)
            let ready = await eventually(within: .seconds(60)) { next.output.contains("listening on") || next.output.contains("jobtop serve: cannot") }
            #expect(ready && next.output.contains("listening on"), "round \(round): \(next.output)")
            #expect(await serve.wait(atMost: .seconds(60)) != nil)
            serve = next
            let status = try await fixture.report()
            let counts = status["counts"] as? [String: Any]
            #expect(counts?["queued"] as? Int == 3_000, "round \(round): \(counts ?? [:])")
        }
        _ = try await fixture.run(["shutdown"])
        #expect(await serve.wait(atMost: .seconds(60)) != nil)
    }

    /// Whether the lock file at `path` can be locked now (no serve holds it).
    static func isFree(_ path: String) -> Bool {
        let fd = open(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { return false }
        flock(fd, LOCK_UN)
        return true
    }
}
