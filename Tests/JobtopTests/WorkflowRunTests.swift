import Foundation
import JobtopTestSupport
import Testing

/// Job files with groups, `after` and `delay`, run headless by the real binary and checked from
/// the JSON log: orders and fields, never wall-clock timings.
@Suite("Workflows run by the jobtop binary", .timeLimit(.minutes(1)))
struct WorkflowRunTests {
    /// One JSON log line.
    typealias Object = [String: Any]

    private func events(_ name: String, _ objects: [Object]) -> [Object] {
        objects.filter { $0["event"] as? String == name }
    }

    private func seq(_ event: String, of job: String, _ objects: [Object]) -> Int? {
        objects.first { $0["event"] as? String == event && $0["name"] as? String == job }?["seq"] as? Int
    }

    /// The most jobs of each group that ran at once, replaying `started` against the events
    /// that end an attempt.
    private func peaks(_ objects: [Object]) -> [String: Int] {
        var groupOf: [String: String] = [:]
        var running: Set<String> = []
        var peaks: [String: Int] = [:]
        for object in objects {
            guard let job = object["job"] as? String, let group = groupOf[job] ?? object["group"] as? String else { continue }
            switch object["event"] as? String {
            case "submitted":
                groupOf[job] = group
            case "started":
                #expect(object["group"] as? String == group, "a started line names the job's group")
                running.insert(job)
                peaks[group] = max(peaks[group] ?? 0, running.count { groupOf[$0] == group })
            case "succeeded", "failed", "retry", "cancelled", "requeued":
                running.remove(job)
            default:
                break
            }
        }
        return peaks
    }

    @Test("Groups keep to their limits, and no job starts before every job it waits for succeeded")
    func limitsAndDependencies() async throws {
        // Given two capped groups whose jobs all become ready at once, and a fan-in
        let scratch = try Scratch()
        var text = "[groups.pair]\nparallel = 2\n[groups.solo]\nparallel = 1\n"
        for index in 1...4 { text += "[[job]]\nname = \"p\(index)\"\ngroup = \"pair\"\ncommand = \"sleep 0.2\"\n" }
        for index in 1...3 { text += "[[job]]\nname = \"s\(index)\"\ngroup = \"solo\"\ncommand = \"sleep 0.1\"\n" }
        text += """
            [[job]]
            name = "join"
            after = ["p1", "p2", "p3", "p4", "s3"]
            command = "true"
            [[job]]
            name = "last"
            group = "solo"
            after = ["join", "s1"]
            command = "true"
            """
        try scratch.write("w.toml", text)
        // When it runs with slots enough for every job at once
        let run = try await JobtopProcess.run(["w.toml", "-j", "8", "--log-format", "json"], directory: scratch.path)
        // Then
        #expect(run.status == 0, "\(run.stderr)")
        let objects = try Log.json(run.lines)
        let groups = events("group", objects)
        #expect(groups.contains { $0["group"] as? String == "pair" && $0["limit"] as? Int == 2 })
        #expect(groups.contains { $0["group"] as? String == "solo" && $0["limit"] as? Int == 1 })
        let firstSubmitted = try #require(events("submitted", objects).first?["seq"] as? Int)
        #expect(groups.allSatisfy { ($0["seq"] as? Int ?? .max) < firstSubmitted }, "groups are set up before any job is submitted")
        let peaks = peaks(objects)
        #expect(peaks["pair"] == 2, "both pair slots were used, never more: \(peaks)")
        #expect(peaks["solo"] == 1)
        let join = try #require(events("submitted", objects).first { $0["name"] as? String == "join" })
        #expect(join["after"] as? [String] == ["p1", "p2", "p3", "p4", "s3"])
        #expect(join["state"] as? String == "blocked")
        #expect(join["group"] as? String == "default")
        for (job, dependencies) in [("join", ["p1", "p2", "p3", "p4", "s3"]), ("last", ["join", "s1"])] {
            let started = try #require(seq("started", of: job, objects))
            #expect(seq("released", of: job, objects).map { $0 < started } == true)
            for dependency in dependencies {
                let succeeded = try #require(seq("succeeded", of: dependency, objects))
                #expect(succeeded < started, "\(job) started after \(dependency) succeeded")
            }
        }
        #expect(events("started", objects).count == 9)
    }

