import Foundation
import GRDB
import JobtopTestSupport
import Scheduler
@testable import SchedulerStore
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The wall-clock time the journals these tests write by hand put the scheduler's time zero at:
/// a minute ago.
private let journalEpoch = Date(timeIntervalSinceNow: -60)

extension SchedulerStore {
    /// ``apply(_:epoch:)`` with the scheduler's time zero at ``journalEpoch``.
    @discardableResult
    func apply(_ events: [SchedulerEvent]) async throws(StoreError) -> [(JobID, StoreError)] {
        try await apply(events, epoch: journalEpoch)
    }
}

/// Runs a durable scheduler on `directory` until `body` is done, then shuts it down gracefully
/// and waits for the journal.
private func withDurable<R: Sendable>(
    _ directory: StateDirectory, slots: Int = 2, history: Int = 10_000, outputCap: Int = 16 << 20,
    _ body: (DurableScheduler) async throws -> R
) async throws -> R {
    let durable = try DurableScheduler.open(
        directory: directory,
        configuration: .init(localSlots: slots, gracePeriod: .seconds(2)),
        storeConfiguration: .init(finishedHistory: history, outputCap: outputCap))
    async let running: Void = durable.scheduler.run()
    await durable.restored()
    do {
        let result = try await body(durable)
        await durable.scheduler.shutdown(.graceful)
        await running
        await durable.close()
        return result
    } catch {
        await durable.scheduler.shutdown(.cancelRunning)
        await running
        await durable.close()
        throw error
    }
}

/// Waits for every job in `ids` to end, from one subscription.
private func waitForEnds(_ ids: [JobID], on client: DurableScheduler) async -> [JobID: JobState] {
    var open = Set(ids)
    var ends: [JobID: JobState] = [:]
    let snapshot = await client.currentSnapshot()
    for job in snapshot.jobs where open.contains(job.id) && job.state.isFinished {
        ends[job.id] = job.state
        open.remove(job.id)
    }
    guard !open.isEmpty else { return ends }
    for await event in await client.subscribe(bufferLimit: nil, includeOutput: false) {
        switch event.kind {
        case .snapshot(let snapshot):
            for job in snapshot.jobs where open.contains(job.id) && job.state.isFinished {
                ends[job.id] = job.state
                open.remove(job.id)
            }
        case .succeeded(let id, let attempts) where open.contains(id):
            ends[id] = .succeeded(attempts: attempts)
            open.remove(id)
        case .failed(let id, let reason, let attempts) where open.contains(id):
            ends[id] = .failed(reason: reason, attempts: attempts)
            open.remove(id)
        case .cancelled(let id) where open.contains(id):
            ends[id] = .cancelled
            open.remove(id)
        case .skipped(let id, let reason) where open.contains(id):
            ends[id] = .skipped(reason)
            open.remove(id)
        default:
            break
        }
        if open.isEmpty { break }
    }
    return ends
}

