import Foundation
import GRDB
import JobtopTestSupport
import Scheduler
import SchedulerSlurm
import SchedulerStore
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `jobtop serve --slurm` on the real one-node Slurm. In the end-to-end suite (an extension of
/// it), so that it is serialized with the other tests that use the node (one of them takes the
/// node down).
extension SlurmEndToEndTests {
    /// A serve of one test, on its own runtime and state directories.
    struct SlurmServe {
        let scratch: Scratch
        let environment: [String: String]

        init(_ scratch: Scratch) {
            self.scratch = scratch
            environment = ["XDG_RUNTIME_DIR": scratch.file("run"), "XDG_STATE_HOME": scratch.file("state")]
        }

        var stateDirectory: StateDirectory { StateDirectory(path: scratch.file("state") + "/jobtop") }

        /// Starts `serve --slurm` and waits until it answers.
        func start(_ extra: [String] = []) async throws -> JobtopProcess {
            let serve = try JobtopProcess(
                ["serve", "--slurm", "-j", "2", "--slurm-poll", "300ms"] + extra, environment: environment, newSession: true)
            let answered = await until(within: .seconds(60)) { try await client(["status"]).status == 0 }
            if !answered {
                serve.send(SIGKILL)
                throw SpawnError(message: "serve --slurm did not answer within 60 s: \(serve.output)")
            }
            return serve
        }

        func client(_ arguments: [String]) async throws -> JobtopProcess.Outcome {
            try await JobtopProcess(arguments, environment: environment).wait()
        }

        /// `status --all --json`'s jobs.
        func jobs() async throws -> [[String: Any]] {
            let status = try await client(["status", "--all", "--json"])
            let object = try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any]
            return object?["jobs"] as? [[String: Any]] ?? []
        }
    }

    /// Polls an async condition until it holds or the (generous) deadline passes.
    static func until(within limit: Duration, _ condition: () async throws -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if (try? await condition()) == true { return true }
            try? await Task.sleep(for: .milliseconds(200))
        }
        return (try? await condition()) == true
    }

    /// The state word `scontrol -o show job ID` gives, or "" once Slurm has forgotten the job.
    static func slurmState(_ id: String) -> String {
        let text = (try? SlurmCluster.run("/bin/sh", ["-c", "scontrol -o show job \(id) 2>/dev/null"])) ?? ""
        guard let range = text.range(of: "JobState=") else { return "" }
        return String(text[range.upperBound...].prefix { !$0.isWhitespace })
    }

    @Test("serve --slurm: a submitted job runs on Slurm and status shows its Slurm id; after kill -9 of serve the restart cancels the old Slurm job and the job ends exactly once")
    func serveCrash() async throws {
        try SlurmCluster.require()
        let scratch = try Scratch()
        let daemon = SlurmServe(scratch)
        let marker = "jobtop-slurm-serve-\(UUID().uuidString.prefix(8))"
        let runs = scratch.file("runs")
        let ran = scratch.file("ran")
        // The first attempt sleeps long (the crash comes then) and, when its sleep is killed,
        // exits without writing `end` (its shell may outlive the sleep by a moment); the second
        // one ends at once.
        let file = try scratch.write("jobs.toml", """
            [[job]]
            name = "\(marker)"
            command = "echo start >> \(runs); test -f \(ran) || { touch \(ran); sleep 300; exit 1; }; echo end >> \(runs) # \(marker)"
            retries = 1
            """)

        // Given a serve on Slurm running the job.
        // (A serve left running by a failed expectation is killed and reaped when let go.)
        var serve = try await daemon.start()
        let submitted = try await daemon.client(["submit", file])
        try #require(submitted.status == 0, "\(submitted.stderr)")
        var oldID = ""
        let placed = await Self.until(within: .seconds(90)) {
            guard let job = try await daemon.jobs().first, job["state"] as? String == "running",
                  let placement = job["placement"] as? String,
                  let id = SlurmLeftovers.slurmID(inPlacement: placement) else { return false }
            oldID = id
            return await offThePool { Self.slurmState(id) == "RUNNING" && SlurmCluster.hasProcess(marker) }
        }
        try #require(placed, "the job never ran on Slurm: \(serve.output)")
        // and the serve's store saw it begin (Slurm's queue is polled: an attempt still held in
        // the store goes back uncounted after a crash, as one that never ran).
        let database = try DatabaseQueue(path: daemon.stateDirectory.database.path)
        let begun = await Self.until(within: .seconds(60)) {
            try await database.read { db in
                try Int.fetchOne(db, sql: "SELECT count(*) FROM attempt WHERE ended_at IS NULL AND held = 0") == 1
            }
        }
        try #require(begun, "the store never recorded the attempt's start")
        let status = try await daemon.client(["status"])
        // Its Slurm id, then its attempt (it may be retried once).
        #expect(status.stdout.contains("running (\(oldID); attempt 1 of 2)"), "\(status.stdout)")

        // When serve dies outright, its Slurm job runs on, and the store holds its Slurm id.
        serve.send(SIGKILL)
        _ = await serve.wait()
        #expect(Self.slurmState(oldID) == "RUNNING")
        let store = try SchedulerStore(directory: daemon.stateDirectory)
        let stored = try await store.storedJobs()
        let jobID = try #require(stored.first.flatMap { UUID(uuidString: $0.id) }.map(JobID.init(uuid:)))
        let before = try await store.attempts(of: jobID)
        store.close()
        #expect(before.map(\.placement).compactMap { $0.flatMap(SlurmLeftovers.slurmID(inPlacement:)) } == [oldID])

        // Then a new serve cancels it, counts the attempt as failed, and runs the job again once.
        serve = try await daemon.start()
        let said = await eventually(within: .seconds(30)) { serve.output.contains("cancelled 1 Slurm job they left (\(oldID))") }
        #expect(said, "\(serve.output)")
        // Slurm passes through COMPLETING while it kills the job's processes.
        let cancelledID = oldID
        #expect(await eventually(within: .seconds(30)) { await offThePool { Self.slurmState(cancelledID) == "CANCELLED" } }, "\(Self.slurmState(oldID))")
        let succeeded = await Self.until(within: .seconds(120)) {
            try await daemon.jobs().first?["state"] as? String == "succeeded"
        }
        #expect(succeeded, "\(serve.output)")
        let lines = ((try? String(contentsOfFile: runs, encoding: .utf8)) ?? "").split(separator: "\n")
        #expect(lines == ["start", "start", "end"], "\(lines)")

        let shutdown = try await daemon.client(["shutdown"])
        #expect(shutdown.status == 0)
        #expect(await serve.wait(atMost: .seconds(60)) != nil, "serve did not stop: \(serve.output)")
        let after = try SchedulerStore(directory: daemon.stateDirectory)
        let attempts = try await after.attempts(of: jobID)
        after.close()
        #expect(attempts.map(\.outcome) == [SchedulerStore.stoppedReason, "succeeded"], "\(attempts)")
        let newID = attempts.last?.placement.flatMap(SlurmLeftovers.slurmID(inPlacement:))
        #expect(newID != nil && newID != oldID, "\(attempts)")
        // Nothing of it is left in Slurm or on the node.
        // (squeue lists a job while it is COMPLETING, a moment after its end.)
        let queue: @Sendable () -> String = {
            (try? SlurmCluster.run("/bin/sh", ["-c", "squeue -h -n '\(marker)' -o %i"])) ?? "squeue failed"
        }
        let emptied = await eventually(within: .seconds(30)) {
            await offThePool { queue().trimmingCharacters(in: .whitespacesAndNewlines).isEmpty }
        }
        let left = emptied ? "" : await offThePool(queue)
        #expect(emptied, "\(left)")
        let gone = await eventually(within: .seconds(30)) { await offThePool { !SlurmCluster.hasProcess(marker) } }
        #expect(gone)
    }

    @Test("serve --slurm: a shutdown gives a job still pending in Slurm's queue back (cancelled there, not run), and the next serve runs it as its first attempt")
    func shutdownGivesPendingJobsBack() async throws {
        try SlurmCluster.require()
        let scratch = try Scratch()
        let daemon = SlurmServe(scratch)
        let marker = "jobtop-slurm-pending-\(UUID().uuidString.prefix(8))"
        let ran = scratch.file("ran")
        // Given a serve whose Slurm jobs wait an hour in Slurm's queue (--begin)
        var serve = try await daemon.start(["--slurm-arg=--begin=now+3600"])
        let submitted = try await daemon.client(["submit", "--name", marker, "-c", "touch \(ran) # \(marker)"])
        try #require(submitted.status == 0, "\(submitted.stderr)")
        var slurmID = ""
        let pending = await Self.until(within: .seconds(90)) {
            guard let job = try await daemon.jobs().first, let placement = job["placement"] as? String,
                  let id = SlurmLeftovers.slurmID(inPlacement: placement) else { return false }
            slurmID = id
            return await offThePool { Self.slurmState(id) == "PENDING" }
        }
        try #require(pending, "the job never waited in Slurm's queue: \(serve.output)")

        // When the serve is shut down (running jobs would finish; nothing new starts)
        let shutdown = try await daemon.client(["shutdown"])
        #expect(shutdown.status == 0, "\(shutdown.stderr)")
        #expect(await serve.wait(atMost: .seconds(60)) != nil, "serve did not stop: \(serve.output)")

        // Then its Slurm job was cancelled while pending, and never ran
        let id = slurmID
        #expect(await eventually(within: .seconds(30)) { await offThePool { ["CANCELLED", ""].contains(Self.slurmState(id)) } })
        #expect(!FileManager.default.fileExists(atPath: ran))

        // And the next serve (no --begin) runs it, as its first attempt
        serve = try await daemon.start()
        let succeeded = await Self.until(within: .seconds(120)) {
            guard let job = try await daemon.jobs().first else { return false }
            return job["state"] as? String == "succeeded" && job["attempts"] as? Int == 1
        }
        #expect(succeeded, "\(serve.output)")
        #expect(FileManager.default.fileExists(atPath: ran))
        _ = try await daemon.client(["shutdown"])
        #expect(await serve.wait(atMost: .seconds(60)) != nil, "serve did not stop: \(serve.output)")
    }

    @Test("serve --slurm with an unknown partition: exit 2 before it listens")
    func serveRefusedUpFront() async throws {
        try SlurmCluster.require()
        let scratch = try Scratch()
        let daemon = SlurmServe(scratch)
        let serve = try await JobtopProcess(
            ["serve", "--slurm", "--partition", "nope"], environment: daemon.environment).wait()
        #expect(serve.status == 2)
        #expect(serve.stderr.contains("jobtop serve: --slurm: unknown Slurm partition 'nope' (partitions: debug)"), "\(serve.stderr)")
        #expect(!FileManager.default.fileExists(atPath: scratch.file("run") + "/jobtop/serve.sock"))
        // A directory for the job scripts that cannot be made: exit 2 too, and serve does not hang.
        let directory = try #require(await JobtopProcess(
            ["serve", "--slurm", "--slurm-dir", "/proc/jobtop-no-such-dir"], environment: daemon.environment
        ).wait(atMost: .seconds(60)), "serve hung")
        #expect(directory.status == 2)
        #expect(directory.stderr.contains("jobtop serve: --slurm: cannot write Slurm job scripts in '/proc/jobtop-no-such-dir/"), "\(directory.stderr)")
    }
}

