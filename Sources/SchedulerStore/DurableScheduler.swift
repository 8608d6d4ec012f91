import Foundation
import Scheduler

/// A ``Scheduler`` whose queue outlives its process: what `jobtop serve` runs.
///
/// - A submission is written to the store (one transaction for the whole batch) before the
///   scheduler sees it, so the ids it answers with survive a crash the next moment.
/// - Every other command is performed, then answered once the journal has committed the events
///   it caused.
/// - The journal is a lossless subscriber: it writes every event's effect (starts, attempts,
///   outcomes, priorities, groups, the pause) and every output line; while it is behind, the
///   scheduler starts nothing new (the events' own back-pressure), so the store never falls far
///   behind what ran.
/// - ``open(directory:configuration:storeConfiguration:clock:)`` restores what the previous
///   process left: it stops the process groups its jobs left running, counts each
///   attempt that was running as failed ("jobtop stopped") and queues it again if its retry
///   budget allows (at-least-once), gives back without counting an attempt that waited at a
///   worker that holds attempts and had not begun, then puts every job back with its state.
///
/// It is a ``SchedulerClient`` like the in-process ``Scheduler``: the dashboard, `jobtop serve`'s
/// service and the tests cannot tell them apart.
public final class DurableScheduler: SchedulerClient {
    public typealias Events = EventStream

    /// The scheduler it wraps (workers are added to it directly).
    public let scheduler: Scheduler
    /// Its store.
    public let store: SchedulerStore
    /// What the restart found, but its ``SchedulerStore/Recovery/jobs`` (handed to the scheduler,
    /// not kept twice: see ``restoredJobCount``).
    public let recovery: SchedulerStore.Recovery
    /// How many jobs the restart found (the finished ones kept and every one still to run); those
    /// the scheduler refused are not put back (``restored()`` says how many were).
    public let restoredJobCount: Int
    /// How many process groups of the previous serve's jobs were found running and stopped.
    public let orphansStopped: Int
    /// How many of the previous serve's attempts placed outside this machine (Slurm jobs) the
    /// `stopPlaced` of ``open(directory:configuration:storeConfiguration:clock:stopPlaced:)`` stopped.
    public let placedStopped: Int
    private let journal: Journal
    private let journalTask: Task<Void, Never>
    /// Notes every ``aliveInterval`` while jobs run that the serve is alive (see
    /// ``SchedulerStore/markAlive(at:)``): the journal notes it only when it writes.
    private let aliveTask: Task<Void, Never>
    /// How often ``aliveTask`` notes it: a cut-off attempt's end is at most this early.
    static let aliveInterval = Duration.seconds(5)
    private let restoreTask: Task<Int, Never>
    /// A `clean` the database refused (a full disk), tried again until it goes (see ``clean()``).
    private let cleanRetry = Locked<Task<Void, Never>?>(nil)

    /// Opens the state in `directory` (taking its lock), stops what a previous serve left
    /// running, restores its jobs into a new scheduler and starts the journal. The scheduler is
    /// not run: call ``Scheduler/run()`` (or the caller's usual way of running it).
    ///
    /// Blocking (reads the database, may wait the grace period for leftover processes): call it
    /// at start-up, off the cooperative pool if it matters.
    ///
    /// - Parameters:
    ///   - stopPlaced: Stops what the previous serve's attempts that were cut short left running
    ///     outside this machine (``SchedulerStore/Recovery/placements``: Slurm jobs), before
    ///     anything else; returns how many it stopped. Called only when there are some.
    /// - Throws: ``StoreError`` when the state cannot be opened (another serve holds it, a
    ///   database that is not jobtop's, a directory that cannot be made).
    public static func open(
        directory: StateDirectory,
        configuration: Scheduler.Configuration = .init(),
        storeConfiguration: SchedulerStore.Configuration = .init(),
        clock: some Clock<Duration> = ContinuousClock(),
        stopPlaced: ([JobID: String]) -> Int = { _ in 0 }
    ) throws(StoreError) -> DurableScheduler {
        let store = try SchedulerStore(directory: directory, configuration: storeConfiguration)
        var recovery = try store.recover()
        // An attempt cut short counts as failed and runs again: what it left elsewhere (a Slurm
        // job) is stopped first, or it would run twice at once.
        let placedStopped = recovery.placements.isEmpty ? 0 : stopPlaced(recovery.placements)
        // Only a serve that left jobs to run can have left processes (one whose start was not
        // written yet is still queued on disk); nothing starts before they are stopped.
        // And only the processes of jobs that had not ended: a `keep_background` job's daemon,
        // left running on purpose, outlives a crash of serve (a restart killed it).
        var unfinished = Set(recovery.jobs.lazy.filter { $0.ending == nil }.map(\.id.description))
        for id in recovery.interrupted + recovery.cancelled { unfinished.insert(id.description) }
        let orphans = unfinished.isEmpty ? 0 : OrphanReaper.stopAll(carrying: store.instanceID, ofJobs: unfinished, grace: configuration.gracePeriod)
        let scheduler = Scheduler(configuration: configuration, clock: clock)
        // The jobs go to the scheduler, marked in place: taken out of the recovery first (so
        // the array is not shared and nothing copies 100,000 specs), not kept after.
        var jobs = recovery.jobs
        recovery.jobs = []
        for index in jobs.indices {
            mark(&jobs[index].spec, id: jobs[index].id, instance: store.instanceID)
        }
        return DurableScheduler(
            scheduler: scheduler, clock: SchedulerClock(clock), store: store, recovery: recovery, jobs: jobs, orphansStopped: orphans,
            placedStopped: placedStopped)
    }

