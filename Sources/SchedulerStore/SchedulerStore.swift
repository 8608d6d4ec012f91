import Foundation
import GRDB
import Scheduler

/// The durable state of one `jobtop serve`: every job's spec and where it stands, its attempts
/// and their outcomes, the groups and the pause, in SQLite (WAL mode) through GRDB, and each
/// job's output in a file of its own.
///
/// Two writers feed it, both on GRDB's own serial queue (never the cooperative pool): a
/// submission is written before the scheduler sees it (``insert(_:)``), and a journal writes
/// what the scheduler's events say happened (``apply(_:)``), in batches, one transaction each.
public final class SchedulerStore: Sendable {
    /// What a store keeps.
    public struct Configuration: Sendable {
        /// Finished jobs kept in the database (with their output files); the oldest beyond are
        /// forgotten when the store opens and on ``clean()``.
        public var finishedHistory: Int
        /// The most bytes of output kept per job; beyond, one line says the rest was not kept.
        public var outputCap: Int

        /// Creates one.
        public init(finishedHistory: Int = 10_000, outputCap: Int = 16 << 20) {
            self.finishedHistory = max(0, finishedHistory)
            self.outputCap = max(1024, outputCap)
        }
    }

    /// The directory.
    public let directory: StateDirectory
    /// The settings.
    public let configuration: Configuration
    /// The state directory's own id: the value of `JOBTOP_SERVE_ID` in its jobs' environments.
    public let instanceID: String
    private let database: DatabaseQueue
    private let lock: StateLock
    private let output: OutputFiles
    /// The workers that may hold an attempt before it runs (``WorkerDescriptor/holdsAttempts``),
    /// as the journal's events said: an attempt handed to one is written as held until its
    /// `began` event.
    private let holdingWorkers = Locked<Set<WorkerID>>([])