    @Test("A failing job skips its dependents and theirs, with the reason, and the run exits 1")
    func failureSkips() async throws {
        let scratch = try Scratch()
        try scratch.write("w.toml", """
            [[job]]
            name = "bad"
            command = "exit 3"
            [[job]]
            name = "child"
            after = ["bad"]
            command = "touch child-ran"
            [[job]]
            name = "grandchild"
            after = ["child"]
            command = "touch grandchild-ran"
            [[job]]
            name = "other"
            command = "touch other-ran"
            """)
        let run = try await JobtopProcess.run(["w.toml", "--log-format", "json"], directory: scratch.path)
        #expect(run.status == 1)
        let objects = try Log.json(run.lines)
        let skipped = events("skipped", objects)
        #expect(skipped.map { $0["name"] as? String } == ["child", "grandchild"])
        #expect(skipped.first?["reason"] as? String == "dependency 'bad' failed")
        #expect(skipped.first?["dependency"] as? String == "bad")
        #expect(skipped.last?["reason"] as? String == "dependency 'child' was skipped")
        #expect(skipped.last?["dependency"] as? String == "child")
        #expect(seq("failed", of: "bad", objects).map { $0 < (skipped.first?["seq"] as? Int ?? 0) } == true)
        #expect(seq("started", of: "child", objects) == nil && seq("started", of: "grandchild", objects) == nil)
        #expect(scratch.read("child-ran") == nil && scratch.read("grandchild-ran") == nil)
        #expect(scratch.read("other-ran") != nil)
        let summary = try #require(objects.last)
        #expect(summary["skipped"] as? Int == 2 && summary["failed"] as? Int == 1 && summary["succeeded"] as? Int == 1)
        #expect(run.stderr.contains("skipped: child: dependency 'bad' failed"), "\(run.stderr)")
    }

    @Test("A delayed job is scheduled, blocked while what it waits for runs, released, then started")
    func delayThenDependency() async throws {
        // Given a delayed job that also waits for a job held by a gate the test opens
        let scratch = try Scratch()
        try scratch.write("w.toml", """
            [[job]]
            name = "gate"
            command = "while [ ! -f go ]; do sleep 0.02; done"
            [[job]]
            name = "report"
            after = ["gate"]
            delay = "300ms"
            command = "touch report-ran"
            """)
        let process = try JobtopProcess(["w.toml", "--log-format", "json"], directory: scratch.path)
        // When its time has come while the gate is still closed
        let blocked = await process.firstLine { $0.contains("\"event\":\"blocked\"") }
        #expect(blocked?.contains("\"waiting_for\":[\"gate\"]") == true, "\(blocked ?? "no blocked line")")
        #expect(scratch.read("report-ran") == nil)
        try scratch.write("go", "")
        let run = await process.wait()
        // Then it ran only after it was released, after the gate succeeded
        #expect(run.status == 0, "\(run.stderr)")
        let objects = try Log.json(run.lines)
        let submitted = try #require(events("submitted", objects).first { $0["name"] as? String == "report" })
        #expect(submitted["state"] as? String == "scheduled")
        #expect(submitted["at"] as? String != nil)
        let order = ["blocked", "released", "started", "succeeded"].map { seq($0, of: "report", objects) ?? -1 }
        #expect(order == order.sorted() && !order.contains(-1), "\(order)")
        #expect((seq("succeeded", of: "gate", objects) ?? .max) < order[1])
    }

    @Test("A start time is logged exactly as the file gives it (it was logged up to 17 ms early, the log's clock zero taken apart from the scheduler's)")
    func startTimeLoggedExactly() async throws {
        let scratch = try Scratch()
        try scratch.write("w.toml", "[[job]]\nname = \"new-year\"\nat = \"2099-01-01T00:00:00Z\"\ncommand = \"true\"\n")
        for _ in 0..<3 {
            let process = try JobtopProcess(["w.toml", "--log-format", "json"], directory: scratch.path)
            let submitted = await process.firstLine { $0.contains("\"event\":\"submitted\"") }
            process.send(SIGINT)
            _ = await process.wait()
            let line = try #require(submitted)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            #expect(object["at"] as? String == "2099-01-01T00:00:00.000Z", "\(line)")
        }
    }

    @Test("A delayed job with nothing to wait for is scheduled, then released, then started")
    func delayOnly() async throws {
        let scratch = try Scratch()
        try scratch.write("w.toml", "[[job]]\nname = \"later\"\ndelay = \"200ms\"\ncommand = \"true\"\n")
        let run = try await JobtopProcess.run(["w.toml", "--log-format", "json"], directory: scratch.path)
        #expect(run.status == 0, "\(run.stderr)")
        let objects = try Log.json(run.lines)
        let submitted = try #require(events("submitted", objects).first)
        #expect(submitted["state"] as? String == "scheduled")
        let at = try #require(submitted["at"] as? String)
        let order = ["submitted", "released", "started"].map { seq($0, of: "later", objects) ?? -1 }
        #expect(order == order.sorted() && !order.contains(-1), "\(order)")
        // The release comes when the scheduler's clock reaches the time the submitted line gave.
        let released = try #require(events("released", objects).first?["ts"] as? String)
        #expect(released >= at)
    }