    private init(
        scheduler: Scheduler, clock: SchedulerClock, store: SchedulerStore, recovery: SchedulerStore.Recovery, jobs: [RestoredJob], orphansStopped: Int,
        placedStopped: Int
    ) {
        self.scheduler = scheduler
        self.store = store
        self.recovery = recovery
        self.restoredJobCount = jobs.count
        self.orphansStopped = orphansStopped
        self.placedStopped = placedStopped
        let journal = Journal()
        self.journal = journal
        // Subscribed before anything is restored, so the journal sees every event from the first.
        let ready = Gate()
        journalTask = Task {
            let events = await scheduler.events(bufferLimit: 8_192, includeOutput: true, delivery: .lossless)
            var iterator = events.makeAsyncIterator()
            await ready.open()
            while let batch = await iterator.nextBatch() {
                guard await Self.write(batch, to: store, journal: journal, clock: clock, epoch: scheduler.clock.wallClockEpoch) else { break }
            }
            await journal.ended()
        }
        aliveTask = Task {
            while !Task.isCancelled {
                try? await clock.sleep(clock.now() + Self.aliveInterval)
                if Task.isCancelled { break }
                guard await scheduler.runningCount > 0 else { continue }
                try? await store.markAlive(at: scheduler.clock.wallClockEpoch + clock.now().seconds)
            }
        }
        restoreTask = Task {
            await ready.wait()
            for group in recovery.groups {
                if group.limit != nil { try? await scheduler.setGroupLimit(group.name, to: group.limit) }
                if group.isPaused { try? await scheduler.pauseGroup(group.name) }
            }
            if recovery.isPaused { await scheduler.pause() }
            let refused = await scheduler.restore(jobs)
            for (id, error) in refused {
                FileHandle.standardError.write(Data("jobtop: job \(id.short) could not be restored: \(error)\n".utf8))
            }
            _ = await journal.wait(through: await scheduler.lastEventSeq)
            return jobs.count - refused.count
        }
    }

    /// Waits until the previous state is back in the scheduler and journaled: before serving
    /// clients.
    ///
    /// - Returns: How many jobs were put back (those the scheduler refused, each said on stderr,
    ///   not counted).
    @discardableResult
    public func restored() async -> Int {
        await restoreTask.value
    }

    deinit {
        journalTask.cancel()
        aliveTask.cancel()
    }