    /// Opens (or makes) the state in `directory`, taking its lock.
    ///
    /// - Throws: ``StoreError`` naming the file when the directory cannot be made, another serve
    ///   holds the lock, or the database cannot be opened or is not jobtop's.
    public init(directory: StateDirectory, configuration: Configuration = .init()) throws(StoreError) {
        self.directory = directory
        self.configuration = configuration
        try directory.create()
        lock = try StateLock(directory.lockFile)
        directory.makePrivate()
        var config = GRDB.Configuration()
        config.journalMode = .wal
        config.label = "jobtop.state"
        // WAL with synchronous=NORMAL: a commit survives a crash of jobtop (kill -9) at once; a
        // power loss may take the last moments back (the README says so).
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        do {
            database = try DatabaseQueue(path: directory.database.path, configuration: config)
            // Another program's database under jobtop's name is not taken over: its tables were
            // kept beside jobtop's (or one named `job` failed the migration, whose message was
            // its whole schema).
            let foreign = try database.read { db -> [String] in
                let tables = try String.fetchAll(
                    db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
                return tables.contains("grdb_migrations") ? [] : tables
            }
            if !foreign.isEmpty {
                let shown = foreign.prefix(5).joined(separator: ", ") + (foreign.count > 5 ? ", …" : "")
                throw StoreError(
                    "\(directory.database.path) is not jobtop's state database (it has tables of its own: \(shown)); move it away, or give jobtop serve another --state-dir")
            }
            try Self.migrator.migrate(database)
            instanceID = try database.write { db in
                if let id = try String.fetchOne(db, sql: "SELECT value FROM setting WHERE key = 'instance'") {
                    return id
                }
                let id = UUID().uuidString.lowercased()
                try db.execute(sql: "INSERT INTO setting(key, value) VALUES ('instance', ?)", arguments: [id])
                return id
            }
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError("cannot open the state database \(directory.database.path): \(error)")
        }
        output = OutputFiles(directory: directory, cap: configuration.outputCap)
    }

    private static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            // `seq` is the submission order (recovery restores in it, so a dependency always comes
            // before its dependents); the spec's columns (SpecColumns) hold its dependencies as ids
            // and its start time as a date; `priority` is the present one.
            try db.execute(sql: """
                CREATE TABLE job (
                    seq INTEGER PRIMARY KEY,
                    id TEXT NOT NULL UNIQUE,
                    state TEXT NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0,
                    \(SpecColumns.definitions),
                    reason TEXT,
                    skip BLOB,
                    submitted_at REAL NOT NULL,
                    finished_at REAL
                );
                CREATE INDEX job_finished ON job(finished_at) WHERE finished_at IS NOT NULL;
                CREATE TABLE attempt (
                    job TEXT NOT NULL,
                    number INTEGER NOT NULL,
                    worker TEXT NOT NULL,
                    started_at REAL NOT NULL,
                    ended_at REAL,
                    outcome TEXT
                );
                CREATE INDEX attempt_job ON attempt(job);
                CREATE TABLE grp (
                    name TEXT PRIMARY KEY,
                    max_running INTEGER,
                    paused INTEGER NOT NULL DEFAULT 0
                );
                CREATE TABLE setting (
                    key TEXT PRIMARY KEY,
                    value TEXT NOT NULL
                );
                """)
        }
        migrator.registerMigration("v2") { db in
            // Where the attempt runs outside this machine, in its worker's words (a Slurm job
            // id, then its reason while it waits): a restart stops what a dead serve left there.
            try db.execute(sql: "ALTER TABLE attempt ADD COLUMN placement TEXT")
        }
        migrator.registerMigration("v3") { db in
            // When a job waiting for a retry is due (seconds since 1970): a restart lets it wait
            // out the rest of its backoff instead of running it at once.
            try db.execute(sql: "ALTER TABLE job ADD COLUMN retry_at REAL")
        }
        migrator.registerMigration("v4") { db in
            // 1 while an attempt waits at a worker that holds it (a remote worker's prefetch, a
            // Slurm queue) and has not begun: a restart gives it back without counting it.
            try db.execute(sql: "ALTER TABLE attempt ADD COLUMN held INTEGER NOT NULL DEFAULT 0")
        }
        migrator.registerMigration("v5") { db in
            // Why the attempt was being stopped, if it was (`cancel`, `timeout`: a StopReason):
            // a restart ends a job whose cancel was answered cancelled, not run again.
            try db.execute(sql: "ALTER TABLE attempt ADD COLUMN stopping TEXT")
        }
        return migrator
    }

    /// Lets go of the state directory's lock: another serve may open it. Call it once nothing
    /// more will be written (the store must not be used after).
    public func close() {
        // The database first: a serve that starts once the lock is free opens it, and found it
        // still open here (its last checkpoint under way: "database is locked").
        try? database.close()
        lock.release()
    }

    // MARK: - Submissions

    /// One job of a submission as the store writes it.
    public struct NewJob: Sendable {
        /// Its id.
        public var id: JobID
        /// Its spec in durable form: dependencies as ids, a start time as a date.
        public var spec: JobSpec

        /// Creates one.
        public init(id: JobID, spec: JobSpec) {
            self.id = id
            self.spec = spec
        }
    }

    /// Writes a submission in one transaction, before the scheduler sees it.
    public func insert(_ jobs: [NewJob]) async throws(StoreError) {
        var rows: [StatementArguments] = []
        rows.reserveCapacity(jobs.count)
        let now = Date().timeIntervalSince1970
        for job in jobs {
            rows.append(StatementArguments([job.id.description, now] + (try SpecColumns.values(of: job.spec))))
        }
        let prepared = rows
        let columns = SpecColumns.names.joined(separator: ", ")
        let marks = Array(repeating: "?", count: SpecColumns.names.count).joined(separator: ", ")
        do {
            try await database.write { db in
                let statement = try db.cachedStatement(sql: """
                    INSERT INTO job(id, submitted_at, state, \(columns)) VALUES (?, ?, 'queued', \(marks))
                    """)
                for row in prepared {
                    try statement.execute(arguments: row)
                }
            }
        } catch {
            throw StoreError("the state database refused the submission: \(error)")
        }
    }

    /// Forgets jobs written by ``insert(_:)`` that the scheduler then refused or coalesced.
    public func remove(_ ids: [JobID]) async throws(StoreError) {
        guard !ids.isEmpty else { return }
        do {
            try await database.write { db in
                let statement = try db.cachedStatement(sql: "DELETE FROM job WHERE id = ?")
                for id in ids { try statement.execute(arguments: [id.description]) }
            }
        } catch {
            throw StoreError("the state database: \(error)")
        }
    }

    // MARK: - The journal

    /// Writes what a batch of events says happened, in one transaction (nothing of it when it
    /// throws: the same batch may be written again); then the output lines go to the jobs'
    /// files.
    ///
    /// - Returns: The jobs whose output lines of this batch could not be written, each with why
    ///   (their files are not retried: the lines are lost).
    /// - Throws: ``StoreError`` when the transaction failed (the disk is full, the database is
    ///   locked by another program): nothing of the batch is written, its output included.
    /// - Parameter epoch: The wall-clock time of the scheduler's time zero
    ///   (``SchedulerClock/wallClockEpoch``): each event is written at its own time, not at the
    ///   batch's (a journal that fell behind wrote a 0.3 s job's start and end at one time).
    @discardableResult
    public func apply(_ events: [SchedulerEvent], epoch: Date) async throws(StoreError) -> [(JobID, StoreError)] {
        var hasRows = false
        var hasOutput = false
        // Which starts go to a worker that holds attempts, by the events' order (a worker joins
        // before it is handed a job).
        var heldStarts: Set<UInt64> = []
        holdingWorkers.withLock { holding in
            for event in events {
                switch event.kind {
                case .output: hasOutput = true
                case .started(_, let attempt, _, let worker):
                    hasRows = true
                    if holding.contains(worker) { heldStarts.insert(event.seq) }
                    // Later attempts get a separator line in the output file.
                    if attempt > 1 { hasOutput = true }
                case .requeued(_, let reason) where OutputLine.requeueSeparator(reason) != nil:
                    // So does a retry by hand, a lost worker's attempt or one a shutdown stopped
                    // (and the job's row changes).
                    hasRows = true
                    hasOutput = true
                case .snapshot(let snapshot):
                    for worker in snapshot.workers where worker.descriptor.holdsAttempts { holding.insert(worker.descriptor.id) }
                case .workerJoined(let descriptor):
                    if descriptor.holdsAttempts { holding.insert(descriptor.id) }
                case .workerLeft(let id, _):
                    holding.remove(id)
                case .submitted, .coalesced, .progress, .lagged, .leftoverProcesses,
                     .slotsChanged, .workerResized, .shuttingDown, .batchHalted, .batchSettled:
                    continue
                default: hasRows = true
                }
            }
        }
        if hasRows {
            let heldStarts = heldStarts
            let epoch = epoch.timeIntervalSince1970
            do {
                try await database.write { db in
                    for event in events {
                        try Self.apply(event, held: heldStarts.contains(event.seq), db: db, now: epoch + event.time.seconds)
                    }
                    try Self.markAlive(at: epoch + events[events.count - 1].time.seconds, db: db)
                }
            } catch {
                throw StoreError("the state database refused the journal: \(error)")
            }
        }
        return hasOutput ? await output.write(events: events) : []
    }

    /// Notes that the serve was alive at `date`, for the next one to end the attempts it finds
    /// cut off then rather than at its own start (after a `kill -9` or a power cut, a cut-off
    /// attempt's run time counted the downtime). The journal notes it with each batch it
    /// writes; ``DurableScheduler`` also every few seconds while jobs run.
    public func markAlive(at date: Date) async throws(StoreError) {
        do {
            try await database.write { db in try Self.markAlive(at: date.timeIntervalSince1970, db: db) }
        } catch {
            throw StoreError("the state database: \(error)")
        }
    }

    private static func markAlive(at seconds: Double, db: Database) throws {
        try db.execute(sql: "INSERT OR REPLACE INTO setting(key, value) VALUES ('alive', ?)", arguments: [String(seconds)])
    }

    /// Writes what `event` changes, which happened at `now` (seconds since 1970); `held`: a
    /// `started` that went to a worker that holds attempts.
    private static func apply(_ event: SchedulerEvent, held: Bool, db: Database, now: Double) throws {
        switch event.kind {
        case .started(let id, let attempt, _, let worker):
            try db.execute(sql: "UPDATE job SET state = 'running', attempts = ? WHERE id = ?", arguments: [attempt, id.description])
            try db.execute(
                sql: "INSERT INTO attempt(job, number, worker, started_at, held) VALUES (?, ?, ?, ?, ?)",
                arguments: [id.description, attempt, worker.short, now, held])
        case .began(let id, let attempt):
            // It runs from now: its run time counts from here, and it is no longer held.
            try db.execute(
                sql: "UPDATE attempt SET held = 0, started_at = ? WHERE job = ? AND number = ? AND ended_at IS NULL",
                arguments: [now, id.description, attempt])
        case .retryScheduled(let id, let failed, let reason, _, let due):
            // The due time as a date: as far after now as it is after the event.
            let retryAt = now + max(0, (due - event.time).seconds)
            try db.execute(
                sql: "UPDATE job SET state = 'waiting', attempts = ?, reason = ?, retry_at = ? WHERE id = ?",
                arguments: [failed, reason.description, retryAt, id.description])
            try endAttempt(id, outcome: reason.description, db: db, now: now)
        case .requeued(let id, let reason):
            switch reason {
            case .retryDue:
                try db.execute(sql: "UPDATE job SET state = 'queued' WHERE id = ?", arguments: [id.description])
            case .retriedByUser:
                try db.execute(
                    sql: "UPDATE job SET state = 'queued', attempts = 0, reason = NULL, skip = NULL, finished_at = NULL WHERE id = ?",
                    arguments: [id.description])
            case .workerLost, .stoppedForShutdown:
                // An attempt cut off that does not count; its row says why ("worker lost: …").
                // (A serve freezes its journal before a stop, so its restart counts a stopped
                // attempt as failed instead; a program that stops its durable scheduler so keeps
                // it uncounted.)
                try db.execute(
                    sql: "UPDATE job SET state = 'queued', attempts = max(0, attempts - 1) WHERE id = ?",
                    arguments: [id.description])
                try endAttempt(id, outcome: reason.description, db: db, now: now)
            case .withdrawn, .withdrawnForPause, .withdrawnForShutdown, .withdrawnForPriority:
                // Given back by the worker that held it, unbegun: that attempt never ran, so
                // it leaves no row (as one never handed out).
                try db.execute(
                    sql: "UPDATE job SET state = 'queued', attempts = max(0, attempts - 1) WHERE id = ?",
                    arguments: [id.description])
                try db.execute(
                    sql: "DELETE FROM attempt WHERE job = ? AND ended_at IS NULL", arguments: [id.description])
            }
        case .succeeded(let id, let attempts):
            try finish(id, state: "succeeded", attempts: attempts, reason: nil, db: db, now: now)
            try endAttempt(id, outcome: "succeeded", db: db, now: now)
        case .failed(let id, let reason, let attempts):
            try finish(id, state: "failed", attempts: attempts, reason: reason.description, db: db, now: now)
            try endAttempt(id, outcome: reason.description, db: db, now: now)
        case .cancelled(let id):
            try db.execute(
                sql: "UPDATE job SET state = 'cancelled', finished_at = ? WHERE id = ?", arguments: [now, id.description])
            try endAttempt(id, outcome: "cancelled", db: db, now: now)
        case .skipped(let id, let reason):
            let skip = try JSONEncoder().encode(reason)
            try db.execute(
                sql: "UPDATE job SET state = 'skipped', reason = ?, skip = ?, finished_at = ? WHERE id = ?",
                arguments: [reason.description, skip, now, id.description])
        case .blocked(let id, _):
            // Back from a skip (its dependency retried): the skip's reason goes with it, or a
            // restart showed it as a failure of a job that never ran.
            try db.execute(
                sql: "UPDATE job SET state = 'blocked', finished_at = NULL, skip = NULL, reason = NULL WHERE id = ?",
                arguments: [id.description])
        case .released(let id):
            try db.execute(sql: "UPDATE job SET state = 'queued' WHERE id = ?", arguments: [id.description])
        case .scheduled(let id, _):
            try db.execute(
                sql: "UPDATE job SET state = 'scheduled', finished_at = NULL, skip = NULL, reason = NULL WHERE id = ?",
                arguments: [id.description])
        case .edited(let id, let command):
            // A shell command now (work_kind 0, as SpecColumns writes it).
            try db.execute(sql: "UPDATE job SET work_kind = 0, command = ? WHERE id = ?", arguments: [command, id.description])
        case .stopping(let id, let reason):
            try db.execute(
                sql: "UPDATE attempt SET stopping = ? WHERE job = ? AND ended_at IS NULL", arguments: [reason.rawValue, id.description])
        case .placed(let id, let detail):
            try db.execute(
                sql: "UPDATE attempt SET placement = ? WHERE job = ? AND ended_at IS NULL", arguments: [detail, id.description])
        case .reprioritized(let id, _, let to):
            try db.execute(sql: "UPDATE job SET priority = ? WHERE id = ?", arguments: [to, id.description])
        case .paused:
            try db.execute(sql: "INSERT OR REPLACE INTO setting(key, value) VALUES ('paused', '1')")
        case .resumed:
            try db.execute(sql: "DELETE FROM setting WHERE key = 'paused'")
        case .groupChanged(let group):
            try db.execute(
                sql: "INSERT OR REPLACE INTO grp(name, max_running, paused) VALUES (?, ?, ?)",
                arguments: [group.name, group.limit, group.isPaused])
        default:
            break
        }
    }

    private static func finish(_ id: JobID, state: String, attempts: Int, reason: String?, db: Database, now: Double) throws {
        try db.execute(
            sql: "UPDATE job SET state = ?, attempts = ?, reason = ?, finished_at = ? WHERE id = ?",
            arguments: [state, attempts, reason, now, id.description])
    }

    private static func endAttempt(_ id: JobID, outcome: String, db: Database, now: Double) throws {
        try db.execute(
            sql: "UPDATE attempt SET ended_at = ?, outcome = ? WHERE job = ? AND ended_at IS NULL",
            arguments: [now, outcome, id.description])
    }

    // MARK: - Recovery

    /// What a restart puts back.
    public struct Recovery: Sendable {
        /// The jobs, in submission order: the finished ones kept and every one still to run.
        public var jobs: [RestoredJob]
        /// The groups as they were (limits, pauses).
        public var groups: [JobGroup]
        /// Whether dispatch was paused.
        public var isPaused: Bool
        /// Jobs that were running when the previous serve stopped: each attempt counted as failed
        /// ("jobtop stopped"); those with attempts left are queued again.
        public var interrupted: [JobID]
        /// Jobs of those that had no attempt left and so failed.
        public var failedForGood: [JobID]
        /// Jobs of those whose attempt was being stopped for its timeout: it counts as timed
        /// out, not as stopped by jobtop.
        public var timedOut: [JobID] = []
        /// Jobs whose cancel was asked for (and answered) while their attempt was being stopped
        /// when the previous serve stopped: they end cancelled, not run again.
        public var cancelled: [JobID] = []
        /// Jobs whose attempt was handed to a worker that holds attempts and had not begun there
        /// (a remote worker's prefetch, a Slurm queue): queued again, the attempt not counted.
        public var handedBack: [JobID] = []
        /// Where each of the ``interrupted`` attempts had been placed outside this machine, in
        /// its worker's words (``SchedulerEvent/Kind/placed(_:_:)``: a Slurm job id, perhaps
        /// with Slurm's reason after it): what a restart must stop there.
        public var placements: [JobID: String] = [:]
    }

    /// The reason an attempt that was running when serve stopped failed.
    public static let stoppedReason = "jobtop stopped"
    /// How an attempt that waited at its worker, not begun, when serve stopped ended.
    public static let handedBackOutcome = "jobtop stopped before it began"

    /// Reads everything back for a restart and counts the attempts that were running as failed
    /// (written in the same transaction); forgets the oldest finished jobs beyond the history.
    /// Blocking (GRDB's queue, waited for): call it at start-up, before the scheduler runs.
    public func recover() throws(StoreError) -> Recovery {
        do {
            return try database.write { db in try self.recover(db) }
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError("cannot read the state database \(directory.database.path): \(error)")
        }
    }

    private func recover(_ db: Database) throws -> Recovery {
        try pruneHistory(db)
        let decoder = JSONDecoder()
        var groups: [JobGroup] = []
        for row in try Row.fetchAll(db, sql: "SELECT name, max_running, paused FROM grp ORDER BY rowid") {
            groups.append(JobGroup(name: row["name"], limit: row["max_running"], isPaused: row["paused"]))
        }
        let isPaused = try String.fetchOne(db, sql: "SELECT value FROM setting WHERE key = 'paused'") != nil

        // One pass over the rows, straight into what the scheduler restores (no intermediate
        // copy of 100,000 specs). The columns by index (see SpecColumns.spec(from:at:)): id,
        // state, attempts, reason, skip, retry_at, submitted_at, finished_at, the last attempt's
        // started_at (a finished job's run time, or a cut-off one's), whether a running job's
        // attempt is held at its worker, why it was being stopped if it was, then the spec's.
        var jobs: [RestoredJob] = []
        if let count = try Int.fetchOne(db, sql: "SELECT count(*) FROM job") { jobs.reserveCapacity(count) }
        // Each job's id (for the dependencies, below), and where the
        // jobs that were running are in `jobs` (their rows are written once the reading is done).
        var known: Set<JobID> = []
        known.reserveCapacity(jobs.capacity)
        var withDependencies: [Int] = []
        var running: [Int] = []
        var held: [Int] = []
        // Running jobs whose cancel was under way, and whether their attempt had begun; running
        // jobs whose attempt was being stopped for its timeout.
        var cancelling: [(index: Int, began: Bool)] = []
        var timingOut: Set<Int> = []
        let cursor = try Row.fetchCursor(
            db, sql: """
                SELECT id, state, attempts, reason, skip, retry_at, submitted_at, finished_at,
                    CASE WHEN finished_at IS NULL AND state <> 'running' THEN NULL
                         ELSE (SELECT started_at FROM attempt WHERE attempt.job = job.id ORDER BY attempt.rowid DESC LIMIT 1) END,
                    CASE WHEN state = 'running'
                         THEN (SELECT held FROM attempt WHERE attempt.job = job.id AND ended_at IS NULL ORDER BY attempt.rowid DESC LIMIT 1)
                         ELSE 0 END,
                    CASE WHEN state = 'running'
                         THEN (SELECT stopping FROM attempt WHERE attempt.job = job.id AND ended_at IS NULL ORDER BY attempt.rowid DESC LIMIT 1)
                         ELSE NULL END,
                    \(SpecColumns.selection)
                FROM job ORDER BY seq
                """)
        while let row = try cursor.next() {
            let text: String = row[0]
            guard let id = JobID(parsing: text) else { continue }
            let spec = try SpecColumns.spec(from: row, at: 11)
            let submittedAt: Double? = row[6]
            let finishedAt: Double? = row[7]
            let startedAt: Double? = row[8]
            let times = (
                submitted: submittedAt.map { Date(timeIntervalSince1970: $0) },
                started: startedAt.map { Date(timeIntervalSince1970: $0) },
                finished: finishedAt.map { Date(timeIntervalSince1970: $0) })
            let state: String = row[1]
            let attempts: Int = row[2]
            let reason: String? = row[3]
            known.insert(id)
            if !spec.dependencies.isEmpty { withDependencies.append(jobs.count) }
            let lastFailure = reason.map { FailureReason.error($0) }
            switch state {
            case "succeeded":
                jobs.append(RestoredJob(
                    id: id, spec: spec, attempts: attempts, ending: .succeeded(attempts: attempts),
                    submittedAt: times.submitted, startedAt: times.started, finishedAt: times.finished))
            case "failed":
                jobs.append(RestoredJob(
                    id: id, spec: spec, attempts: attempts,
                    ending: .failed(reason: .error(reason ?? "failed"), attempts: attempts),
                    submittedAt: times.submitted, startedAt: times.started, finishedAt: times.finished))
            case "cancelled":
                jobs.append(RestoredJob(
                    id: id, spec: spec, attempts: attempts, lastFailure: lastFailure, ending: .cancelled,
                    submittedAt: times.submitted, startedAt: times.started, finishedAt: times.finished))
            case "skipped":
                let skipData: Data? = row[4]
                if let skip = try skipData.map({ try decoder.decode(SkipReason.self, from: $0) }) {
                    jobs.append(RestoredJob(
                        id: id, spec: spec, attempts: attempts, ending: .skipped(skip),
                        submittedAt: times.submitted, finishedAt: times.finished))
                } else if withDependencies.last == jobs.count {
                    withDependencies.removeLast()
                }
            case "running" where (row[10] as String?) == StopReason.cancel.rawValue:
                // Its cancel was asked for, and answered, before serve stopped: it ends
                // cancelled (when it was cut off, below), as it would have, not run again. An
                // attempt that had not begun at its worker leaves no start, as a cancel of it does.
                let began = (row[9] as Int?) != 1
                cancelling.append((jobs.count, began))
                jobs.append(RestoredJob(
                    id: id, spec: spec, attempts: began ? attempts : max(0, attempts - 1), lastFailure: lastFailure,
                    ending: .cancelled, submittedAt: times.submitted, startedAt: began ? times.started : nil))
            case "running" where (row[9] as Int?) == 1:
                // Its attempt waited at its worker and never began: it goes back to the queue as
                // it was before, that attempt not counted (written below).
                held.append(jobs.count)
                jobs.append(RestoredJob(
                    id: id, spec: spec, attempts: max(0, attempts - 1), lastFailure: lastFailure, submittedAt: times.submitted))
            case "running":
                // Its attempt was cut short: it counts, as a failure (decided below), for its
                // timeout if it was being stopped for it.
                if (row[10] as String?) == StopReason.timeout.rawValue { timingOut.insert(jobs.count) }
                running.append(jobs.count)
                // Its start kept for the case it fails for good here: its run shows with its time.
                jobs.append(RestoredJob(
                    id: id, spec: spec, attempts: attempts, lastFailure: .error(Self.stoppedReason),
                    submittedAt: times.submitted, startedAt: times.started))
            case "waiting":
                // It waits out the rest of its backoff (its retry is due at once if that time has
                // passed, or was not recorded).
                let retryAt: Double? = row[5]
                jobs.append(RestoredJob(
                    id: id, spec: spec, attempts: attempts, lastFailure: lastFailure,
                    retryAt: retryAt.map { Date(timeIntervalSince1970: $0) }, submittedAt: times.submitted))
            default:
                // Queued, blocked or scheduled: its dependencies and start time say which it
                // becomes.
                jobs.append(RestoredJob(id: id, spec: spec, attempts: attempts, lastFailure: lastFailure, submittedAt: times.submitted))
            }
        }

        // A dependency the store no longer has was cleaned after it ended: it ended before
        // anything that waits for it could end, and a success is what let a job go on, so it
        // counts as met, and is left out (the scheduler would not know it). One the store still
        // has is kept, a success too: the scheduler finds it met, and the job still names it
        // (`status` listed only the unmet ones after a restart).
        if !withDependencies.isEmpty {
            for index in withDependencies {
                jobs[index].spec.dependencies.removeAll { dependency in
                    guard case .job(let other) = dependency else { return true }
                    return !known.contains(other)
                }
            }
        }

        var interrupted: [JobID] = []
        var timedOut: [JobID] = []
        var failedForGood: [JobID] = []
        var handedBack: [JobID] = []
        var placements: [JobID: String] = [:]
        // Attempts found cut off end when the last serve was last known alive (not later than
        // now: a clock set back), not now: their run time does not count the downtime.
        let now = Date().timeIntervalSince1970
        let aliveAt = try String.fetchOne(db, sql: "SELECT value FROM setting WHERE key = 'alive'").flatMap(Double.init)
        let cutOffAt = min(now, aliveAt ?? now)
        // Ends the job's open attempt with `outcome`, noting where it had been placed outside
        // this machine: a Slurm job, running or pending, must be stopped there too, or it runs
        // later for nobody.
        func endOpenAttempt(of id: JobID, outcome: String) throws {
            if let placement = try String.fetchOne(
                db, sql: "SELECT placement FROM attempt WHERE job = ? AND ended_at IS NULL AND placement IS NOT NULL ORDER BY rowid DESC LIMIT 1",
                arguments: [id.description]) {
                placements[id] = placement
            }
            try db.execute(
                sql: "UPDATE attempt SET ended_at = max(started_at, ?), outcome = ? WHERE job = ? AND ended_at IS NULL",
                arguments: [cutOffAt, outcome, id.description])
        }
        for index in held {
            let id = jobs[index].id
            handedBack.append(id)
            try endOpenAttempt(of: id, outcome: Self.handedBackOutcome)
            try db.execute(
                sql: "UPDATE job SET state = 'queued', attempts = ? WHERE id = ?", arguments: [jobs[index].attempts, id.description])
        }
        var cancelled: [JobID] = []
        for (index, began) in cancelling {
            let id = jobs[index].id
            cancelled.append(id)
            try endOpenAttempt(of: id, outcome: "cancelled")
            if !began {
                try db.execute(sql: "DELETE FROM attempt WHERE job = ? AND outcome = 'cancelled' AND rowid = (SELECT max(rowid) FROM attempt WHERE job = ?)",
                               arguments: [id.description, id.description])
            }
            try db.execute(
                sql: "UPDATE job SET state = 'cancelled', attempts = ?, finished_at = ? WHERE id = ?",
                arguments: [jobs[index].attempts, cutOffAt, id.description])
            jobs[index].finishedAt = Date(timeIntervalSince1970: cutOffAt)
        }
        for index in running {
            let id = jobs[index].id
            let attempts = jobs[index].attempts
            interrupted.append(id)
            // A timeout that was being enforced is what ended the attempt ('timed out after
            // 5s'), not the stop of serve.
            let reason = timingOut.contains(index) ? jobs[index].spec.timeout.map { FailureReason.timeout($0).description } : nil
            if reason != nil { timedOut.append(id) }
            let outcome = reason ?? Self.stoppedReason
            try endOpenAttempt(of: id, outcome: outcome)
            if attempts >= jobs[index].spec.retry.maxAttempts {
                failedForGood.append(id)
                try db.execute(
                    sql: "UPDATE job SET state = 'failed', reason = ?, finished_at = ? WHERE id = ?",
                    arguments: [outcome, cutOffAt, id.description])
                jobs[index].lastFailure = nil
                jobs[index].ending = .failed(reason: .error(outcome), attempts: attempts)
                // It ended when it was cut off (its TIME and attempt line were blank).
                jobs[index].finishedAt = Date(timeIntervalSince1970: cutOffAt)
            } else {
                jobs[index].lastFailure = .error(outcome)
                try db.execute(
                    sql: "UPDATE job SET state = 'queued', reason = ? WHERE id = ?",
                    arguments: [outcome, id.description])
            }
        }
        return Recovery(
            jobs: jobs, groups: groups, isPaused: isPaused, interrupted: interrupted, failedForGood: failedForGood,
            timedOut: timedOut, cancelled: cancelled, handedBack: handedBack, placements: placements)
    }

    static func isFinished(_ state: String) -> Bool {
        state == "succeeded" || state == "failed" || state == "cancelled" || state == "skipped"
    }

    /// Forgets the oldest finished jobs beyond the history setting, with their attempts and
    /// output files. (A job that waits for one of them counts it as met: a failure would have
    /// ended the job that waits.)
    private func pruneHistory(_ db: Database) throws {
        let finished = try Int.fetchOne(db, sql: "SELECT count(*) FROM job WHERE finished_at IS NOT NULL") ?? 0
        let excess = finished - configuration.finishedHistory
        guard excess > 0 else { return }
        let ids = try String.fetchAll(db, sql: """
            SELECT id FROM job WHERE finished_at IS NOT NULL ORDER BY finished_at, seq LIMIT ?
            """, arguments: [excess])
        try forget(ids, db: db)
    }

    private func forget(_ ids: [String], db: Database) throws {
        let deleteJob = try db.cachedStatement(sql: "DELETE FROM job WHERE id = ?")
        let deleteAttempts = try db.cachedStatement(sql: "DELETE FROM attempt WHERE job = ?")
        for id in ids {
            try deleteJob.execute(arguments: [id])
            try deleteAttempts.execute(arguments: [id])
            try? FileManager.default.removeItem(at: directory.outputFile(of: id))
        }
    }

    /// Forgets every job that had ended by `endedBy`, with its attempts and output file
    /// (`jobtop clean`), and the groups left with no job, no limit and no pause (as the
    /// scheduler forgets them).
    public func forgetAllFinished(endedBy: Date) async throws(StoreError) {
        do {
            try await database.write { db in
                let ids = try String.fetchAll(
                    db, sql: "SELECT id FROM job WHERE finished_at IS NOT NULL AND finished_at <= ?",
                    arguments: [endedBy.timeIntervalSince1970])
                try self.forget(ids, db: db)
                try db.execute(sql: """
                    DELETE FROM grp WHERE max_running IS NULL AND paused = 0
                        AND name NOT IN (SELECT grp FROM job WHERE grp IS NOT NULL)
                    """)
            }
        } catch {
            throw StoreError("the state database: \(error)")
        }
    }

    /// Removes the output files of `ids` (those there are): what `clean` frees first.
    public func removeOutputFiles(of ids: [JobID]) {
        for id in ids { try? FileManager.default.removeItem(at: directory.outputFile(of: id.description)) }
    }

    /// The jobs that had ended by `endedBy`.
    public func finishedJobIDs(endedBy: Date) async throws(StoreError) -> [JobID] {
        do {
            return try await database.read { db in
                try String.fetchAll(
                    db, sql: "SELECT id FROM job WHERE finished_at IS NOT NULL AND finished_at <= ?",
                    arguments: [endedBy.timeIntervalSince1970]
                ).compactMap { JobID(parsing: $0) }
            }
        } catch {
            throw StoreError("the state database: \(error)")
        }
    }

    // MARK: - Reading

    /// The finished jobs the database keeps that `text` names, for a reference the scheduler
    /// no longer knows (its record dropped beyond its retention, its row and output file still
    /// here): the job whose id it is; else the newest job named so; else the jobs whose ids
    /// start with it (at most `limit` of them, with how many there are). `[]` when none.
    ///
    /// `wait ID` and `log ID` of a job 10,000 jobs old said there was no such job (exit 2) while
    /// `status` counted it and its output was on disk.
    public func finishedJobs(matching text: String, limit: Int) async throws(StoreError) -> (jobs: [JobInfo], count: Int) {
        let wanted = text.lowercased()
        guard !wanted.isEmpty else { return ([], 0) }
        let columns = "id, state, attempts, reason, skip, name, command, priority, grp, retry_max"
        let finished = "finished_at IS NOT NULL"
        do {
            return try await database.read { db in
                let decoder = JSONDecoder()
                func info(_ row: Row) -> JobInfo? {
                    guard let id = JobID(parsing: row[0] as String) else { return nil }
                    let attempts: Int = row[2]
                    let reason: String? = row[3]
                    let state: JobState
                    switch row[1] as String {
                    case "succeeded": state = .succeeded(attempts: attempts)
                    case "failed": state = .failed(reason: .error(reason ?? "failed"), attempts: attempts)
                    case "cancelled": state = .cancelled
                    case "skipped":
                        guard let data = row[4] as Data?, let skip = try? decoder.decode(SkipReason.self, from: data) else { return nil }
                        state = .skipped(skip)
                    default: return nil
                    }
                    return JobInfo(
                        id: id, name: row[5], command: row[6], priority: row[7], state: state, attempts: attempts,
                        maxAttempts: row[9], lastFailure: reason.map { FailureReason.error($0) },
                        group: row[8] ?? JobSpec.defaultGroup)
                }
                if let row = try Row.fetchOne(db, sql: "SELECT \(columns) FROM job WHERE id = ? AND \(finished)", arguments: [wanted]) {
                    return (info(row).map { [$0] } ?? [], 1)
                }
                if let row = try Row.fetchOne(
                    db, sql: "SELECT \(columns) FROM job WHERE name = ? AND \(finished) ORDER BY submitted_at DESC, seq DESC LIMIT 1",
                    arguments: [text]) {
                    return (info(row).map { [$0] } ?? [], 1)
                }
                // An id's characters only (a `%` or `_` would be a pattern).
                guard wanted.allSatisfy({ $0.isHexDigit || $0 == "-" }) else { return ([], 0) }
                let count = try Int.fetchOne(
                    db, sql: "SELECT count(*) FROM job WHERE substr(id, 1, ?) = ? AND \(finished)",
                    arguments: [wanted.count, wanted]) ?? 0
                let rows = try Row.fetchAll(
                    db, sql: "SELECT \(columns) FROM job WHERE substr(id, 1, ?) = ? AND \(finished) ORDER BY seq LIMIT ?",
                    arguments: [wanted.count, wanted, limit])
                return (rows.compactMap(info), count)
            }
        } catch {
            throw StoreError("the state database: \(error)")
        }
    }

    /// A job's output file, if it printed anything.
    public func outputFile(of id: JobID) -> URL? {
        let url = directory.outputFile(of: id.description)
        return FileManager.default.fileExists(atPath: url.path) ? url : nil
    }

    /// A job's attempts as recorded: number, worker, start, end, outcome.
    public func attempts(of id: JobID) async throws(StoreError) -> [AttemptRecord] {
        do {
            return try await database.read { db in
                try Row.fetchAll(
                    db, sql: "SELECT number, worker, started_at, ended_at, outcome, placement FROM attempt WHERE job = ? ORDER BY rowid",
                    arguments: [id.description]
                ).map { row in
                    AttemptRecord(
                        number: row["number"], worker: row["worker"],
                        startedAt: Date(timeIntervalSince1970: row["started_at"]),
                        endedAt: (row["ended_at"] as Double?).map { Date(timeIntervalSince1970: $0) },
                        outcome: row["outcome"], placement: row["placement"])
                }
            }
        } catch {
            throw StoreError("the state database: \(error)")
        }
    }

    /// Every job the database holds, in submission order: what a tool or a test reads when no
    /// serve runs (a serve's clients ask it instead).
    public func storedJobs() async throws(StoreError) -> [StoredJob] {
        do {
            return try await database.read { db in
                var jobs: [StoredJob] = []
                let cursor = try Row.fetchCursor(
                    db, sql: "SELECT id, state, attempts, reason, skip, retry_at, \(SpecColumns.selection) FROM job ORDER BY seq")
                while let row = try cursor.next() {
                    let spec = try SpecColumns.spec(from: row, at: 6)
                    jobs.append(StoredJob(
                        id: row[0], name: spec.name, command: spec.work.description, state: row[1],
                        priority: spec.priority, attempts: row[2], reason: row[3]))
                }
                return jobs
            }
        } catch {
            throw StoreError("the state database: \(error)")
        }
    }

    /// How many jobs the database holds in each state (for tests and `status`).
    public func stateCounts() async throws(StoreError) -> [String: Int] {
        do {
            return try await database.read { db in
                var counts: [String: Int] = [:]
                for row in try Row.fetchAll(db, sql: "SELECT state, count(*) AS n FROM job GROUP BY state") {
                    counts[row["state"]] = row["n"]
                }
                return counts
            }
        } catch {
            throw StoreError("the state database: \(error)")
        }
    }
}

/// A job as the store recorded it.
public struct StoredJob: Sendable, Equatable {
    /// Its id (the full UUID, lowercase).
    public var id: String
    /// Its name, if it has one.
    public var name: String?
    /// Its command.
    public var command: String
    /// `queued`, `running`, `waiting`, `blocked`, `scheduled`, `succeeded`, `failed`, `cancelled`, `skipped`.
    public var state: String
    /// Its present priority.
    public var priority: Int
    /// Attempts counted.
    public var attempts: Int
    /// Why its last attempt failed, or why it was skipped.
    public var reason: String?
}

/// One attempt of a job as the store recorded it.
public struct AttemptRecord: Sendable, Equatable {
    /// Its number (from 1; a user's retry starts again at 1).
    public var number: Int
    /// The worker's short id.
    public var worker: String
    /// When it started.
    public var startedAt: Date
    /// When it ended, if it did.
    public var endedAt: Date?
    /// How it ended: `succeeded`, a failure reason, `cancelled`, `jobtop stopped`.
    public var outcome: String?
    /// Where its worker last said it placed it outside this machine (a Slurm job id and
    /// reason), if it did.
    public var placement: String? = nil
}