extension SlurmInputTests {
    @Test("submit of a job file with a [slurm] table says the table is not used")
    func submitSaysSlurmTableIsUnused() async throws {
        let scratch = try Scratch()
        let file = try scratch.write("jobs.toml", "[slurm]\npartition = \"debug\"\n\n[[job]]\ncommand = \"true\"\n")
        // No serve runs here: the note comes before the connection is tried.
        let submit = try await JobtopProcess(
            ["submit", file],
            environment: ["XDG_RUNTIME_DIR": scratch.file("run"), "XDG_STATE_HOME": scratch.file("state")]
        ).wait()
        #expect(submit.status == 3)
        #expect(submit.stderr.contains("jobtop submit: the file's [slurm] tables are not used"), "\(submit.stderr)")
    }

    @Test("serve's Slurm options without --slurm: exit 2")
    func serveOptionsNeedSlurm() async throws {
        let scratch = try Scratch()
        let serve = try await JobtopProcess(
            ["serve", "--partition", "debug"],
            environment: ["XDG_RUNTIME_DIR": scratch.file("run"), "XDG_STATE_HOME": scratch.file("state")]
        ).wait()
        #expect(serve.status == 2)
        #expect(serve.stderr.contains("--partition, --slurm-arg, --slurm-poll and --slurm-dir need --slurm"), "\(serve.stderr)")
    }
}

