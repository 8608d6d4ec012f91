import Foundation
import Scheduler
import Testing
@testable import jobtop

/// Groups, `after`, `delay` and `at` in job files; `--group-limit`; the log lines of the
/// workflow events.
@Suite("Workflows in job files")
struct WorkflowFileTests {
    /// 2026-11-23T21:00:00Z.
    static let now = Date(timeIntervalSince1970: 1_795_467_600)
    static let utc = TimeZone(secondsFromGMT: 0)!

    private func parse(_ text: String) throws(JobInputError) -> JobFile.Contents {
        try JobFile.parse(text, file: "w.toml", directory: "/", now: Self.now, timeZone: Self.utc)
    }

    private func indexes(_ spec: JobSpec) -> [Int] {
        spec.dependencies.map { dependency in
            guard case .earlier(let index) = dependency else { return -1 }
            return index
        }
    }

    @Test("Groups, after, delay and at are read; dependencies point at earlier specs")
    func everyWorkflowField() throws {
        // Given a file with two groups, a chain and start times
        let contents = try parse("""
            [groups.download]
            parallel = 2
            [groups.gpu]
            parallel = 1
            paused = true
            [defaults]
            group = "download"
            [[job]]
            name = "fetch-a"
            command = "a"
            [[job]]
            name = "fetch-b"
            command = "b"
            delay = "1m30s"
            [[job]]
            name = "train"
            group = "gpu"
            after = ["fetch-a", "fetch-b"]
            at = "2026-11-24T02:00:00+01:00"
            command = "t"
            [[job]]
            name = "report"
            group = "default"
            after = "train"
            at = "22:15"
            command = "r"
            """)
        // Then
        #expect(contents.groups == [JobGroup(name: "download", limit: 2), JobGroup(name: "gpu", limit: 1, isPaused: true)])
        #expect(contents.jobs.map(\.name) == ["fetch-a", "fetch-b", "train", "report"])
        #expect(contents.jobs.map(\.group) == ["download", "download", "gpu", "default"])
        #expect(contents.jobs.map(indexes) == [[], [], [0, 1], [2]])
        #expect(contents.jobs[0].notBefore == nil)
        #expect(contents.jobs[1].notBefore == .delay(.seconds(90)))
        #expect(contents.jobs[2].notBefore == .date(Date(timeIntervalSince1970: 1_795_467_600 + 4 * 3600)))
        #expect(contents.jobs[3].notBefore == .date(Date(timeIntervalSince1970: 1_795_467_600 + 75 * 60)))
    }

    @Test("A local time of day already past today means tomorrow; native TOML times are read too")
    func timeOfDay() throws {
        let contents = try parse("""
            [[job]]
            command = "a"
            at = "20:59:59"
            [[job]]
            command = "b"
            at = 07:30:00
            [[job]]
            command = "c"
            at = 2026-11-23T21:00:01Z
            """)
        let day = 24.0 * 3600
        #expect(contents.jobs[0].notBefore == .date(Self.now.addingTimeInterval(day - 1)))
        #expect(contents.jobs[1].notBefore == .date(Self.now.addingTimeInterval(day - 13.5 * 3600)))
        #expect(contents.jobs[2].notBefore == .date(Self.now.addingTimeInterval(1)))
    }

    @Test("Jobs are submitted after the jobs they wait for: file order when it already is one")
    func topologicalOrder() throws {
        // Given jobs listed before the jobs they wait for
        let contents = try parse("""
            [[job]]
            name = "deploy"
            after = ["test"]
            command = "d"
            [[job]]
            name = "lint"
            command = "l"
            [[job]]
            name = "test"
            after = ["build"]
            command = "t"
            [[job]]
            name = "build"
            command = "b"
            """)
        // Then each comes after what it waits for, and the rest keep their order
        #expect(contents.jobs.map(\.name) == ["build", "test", "deploy", "lint"])
        #expect(contents.jobs.map(indexes) == [[], [0], [1], []])
        // And a file already in order is kept as it is
        let ordered = try parse("""
            [[job]]
            name = "a"
            command = "a"
            [[job]]
            name = "b"
            command = "b"
            [[job]]
            name = "c"
            after = ["a"]
            command = "c"
            [[job]]
            name = "d"
            command = "d"
            """)
        #expect(ordered.jobs.map(\.name) == ["a", "b", "c", "d"])
    }