    /// Writes a batch of events to the store. A batch the database refuses (the disk full, the
    /// file locked by another program) is written again, 50 ms later at first, then up to a
    /// second apart, on the scheduler's clock, until it goes: dropped, its jobs' ends were lost
    /// (a finished job stayed "running" on disk and ran again after a restart). Meanwhile
    /// nothing further is read: the scheduler, whose lossless subscriber the journal is, holds
    /// new starts once its buffer is full.
    ///
    /// - Returns: `false` when the journal stops: its task was cancelled, or the serve is
    ///   closing and the batch was refused once more.
    private static func write(
        _ events: [SchedulerEvent], to store: SchedulerStore, journal: Journal, clock: SchedulerClock, epoch: Date
    ) async -> Bool {
        var pause = Duration.milliseconds(50)
        while true {
            var batch = events
            if let last = await journal.frozenAfter {
                // Stopping twice: what jobs print while they stop (a trap's last words) is still
                // their output; their ends, and the queue's cancel, are not written.
                batch.removeAll { event in
                    guard event.seq > last else { return false }
                    if case .output = event.kind { return false }
                    return true
                }
                if batch.isEmpty { return true }
            }
            do throws(StoreError) {
                let lost = try await store.apply(batch, epoch: epoch)
                await journal.committed(through: batch[batch.count - 1].seq, outputLost: lost)
                return true
            } catch {
                if Task.isCancelled { return false }
                guard await journal.failed(error, unsaved: batch.count) else { return false }
                try? await clock.sleep(clock.now() + pause)
                pause = min(pause * 2, .seconds(1))
            }
        }
    }

    /// After the scheduler has shut down: waits for the journal to write the last events and
    /// lets go of the state directory (another serve may then open it).
    public func close() async {
        // Ended before this returns: the task holds the store, and a store let go later, by
        // the task, closes its database while the next serve (a test's restart) opens it.
        aliveTask.cancel()
        await aliveTask.value
        if let retry = cleanRetry.withLock({ $0 }) {
            retry.cancel()
            await retry.value
        }
        await journal.close()
        await journalTask.value
        store.close()
    }

    /// Waits until the journal has written everything up to the scheduler's last event (after a
    /// shutdown, before the process exits).
    public func flush() async {
        _ = await journal.wait(through: await scheduler.lastEventSeq)
    }

    // MARK: - SchedulerClient

    public func perform(_ command: SchedulerCommand) async throws(SchedulerError) -> SchedulerReply {
        await restored()
        if case .submit(let specs, let batch) = command {
            return .submitted(try await submit(specs, batch: batch))
        }
        if case .shutdown(.cancelRunning) = command {
            // Stop now and cancel: the running jobs are stopped and the queue cancelled here,
            // but neither is written (their output while they stop is): a stop is not a cancel
            // of the queue on disk. The next serve counts each cut-off attempt as failed
            // ("jobtop stopped") and runs the queue.
            //
            // (`.stopRunning` — a serve's second SIGTERM, `shutdown --now` — is written as it
            // is: each stopped attempt back in the queue, uncounted, as its `requeued` event
            // says, so the next serve runs it again. Frozen too, it failed every stopped job
            // with no retries left and skipped its dependents: a clean stop lost work.)
            await journal.freeze(after: await scheduler.lastEventSeq)
        }
        if case .forgetFinished = command { return try await clean() }
        let reply = try await scheduler.perform(command)
        if let error = await journal.wait(through: await scheduler.lastEventSeq) {
            throw SchedulerError(.notAllowed, "done, but the state could not be saved: \(error)")
        }
        return reply
    }

    /// `jobtop clean`: the scheduler forgets its finished jobs, their output files are removed
    /// at once, and the database forgets every job that had ended by then — once the journal has
    /// written their ends, and again and again, up to a second apart, while the database refuses
    /// it. A full disk is a likely reason to clean: the files go first, which makes the room the
    /// journal and the clean need (the clean was forgotten on disk, the jobs came back at the
    /// next start, and the files that filled the disk stayed).
    private func clean() async throws(SchedulerError) -> SchedulerReply {
        let finished = await scheduler.currentSnapshot().jobs.filter(\.state.isFinished).map(\.id)
        let reply = try await scheduler.perform(.forgetFinished)
        let seq = await scheduler.lastEventSeq
        let clock = scheduler.clock
        let endedBy = clock.wallClockEpoch.addingTimeInterval(clock.now().seconds)
        // (Those it forgot: one retried in between is listed still, and keeps its file.)
        let listed = Set(await scheduler.currentSnapshot().jobs.lazy.map(\.id))
        store.removeOutputFiles(of: finished.filter { !listed.contains($0) })
        // (Those beyond what the scheduler kept, from the database: reading needs no room.)
        if let older = try? await store.finishedJobIDs(endedBy: endedBy) { store.removeOutputFiles(of: older) }
        let (journal, store) = (journal, store)
        @Sendable func save() async -> StoreError? {
            if let error = await journal.wait(through: seq) { return error }
            do { try await store.forgetAllFinished(endedBy: endedBy) } catch { return error }
            return nil
        }
        // The journal tries its refused batch again within a second: given that long here, a
        // clean that made the room it needs is saved before it answers.
        var pause = Duration.milliseconds(50)
        var waited = Duration.zero
        var refusal = await save()
        while refusal != nil, waited < .seconds(2) {
            try? await clock.sleep(clock.now() + pause)
            waited += pause
            pause = min(pause * 2, .seconds(1))
            refusal = await save()
        }
        guard let refusal else { return reply }
        cleanRetry.withLock { retry in
            retry?.cancel()
            retry = Task {
                while !Task.isCancelled {
                    try? await clock.sleep(clock.now() + .seconds(1))
                    if Task.isCancelled { return }
                    if await save() == nil {
                        FileHandle.standardError.write(Data("jobtop: the clean is saved\n".utf8))
                        return
                    }
                }
            }
        }
        throw SchedulerError(.notAllowed, "forgotten here, not yet on disk (\(refusal)); saved as soon as the disk takes it, while this serve runs")
    }