/// What a restart makes of the placements a dead serve recorded, on a fake Slurm.
@Suite("SlurmLeftovers on a fake Slurm")
struct SlurmLeftoversTests {
    @Test(
        "A Slurm job id is read from a placement; anything else is not one",
        arguments: [
            ("1234", "1234"), ("1234 Priority", "1234"), ("77_3 Resources", "77_3"),
            ("", nil), ("host-1", nil), ("12a", nil), ("_3", nil), ("1_2_3", nil),
        ] as [(String, String?)])
    func slurmID(placement: String, id: String?) {
        #expect(SlurmLeftovers.slurmID(inPlacement: placement) == id)
    }

    @Test("Only jobs Slurm still has pending or running are cancelled, all in one scancel")
    func cancelsWhatIsLeft() {
        // Given three recorded placements: one running, one pending, one ended.
        let slurm = FakeSlurm()
        slurm.set("10", state: "RUNNING")
        slurm.set("11", state: "PENDING")
        slurm.set("12", state: "COMPLETED")
        // When the leftovers are cancelled.
        let outcome = SlurmLeftovers.cancel(placements: ["10", "11 Priority", "12", "not-slurm"], commands: slurm)
        // Then one squeue and one scancel covered them, and only the two alive were cancelled.
        #expect(outcome == SlurmLeftovers.Outcome(cancelled: ["10", "11"], problem: nil))
        #expect(slurm.calls("squeue").count == 1)
        #expect(slurm.calls("scancel") == [["10", "11"]])
    }

    @Test("Nothing recorded that is a Slurm job: Slurm is not asked")
    func nothingToAsk() {
        let slurm = FakeSlurm()
        #expect(SlurmLeftovers.cancel(placements: ["worker-a"], commands: slurm) == SlurmLeftovers.Outcome(cancelled: []))
        #expect(slurm.calls("squeue").isEmpty && slurm.calls("scancel").isEmpty)
    }
}