    @Test("A paused group's jobs (and those after them) do not run; other groups go on")
    func pausedGroup() async throws {
        // Given a paused group beside an open one
        let scratch = try Scratch()
        try scratch.write("w.toml", """
            [groups.held]
            paused = true
            parallel = 2
            [[job]]
            name = "h"
            group = "held"
            command = "touch h-ran"
            [[job]]
            name = "after-h"
            after = ["h"]
            command = "touch after-h-ran"
            [[job]]
            name = "free"
            command = "touch free-ran"
            """)
        let process = try JobtopProcess(["w.toml", "-j", "4", "--log-format", "json"], directory: scratch.path)
        // When the open group's job has run (it was ready in the same step as the held one)
        let freeDone = await process.firstLine { $0.contains("\"event\":\"succeeded\"") }
        #expect(freeDone?.contains("\"name\":\"free\"") == true)
        // Then the held job has not started; the run waits until it is interrupted
        process.send(SIGTERM)
        let run = await process.wait()
        #expect(run.status == 143)
        let objects = try Log.json(run.lines)
        // Every `group` line of it says paused (its limit set first, the first one said
        // paused=false of a group that never ran unpaused).
        let held = events("group", objects).filter { $0["group"] as? String == "held" }
        #expect(!held.isEmpty && held.allSatisfy { $0["paused"] as? Bool == true }, "\(held)")
        #expect(held.last?["limit"] as? Int == 2)
        #expect(events("started", objects).map { $0["name"] as? String } == ["free"])
        #expect(scratch.read("h-ran") == nil && scratch.read("after-h-ran") == nil)
        #expect(run.stderr.contains("group 'held' starts paused"), "\(run.stderr)")
    }

    @Test("The paused-group notice counts the -c jobs in the group too (it said 1 job of 2)")
    func pausedGroupNoticeCountsCommandJobs() async throws {
        let scratch = try Scratch()
        try scratch.write("w.toml", "[groups.default]\npaused = true\n[[job]]\ncommand = \"true\"\n")
        let process = try JobtopProcess(["w.toml", "-c", "echo extra", "--log-format", "json"], directory: scratch.path)
        _ = await process.firstLine { $0.contains("\"event\":\"submitted\"") }
        process.send(SIGTERM)
        let run = await process.wait()
        #expect(run.stderr.contains("group 'default' starts paused (paused = true) and nothing resumes it headless: its 2 jobs"), "\(run.stderr)")
    }

    @Test("--group-limit overrides the file's parallel")
    func groupLimitOverride() async throws {
        let scratch = try Scratch()
        var text = "[groups.wide]\nparallel = 3\n"
        for index in 1...3 { text += "[[job]]\nname = \"w\(index)\"\ngroup = \"wide\"\ncommand = \"sleep 0.1\"\n" }
        try scratch.write("w.toml", text)
        let run = try await JobtopProcess.run(
            ["w.toml", "-j", "4", "--group-limit", "wide=1", "--log-format", "json"], directory: scratch.path)
        #expect(run.status == 0, "\(run.stderr)")
        let objects = try Log.json(run.lines)
        #expect(events("group", objects).map { $0["limit"] as? Int } == [1])
        #expect(peaks(objects) == ["wide": 1])
        #expect(events("succeeded", objects).count == 3)
    }

    @Test("--group-limit default=N limits -c jobs, which run in the default group")
    func defaultGroupLimit() async throws {
        let run = try await JobtopProcess.run(
            ["-c", "sleep 0.1", "-c", "sleep 0.1", "-c", "sleep 0.1", "-j", "3", "--group-limit", "default=1", "--log-format", "json"])
        #expect(run.status == 0, "\(run.stderr)")
        let objects = try Log.json(run.lines)
        #expect(peaks(objects) == ["default": 1])
        #expect(events("started", objects).allSatisfy { $0["group"] as? String == "default" })
    }

    /// A first job that would leave a mark if anything started.
    static let marker = "[[job]]\nname = \"marker\"\ncommand = \"touch started\"\n"