    private func submit(_ specs: [JobSpec], batch: BatchID?) async throws(SchedulerError) -> [JobID] {
        let ids = specs.map { _ in JobID(uuid: UUID()) }
        var forScheduler: [JobSpec] = []
        var forStore: [SchedulerStore.NewJob] = []
        forScheduler.reserveCapacity(specs.count)
        forStore.reserveCapacity(specs.count)
        for (index, spec) in specs.enumerated() {
            guard spec.work.isProcess else {
                throw SchedulerError(.invalidArgument, "job \(index + 1) is Swift code, which cannot be saved; a durable scheduler runs commands")
            }
            // (The store keeps a delay as the date it ends on, so a restart keeps it.)
            var durable = spec
            forScheduler.append(Self.marked(spec, id: ids[index], instance: store.instanceID))
            durable.dependencies = spec.dependencies.map { dependency in
                if case .earlier(let other) = dependency, other >= 0, other < index { return .job(ids[other]) }
                return dependency
            }
            forStore.append(SchedulerStore.NewJob(id: ids[index], spec: durable))
        }
        do {
            try await store.insert(forStore)
        } catch {
            throw SchedulerError(.notAllowed, "not submitted: \(error)")
        }
        let result: [JobID]
        do {
            result = try await scheduler.submit(contentsOf: forScheduler, ids: ids, batch: batch)
        } catch {
            try? await store.remove(ids)
            throw error
        }
        // A spec coalesced into an existing job was not submitted.
        let unused = zip(ids, result).filter { $0 != $1 }.map(\.0)
        if !unused.isEmpty { try? await store.remove(unused) }
        return result
    }

    /// The spec a job runs with: its environment carries the state directory's id (how a
    /// restart finds what a dead serve left running) and the job's own.
    private static func marked(_ spec: JobSpec, id: JobID, instance: String) -> JobSpec {
        var spec = spec
        mark(&spec, id: id, instance: instance)
        return spec
    }

    private static func mark(_ spec: inout JobSpec, id: JobID, instance: String) {
        spec.environment.reserveCapacity(spec.environment.count + 2)
        spec.environment[OrphanReaper.variable] = instance
        spec.environment["JOBTOP_JOB_ID"] = id.description
    }

    public func subscribe(bufferLimit: Int?, includeOutput: Bool, delivery: EventDelivery) async -> EventStream {
        await restored()
        return await scheduler.subscribe(bufferLimit: bufferLimit, includeOutput: includeOutput, delivery: delivery)
    }

    public func currentSnapshot() async -> SchedulerSnapshot {
        await restored()
        return await scheduler.currentSnapshot()
    }