    @Test("A chain of 10,000 jobs listed backwards is ordered without overflowing the stack")
    func longChain() throws {
        var text = ""
        for index in (0..<10_000).reversed() {
            text += "[[job]]\nname = \"j\(index)\"\ncommand = \"true\"\n"
            if index > 0 { text += "after = [\"j\(index - 1)\"]\n" }
        }
        let contents = try parse(text)
        #expect(contents.jobs.first?.name == "j0")
        #expect(contents.jobs.last?.name == "j9999")
        #expect(contents.jobs.enumerated().allSatisfy { position, spec in indexes(spec).allSatisfy { $0 == position - 1 } })
    }

    @Test("A cycle is refused naming every job in it, in cycle order, from the first in the file")
    func cycle() {
        #expect(throws: JobInputError(
            .dependencyCycle,
            "w.toml: job 2 ('b'): 'after' makes a cycle of 3 jobs: 'b' waits for 'c', which waits for 'd', which waits for 'b'; none of them could ever start"
        )) {
            try parse("""
                [[job]]
                name = "a"
                command = "a"
                [[job]]
                name = "b"
                after = ["a", "c"]
                command = "b"
                [[job]]
                name = "c"
                after = ["d"]
                command = "c"
                [[job]]
                name = "d"
                after = ["b"]
                command = "d"
                """)
        }
        #expect(throws: JobInputError(
            .dependencyCycle, "w.toml: job 1 ('self'): 'after' names the job itself: it could never start"
        )) {
            try parse("[[job]]\nname = \"self\"\nafter = [\"self\"]\ncommand = \"x\"\n")
        }
    }

    @Test(
        "Each bad workflow is refused with the file, the job and the problem",
        arguments: [
            ("[[job]]\nname = \"alpha\"\ncommand = \"x\"\n[[job]]\nname = \"beta\"\nafter = [\"compile\"]\ncommand = \"y\"\n",
             "w.toml: job 2 ('beta'): 'after': no job named 'compile' (named jobs: alpha, beta)", JobInputError.Code.unknownDependency),
            ("[[job]]\nname = \"fetch\"\ncommand = \"x\"\n[[job]]\nafter = [\"fecth\"]\ncommand = \"y\"\n",
             "w.toml: job 2: 'after': no job named 'fecth' (did you mean 'fetch'?)", .unknownDependency),
            // Two edits from 'a', but nothing like it: no hint (it suggested 'a').
            ("[[job]]\nname = \"a\"\ncommand = \"x\"\n[[job]]\nafter = [\"zz\"]\ncommand = \"y\"\n",
             "w.toml: job 2: 'after': no job named 'zz' (named jobs: a)", .unknownDependency),
            // An `after` of any length: no hint is looked for past 256 characters (the search
            // costs the product of the lengths: 20,000-character names took minutes; a name is
            // now at most 256 bytes, an `after` value still any length).
            ("[[job]]\nname = \"\(String(repeating: "a", count: 256))\"\ncommand = \"x\"\n[[job]]\nafter = [\"\(String(repeating: "a", count: 19_999))b\"]\ncommand = \"y\"\n",
             "w.toml: job 2: 'after': no job named '\(String(repeating: "a", count: 19_999))b' (named jobs: \(String(repeating: "a", count: 256)))", .unknownDependency),
            ("[[job]]\nname = \"a\"\ncommand = \"x\"\n[[job]]\nname = \"a\"\ncommand = \"y\"\n[[job]]\nafter = [\"a\"]\ncommand = \"z\"\n",
             "w.toml: job 2 ('a'): duplicate name 'a' (job 1 has it too)", .duplicateName),
            ("[[job]]\ncommand = \"x\"\nafter = [1]\n", "w.toml: job 1: 'after' must list job names (strings), but item 1 is an integer", .wrongType),
            ("[[job]]\ncommand = \"x\"\ngroup = \"gpu\"\n",
             "w.toml: job 1: 'group': no group 'gpu'; add a [groups.gpu] table, or use one of: default", .unknownGroup),
            ("[groups.gpu]\n[[job]]\ncommand = \"x\"\ngroup = \"gpus\"\n",
             "w.toml: job 1: 'group': no group 'gpus' (did you mean 'gpu'?)", .unknownGroup),
            ("[defaults]\ngroup = \"gpu\"\n[[job]]\ncommand = \"x\"\n", "w.toml: [defaults]: 'group': no group 'gpu'", .unknownGroup),
            ("[groups.gpu]\nparallel = 0\n[[job]]\ncommand = \"x\"\n", "w.toml: [groups.gpu]: 'parallel' must be at least 1, not 0", .invalidValue),
            ("[groups.gpu]\nparallel = 1.5\n[[job]]\ncommand = \"x\"\n", "w.toml: [groups.gpu]: 'parallel' must be an integer, not a float", .wrongType),
            ("[groups.gpu]\nparalel = 2\n[[job]]\ncommand = \"x\"\n",
             "w.toml: [groups.gpu]: unknown key 'paralel' (did you mean 'parallel'?) (allowed: parallel, paused)", .unknownKey),
            ("[groups.gpu]\npaused = \"yes\"\n[[job]]\ncommand = \"x\"\n", "w.toml: [groups.gpu]: 'paused' must be true or false, not a string", .wrongType),
            ("[groups]\ngpu = 2\n[[job]]\ncommand = \"x\"\n", "w.toml: 'groups.gpu' must be a table", .wrongType),
            ("[groups.\"a b\"]\n[[job]]\ncommand = \"x\"\n", "w.toml: [groups.a b]: group name \"a b\" has a space", .invalidValue),
            ("[[job]]\nname = \"n\"\ncommand = \"x\"\ndelay = \"1s\"\nat = \"02:00\"\n", "w.toml: job 1 ('n'): 'delay' and 'at' together: give one of them", .invalidValue),
            ("[[job]]\ncommand = \"x\"\nat = \"2026-11-23T20:59:59Z\"\n",
             "w.toml: job 1: 'at': 2026-11-23T20:59:59.000Z is in the past (now it is 2026-11-23T21:00:00.000Z)", .timeInPast),
            ("[[job]]\ncommand = \"x\"\nat = 2020-01-01T00:00:00Z\n", "w.toml: job 1: 'at': 2020-01-01T00:00:00.000Z is in the past", .timeInPast),
            ("[[job]]\ncommand = \"x\"\nat = \"2026-11-24T02:00:00\"\n", "w.toml: job 1: 'at': '2026-11-24T02:00:00' is not a start time (it has no offset", .invalidValue),
            ("[[job]]\ncommand = \"x\"\nat = \"25:00\"\n", "w.toml: job 1: 'at': '25:00' is not a start time (no such time of day", .invalidValue),
            // A TOML local date-time is quoted as written (no Z it did not have).
            ("[[job]]\ncommand = \"x\"\nat = 2099-05-27T07:32:00\n", "w.toml: job 1: 'at': '2099-05-27T07:32:00' is not a start time (it has no offset", .invalidValue),
            // Beyond what the scheduler's clock counts: refused, not moved to its end.
            ("[[job]]\ncommand = \"x\"\nat = \"9999-12-31T23:59:59Z\"\n", "w.toml: job 1: 'at': 9999-12-31T23:59:59.000Z is more than 100 years away", .timeInPast),
            ("[[job]]\ncommand = \"x\"\nat = \"2026-02-30T00:00:00Z\"\n", "'2026-02-30T00:00:00Z' is not a start time (no such date or time", .invalidValue),
            ("[[job]]\ncommand = \"x\"\nat = \"tomorrow\"\n", "w.toml: job 1: 'at': 'tomorrow' is not a start time (not in either form", .invalidValue),
            ("[[job]]\ncommand = \"x\"\nat = 2026-11-24\n", "w.toml: job 1: 'at' must be a time like", .wrongType),
            ("[[job]]\ncommand = \"x\"\ndelay = \"soon\"\n", "w.toml: job 1: 'delay': 'soon' is not a duration", .invalidValue),
            ("[[job]]\ncommand = \"x\"\ndelay = 5\n", "w.toml: job 1: 'delay' must be a duration string", .wrongType),
            ("[defaults]\nafter = [\"a\"]\n[[job]]\ncommand = \"x\"\n", "w.toml: [defaults]: unknown key 'after' ('after' cannot be a default)", .unknownKey),
            ("[group.gpu]\n[[job]]\ncommand = \"x\"\n", "w.toml: unknown top-level key 'group' (did you mean 'groups'?)", .unknownKey),
        ])
    func refused(text: String, message: String, code: JobInputError.Code) {
        #expect {
            try parse(text)
        } throws: { error in
            guard let error = error as? JobInputError else { return false }
            return error.code == code && error.message.contains(message)
        }
    }

    @Test("--group-limit reads NAME=N and refuses anything else with what to write")
    func groupLimitSyntax() throws {
        #expect(try GroupLimit.parse("download=2") == GroupLimit(name: "download", limit: 2))
        #expect(try GroupLimit.parse("a=b=3") == GroupLimit(name: "a=b", limit: 3))
        for (text, message) in [
            ("download", "it has no '=': write NAME=N"),
            ("=2", "a group name cannot be empty"),
            ("gpu=", "'' is not a whole number"),
            ("gpu=two", "'two' is not a whole number"),
            ("gpu=0", "the limit must be at least 1, not 0"),
            ("gpu=-1", "the limit must be at least 1, not -1"),
        ] {
            #expect {
                try GroupLimit.parse(text)
            } throws: { error in
                (error as? JobInputError)?.message.contains(message) == true
            }
        }
    }

    @Test("--group-limit overrides a file's parallel, may limit the default group, and refuses an unknown group")
    func groupLimitApplied() throws {
        let file = [JobGroup(name: "build", limit: 2, isPaused: true), JobGroup(name: "gpu")]
        let applied = try GroupLimit.apply(
            [GroupLimit(name: "build", limit: 1), GroupLimit(name: "default", limit: 3), GroupLimit(name: "gpu", limit: 4)], to: file)
        #expect(applied == [
            JobGroup(name: "default", limit: 3), JobGroup(name: "build", limit: 1, isPaused: true), JobGroup(name: "gpu", limit: 4),
        ])
        #expect(throws: JobInputError(
            .unknownGroup,
            "--group-limit bulid=1: no group 'bulid' (did you mean 'build'?) (groups: default, build, gpu; a job file declares groups under [groups])"
        )) {
            try GroupLimit.apply([GroupLimit(name: "bulid", limit: 1)], to: file)
        }
    }

    @Test("Log lines of the workflow events carry groups, dependency names, times and reasons")
    func logLines() throws {
        // Given a formatter that saw a dependency and a dependent submitted
        let fetch = JobID(uuid: UUID(uuidString: "00000000-0000-4000-8000-000000000001")!)
        let train = JobID(uuid: UUID(uuidString: "00000000-0000-4000-8000-000000000002")!)
        let worker = WorkerDescriptor(id: WorkerID(), name: "local-1", kind: .local, slots: 1)
        for format in [LogFormat.text, .json] {
            let formatter = EventLogFormatter(format: format, logsOutput: false, epoch: 0)
            var seq: UInt64 = 0
            func line(_ milliseconds: Int, _ kind: SchedulerEvent.Kind) -> String? {
                seq += 1
                return formatter.line(for: SchedulerEvent(seq: seq, time: .milliseconds(milliseconds), kind: kind))
            }
            _ = line(0, .workerJoined(worker))
            let group = line(0, .groupChanged(JobGroup(name: "gpu", limit: 1, isPaused: false)))
            let submittedFetch = line(0, .submitted(JobInfo(id: fetch, name: "fetch", command: "f", maxAttempts: 1)))
            let submittedTrain = line(0, .submitted(JobInfo(
                id: train, name: "train", command: "t", state: .scheduled(until: .seconds(10)), maxAttempts: 1,
                group: "gpu", dependencies: [fetch])))
            let startedFetch = line(1, .started(fetch, attempt: 1, maxAttempts: 1, worker: worker.id))
            _ = line(2, .failed(fetch, reason: .exitStatus(1), attempts: 1))
            let reason = SkipReason(dependency: fetch, dependencyName: "fetch", outcome: .failed)
            let skipped = line(3, .skipped(train, reason: reason))
            // A retried dependency brings the dependent back: the name is still known
            let blocked = line(4, .blocked(train, waitingFor: [fetch]))
            let scheduled = line(5, .scheduled(train, at: .milliseconds(7_500)))
            let released = line(7_500, .released(train))
            let startedTrain = line(7_600, .started(train, attempt: 1, maxAttempts: 1, worker: worker.id))
            let summary = formatter.summaryLine(
                RunSummary(counts: [.succeeded: 1, .skipped: 1], wall: .seconds(1), signal: nil), at: 0)

            switch format {
            case .text:
                #expect(group?.hasSuffix(" group     group=gpu limit=1 paused=false") == true)
                #expect(submittedFetch?.hasSuffix(" fetch command=f priority=0 max_attempts=1") == true, "\(submittedFetch ?? "")")
                #expect(submittedTrain?.hasSuffix(
                    " train command=t priority=0 max_attempts=1 group=gpu after=fetch state=scheduled at=1970-01-01T00:00:10.000Z") == true,
                    "\(submittedTrain ?? "")")
                #expect(startedFetch?.hasSuffix("attempt=1/1 worker=local-1") == true)
                #expect(skipped?.hasSuffix(" train reason=\"dependency 'fetch' failed\" dependency=fetch dependency_outcome=failed") == true,
                        "\(skipped ?? "")")
                #expect(blocked?.hasSuffix(" train waiting_for=fetch") == true, "\(blocked ?? "")")
                #expect(scheduled?.hasSuffix(" train at=1970-01-01T00:00:07.500Z in=7.495s") == true, "\(scheduled ?? "")")
                #expect(released?.hasSuffix(" released  00000000 train") == true, "\(released ?? "")")
                #expect(startedTrain?.hasSuffix("attempt=1/1 worker=local-1 group=gpu") == true)
                #expect(summary.contains("cancelled=0 skipped=1 wall=1s"))
                #expect(summary.contains("exit_status=1"))
            case .json:
                let objects = try Log.json([group, submittedFetch, submittedTrain, startedFetch, skipped, blocked, scheduled, startedTrain, summary]
                    .map { try #require($0) })
                #expect(objects[0]["group"] as? String == "gpu" && objects[0]["limit"] as? Int == 1 && objects[0]["paused"] as? Bool == false)
                #expect(objects[1]["group"] as? String == "default" && objects[1]["after"] == nil && objects[1]["state"] == nil)
                #expect(objects[2]["group"] as? String == "gpu")
                #expect(objects[2]["after"] as? [String] == ["fetch"])
                #expect(objects[2]["state"] as? String == "scheduled")
                #expect(objects[2]["at"] as? String == "1970-01-01T00:00:10.000Z")
                #expect(objects[3]["group"] as? String == "default")
                #expect(objects[4]["reason"] as? String == "dependency 'fetch' failed")
                #expect(objects[4]["dependency"] as? String == "fetch")
                #expect(objects[5]["waiting_for"] as? [String] == ["fetch"])
                #expect(objects[6]["in"] as? Double == 7.495)
                #expect(objects[7]["group"] as? String == "gpu")
                #expect(objects[8]["skipped"] as? Int == 1)
            }
        }
    }

    @Test("A run with a skipped job exits with the failure status, and says how many were skipped")
    func summaryCountsSkipped() {
        let summary = RunSummary(counts: [.succeeded: 2, .skipped: 1], wall: .seconds(1), signal: nil)
        #expect(summary.exitStatus == ExitStatus.someFailed)
        #expect(summary.sentence.hasPrefix("3 jobs: 2 succeeded, 0 failed, 0 cancelled, 1 skipped"))
        // The rate counts the jobs that ran to an end, not the skipped one.
        #expect(summary.jobsPerSecond == 2)
        #expect(RunSummary(counts: [.succeeded: 4, .cancelled: 10_049], wall: .seconds(2), signal: SIGTERM).jobsPerSecond == 2)
        let held = RunSummary(counts: [.succeeded: 1, .blocked: 1, .scheduled: 1], wall: .seconds(1), signal: nil)
        #expect(held.unfinished == 2)
        #expect(held.exitStatus == ExitStatus.someFailed)
    }
}