    @Test(
        "Each bad workflow exits 2 naming the file, the job and the problem, and nothing runs",
        arguments: [
            ("[[job]]\nname = \"x\"\nafter = [\"nope\"]\ncommand = \"true\"\n", [], "w.toml: job 2 ('x'): 'after': no job named 'nope'"),
            ("[[job]]\nname = \"a\"\nafter = [\"b\"]\ncommand = \"true\"\n[[job]]\nname = \"b\"\nafter = [\"a\"]\ncommand = \"true\"\n", [],
             "w.toml: job 2 ('a'): 'after' makes a cycle of 2 jobs: 'a' waits for 'b', which waits for 'a'"),
            ("[[job]]\nname = \"marker\"\ncommand = \"true\"\n[[job]]\nafter = [\"marker\"]\ncommand = \"true\"\n", [],
             "w.toml: job 2 ('marker'): duplicate name 'marker'"),
            ("[[job]]\ngroup = \"gpu\"\ncommand = \"true\"\n", [], "w.toml: job 2: 'group': no group 'gpu'"),
            // Coalesced into the job it waits for, it would never run (it ran nothing, exit 0).
            ("[[job]]\nname = \"a\"\nkey = \"k\"\ncommand = \"true\"\n[[job]]\nkey = \"k\"\nafter = [\"a\"]\ncommand = \"true\"\n", [],
             "w.toml: job 3: 'key' \"k\" is also the key of job 2 ('a'), which it waits for ('after'): it would be coalesced into that job and never run"),
            ("[[job]]\nname = \"a\"\nkey = \"k\"\ncommand = \"true\"\n[[job]]\nname = \"b\"\nafter = [\"a\"]\ncommand = \"true\"\n[[job]]\nkey = \"k\"\nafter = [\"b\"]\ncommand = \"true\"\n", [],
             "w.toml: job 4: 'key' \"k\" is also the key of job 2 ('a'), which it waits for (through job 3 ('b')): it would be coalesced into that job and never run"),
            ("[groups.gpu]\nparallel = 0\n", [], "w.toml: [groups.gpu]: 'parallel' must be at least 1, not 0"),
            ("[groups.gpu]\nparallel = \"2\"\n", [], "w.toml: [groups.gpu]: 'parallel' must be an integer, not a string"),
            ("[[job]]\ndelay = \"1s\"\nat = \"02:00\"\ncommand = \"true\"\n", [], "w.toml: job 2: 'delay' and 'at' together"),
            ("[[job]]\nat = \"2001-01-01T00:00:00Z\"\ncommand = \"true\"\n", [], "w.toml: job 2: 'at': 2001-01-01T00:00:00.000Z is in the past"),
            ("[[job]]\ndelay = \"10 minutes\"\ncommand = \"true\"\n", [], "w.toml: job 2: 'delay': '10 minutes' is not a duration"),
            ("[[job]]\nat = \"2pm\"\ncommand = \"true\"\n", [], "w.toml: job 2: 'at': '2pm' is not a start time"),
            ("", ["--group-limit", "marker"], "'marker' is invalid for '--group-limit <name=n>': it has no '='"),
            ("", ["--group-limit", "default=0"], "'default=0' is invalid for '--group-limit <name=n>': the limit must be at least 1, not 0"),
            ("", ["--group-limit", "gpu=2"], "--group-limit gpu=2: no group 'gpu'"),
        ] as [(String, [String], String)])
    func refused(tail: String, options: [String], message: String) async throws {
        let scratch = try Scratch()
        try scratch.write("w.toml", Self.marker + tail)
        let run = try await JobtopProcess.run(["w.toml"] + options, directory: scratch.path)
        #expect(run.status == 2)
        #expect(run.stderr.contains(message), "\(run.stderr)")
        #expect(run.stdout.isEmpty)
        #expect(scratch.read("started") == nil)
    }

    @Test("The workflow example runs to its end: every job succeeds, in its groups' limits")
    func example() async throws {
        let example = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("examples/workflow.toml").path
        let run = try await JobtopProcess.run([example, "-j", "4", "--log-format", "json"])
        #expect(run.status == 0, "\(run.stderr)")
        let objects = try Log.json(run.lines)
        #expect(events("succeeded", objects).count == events("submitted", objects).count)
        let peaks = peaks(objects)
        #expect((peaks["build"] ?? 0) <= 2 && (peaks["deploy"] ?? 0) <= 1, "\(peaks)")
        #expect(seq("released", of: "notify", objects) != nil)
    }
}