    /// The scheduler's tail of the job's output; for a job that ran before this process started
    /// (of which the scheduler holds nothing), the last lines of its output file (every line on
    /// stdout's side: the file does not say which stream a line came from).
    public func outputTail(of id: JobID) async -> (lines: [OutputLine], dropped: Int) {
        let held = await scheduler.outputTail(of: id)
        guard held.lines.isEmpty, held.dropped == 0, let file = outputFile(of: id) else { return held }
        let limit = scheduler.configuration.tailLines
        // Read on a dispatch queue: a blocking read must not hold a thread of the cooperative pool.
        return await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: Self.lastLines(of: file, limit: limit)) }
        }
    }

    /// The last `limit` lines of an output file (at most the store's cap per job), and how many
    /// came before them.
    static func lastLines(of file: URL, limit: Int) -> (lines: [OutputLine], dropped: Int) {
        guard limit > 0, let data = try? Data(contentsOf: file) else { return ([], 0) }
        var splitter = LineSplitter(stream: .stdout)
        var kept: [OutputLine] = []
        var total = 0
        func keep(_ line: OutputLine) {
            total += 1
            kept.append(line)
            // Trimmed now and then, not at every line: amortized O(1) a line.
            if kept.count >= 2 * limit { kept.removeFirst(kept.count - limit) }
        }
        data.withUnsafeBytes { raw in splitter.feed(raw.bindMemory(to: UInt8.self), keep) }
        splitter.flush(keep)
        if kept.count > limit { kept.removeFirst(kept.count - limit) }
        return (kept, total - kept.count)
    }

    public func waitForRoom(in batch: BatchID, below limit: Int) async -> Bool {
        await scheduler.waitForRoom(in: batch, below: limit)
    }

    /// A job's whole output file (every attempt), if it printed anything. The journal may still
    /// be writing its last lines: ``flush()`` first to read all of a finished job's.
    public func outputFile(of id: JobID) -> URL? {
        store.outputFile(of: id)
    }
}

/// How far the journal has written, and who waits for it.
private actor Journal {
    private var committed: UInt64 = 0
    /// Why the batch being written was refused, while it is (cleared when it is written).
    private var failure: StoreError?
    private var isEnded = false
    /// Set by ``close()``: a batch the database refuses is then given up after one more try.
    private var isClosing = false
    /// Jobs that lost output (each said once).
    private var losingOutput: Set<JobID> = []
    private var waiters: [(seq: UInt64, continuation: CheckedContinuation<StoreError?, Never>)] = []

    /// Writes nothing after this event (a stop that must not be written as cancels).
    private(set) var frozenAfter: UInt64?

    func freeze(after seq: UInt64) {
        frozenAfter = seq
        isEnded = true
        wake()
    }

    /// A batch was written through `seq`; `outputLost`: the jobs whose lines of it were not.
    func committed(through seq: UInt64, outputLost: [(JobID, StoreError)]) {
        committed = max(committed, seq)
        if failure != nil {
            failure = nil
            say("the state is saved again")
        }
        // Each job's loss is said once: a job printing to a full disk lost lines in every batch,
        // and the log had hundreds of the same line.
        for (id, error) in outputLost where losingOutput.insert(id).inserted {
            say("job \(id.short) loses output: \(error)")
        }
        wake()
    }

    /// The database refused a batch of `unsaved` events. Commands waiting for the journal are
    /// answered that their effect is not saved; the first refusal of a run of them is said.
    ///
    /// - Returns: Whether to try the batch again (not once ``close()`` was called).
    func failed(_ error: StoreError, unsaved: Int) -> Bool {
        if isClosing {
            say("\(error); \(unsaved) event\(unsaved == 1 ? "" : "s") not saved (the next serve counts the jobs still marked running as cut off)")
            return false
        }
        if failure == nil { say("\(error); trying again (new jobs wait meanwhile)") }
        failure = error
        wake()
        return true
    }

    func ended() {
        isEnded = true
        wake()
    }

    /// The serve is closing: a refused batch is given up.
    func close() {
        isClosing = true
    }

    /// Waits until everything up to `seq` is written; returns why the journal is not written,
    /// if it is refused now (then at once).
    func wait(through seq: UInt64) async -> StoreError? {
        if committed >= seq || isEnded || failure != nil { return failure }
        return await withCheckedContinuation { waiters.append((seq, $0)) }
    }

    private func say(_ text: String) {
        FileHandle.standardError.write(Data("jobtop: \(text)\n".utf8))
    }

    private func wake() {
        var still: [(seq: UInt64, continuation: CheckedContinuation<StoreError?, Never>)] = []
        for waiter in waiters {
            if committed >= waiter.seq || isEnded || failure != nil {
                waiter.continuation.resume(returning: failure)
            } else {
                still.append(waiter)
            }
        }
        waiters = still
    }
}

/// Opens once; every waiter before or after goes on.
private actor Gate {
    private var isOpen = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func open() {
        isOpen = true
        for waiter in waiters { waiter.resume() }
        waiters = []
    }

    func wait() async {
        if isOpen { return }
        await withCheckedContinuation { waiters.append($0) }
    }
}