@Suite("Durable state")
struct StoreTests {
    @Test("In a state directory others may read (an existing 0755 one), the database, its WAL files and the output are this user's alone (they were 0644)")
    func stateIsPrivateInAnOpenDirectory() async throws {
        let scratch = try Scratch()
        let path = scratch.file("open-state")
        #expect(mkdir(path, 0o755) == 0)
        chmod(path, 0o755)
        let directory = StateDirectory(path: path)
        let ids = try await withDurable(directory) { durable in
            guard case .submitted(let ids) = try await durable.perform(.submit([JobSpec(work: .shell("echo secret"))], batch: nil)) else {
                throw SpawnError(message: "no ids")
            }
            _ = await waitForEnds(ids, on: durable)
            return ids
        }
        func mode(_ file: String) -> mode_t? {
            var info = stat()
            return stat(file, &info) == 0 ? info.st_mode & 0o777 : nil
        }
        #expect(mode(directory.database.path) == 0o600)
        for suffix in ["-wal", "-shm"] {
            if let walMode = mode(directory.database.path + suffix) { #expect(walMode == 0o600, "\(suffix)") }
        }
        #expect(mode(directory.outputDirectory.path) == 0o700)
        let outputs = try FileManager.default.contentsOfDirectory(atPath: directory.outputDirectory.path)
        #expect(outputs.count == ids.count)
        for file in outputs { #expect(mode(directory.outputDirectory.appendingPathComponent(file).path) == 0o600, "\(file)") }
        #expect(mode(path) == 0o755, "the directory given stays as it is")
    }

    @Test("submitted jobs, their outcomes, attempts and output survive a restart")
    func outcomesSurviveARestart() async throws {
        let scratch = try Scratch()
        let directory = StateDirectory(path: scratch.file("state"))
        let ids = try await withDurable(directory) { durable in
            let reply = try await durable.perform(.submit([
                JobSpec(name: "ok", work: .shell("echo hello; echo world >&2")),
                JobSpec(name: "bad", work: .shell("echo trying; exit 3"), retry: RetryPolicy(maxAttempts: 2, initialBackoff: .milliseconds(1))),
            ], batch: nil))
            guard case .submitted(let ids) = reply else { throw SpawnError(message: "no ids") }
            let ends = await waitForEnds(ids, on: durable)
            #expect(ends[ids[0]] == .succeeded(attempts: 1))
            #expect(ends[ids[1]]?.kind == .failed)
            return ids
        }
        try await withDurable(directory) { durable in
            let snapshot = await durable.currentSnapshot()
            let ok = try #require(snapshot.jobs.first { $0.id == ids[0] })
            let bad = try #require(snapshot.jobs.first { $0.id == ids[1] })
            #expect(ok.state == .succeeded(attempts: 1))
            #expect(ok.name == "ok")
            #expect(bad.state.kind == .failed)
            #expect(bad.attempts == 2)
            #expect(bad.lastFailure?.description == "exit 3")
            let output = try String(contentsOf: try #require(durable.outputFile(of: ids[0])), encoding: .utf8)
            #expect(output.contains("hello\n"))
            #expect(output.contains("world\n"))
            let retried = try String(contentsOf: try #require(durable.outputFile(of: ids[1])), encoding: .utf8)
            #expect(retried == "trying\n--- jobtop: attempt 2 of 2 ---\ntrying\n")
            // What a dashboard attached after the restart shows: the scheduler ran none of it,
            // the file has it.
            let tail = await durable.outputTail(of: ids[1])
            #expect(tail.lines.map(\.text) == ["trying", "--- jobtop: attempt 2 of 2 ---", "trying"] && tail.dropped == 0)
            let attempts = try await durable.store.attempts(of: ids[1])
            #expect(attempts.map(\.number) == [1, 2])
            #expect(attempts.map(\.outcome) == ["exit 3", "exit 3"])
        }
    }

    @Test("A job still names, after a restart, the dependencies that had succeeded (they were left out of its list), and runs once the others have")
    func succeededDependenciesAreStillNamed() async throws {
        let scratch = try Scratch()
        let directory = StateDirectory(path: scratch.file("state"))
        let (first, later) = try await withDurable(directory) { durable in
            guard case .submitted(let first) = try await durable.perform(.submit([JobSpec(name: "a", work: .shell("true"))], batch: nil)) else {
                throw SpawnError(message: "no ids")
            }
            _ = await waitForEnds(first, on: durable)
            _ = try await durable.perform(.pause)
            var b = JobSpec(name: "b", work: .shell("true"))
            b.dependencies = [.job(first[0]), .earlier(0)]
            guard case .submitted(let later) = try await durable.perform(.submit([JobSpec(name: "x", work: .shell("true")), b], batch: nil)) else {
                throw SpawnError(message: "no ids")
            }
            return (first[0], later)
        }
        try await withDurable(directory) { durable in
            let b = try #require(await durable.currentSnapshot().jobs.first { $0.id == later[1] })
            #expect(b.dependencies == [first, later[0]])
            #expect(b.state == .blocked)
            _ = try await durable.perform(.resume)
            let ends = await waitForEnds(later, on: durable)
            #expect(ends[later[1]] == .succeeded(attempts: 1))
        }
    }

    @Test("A job's whole environment and argv survive a restart (SQLite's text ended at the first NUL: three variables came back as one)")
    func environmentAndArgvSurviveARestart() async throws {
        let scratch = try Scratch()
        let directory = StateDirectory(path: scratch.file("state"))
        let environment = ["B": "2", "A": "1", "C": "three = with spaces\nand a newline"]
        let arguments = ["/bin/sh", "-c", "printf '%s|' \"$@\"; printf '%s|%s|%s' \"$A\" \"$B\" \"$C\"", "sh", "a b", "", "c"]
        let ids = try await withDurable(directory) { durable in
            _ = try await durable.perform(.pause)
            guard case .submitted(let ids) = try await durable.perform(.submit([
                JobSpec(name: "env", work: .shell("true"), environment: environment),
                JobSpec(name: "argv", work: .argv(arguments), environment: environment),
            ], batch: nil)) else { throw SpawnError(message: "no ids") }
            return ids
        }
        try await withDurable(directory) { durable in
            let jobs = await durable.currentSnapshot().jobs
            #expect(jobs.first { $0.id == ids[0] }?.environment == environment)
            _ = try await durable.perform(.resume)
            let ends = await waitForEnds(ids, on: durable)
            #expect(ends[ids[1]] == .succeeded(attempts: 1))
            await durable.flush()
            let output = try String(contentsOf: try #require(durable.outputFile(of: ids[1])), encoding: .utf8)
            #expect(output == "a b||c|1|2|three = with spaces\nand a newline")
        }
    }

    @Test("an attempt's separator starts a line of its own after output with no newline; a line the job stopped writing in the middle of is in the file while it runs")
    func separatorsStartALineAndPartialLinesAreWritten() async throws {
        let scratch = try Scratch()
        let directory = StateDirectory(path: scratch.file("state"))
        let gate = scratch.file("gate")
        #expect(mkfifo(gate, 0o600) == 0)
        let files = try await withDurable(directory) { durable in
            let reply = try await durable.perform(.submit([
                JobSpec(name: "glued", work: .shell("printf x; exit 1"), retry: RetryPolicy(maxAttempts: 2, initialBackoff: .milliseconds(1))),
                JobSpec(name: "half", work: .shell("printf 'half a line'; read x < '\(gate)'; echo ', and the rest'")),
            ], batch: nil))
            guard case .submitted(let ids) = reply else { throw SpawnError(message: "no ids") }
            // Written once the job has been silent for a moment (it waited for a newline, and a
            // kill -9 of serve lost it).
            let written = await eventually(within: .seconds(30)) {
                durable.outputFile(of: ids[1]).flatMap { try? String(contentsOf: $0, encoding: .utf8) } == "half a line"
            }
            #expect(written)
            let writer = FileHandle(forWritingAtPath: gate)
            try writer?.write(contentsOf: Data("go\n".utf8))
            try writer?.close()
            _ = await waitForEnds(ids, on: durable)
            return ids.map { directory.outputFile(of: $0.description) }
        }
        // Read once the serve has closed: its journal (the files) is written by then.
        #expect(try String(contentsOf: files[0], encoding: .utf8) == "x\n--- jobtop: attempt 2 of 2 ---\nx")
        #expect(try String(contentsOf: files[1], encoding: .utf8) == "half a line, and the rest\n")
    }

    @Test("output past the cap ends with the note, also when the cap falls at a line's end (the rest was dropped without it)")
    func theCapsNoteIsWrittenWhereverTheCapFalls() async throws {
        let scratch = try Scratch()
        let directory = StateDirectory(path: scratch.file("state"))
        // 1,024 lines of 1,024 bytes fill 1 MiB exactly; lines of 1,000 bytes cross it mid-line.
        let exact = "awk 'BEGIN { for (i = 0; i < 1024; i++) printf \"%01023d\\n\", i; print \"more\" }'"
        let across = "awk 'BEGIN { for (i = 0; i < 1100; i++) printf \"%0999d\\n\", i }'"
        let fits = "awk 'BEGIN { for (i = 0; i < 1024; i++) printf \"%01023d\\n\", i }'"
        let files = try await withDurable(directory, slots: 1, outputCap: 1 << 20) { durable in
            let reply = try await durable.perform(.submit([exact, across, fits].map { JobSpec(work: .shell($0)) }, batch: nil))
            guard case .submitted(let ids) = reply else { throw SpawnError(message: "no ids") }
            _ = await waitForEnds(ids, on: durable)
            return ids.map { directory.outputFile(of: $0.description) }
        }
        let note = "[jobtop: output beyond 1 MiB is not kept]\n"
        let texts = try files.map { try String(contentsOf: $0, encoding: .utf8) }
        #expect(texts[0].utf8.count == (1 << 20) + note.utf8.count && texts[0].hasSuffix("\n" + note))
        #expect(!texts[0].contains("more"))
        #expect(texts[1].utf8.count == (1 << 20) + 1 + note.utf8.count && texts[1].hasSuffix("\n" + note))
        // All of it fits: no note.
        #expect(texts[2].utf8.count == 1 << 20 && !texts[2].contains("jobtop"))
    }

    @Test("finished jobs keep their run times and end order after a restart, and every job its submission time")
    func timesSurviveARestart() async throws {
        let scratch = try Scratch()
        let directory = StateDirectory(path: scratch.file("state"))
        // One job at a time: `first` ends before `second` starts, and `second` runs for a while.
        let ids = try await withDurable(directory, slots: 1) { durable in
            let reply = try await durable.perform(.submit([
                JobSpec(name: "first", work: .shell("true")),
                JobSpec(name: "second", work: .shell("sleep 0.3")),
            ], batch: nil))
            guard case .submitted(let ids) = reply else { throw SpawnError(message: "no ids") }
            _ = await waitForEnds(ids, on: durable)
            return ids
        }
        try await withDurable(directory) { durable in
            let snapshot = await durable.currentSnapshot()
            let first = try #require(snapshot.jobs.first { $0.id == ids[0] })
            let second = try #require(snapshot.jobs.first { $0.id == ids[1] })
            // Before this serve's clock began: negative times, in the order they happened.
            let submitted = first.submittedAt, started = try #require(second.startedAt), finished = try #require(second.finishedAt)
            #expect(submitted < .zero && submitted <= second.submittedAt)
            #expect(try #require(first.finishedAt) <= started)
            #expect(finished < .zero)
            #expect(finished - started >= .milliseconds(250))
        }
    }

    @Test("Each event is written at its own time, not at its batch's: a journal that fell behind keeps a job's run time")
    func eventsKeepTheirOwnTimes() async throws {
        // Under load a 0.3 s job's start and end came to the journal in one batch, and both were
        // written at the batch's time: it had run for no time at all.
        let scratch = try Scratch()
        let store = try SchedulerStore(directory: StateDirectory(path: scratch.file("state")))
        defer { store.close() }
        let job = JobID(uuid: UUID())
        try await store.insert([.init(id: job, spec: JobSpec(name: "slow", work: .shell("sleep 0.3")))])
        let epoch = Date(timeIntervalSince1970: 1_800_000_000)
        try await store.apply([
            SchedulerEvent(seq: 1, time: .seconds(2), kind: .started(job, attempt: 1, maxAttempts: 1, worker: WorkerID())),
            SchedulerEvent(seq: 2, time: .milliseconds(2_300), kind: .succeeded(job, attempts: 1)),
        ], epoch: epoch)
        let attempt = try #require(try await store.attempts(of: job).first)
        #expect(abs(attempt.startedAt.timeIntervalSince(epoch) - 2) < 0.001)
        #expect(abs(try #require(attempt.endedAt).timeIntervalSince(epoch) - 2.3) < 0.001)
    }

    @Test("an output file's last lines: as many as asked for, the count of those before, a last line with no newline")
    func lastLinesOfAFile() throws {
        let scratch = try Scratch()
        let file = URL(fileURLWithPath: scratch.file("out"))
        try Data((1...2_500).map { "line \($0)\n" }.joined().appending("tail").utf8).write(to: file)
        let (lines, dropped) = DurableScheduler.lastLines(of: file, limit: 1_000)
        #expect(lines.count == 1_000 && dropped == 1_501)
        #expect(lines.first?.text == "line 1502" && lines.last?.text == "tail" && lines.last?.ending == OutputLine.Ending.none)
        #expect(DurableScheduler.lastLines(of: URL(fileURLWithPath: scratch.file("none")), limit: 10).lines.isEmpty)
    }

    @Test("A journal the database refuses is written again once it can be: no job's end is lost, and a command meanwhile says its effect is not saved")
    func aRefusedJournalIsWrittenAgain() async throws {
        let scratch = try Scratch()
        let directory = StateDirectory(path: scratch.file("state"))
        let id = try await withDurable(directory) { durable in
            // Given a job held by a pause
            _ = try await durable.perform(.pause)
            let reply = try await durable.perform(.submit([JobSpec(name: "x", work: .shell("echo kept"))], batch: nil))
            guard case .submitted(let ids) = reply else { throw SpawnError(message: "no ids") }
            // and the database locked by another program (refused as a full disk refuses it)
            var holding = Configuration()
            holding.allowsUnsafeTransactions = true  // the lock stays between the two accesses
            let other = try DatabaseQueue(path: directory.database.path, configuration: holding)
            try other.inDatabase { try $0.execute(sql: "BEGIN IMMEDIATE") }
            // When the job runs to its end
            await #expect(throws: SchedulerError.self, "the resume is done, but said not saved") {
                try await durable.perform(.resume)
            }
            #expect(await waitForEnds(ids, on: durable)[ids[0]] == .succeeded(attempts: 1))
            // and the lock goes
            try other.inDatabase { try $0.execute(sql: "COMMIT") }
            try other.close()
            return ids[0]
        }
        // Then the restart finds the job succeeded, with its output (before, the refused batch
        // was dropped: the job stayed "running" on disk, and a restart counted it cut off)
        try await withDurable(directory) { durable in
            let job = try #require(await durable.currentSnapshot().jobs.first { $0.id == id })
            #expect(job.state == .succeeded(attempts: 1))
            let output = try String(contentsOf: try #require(durable.outputFile(of: id)), encoding: .utf8)
            #expect(output == "kept\n")
            #expect(try await durable.store.attempts(of: id).map(\.outcome) == ["succeeded"])
        }
    }

    @Test("A job whose output file cannot be written loses its lines of the batch, said once by the caller; another job's lines in the same batch are written")
    func outputLossIsPerJob() async throws {
        let scratch = try Scratch()
        let directory = StateDirectory(path: scratch.file("state"))
        let store = try SchedulerStore(directory: directory)
        defer { store.close() }
        let (blocked, fine) = (JobID(uuid: UUID()), JobID(uuid: UUID()))
        // A directory where the first job's file would be: opening it for writing fails
        try FileManager.default.createDirectory(at: directory.outputFile(of: blocked.description), withIntermediateDirectories: true)
        let lost = try await store.apply([
            SchedulerEvent(seq: 1, time: .zero, kind: .output(blocked, OutputLine(stream: .stdout, text: "lost"))),
            SchedulerEvent(seq: 2, time: .zero, kind: .output(fine, OutputLine(stream: .stdout, text: "kept"))),
        ])
        #expect(lost.map(\.0) == [blocked])
        #expect(lost.first?.1.description.contains(directory.outputFile(of: blocked.description).path) == true)
        #expect(try String(contentsOf: try #require(store.outputFile(of: fine)), encoding: .utf8) == "kept\n")
    }

    @Test("forgotten finished jobs stay forgotten after a restart; queued ones stay; the rows of groups left with no job and no setting go")
    func cleanIsDurable() async throws {
        let scratch = try Scratch()
        let directory = StateDirectory(path: scratch.file("state"))
        let (done, queued) = try await withDurable(directory) { durable in
            var spec = JobSpec(work: .shell("echo x"))
            spec.group = "tmp"
            guard case .submitted(let ids) = try await durable.perform(.submit([spec], batch: nil)) else {
                throw SpawnError(message: "no ids")
            }
            _ = await waitForEnds(ids, on: durable)
            _ = try await durable.perform(.pause)
            _ = try await durable.perform(.setGroupLimit("lifted", 2))
            _ = try await durable.perform(.setGroupLimit("lifted", nil))
            _ = try await durable.perform(.setGroupLimit("kept", 3))
            var waiting = JobSpec(work: .shell("true"))
            waiting.group = "q"
            guard case .submitted(let more) = try await durable.perform(.submit([waiting], batch: nil)) else {
                throw SpawnError(message: "no ids")
            }
            #expect(try await durable.perform(.forgetFinished) == .forgotten(1))
            #expect(await durable.currentSnapshot().groups.map(\.group.name) == ["default", "kept", "q"])
            return (ids[0], more[0])
        }
        // (The rows of groups with no setting were kept for good, one per name ever used.)
        let rows = try await DatabaseQueue(path: directory.database.path).read { db in
            try String.fetchAll(db, sql: "SELECT name FROM grp ORDER BY name")
        }
        #expect(rows == ["kept", "q"])
        try await withDurable(directory) { durable in
            let jobs = await durable.currentSnapshot().jobs.map(\.id)
            #expect(jobs == [queued])
            #expect(durable.outputFile(of: done) == nil)
        }
    }

    @Test("a second store on the same directory is refused while the first holds it")
    func secondOpenIsRefused() async throws {
        let scratch = try Scratch()
        let directory = StateDirectory(path: scratch.file("state"))
        let first = try SchedulerStore(directory: directory)
        #expect(throws: StoreError.self) { try SchedulerStore(directory: directory) }
        do {
            _ = try SchedulerStore(directory: directory)
        } catch {
            #expect(error.message.contains("another jobtop serve"))
            #expect(error.message.contains("pid \(getpid())"))
        }
        _ = first
    }

    @Test("a second store is refused even once the lock file was removed (rm lock): the directory itself is locked (a second serve took the directory over and killed the first one's running jobs)")
    func removedLockFileStillRefuses() async throws {
        let scratch = try Scratch()
        let directory = StateDirectory(path: scratch.file("state"))
        let first = try SchedulerStore(directory: directory)
        try FileManager.default.removeItem(at: directory.lockFile)
        do {
            _ = try SchedulerStore(directory: directory)
            Issue.record("a second store opened the directory")
        } catch {
            #expect(error.message.contains("another jobtop serve uses the state directory"), "\(error.message)")
        }
        _ = first
    }

    @Test("another program's SQLite file under jobtop's name is refused, named, and left as it was (its tables were kept beside jobtop's; one named job failed with its whole schema as the message)")
    func foreignDatabaseIsRefused() async throws {
        let scratch = try Scratch()
        let directory = StateDirectory(path: scratch.file("state"))
        try FileManager.default.createDirectory(atPath: directory.url.path, withIntermediateDirectories: true)
        for table in ["foo", "job"] {
            try? FileManager.default.removeItem(at: directory.database)
            let other = try DatabaseQueue(path: directory.database.path)
            try await other.write { try $0.execute(sql: "CREATE TABLE \(table) (x INTEGER)") }
            try other.close()
            do {
                _ = try SchedulerStore(directory: directory)
                Issue.record("a database with a table \(table) was taken")
            } catch {
                #expect(error.message.contains("is not jobtop's state database (it has tables of its own: \(table))"), "\(error.message)")
                #expect(!error.message.contains("CREATE"), "\(error.message)")
            }
            let kept = try DatabaseQueue(path: directory.database.path)
            #expect(try await kept.read { try String.fetchAll($0, sql: "SELECT name FROM sqlite_master WHERE type = 'table'") } == [table])
            try kept.close()
        }
    }

    @Test("the lock goes with its holder")
    func lockIsReleased() async throws {
        let scratch = try Scratch()
        let directory = StateDirectory(path: scratch.file("state"))
        do { _ = try SchedulerStore(directory: directory) }
        _ = try SchedulerStore(directory: directory)
    }

    @Test("a file that is not a database is refused with its path")
    func notADatabase() async throws {
        let scratch = try Scratch()
        try scratch.write("state/jobtop.db", String(repeating: "not sqlite\n", count: 200))
        let directory = StateDirectory(path: scratch.file("state"))
        do {
            _ = try SchedulerStore(directory: directory)
            Issue.record("opened a file that is not a database")
        } catch {
            #expect(error.message.contains(scratch.file("state/jobtop.db")))
        }
    }

    @Test("a state directory under a file is refused in words, naming the file")
    func underAFile() async throws {
        let scratch = try Scratch()
        try scratch.write("plain", "a file\n")
        do {
            _ = try SchedulerStore(directory: StateDirectory(path: scratch.file("plain/state")))
            Issue.record("made a state directory under a file")
        } catch {
            // It said "The operation could not be completed. (NSCocoaErrorDomain error 512.)".
            #expect(error.message.hasSuffix("\(scratch.file("plain")) is a file, not a directory"), "\(error.message)")
        }
    }

    @Test("queued, blocked and scheduled jobs, priorities, groups and the pause come back as they were")
    func openJobsComeBack() async throws {
        let scratch = try Scratch()
        let directory = StateDirectory(path: scratch.file("state"))
        let marker = scratch.file("ran")
        let (ids, later) = try await withDurable(directory) { durable in
            _ = try await durable.perform(.pause)
            _ = try await durable.perform(.setGroupLimit("gpu", 1))
            _ = try await durable.perform(.pauseGroup("io"))
            let reply = try await durable.perform(.submit([
                JobSpec(name: "first", work: .shell("echo first >> \(marker)"), priority: 1),
                JobSpec(name: "second", work: .shell("echo second >> \(marker)"), group: "gpu", dependencies: [.earlier(0)]),
                JobSpec(name: "io", work: .shell("echo io >> \(marker)"), group: "io"),
                JobSpec(name: "later", work: .shell("echo later >> \(marker)"), notBefore: .delay(.seconds(3600))),
            ], batch: nil))
            guard case .submitted(let ids) = reply else { throw SpawnError(message: "no ids") }
            _ = try await durable.perform(.setPriority(ids[0], 7))
            return (ids, ids[3])
        }
        #expect(!FileManager.default.fileExists(atPath: marker))
        try await withDurable(directory) { durable in
            let snapshot = await durable.currentSnapshot()
            #expect(snapshot.isPaused)
            let byID = Dictionary(uniqueKeysWithValues: snapshot.jobs.map { ($0.id, $0) })
            #expect(byID[ids[0]]?.state == .queued)
            #expect(byID[ids[0]]?.priority == 7)
            #expect(byID[ids[1]]?.state == .blocked)
            #expect(byID[ids[1]]?.dependencies == [ids[0]])
            #expect(byID[ids[2]]?.state == .queued)
            if case .scheduled = byID[later]?.state {} else { Issue.record("later is \(String(describing: byID[later]?.state))") }
            #expect(snapshot.groups.first { $0.group.name == "gpu" }?.group.limit == 1)
            #expect(snapshot.groups.first { $0.group.name == "io" }?.group.isPaused == true)
            _ = try await durable.perform(.resume)
            let ends = await waitForEnds([ids[0], ids[1]], on: durable)
            #expect(ends[ids[0]] == .succeeded(attempts: 1))
            #expect(ends[ids[1]] == .succeeded(attempts: 1))
            _ = try await durable.perform(.cancel(later))
            _ = try await durable.perform(.cancel(ids[2]))
        }
        #expect(scratch.read("ran") == "first\nsecond\n")
    }

    @Test("a job waiting for a retry waits out the rest of its backoff after a restart; one whose retry came due meanwhile runs at once")
    func waitingJobsKeepTheirBackoff() async throws {
        let scratch = try Scratch()
        let directory = StateDirectory(path: scratch.file("state"))
        // A journal as a serve leaves it when it stops while two jobs wait for their retries:
        // one due in an hour, one due a second after its failure (long past once restarted).
        let store = try SchedulerStore(directory: directory)
        let later = JobID(uuid: UUID())
        let due = JobID(uuid: UUID())
        let retry = RetryPolicy(maxAttempts: 3)
        try await store.insert([
            .init(id: later, spec: JobSpec(name: "later", work: .shell("true"), retry: retry)),
            .init(id: due, spec: JobSpec(name: "due", work: .shell("true"), retry: retry)),
        ])
        let worker = WorkerID()
        let failure = FailureReason.exitStatus(1)
        try await store.apply([
            SchedulerEvent(seq: 1, time: .zero, kind: .started(later, attempt: 1, maxAttempts: 3, worker: worker)),
            SchedulerEvent(seq: 2, time: .zero, kind: .started(due, attempt: 1, maxAttempts: 3, worker: worker)),
            SchedulerEvent(seq: 3, time: .seconds(1), kind: .retryScheduled(
                later, failedAttempt: 1, reason: failure, nextAttempt: 2, at: .seconds(3601))),
            SchedulerEvent(seq: 4, time: .seconds(1), kind: .retryScheduled(
                due, failedAttempt: 1, reason: failure, nextAttempt: 2, at: .seconds(1) - .milliseconds(1))),
        ])
        store.close()

        try await withDurable(directory) { durable in
            let ends = await waitForEnds([due], on: durable)
            #expect(ends[due] == .succeeded(attempts: 2))
            let snapshot = await durable.currentSnapshot()
            let job = snapshot.jobs.first { $0.id == later }
            guard case .waitingForRetry(let until, let failedAttempt, let reason) = job?.state else {
                Issue.record("later is \(String(describing: job?.state)), not waiting for its retry")
                return
            }
            #expect(failedAttempt == 1)
            #expect(reason == .error(failure.description))
            // About an hour from now (the restart took well under a minute).
            let left = until - snapshot.time
            #expect(left > .seconds(3500) && left <= .seconds(3600))
            #expect(job?.attempts == 1)
            _ = try await durable.perform(.cancel(later))
        }
    }

    @Test("A shutdown that stops the running jobs (a serve's second SIGTERM, shutdown --now): subscribers see the stopped job go back to the queue and nothing cancelled or skipped; on disk too: the stopped attempt does not count (it failed the job for good when it had no retries, and skipped its dependents)")
    func stopRunningKeepsTheQueue() async throws {
        let scratch = try Scratch()
        let directory = StateDirectory(path: scratch.file("state"))
        let started = scratch.file("started")
        var kinds: [SchedulerEvent.Kind] = []
        let durable = try DurableScheduler.open(
            directory: directory, configuration: .init(localSlots: 1, gracePeriod: .seconds(2)), storeConfiguration: .init())
        async let running: Void = durable.scheduler.run()
        await durable.restored()
        let events = await durable.subscribe(bufferLimit: nil, includeOutput: false)
        // The long one runs until stopped the first time, and succeeds the next.
        var after = JobSpec(name: "after", work: .shell("true"))
        after.dependencies = [.earlier(0)]
        let reply = try await durable.perform(.submit([
            JobSpec(name: "long", work: .shell("[ -e '\(started)' ] && exit 0; touch '\(started)'; sleep 300")),
            JobSpec(name: "queued", work: .shell("true")),
            after,
        ], batch: nil))
        guard case .submitted(let ids) = reply else { throw SpawnError(message: "no ids") }
        #expect(await eventually(within: .seconds(60)) { FileManager.default.fileExists(atPath: started) })
        _ = try await durable.perform(.shutdown(.stopRunning))
        await running
        for await event in events { kinds.append(event.kind) }
        await durable.close()
        #expect(!kinds.contains { if case .cancelled = $0 { true } else if case .skipped = $0 { true } else { false } }, "\(kinds)")
        #expect(kinds.contains { if case .requeued(ids[0], .stoppedForShutdown) = $0 { true } else { false } }, "\(kinds)")

        // On disk: the stopped job is queued with its attempt uncounted (no retries, and it
        // still runs again), nothing was cut off; the others are as they were.
        try await withDurable(directory) { durable in
            #expect(durable.recovery.interrupted.isEmpty)
            let ends = await waitForEnds(ids, on: durable)
            #expect(ends[ids[1]] == .succeeded(attempts: 1))
            #expect(ends[ids[2]] == .succeeded(attempts: 1))
            #expect(ends[ids[0]] == .succeeded(attempts: 1))
        }
    }

    @Test("a job that was running when serve died: its process group is stopped, the attempt counts as failed, and it runs again if it may")
    func interruptedJobs() async throws {
        let scratch = try Scratch()
        let directory = StateDirectory(path: scratch.file("state"))
        // The first serve's store, with two jobs recorded as running (as a journal leaves them
        // when serve is killed), one of which has a retry left, and a process that carries the
        // state directory's mark, as such a job's leftover would.
        let store = try SchedulerStore(directory: directory)
        let again = JobID(uuid: UUID())
        let once = JobID(uuid: UUID())
        try await store.insert([
            .init(id: again, spec: JobSpec(name: "again", work: .shell("true"), retry: RetryPolicy(maxAttempts: 2))),
            .init(id: once, spec: JobSpec(name: "once", work: .shell("true"))),
        ])
        let worker = WorkerID()
        try await store.apply([
            SchedulerEvent(seq: 1, time: .zero, kind: .started(again, attempt: 1, maxAttempts: 2, worker: worker)),
            SchedulerEvent(seq: 2, time: .zero, kind: .started(once, attempt: 1, maxAttempts: 1, worker: worker)),
        ])
        let leftover = try JobtopProcess(
            ["1000"], environment: ["JOBTOP_SERVE_ID": store.instanceID], newSession: true, executable: "/bin/sleep")
        let instance = store.instanceID
        store.close()

        try await withDurable(directory) { durable in
            #expect(durable.store.instanceID == instance)
            #expect(durable.orphansStopped == 1)
            #expect(durable.recovery.interrupted.sorted() == [again, once].sorted())
            #expect(durable.recovery.failedForGood == [once])
            let ends = await waitForEnds([again, once], on: durable)
            #expect(ends[again] == .succeeded(attempts: 2))
            #expect(ends[once] == .failed(reason: .error(SchedulerStore.stoppedReason), attempts: 1))
            // The one that failed for good keeps its run's times (its TIME was blank).
            let shown = await durable.scheduler.currentSnapshot().jobs.first { $0.id == once }
            #expect(shown?.history.startedAt != nil && shown?.history.finishedAt != nil, "\(String(describing: shown?.history))")
            await durable.flush()
            let attempts = try await durable.store.attempts(of: again)
            #expect(attempts.map(\.outcome) == [SchedulerStore.stoppedReason, "succeeded"])
        }
        // Stopped by the SIGTERM, well before the grace period's SIGKILL.
        let outcome = await leftover.wait()
        #expect(outcome.status == 128 + SIGTERM)
    }

    @Test("Output a job's file could not take (a full disk) is marked where it is missing, on a line of its own, once writing works again: a reader saw lines of two places spliced into one and no word of the hole")
    func missingOutputIsMarked() async throws {
        let scratch = try Scratch()
        let directory = StateDirectory(path: scratch.file("state"))
        try FileManager.default.createDirectory(at: directory.outputDirectory, withIntermediateDirectories: true)
        let files = OutputFiles(directory: directory, cap: 1 << 20)
        let id = JobID(uuid: UUID())
        func output(_ text: String, _ ending: OutputLine.Ending = .newline) -> SchedulerEvent {
            SchedulerEvent(seq: 1, time: .zero, kind: .output(id, OutputLine(stream: .stdout, text: text, ending: ending)))
        }
        let path = directory.outputFile(of: id.description).path
        #expect(await files.write(events: [output("first"), output("half a li", .none)]).isEmpty)
        // When its file cannot be written (here: a directory stands in its place)
        try FileManager.default.moveItem(atPath: path, toPath: path + ".kept")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        #expect(await files.write(events: [output("ne"), output("lost")]).count == 1)
        try FileManager.default.removeItem(atPath: path)
        try FileManager.default.moveItem(atPath: path + ".kept", toPath: path)
        // Then the next write says what is missing first, on a line of its own
        #expect(await files.write(events: [output("after")]).isEmpty)
        let written = try String(contentsOfFile: path, encoding: .utf8)
        #expect(written == """
            first
            half a li
            [jobtop: 8 bytes of output are missing here: they could not be written (Is a directory)]
            after

            """, "\(written.debugDescription)")
    }

    @Test("A job whose cancel was answered while its attempt was being stopped when serve died ends cancelled after the restart, not run again (its dependent skipped for it); one being stopped for its timeout counts as that timeout")
    func stopsUnderWayWhenServeDied() async throws {
        let scratch = try Scratch()
        let directory = StateDirectory(path: scratch.file("state"))
        let store = try SchedulerStore(directory: directory)
        let (stopped, kid, slow) = (JobID(uuid: UUID()), JobID(uuid: UUID()), JobID(uuid: UUID()))
        var kidSpec = JobSpec(name: "kid", work: .shell("true"))
        kidSpec.dependencies = [.job(stopped)]
        try await store.insert([
            .init(id: stopped, spec: JobSpec(name: "stopped", work: .shell("true"), retry: RetryPolicy(maxAttempts: 4))),
            .init(id: kid, spec: kidSpec),
            .init(id: slow, spec: JobSpec(name: "slow", work: .shell("true"), retry: RetryPolicy(maxAttempts: 2), timeout: .seconds(5))),
        ])
        let worker = WorkerID()
        // As a journal leaves them when serve is killed during the stops' grace period.
        try await store.apply([
            SchedulerEvent(seq: 1, time: .zero, kind: .started(stopped, attempt: 1, maxAttempts: 4, worker: worker)),
            SchedulerEvent(seq: 2, time: .zero, kind: .blocked(kid, waitingFor: [stopped])),
            SchedulerEvent(seq: 3, time: .zero, kind: .started(slow, attempt: 1, maxAttempts: 2, worker: worker)),
            SchedulerEvent(seq: 4, time: .seconds(1), kind: .stopping(stopped, .cancel)),
            SchedulerEvent(seq: 5, time: .seconds(5), kind: .stopping(slow, .timeout)),
        ])
        store.close()

        try await withDurable(directory) { durable in
            #expect(durable.recovery.cancelled == [stopped])
            #expect(durable.recovery.interrupted == [slow])
            // (serve's note counts it as timed out, not as stopped by jobtop.)
            #expect(durable.recovery.timedOut == [slow])
            let ends = await waitForEnds([stopped, kid, slow], on: durable)
            #expect(ends[stopped] == .cancelled)
            #expect(ends[kid] == .skipped(SkipReason(dependency: stopped, dependencyName: "stopped", outcome: .cancelled)))
            #expect(ends[slow] == .succeeded(attempts: 2))
            await durable.flush()
            let stoppedAttempts = try await durable.store.attempts(of: stopped)
            #expect(stoppedAttempts.map(\.outcome) == ["cancelled"])
            let slowAttempts = try await durable.store.attempts(of: slow)
            #expect(slowAttempts.map(\.outcome) == ["timed out after 5s", "succeeded"])
        }
    }

    @Test("A restart stops only the processes of jobs that had not ended: what a finished job left running on purpose (keep_background) carries its job's id and outlives the crash (a restart killed it)")
    func restartSparesWhatFinishedJobsLeft() async throws {
        let scratch = try Scratch()
        let directory = StateDirectory(path: scratch.file("state"))
        let store = try SchedulerStore(directory: directory)
        let (kept, cut) = (JobID(uuid: UUID()), JobID(uuid: UUID()))
        try await store.insert([
            .init(id: kept, spec: JobSpec(name: "daemon", work: .shell("true"))),
            .init(id: cut, spec: JobSpec(name: "cut", work: .shell("true"), retry: RetryPolicy(maxAttempts: 2))),
        ])
        let worker = WorkerID()
        try await store.apply([
            SchedulerEvent(seq: 1, time: .zero, kind: .started(kept, attempt: 1, maxAttempts: 1, worker: worker)),
            SchedulerEvent(seq: 2, time: .zero, kind: .succeeded(kept, attempts: 1)),
            SchedulerEvent(seq: 3, time: .zero, kind: .started(cut, attempt: 1, maxAttempts: 2, worker: worker)),
        ])
        func process(of job: JobID) throws -> JobtopProcess {
            try JobtopProcess(
                ["1000"], environment: ["JOBTOP_SERVE_ID": store.instanceID, "JOBTOP_JOB_ID": job.description],
                newSession: true, executable: "/bin/sleep")
        }
        let daemon = try process(of: kept)
        let leftover = try process(of: cut)
        store.close()

        try await withDurable(directory) { durable in
            #expect(durable.orphansStopped == 1)
            let ends = await waitForEnds([cut], on: durable)
            #expect(ends[cut] == .succeeded(attempts: 2))
        }
        #expect(await leftover.wait().status == 128 + SIGTERM)
        // (Its own group, as a job's: alive, not a zombie waiting for this test to reap it.)
        #expect(OrphanReaper.liveGroups(among: [daemon.pid]) == [daemon.pid], "the finished job's daemon still runs")
        kill(daemon.pid, SIGKILL)
        _ = await daemon.wait()
    }

    @Test("An attempt cut off by a serve's death ends when the serve was last known alive, not at the restart: its run time does not count the downtime")
    func cutOffAttemptsEndWhenTheServeWasLastAlive() async throws {
        let scratch = try Scratch()
        let directory = StateDirectory(path: scratch.file("state"))
        let store = try SchedulerStore(directory: directory)
        let (long, short) = (JobID(uuid: UUID()), JobID(uuid: UUID()))
        try await store.insert([
            .init(id: long, spec: JobSpec(name: "long", work: .shell("true"))),
            .init(id: short, spec: JobSpec(name: "short", work: .shell("true"), retry: RetryPolicy(maxAttempts: 2))),
        ])
        // Started an hour ago; the serve was last alive 10 s later (a journal write), then
        // 25 s later (the periodic note), then killed
        let epoch = Date(timeIntervalSinceNow: -3600).timeIntervalSince1970.rounded()
        let started = Date(timeIntervalSince1970: epoch)
        try await store.apply([
            SchedulerEvent(seq: 1, time: .zero, kind: .started(long, attempt: 1, maxAttempts: 1, worker: WorkerID())),
        ], epoch: started)
        try await store.apply([
            SchedulerEvent(seq: 2, time: .seconds(10), kind: .started(short, attempt: 1, maxAttempts: 2, worker: WorkerID())),
        ], epoch: started)
        try await store.markAlive(at: started + 25)
        store.close()
        let next = try SchedulerStore(directory: directory)
        defer { next.close() }
        let recovery = try next.recover()
        #expect(recovery.failedForGood == [long])
        #expect(recovery.jobs.first { $0.id == long }?.finishedAt == started + 25)
        #expect(try await next.attempts(of: long).map(\.endedAt) == [started + 25])
        #expect(try await next.attempts(of: short).map(\.endedAt) == [started + 25])
    }

    @Test("An attempt held at a worker that holds attempts (prefetch) and never begun goes back to the queue uncounted after a serve's death; one that began counts as cut off; 'began' moves an attempt's start")
    func heldAttemptsAreHandedBack() async throws {
        let scratch = try Scratch()
        let directory = StateDirectory(path: scratch.file("state"))
        let store = try SchedulerStore(directory: directory)
        let (held, begun, local) = (JobID(uuid: UUID()), JobID(uuid: UUID()), JobID(uuid: UUID()))
        try await store.insert([
            .init(id: held, spec: JobSpec(name: "held", work: .shell("true"))),
            .init(id: begun, spec: JobSpec(name: "begun", work: .shell("true"))),
            .init(id: local, spec: JobSpec(name: "local", work: .shell("true"))),
        ])
        let far = WorkerDescriptor(id: WorkerID(), name: "far", kind: .remote, slots: 2, holdsAttempts: true)
        let near = WorkerDescriptor(id: WorkerID(), name: "near", kind: .local, slots: 1)
        try await store.apply([
            SchedulerEvent(seq: 1, time: .zero, kind: .workerJoined(far)),
            SchedulerEvent(seq: 2, time: .zero, kind: .workerJoined(near)),
            SchedulerEvent(seq: 3, time: .zero, kind: .started(held, attempt: 1, maxAttempts: 1, worker: far.id)),
            SchedulerEvent(seq: 4, time: .zero, kind: .started(begun, attempt: 1, maxAttempts: 1, worker: far.id)),
            SchedulerEvent(seq: 5, time: .zero, kind: .started(local, attempt: 1, maxAttempts: 1, worker: near.id)),
        ])
        let handedOver = try await store.attempts(of: begun)[0].startedAt
        try await store.apply([SchedulerEvent(seq: 6, time: .seconds(1), kind: .began(begun, attempt: 1))])
        // Its run starts when it began: a second after its hand-over.
        #expect(abs(try await store.attempts(of: begun)[0].startedAt.timeIntervalSince(handedOver) - 1) < 0.001)
        // Held until it began: only the one handed to the holding worker and not begun is.
        let database = try DatabaseQueue(path: directory.database.path)
        let stillHeld = try await database.read { db in
            try String.fetchAll(db, sql: "SELECT job FROM attempt WHERE held = 1 AND ended_at IS NULL")
        }
        #expect(stillHeld == [held.description])
        store.close()

        try await withDurable(directory) { durable in
            #expect(durable.recovery.handedBack == [held])
            #expect(durable.recovery.interrupted.sorted() == [begun, local].sorted())
            #expect(durable.recovery.failedForGood.sorted() == [begun, local].sorted())
            let ends = await waitForEnds([held], on: durable)
            // Its one attempt was not used up: it runs, as attempt 1.
            #expect(ends[held] == .succeeded(attempts: 1))
            await durable.flush()
            let attempts = try await durable.store.attempts(of: held)
            #expect(attempts.map(\.outcome) == [SchedulerStore.handedBackOutcome, "succeeded"])
            #expect(attempts.map(\.number) == [1, 1])
        }
    }

    @Test("The output file marks a lost worker's attempt even when the loss comes with no output in its batch (it was missing), but not one that printed nothing (its header stands, once), and an attempt's header is not written twice: after a restart that hands back a held attempt, or after the worker-lost line")
    func outputFileSeparators() async throws {
        let scratch = try Scratch()
        let directory = StateDirectory(path: scratch.file("state"))
        let (lost, held) = (JobID(uuid: UUID()), JobID(uuid: UUID()))
        var store = try SchedulerStore(directory: directory)
        try await store.insert([
            .init(id: lost, spec: JobSpec(name: "lost", work: .shell("true"), retry: RetryPolicy(maxAttempts: 3))),
            .init(id: held, spec: JobSpec(name: "held", work: .shell("true"), retry: RetryPolicy(maxAttempts: 3))),
        ])
        let worker = WorkerID()
        func line(_ text: String) -> OutputLine { OutputLine(stream: .stdout, text: text) }
        // A first attempt that prints, a loss on its own in a batch, the attempt again.
        try await store.apply([
            SchedulerEvent(seq: 1, time: .zero, kind: .started(lost, attempt: 1, maxAttempts: 3, worker: worker)),
            SchedulerEvent(seq: 2, time: .zero, kind: .output(lost, line("first try"))),
        ])
        try await store.apply([SchedulerEvent(seq: 3, time: .zero, kind: .requeued(lost, reason: .workerLost(.heartbeatMissed(.seconds(3)))))])
        // A second attempt lost before it printed, then run again: its header once, no
        // worker-lost line (it would mark the end of no output).
        try await store.apply([
            SchedulerEvent(seq: 4, time: .zero, kind: .started(lost, attempt: 1, maxAttempts: 3, worker: worker)),
            SchedulerEvent(seq: 5, time: .zero, kind: .output(lost, line("again"))),
            SchedulerEvent(seq: 6, time: .zero, kind: .retryScheduled(lost, failedAttempt: 1, reason: .exitStatus(1), nextAttempt: 2, at: .zero)),
            SchedulerEvent(seq: 7, time: .zero, kind: .requeued(lost, reason: .retryDue)),
            SchedulerEvent(seq: 8, time: .zero, kind: .started(lost, attempt: 2, maxAttempts: 3, worker: worker)),
        ])
        try await store.apply([SchedulerEvent(seq: 9, time: .zero, kind: .requeued(lost, reason: .workerLost(.heartbeatMissed(.seconds(3)))))])
        try await store.apply([
            SchedulerEvent(seq: 10, time: .zero, kind: .started(lost, attempt: 2, maxAttempts: 3, worker: worker)),
            SchedulerEvent(seq: 11, time: .zero, kind: .output(lost, line("second"))),
        ])
        // An attempt 2 handed out (its header written), then the serve dies; the next serve's
        // store starts it again.
        try await store.apply([
            SchedulerEvent(seq: 12, time: .zero, kind: .started(held, attempt: 1, maxAttempts: 3, worker: worker)),
            SchedulerEvent(seq: 13, time: .zero, kind: .output(held, line("one"))),
            SchedulerEvent(seq: 14, time: .zero, kind: .retryScheduled(held, failedAttempt: 1, reason: .exitStatus(1), nextAttempt: 2, at: .zero)),
            SchedulerEvent(seq: 15, time: .zero, kind: .requeued(held, reason: .retryDue)),
            SchedulerEvent(seq: 16, time: .zero, kind: .started(held, attempt: 2, maxAttempts: 3, worker: worker)),
        ])
        store.close()
        store = try SchedulerStore(directory: directory)
        try await store.apply([
            SchedulerEvent(seq: 1, time: .zero, kind: .started(held, attempt: 2, maxAttempts: 3, worker: worker)),
            SchedulerEvent(seq: 2, time: .zero, kind: .output(held, line("two"))),
        ])
        // A held first attempt lost (in its own batch, and in one with its start) before it
        // began: its file starts with what it printed when it ran
        let never = JobID(uuid: UUID())
        try await store.insert([.init(id: never, spec: JobSpec(name: "never", work: .shell("true")))])
        try await store.apply([
            SchedulerEvent(seq: 3, time: .zero, kind: .started(never, attempt: 1, maxAttempts: 1, worker: worker)),
            SchedulerEvent(seq: 4, time: .zero, kind: .requeued(never, reason: .workerLost(.connectionLost("gone")))),
        ])
        try await store.apply([SchedulerEvent(seq: 5, time: .zero, kind: .started(never, attempt: 1, maxAttempts: 1, worker: worker))])
        try await store.apply([SchedulerEvent(seq: 6, time: .zero, kind: .requeued(never, reason: .workerLost(.connectionLost("gone"))))])
        try await store.apply([
            SchedulerEvent(seq: 7, time: .zero, kind: .started(never, attempt: 1, maxAttempts: 1, worker: worker)),
            SchedulerEvent(seq: 8, time: .zero, kind: .output(never, line("ran"))),
        ])
        store.close()
        let read = { (id: JobID) in try String(contentsOf: directory.outputFile(of: id.description), encoding: .utf8) }
        #expect(try read(never) == "ran\n")
        #expect(try read(lost) == """
            first try
            \(OutputLine.workerLostSeparator)
            again
            \(OutputLine.attemptSeparator(2, of: 3))
            second

            """)
        #expect(try read(held) == """
            one
            \(OutputLine.attemptSeparator(2, of: 3))
            two

            """)
    }

    @Test("A held attempt given back unbegun (withdrawn for a free slot) leaves no attempt row and no count: the job's one attempt is the one that ran, and a restart before it ran queues it uncounted")
    func withdrawnAttemptLeavesNoTrace() async throws {
        let scratch = try Scratch()
        let directory = StateDirectory(path: scratch.file("state"))
        let job = JobID(uuid: UUID())
        var store = try SchedulerStore(directory: directory)
        try await store.insert([.init(id: job, spec: JobSpec(name: "moved", work: .shell("true")))])
        let holder = WorkerDescriptor(id: WorkerID(), name: "holder", kind: .remote, slots: 2, holdsAttempts: true, ownSlots: 1, withdrawsHeld: true)
        let free = WorkerDescriptor(id: WorkerID(), name: "free", kind: .remote, slots: 1, holdsAttempts: true)
        try await store.apply([
            SchedulerEvent(seq: 1, time: .zero, kind: .workerJoined(holder)),
            SchedulerEvent(seq: 2, time: .zero, kind: .started(job, attempt: 1, maxAttempts: 1, worker: holder.id)),
        ])
        try await store.apply([
            SchedulerEvent(seq: 3, time: .zero, kind: .workerJoined(free)),
            SchedulerEvent(seq: 4, time: .zero, kind: .requeued(job, reason: .withdrawn)),
        ])
        #expect(try await store.attempts(of: job).isEmpty)
        // A restart now finds it queued, with no attempt counted
        store.close()
        store = try SchedulerStore(directory: directory)
        let restored = try #require(try store.recover().jobs.first { $0.id == job })
        #expect(restored.attempts == 0 && restored.ending == nil)
        // Run on the free worker, it has one attempt
        try await store.apply([
            SchedulerEvent(seq: 1, time: .zero, kind: .workerJoined(free)),
            SchedulerEvent(seq: 2, time: .zero, kind: .started(job, attempt: 1, maxAttempts: 1, worker: free.id)),
            SchedulerEvent(seq: 3, time: .zero, kind: .began(job, attempt: 1)),
            SchedulerEvent(seq: 4, time: .zero, kind: .succeeded(job, attempts: 1)),
        ])
        let attempts = try await store.attempts(of: job)
        #expect(attempts.map(\.number) == [1])
        #expect(attempts.map(\.outcome) == ["succeeded"])
        store.close()
    }

    @Test("A skipped job brought back by a retry of its dependency loses the skip's reason in the store: a restart showed it twice, as a failure too")
    func aSkipsReasonGoesWhenTheJobComesBack() async throws {
        let scratch = try Scratch()
        let directory = StateDirectory(path: scratch.file("state"))
        let store = try SchedulerStore(directory: directory)
        let (a, b) = (JobID(uuid: UUID()), JobID(uuid: UUID()))
        try await store.insert([
            .init(id: a, spec: JobSpec(name: "a", work: .shell("false"))),
            .init(id: b, spec: JobSpec(name: "b", work: .shell("true"), dependencies: [.job(a)])),
        ])
        let reason = SkipReason(dependency: a, dependencyName: "a", outcome: .failed)
        try await store.apply([
            SchedulerEvent(seq: 1, time: .zero, kind: .skipped(b, reason: reason)),
            SchedulerEvent(seq: 2, time: .zero, kind: .requeued(a, reason: .retriedByUser)),
            SchedulerEvent(seq: 3, time: .zero, kind: .blocked(b, waitingFor: [a])),
        ])
        let stored = try await store.storedJobs().first { $0.id == b.description }
        #expect(stored?.state == "blocked")
        #expect(stored?.reason == nil)
        store.close()
    }

    @Test("an attempt's latest placement (a Slurm job id) is kept; a restart hands those of cut-off attempts to stopPlaced before anything runs")
    func placementsOfInterruptedAttempts() async throws {
        // Given a dead serve's store: one job placed in Slurm and still running, one placed and
        // ended, one running that no worker placed.
        let scratch = try Scratch()
        let directory = StateDirectory(path: scratch.file("state"))
        let store = try SchedulerStore(directory: directory)
        let placed = JobID(uuid: UUID())
        let ended = JobID(uuid: UUID())
        let local = JobID(uuid: UUID())
        try await store.insert([placed, ended, local].map { .init(id: $0, spec: JobSpec(work: .shell("true"))) })
        let worker = WorkerID()
        try await store.apply([
            SchedulerEvent(seq: 1, time: .zero, kind: .started(placed, attempt: 1, maxAttempts: 1, worker: worker)),
            SchedulerEvent(seq: 2, time: .zero, kind: .placed(placed, "4711 Priority")),
            SchedulerEvent(seq: 3, time: .zero, kind: .placed(placed, "4711")),
            SchedulerEvent(seq: 4, time: .zero, kind: .started(ended, attempt: 1, maxAttempts: 1, worker: worker)),
            SchedulerEvent(seq: 5, time: .zero, kind: .placed(ended, "4712")),
            SchedulerEvent(seq: 6, time: .zero, kind: .succeeded(ended, attempts: 1)),
            SchedulerEvent(seq: 7, time: .zero, kind: .started(local, attempt: 1, maxAttempts: 1, worker: worker)),
        ])
        #expect(try await store.attempts(of: placed).map(\.placement) == ["4711"])
        #expect(try await store.attempts(of: ended).map(\.placement) == ["4712"])
        store.close()

        // When a new serve opens it
        var handed: [JobID: String] = [:]
        let durable = try DurableScheduler.open(
            directory: directory, configuration: .init(localSlots: 1),
            stopPlaced: { placements in
                handed = placements
                return placements.count
            })
        // Then only the cut-off attempt that was placed is handed over, and counted as stopped
        #expect(handed == [placed: "4711"])
        #expect(durable.placedStopped == 1)
        #expect(durable.recovery.placements == [placed: "4711"])
        await durable.scheduler.shutdown(.graceful)
        await durable.close()
    }

    @Test("a job the scheduler refuses at a restart is not counted among the restored ones")
    func refusedAtRestartIsNotCounted() async throws {
        let scratch = try Scratch()
        let directory = StateDirectory(path: scratch.file("state"))
        // A row no submission could have made (as a hand-edited database has): its priority is
        // out of range.
        let store = try SchedulerStore(directory: directory)
        try await store.insert([
            .init(id: JobID(uuid: UUID()), spec: JobSpec(name: "fine", work: .shell("true"))),
            .init(id: JobID(uuid: UUID()), spec: JobSpec(name: "odd", work: .shell("true"), priority: 5_000_000)),
        ])
        store.close()
        let durable = try DurableScheduler.open(directory: directory, configuration: .init(localSlots: 0))
        #expect(durable.restoredJobCount == 2, "found")
        #expect(await durable.restored() == 1, "put back")
    }

    @Test("a submission is on disk when it is acknowledged")
    func submissionIsDurableAtAck() async throws {
        let scratch = try Scratch()
        let directory = StateDirectory(path: scratch.file("state"))
        let durable = try DurableScheduler.open(directory: directory, configuration: .init(localSlots: 1))
        // Not run: nothing starts, and nothing but the submission itself writes the job.
        await durable.restored()
        let reply = try await durable.perform(.submit(
            (0..<1_000).map { JobSpec(name: "job \($0)", work: .shell("true")) }, batch: nil))
        guard case .submitted(let ids) = reply else { throw SpawnError(message: "no ids") }
        #expect(ids.count == 1_000)
        let counts = try await durable.store.stateCounts()
        #expect(counts.values.reduce(0, +) == 1_000)
    }

    @Test("a refused submission leaves nothing behind")
    func refusedSubmission() async throws {
        let scratch = try Scratch()
        let directory = StateDirectory(path: scratch.file("state"))
        try await withDurable(directory) { durable in
            await #expect(throws: SchedulerError.self) {
                _ = try await durable.perform(.submit([
                    JobSpec(work: .shell("true")),
                    JobSpec(work: .shell("true"), priority: Int.max),
                ], batch: nil))
            }
            let counts = try await durable.store.stateCounts()
            #expect(counts.isEmpty)
        }
    }
}

@Suite("Finished jobs beyond the retention", .timeLimit(.minutes(2)))
struct HistoryLookupTests {
    @Test("a finished job the scheduler no longer keeps is still found in the database by its id, a prefix of it or its name (wait and log of it said there was no such job)")
    func finishedJobsBeyondTheRetention() async throws {
        let scratch = try Scratch()
        let directory = StateDirectory(path: scratch.file("state"))
        let durable = try DurableScheduler.open(
            directory: directory, configuration: .init(localSlots: 1, finishedRetention: 2), storeConfiguration: .init())
        async let running: Void = durable.scheduler.run()
        await durable.restored()
        let events = await durable.subscribe(bufferLimit: nil, includeOutput: false)
        let specs = [
            JobSpec(name: "nightly", work: .shell("exit 3")), JobSpec(name: "nightly", work: .shell("true")),
            JobSpec(work: .shell("true")), JobSpec(work: .shell("true")), JobSpec(work: .shell("true")),
        ]
        guard case .submitted(let ids) = try await durable.perform(.submit(specs, batch: nil)) else { throw SpawnError(message: "no ids") }
        var ended = 0
        for await event in events where event.kind.isFinal {
            ended += 1
            if ended == ids.count { break }
        }
        await durable.flush()
        let kept = Set(await durable.currentSnapshot().jobs.map(\.id))
        #expect(!kept.contains(ids[0]) && !kept.contains(ids[1]), "the retention dropped the first two")

        let byID = try await durable.store.finishedJobs(matching: ids[0].description, limit: 10)
        #expect(byID.count == 1 && byID.jobs.first?.id == ids[0])
        #expect(byID.jobs.first?.state.kind == .failed && byID.jobs.first?.name == "nightly" && byID.jobs.first?.command == "exit 3")
        let byPrefix = try await durable.store.finishedJobs(matching: ids[0].short.uppercased(), limit: 10)
        #expect(byPrefix.count == 1 && byPrefix.jobs.first?.id == ids[0])
        // The name: the newest of the jobs so named.
        let byName = try await durable.store.finishedJobs(matching: "nightly", limit: 10)
        #expect(byName.count == 1 && byName.jobs.first?.id == ids[1] && byName.jobs.first?.state.kind == .succeeded)
        #expect(try await durable.store.finishedJobs(matching: "nope", limit: 10).count == 0)
        #expect(try await durable.store.finishedJobs(matching: "%", limit: 10).count == 0)

        await durable.scheduler.shutdown(.graceful)
        await running
        await durable.close()
    }
}

@Suite("clean on a full disk", .timeLimit(.minutes(2)))
struct CleanOnAFullDiskTests {
    @Test("clean on a disk a job's output filled: its file goes first, which makes the room the clean needs; it is saved, and a restart finds no job (the clean was forgotten on disk and the file stayed)")
    func cleanFreesTheRoomItNeeds() async throws {
        let scratch = try Scratch()
        let small = scratch.file("small")
        try FileManager.default.createDirectory(atPath: small, withIntermediateDirectories: true)
        // A 3 MB file system of its own (root, here and in CI); elsewhere the test says so.
        guard mount("tmpfs", small, "tmpfs", 0, "size=3m") == 0 else {
            print("clean on a full disk: not tested here (mount of a tmpfs: \(String(cString: strerror(errno))))")
            return
        }
        defer { umount2(small, Int32(MNT_DETACH)) }
        let directory = StateDirectory(path: small + "/state")
        let durable = try DurableScheduler.open(
            directory: directory, configuration: .init(localSlots: 1), storeConfiguration: .init())
        async let running: Void = durable.scheduler.run()
        await durable.restored()
        // 5 MB of output into 3 MB: the disk is full when it ends.
        let big = JobSpec(name: "big", work: .shell("head -c 5000000 /dev/zero | tr '\\0' x | fold -w 100; echo done"))
        var ids: [JobID] = []
        do {
            // (Let go of once read: a subscriber left unread holds the scheduler's shutdown.)
            let events = await durable.subscribe(bufferLimit: nil, includeOutput: false)
            guard case .submitted(let submitted) = try await durable.perform(.submit([big], batch: nil)) else { throw SpawnError(message: "no ids") }
            ids = submitted
            for await event in events where event.kind.isFinal && event.kind.jobID == ids[0] { break }
        }
        var info = statvfs()
        #expect(statvfs(small, &info) == 0 && info.f_bavail == 0, "the disk is full")

        let reply = try await durable.perform(.forgetFinished)
        #expect(reply == .forgotten(1))
        #expect(durable.outputFile(of: ids[0]) == nil)
        #expect(statvfs(small, &info) == 0 && info.f_bavail > 0, "the file is gone")
        await durable.scheduler.shutdown(.graceful)
        await running
        await durable.close()

        try await withDurable(directory) { again in
            #expect(again.restoredJobCount == 0, "the clean was saved")
        }
    }
}
