import ArgumentParser
import Foundation
import Scheduler
import SchedulerService
import TUI

extension Jobtop {
    /// `jobtop attach`: the dashboard, on the serve's scheduler.
    struct Attach: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "attach",
            abstract: "Open the dashboard on the running jobtop serve (q detaches; the jobs go on).",
            discussion: """
                The same dashboard as 'jobtop run', steering the serve's jobs; several can be \
                attached at once. q detaches without asking; X shuts the serve down (asks y/n; \
                running jobs finish first).

                Exit status: 0 detached (or the serve was shut down from here); 2 no terminal \
                the dashboard can use (stdin, stdout, TERM); 3 no serve is running, or it went \
                away while attached (the terminal is restored first).
                """
        )

        @OptionGroup var connection: ConnectOptions

        mutating func run() async throws {
            guard isatty(STDIN_FILENO) != 0 || FileManager.default.isReadableFile(atPath: "/dev/tty") else {
                StandardError.write("jobtop: attach shows the dashboard and reads keys from a terminal; stdin is not one and /dev/tty cannot be opened\n")
                throw ExitCode(ExitStatus.usage)
            }
            // A screen it cannot draw on is refused before anything, as `run` leaves it for
            // headless (attach drew into a file and never ended, drew one garbled line for
            // TERM=dumb, and exited 0 without TERM).
            guard isatty(STDOUT_FILENO) != 0 else {
                StandardError.write("jobtop: attach draws the dashboard on a terminal, and stdout is not one; 'jobtop status' and 'jobtop follow ID' print\n")
                throw ExitCode(ExitStatus.usage)
            }
            if let problem = await Dashboard.terminalProblem() {
                StandardError.write("jobtop: attach cannot draw the dashboard here (\(problem)); 'jobtop status' and 'jobtop follow ID' print\n")
                throw ExitCode(ExitStatus.usage)
            }
            let client = try await connection.client()
            // The first call says whether the serve answers and lets us in (a wrong token, say),
            // before the screen is taken over.
            do {
                try await client.ping()
            } catch {
                await client.close()
                throw ServeFailure(error)
            }
            let (stream, continuation) = AsyncStream<Int32>.makeStream(bufferingPolicy: .bufferingNewest(64))
            let signals = SignalWatcher(signals: Dashboard.signals) { number, _ in continuation.yield(number) }
            let exit = await Dashboard.run(
                client: client, signals: stream,
                options: DashboardOptions(
                    title: "jobtop attach: \(client.endpoint)", isAttached: true,
                    // A job typed with `n` runs here, as one given to `submit` does (not over
                    // --connect: the serve may be on another machine).
                    workingDirectory: connection.connect == nil ? logicalCurrentDirectory() : nil))
            continuation.finish()
            signals.stop()
            // Not awaited: with the serve gone there is nothing to close politely, and the
            // process ends right after.
            client.beginClose()
            switch exit {
            case .quit: return
            case .cannotOpen: throw ExitCode(ExitStatus.usage)
            case .signal(let number): throw ExitCode(ExitStatus.interrupted(by: number))
            case .disconnected:
                StandardError.write("jobtop: jobtop serve at \(client.endpoint) went away; detached\n")
                throw ExitCode(ExitStatus.noServe)
            }
        }
    }

    /// `jobtop submit`: adds jobs to the serve's queue.
    struct Submit: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "submit",
            abstract: "Add jobs to the running jobtop serve and print their ids.",
            discussion: """
                FILE is a job file (.toml) or a plain list (one command per line); "-" reads a list \
                from stdin. --priority, --group and --after apply to -c and list jobs; a job file's \
                jobs keep what the file says. --retries, --backoff, --timeout and --delay (or --at) \
                apply to every job that does not set its own (a job file's included). --name names the one \
                -c job. --after takes ids (or unique prefixes) and names of jobs the serve knows. \
                Jobs run in the directory submit was run in (a job file's relative cwd is taken from \
                there); with --connect, in the serve's, unless their cwd says otherwise.

                Exit status: 0 submitted (with --wait: every job succeeded); 1 refused by the \
                serve (with --wait: some job failed, was cancelled or skipped); 2 bad usage or \
                input (nothing submitted); 3 no serve is running.
                """
        )

        @Argument(help: ArgumentHelp("A job file (.toml) or a plain list of commands; '-' reads the list from stdin.", valueName: "file"))
        var file: String?

        @Option(name: [.customShort("c"), .long], help: ArgumentHelp("Add one job (repeatable).", valueName: "cmd"))
        var command: [String] = []

        @Option(parsing: .unconditional, help: ArgumentHelp("Priority of the -c and list jobs (higher runs first).", valueName: "n"))
        var priority: Int?

        @Option(help: ArgumentHelp("Group of the -c and list jobs.", valueName: "name"))
        var group: String?

        @Option(help: ArgumentHelp("Start the -c and list jobs only after this job succeeded (id, prefix or name; repeatable).", valueName: "job"))
        var after: [String] = []

        @Option(help: ArgumentHelp("Name of the job given with -c (one -c only): for --after, status and the dashboard.", valueName: "name"))
        var name: String?

        @OptionGroup var jobDefaults: JobDefaultOptions

        @Option(
            parsing: .unconditional, help: ArgumentHelp("Start the jobs this long after they are submitted (500ms, 10s, 5m, 1h).", valueName: "duration"),
            transform: { try DurationParser.option($0, "--delay") })
        var delay: Duration?

        @Option(
            help: ArgumentHelp(
                "Start the jobs at this time: a local time of day (02:00, the next one) or an RFC 3339 time (2026-11-28T02:00:00Z).",
                valueName: "time"),
            transform: { try Submit.startDate($0, now: Date()) })
        var at: Date?

        @Flag(help: "Wait until the submitted jobs end; exit like 'jobtop run' would.")
        var wait = false

        @Flag(help: "Print the ids as JSON.")
        var json = false

        @OptionGroup var connection: ConnectOptions

        func validate() throws {
            if let priority, !JobSpec.priorityRange.contains(priority) {
                throw ValidationError("--priority must be between \(JobSpec.priorityRange.lowerBound) and \(JobSpec.priorityRange.upperBound), not \(priority)")
            }
            if command.contains(where: { $0.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty }) {
                throw ValidationError("-c/--command must not be empty")
            }
            if file == nil && command.isEmpty && !JobSources.standardInputIsPiped() {
                throw ValidationError("nothing to submit: give a job file, a list ('-' for stdin) or -c COMMAND")
            }
            if at != nil && delay != nil {
                throw ValidationError("--at and --delay both say when the jobs start: give one")
            }
            try validateGroupOption(group)
            if let name {
                if name.isEmpty { throw ValidationError("--name must not be empty") }
                if let problem = JobFile.nameProblem(name) { throw ValidationError("--name \(problem)") }
                if command.count != 1 || file != nil {
                    throw ValidationError("--name names one job: give exactly one -c and no file or list (a job file names its jobs itself)")
                }
            }
        }

        /// The moment `--at` names, read as a job file's `at` is (once, as the option is parsed;
        /// the parser's message names the option); one already past is refused.
        static func startDate(_ text: String, now: Date) throws -> Date {
            let start: StartTimeParser.StartTime
            do {
                start = try StartTimeParser.parse(text, now: now, timeZone: .current)
            } catch {
                throw ValidationError("\(error)")
            }
            if let past = start.unusableReason(now: now) { throw ValidationError(past) }
            return start.date
        }

        mutating func run() async throws {
            var overrides = jobDefaults.fields
            overrides.start = delay.map { .delay($0) } ?? at.map { .date($0) }
            var plan = try JobSources.plan(file: file, commands: command, overrides: overrides, readsPipedStandardInput: command.isEmpty)
            if let name, plan.commandJobs.count == 1 { plan.commandJobs[0].name = name }
            if plan.slurm != nil {
                // Where jobs run is the serve's choice (serve --slurm and its flags), not a submission's.
                StandardError.write("jobtop submit: the file's [slurm] tables are not used: the serve runs every job where it was started to ('jobtop serve --slurm' for Slurm)\n")
            }
            // Options for -c and list jobs on a job file alone would apply to nothing: refused,
            // not ignored (`--after f` on a file ran its jobs at once though f had failed).
            if plan.list == nil && plan.commandJobs.isEmpty, let file {
                let given = [priority.map { _ in "--priority" }, group.map { _ in "--group" }, after.isEmpty ? nil : "--after"].compactMap { $0 }
                if !given.isEmpty {
                    let keys = given.map { "`\($0.dropFirst(2))`" }.joined(separator: ", ")
                    throw JobInputError(.invalidValue, "\(given.joined(separator: ", ")) \(given.count == 1 ? "applies" : "apply") to -c and list jobs, and \(file) is a job file: its jobs keep what it says (set \(keys) in the file)")
                }
            }
            var listJobs: [JobSpec] = []
            if let list = plan.list {
                listJobs = try Self.readList(list).map(plan.spec(forListCommand:))
            }
            let (priority, group, after, wait, json) = (priority, group, after, wait, json)
            // Over --connect the serve may be on another machine, where this directory means nothing.
            let isLocal = connection.connect == nil
            try await withServe(connection) { client in
                let waits = try await resolve(after, with: client).map { JobSpec.Dependency.job($0.id) }
                var extra = listJobs + plan.commandJobs
                for index in extra.indices {
                    if let priority { extra[index].priority = priority }
                    if let group { extra[index].group = group }
                    extra[index].dependencies += waits
                }
                var specs = plan.fileJobs + extra
                if specs.isEmpty { throw JobInputError(.noJobs, "nothing to submit: the list has no commands") }
                if isLocal {
                    // On this machine a job runs where it was submitted from, as pueue's do and as
                    // `jobtop run` runs them (they ran in the serve's own directory); a relative
                    // `cwd` is taken from there too.
                    let here = logicalCurrentDirectory()
                    for index in specs.indices {
                        let cwd = specs[index].workingDirectory
                        if cwd == nil || cwd?.hasPrefix("/") == false {
                            specs[index].workingDirectory = cwd.map { (here as NSString).appendingPathComponent($0) } ?? here
                        }
                    }
                }
                // Subscribed before submitting, so that --wait misses no job's end (one it was
                // too slow to read shows in the snapshot it then gets).
                let events = wait ? client.events(bufferLimit: 100_000, includeOutput: false, delivery: .latest) : nil
                for planned in plan.groups {
                    // Only what the file says: a `[groups.x]` table without `parallel` leaves the
                    // limit the serve has (set with `jobtop limit`); it removed it. Paused first,
                    // as `run` does: no moment (and no event) of a new paused group unpaused.
                    if planned.isPaused { _ = try await send(client, .pauseGroup(planned.name)) }
                    if let limit = planned.limit { _ = try await send(client, .setGroupLimit(planned.name, limit)) }
                }
                // `paused = false` said in so many words resumes a group the serve has paused
                // (after its new limit: no moment of the old one unpaused). It paused nothing,
                // and said nothing, and the group's jobs stayed queued.
                if !plan.unpausedGroups.isEmpty {
                    let pausedThere = try await client.fetchSnapshot().groups.filter(\.group.isPaused).map(\.group.name)
                    for name in pausedThere.sorted() where plan.unpausedGroups.contains(name) {
                        _ = try await send(client, .resumeGroup(name))
                    }
                }
                // `--group` naming a group the serve does not have yet makes it, with no limit: a
                // misspelt `--group gpuu` would run its jobs unthrottled, so it is said (as
                // `limit` and `pause --group` say it).
                var isNewGroup = false
                if let group, !plan.groups.contains(where: { $0.name == group }) {
                    isNewGroup = try await !client.fetchSnapshot().groups.contains { $0.group.name == group }
                }
                // Jobs with a key may join a job of the serve with the same key, not ended: which
                // jobs had one before, to say so (a joined job's id was printed as if new, and
                // `wait` by its name found nothing).
                var keyed: [String: JobInfo] = [:]
                if specs.contains(where: { $0.coalescingKey != nil }) {
                    for job in try await client.fetchSnapshot().jobs where !job.state.isFinished {
                        if let key = job.key { keyed[key] = job }
                    }
                }
                let reply: SchedulerReply
                do {
                    reply = try await send(client, .submit(specs, batch: nil))
                } catch let error as ControlError where error.code == .connectionLost || error.message.hasPrefix("lost jobtop serve") {
                    // Lost while it answered: the submission may have been made (it is all or
                    // nothing), and running submit again would make it twice.
                    throw ControlError(error.code, "\(error.message); the jobs may have been submitted all the same (a submission is made whole or not at all): 'jobtop status' says, before submitting them again")
                }
                guard case .submitted(let ids) = reply else {
                    StandardError.write("jobtop: the serve did not say which jobs it made\n")
                    throw ExitCode(ExitStatus.someFailed)
                }
                if isNewGroup, let group { sayGroupIsNew(group, "no limit or pause of its own ('jobtop limit', 'jobtop pause --group')") }
                Self.sayJoined(specs, ids: ids, existing: keyed)
                if json {
                    printJSON(zip(ids, specs).map { SubmittedRecord(id: $0.description, short: $0.short, name: $1.name) })
                } else {
                    for text in JobID.distinctShortForms(of: ids) { print(text) }
                }
                fflush(nil)
                guard let events else { return }
                let status = await Self.waitForEnd(of: Set(ids), events: events)
                if status != ExitStatus.success { throw ExitCode(status) }
            }
        }

        /// Says which of `specs` joined a job with the same key instead of being made (the
        /// serve's `existing` jobs with a key, not ended, or one earlier in the submission): the
        /// id printed for it is that job's.
        static func sayJoined(_ specs: [JobSpec], ids: [JobID], existing: [String: JobInfo]) {
            var firstOfKey: [String: Int] = [:]
            for (index, (spec, id)) in zip(specs, ids).enumerated() {
                guard let key = spec.coalescingKey else { continue }
                let what = "job \(index + 1)\(spec.name.map { " (\(printable($0)))" } ?? "")"
                if let earlier = firstOfKey[key], ids[earlier] == id {
                    StandardError.write("jobtop: \(what) has the key '\(printable(key))' of job \(earlier + 1) of this submission: it joined it (\(id.short))\n")
                } else if let job = existing[key], job.id == id {
                    StandardError.write("jobtop: \(what) has the key '\(printable(key))' of \(id.short) (\(printable(job.displayName))), \(job.state.name): it joined that job, whose id is printed\n")
                }
                if firstOfKey[key] == nil { firstOfKey[key] = index }
            }
        }

        /// How a job that did not succeed ended, in a few words.
        static func outcome(of job: JobInfo) -> String {
            switch job.state {
            case .failed(let reason, _): "failed: \(reason)"
            case .skipped(let reason): "skipped: \(reason)"
            default: job.state.name
            }
        }

        /// One line naming the jobs that did not succeed (the first five).
        static func sayNotSucceeded(_ jobs: [(JobID, String)]) {
            guard !jobs.isEmpty else { return }
            let named = jobs.prefix(5).map { "\($0.0.short) (\(printable($0.1)))" }.joined(separator: ", ")
            let more = jobs.count > 5 ? ", and \(jobs.count - 5) more" : ""
            StandardError.write("jobtop: \(jobs.count) job\(jobs.count == 1 ? "" : "s") did not succeed: \(named)\(more)\n")
        }

        struct SubmittedRecord: Encodable {
            var id: String
            var short: String
            /// Null for a job without one, as `status --json` and the README give it.
            @NullWhenAbsent var name: String?
        }

        /// Reads the whole list with the parser `jobtop run` uses, so the same lines are refused
        /// the same way (a NUL byte, a command over the kernel's limit, text that is not UTF-8),
        /// whether the list comes from a file or a pipe.
        private static func readList(_ list: RunPlan.List) throws -> [String] {
            let handle = FileHandle(fileDescriptor: list.fd, closeOnDealloc: true)
            let data = try handle.readToEnd() ?? Data()
            return try CommandListParser.commands(in: [UInt8](data), source: list.source)
        }

        /// Waits until every job of `ids` has ended: 0 when all succeeded, 1 otherwise, 3 when the
        /// serve went away first.
        ///
        /// Says on stderr which jobs did not succeed, and how (`submit --wait` exited 1 without
        /// a word of which one); `endedBefore`: jobs named that had ended before the wait began,
        /// and did not succeed (`wait` settles them at once), said among them.
        static func waitForEnd(of ids: Set<JobID>, events: ControlEvents, endedBefore: [JobInfo] = []) async -> Int32 {
            var notSucceeded = endedBefore.map { ($0.id, Self.outcome(of: $0)) }
            defer { Self.sayNotSucceeded(notSucceeded) }
            guard !ids.isEmpty else { return notSucceeded.isEmpty ? ExitStatus.success : ExitStatus.someFailed }
            var open = ids
            var failed = false
            var resyncing = false
            // A serve stopping its running jobs (a second SIGTERM; or cancelling everything)
            // does not end them on disk: its next start runs them on. Their `cancelled` is the
            // serve going away, not how they ended (`wait` said 1 for a job that then succeeded).
            var serveIsStopping = false
            for await event in events {
                switch event.kind {
                case .shuttingDown(let mode) where mode.stopsRunningJobs:
                    serveIsStopping = true
                case .cancelled where serveIsStopping:
                    continue
                case .lagged:
                    // The serve skipped events this client was too slow to read; the snapshot
                    // that follows says where every job is.
                    resyncing = true
                case .snapshot(let snapshot):
                    for job in snapshot.jobs where open.contains(job.id) && job.state.isFinished {
                        open.remove(job.id)
                        if job.state.kind != .succeeded {
                            failed = true
                            notSucceeded.append((job.id, Self.outcome(of: job)))
                        }
                    }
                    if resyncing {
                        // Not in it at all: ended meanwhile, and beyond what the serve keeps of
                        // finished jobs (the first snapshot came before the submission).
                        let present = Set(snapshot.jobs.lazy.map(\.id))
                        let forgotten = open.filter { !present.contains($0) }
                        if !forgotten.isEmpty {
                            StandardError.write("jobtop: \(forgotten.count) of the jobs ended while this client was behind, and the serve no longer keeps their outcome (see jobtop log ID)\n")
                            open.subtract(forgotten)
                            failed = true
                        }
                        resyncing = false
                    }
                case let kind where kind.isFinal:
                    if let id = kind.jobID, open.remove(id) != nil, case .succeeded = kind {} else if let id = kind.jobID, ids.contains(id) {
                        failed = true
                        let how = switch kind {
                        case .failed(_, let reason, _): "failed: \(reason)"
                        case .skipped(_, let reason): "skipped: \(reason)"
                        default: kind.name
                        }
                        notSucceeded.append((id, how))
                    }
                default: break
                }
                if open.isEmpty { return failed ? ExitStatus.someFailed : ExitStatus.success }
            }
            StandardError.write("jobtop: jobtop serve went away before the jobs ended\n")
            return ExitStatus.noServe
        }
    }

    /// `jobtop status`: the serve's jobs, like the dashboard's table.
    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "status",
            abstract: "List the serve's jobs (active ones; --all adds finished ones).",
            discussion: "Exit status: 0 listed; 3 no serve is running.")

        @Flag(help: "Also list finished jobs (the serve keeps the most recent).")
        var all = false

        @Flag(help: "Print JSON: jobs, groups, workers and counts.")
        var json = false

        @OptionGroup var connection: ConnectOptions

        struct Report: Encodable {
            var paused: Bool
            /// Null when no shutdown is under way.
            @NullWhenAbsent var shuttingDown: String?
            var counts: [String: Int]
            var slots: Int
            var prefetch: Int
            var groups: [GroupRecord]
            var workers: [WorkerRecord]
            var jobs: [JobRecord]
        }

        struct GroupRecord: Encodable {
            var name: String
            /// Null for a group with no limit of its own.
            @NullWhenAbsent var limit: Int?
            var paused: Bool
            /// Its jobs running now, apart from those `sent`.
            var running: Int
            /// Its jobs sent to a worker that holds them and has not begun them (they count
            /// against the group's limit, as running ones do).
            var sent: Int
            var queued: Int
            var held: Int
        }

        struct WorkerRecord: Encodable {
            var name: String
            var kind: String
            var slots: Int
            var prefetch: Int
            var running: Int
            /// Sent to it and held behind its running jobs (its prefetch), not begun.
            var sent: Int
            /// Leaving once its jobs end (a worker drained by SIGTERM): its slots take no new job
            /// and are not among the serve's.
            var draining: Bool
        }

        mutating func run() async throws {
            let (all, json) = (all, json)
            try await withServe(connection) { client in
                let snapshot = try await client.fetchSnapshot()
                let workers = Dictionary(snapshot.workers.map { ($0.descriptor.id, $0.descriptor.name) }, uniquingKeysWith: { a, _ in a })
                let jobs = all ? snapshot.jobs : snapshot.jobs.filter { !$0.state.isFinished }
                // The slots that run jobs, and apart from them what remote workers may hold
                // behind theirs (one total said both: a 2-slot worker showed as 3 slots).
                // A draining worker's slots are out of the total already, and so is its prefetch
                // (taken off again, 4 slots read 1 while a worker with 2 and 1 prefetched drained).
                let prefetch = snapshot.workers.reduce(0) { $0 + ($1.isRetiring ? 0 : $1.descriptor.prefetchDepth) }
                let slots = snapshot.totalSlots - prefetch
                let sentByGroup = Self.sentByGroup(snapshot)
                if json {
                    // A job sent to its worker and held there counts as `sent`, not running, as
                    // in the text (`counts.running` said 5 for 3 running and 2 sent).
                    var counts = Dictionary(uniqueKeysWithValues: snapshot.counts.map { ($0.key.rawValue, $0.value) })
                    counts[JobStateKind.running.rawValue, default: 0] -= snapshot.heldAttempts.count
                    counts["sent"] = snapshot.heldAttempts.count
                    printJSON(Report(
                        paused: snapshot.isPaused, shuttingDown: snapshot.shutdown?.rawValue,
                        counts: counts,
                        slots: slots, prefetch: prefetch,
                        groups: snapshot.groups.map {
                            let sent = sentByGroup[$0.group.name, default: 0]
                            return GroupRecord(name: $0.group.name, limit: $0.group.limit, paused: $0.group.isPaused,
                                               running: $0.running - sent, sent: sent, queued: $0.queued, held: $0.held)
                        },
                        workers: snapshot.workers.map {
                            WorkerRecord(
                                name: $0.descriptor.name, kind: $0.descriptor.kind.rawValue, slots: $0.descriptor.runningSlots,
                                prefetch: $0.descriptor.prefetchDepth,
                                running: $0.running.count { !snapshot.heldAttempts.contains($0) },
                                sent: $0.running.count { snapshot.heldAttempts.contains($0) },
                                draining: $0.isRetiring)
                        },
                        jobs: jobs.map { JobRecord(
                            $0, workers: workers, placements: snapshot.placements, sent: snapshot.heldAttempts, now: snapshot.time) }))
                    return
                }
                let kinds = JobStateKind.allCases.filter { snapshot.count($0) > 0 }
                // A running job its worker holds and has not begun is `sent`, as its row says,
                // not running (5 running were 3 running and 2 sent).
                let sent = snapshot.heldAttempts.count
                var header = kinds.flatMap { kind -> [String] in
                    guard kind == .running, sent > 0 else { return ["\(snapshot.count(kind)) \(kind.rawValue)"] }
                    let running = snapshot.count(kind) - sent
                    return (running > 0 ? ["\(running) running"] : []) + ["\(sent) sent"]
                }.joined(separator: ", ")
                if header.isEmpty { header = "no jobs" }
                if snapshot.isPaused { header += "; paused" }
                if let shutdown = snapshot.shutdown { header += "; shutting down: \(shutdown.summary)" }
                print("\(header); \(slots) slot\(slots == 1 ? "" : "s")\(prefetch > 0 ? " (+\(prefetch) prefetched)" : "")")
                let names = Dictionary(snapshot.jobs.map { ($0.id, printable($0.displayName)) }, uniquingKeysWith: { a, _ in a })
                let busy = snapshot.workers.map { worker in
                    // What it runs, then what it was sent and holds behind that.
                    let running = worker.running.filter { !snapshot.heldAttempts.contains($0) }.map { names[$0] ?? $0.short }
                    let sent = worker.running.filter { snapshot.heldAttempts.contains($0) }.map { names[$0] ?? $0.short }
                    var jobs = running.joined(separator: ", ")
                    if !sent.isEmpty { jobs += (jobs.isEmpty ? "" : "; ") + "sent: " + sent.joined(separator: ", ") }
                    let draining = worker.isRetiring ? "draining " : ""
                    return "\(worker.descriptor.name) \(draining)" + (jobs.isEmpty ? "(idle)" : "(\(jobs))")
                }
                if !busy.isEmpty { print("workers: " + busy.joined(separator: "; ")) }
                for group in snapshot.groups where group.group.name != JobSpec.defaultGroup || group.group.isPaused || group.group.limit != nil {
                    print(Self.groupLine(group, sent: sentByGroup[group.group.name, default: 0]))
                }
                guard !jobs.isEmpty else { return }
                let rows = jobs.map { job -> [String] in
                    [job.id.short, Self.stateCell(
                        of: job, placement: snapshot.placements[job.id], sent: snapshot.heldAttempts.contains(job.id), now: snapshot.time),
                     String(job.priority), job.group, printable(job.displayName)]
                }
                for line in Self.table(header: ["ID", "STATE", "PRIO", "GROUP", "JOB"], rows: rows) { print(line) }
            }
        }

        /// A job's STATE cell: its state, then what else a user asks of it in one parenthesis —
        /// why it failed or was skipped, where it runs, when it starts, and which attempt this
        /// is when it may have several: `running (attempt 2 of 3)`, `waiting (in 26.2s; attempt
        /// 2 of 3 next)`, `failed (exit 3; 3 attempts)`.
        /// A group's line: "group g: limit 1, paused; 1 running, 2 queued, 0 held".
        /// `sent`: how many of its running jobs a worker holds and has not begun; they are said
        /// apart, as in the header (`1 running, 1 sent`; the line said 2 running).
        static func groupLine(_ group: GroupStatus, sent: Int) -> String {
            let limit = group.group.limit.map { "limit \($0)" } ?? "no limit"
            let running = "\(group.running - sent) running" + (sent > 0 ? ", \(sent) sent" : "")
            return "group \(group.group.name): \(limit)\(group.group.isPaused ? ", paused" : ""); \(running), \(group.queued) queued, \(group.held) held"
        }

        /// Per group, its running jobs that their worker holds and has not begun.
        static func sentByGroup(_ snapshot: SchedulerSnapshot) -> [String: Int] {
            guard !snapshot.heldAttempts.isEmpty else { return [:] }
            var sent: [String: Int] = [:]
            for job in snapshot.jobs where snapshot.heldAttempts.contains(job.id) { sent[job.group, default: 0] += 1 }
            return sent
        }

        ///
        /// `sent`: a running job that its worker holds and has not begun (a remote worker's
        /// prefetch behind a busy slot, a Slurm queue) says so: `sent (waiting at its worker)`,
        /// or with its placement, `sent (1234 Priority)`.
        static func stateCell(of job: JobInfo, placement: String?, sent: Bool = false, now: SchedulerTime) -> String {
            var notes: [String] = []
            var name = job.state.name
            if let failure = job.lastFailure, job.state.isFinished {
                // A cancelled job's failure is an earlier attempt's, not what the cancel did
                // (`cancelled (exit 1)` read as if the cancel had made it exit 1).
                notes.append(job.state.kind == .cancelled ? "an earlier attempt: \(failure)" : "\(failure)")
            }
            switch job.state {
            case .running(_, let attempt, _, let stopping):
                if let stopping {
                    // As the dashboard says it: SIGTERM sent, SIGKILL after the grace period.
                    name = "stopping"
                    let why = switch stopping {
                    case .cancel: "cancelled"
                    case .timeout: "timed out"
                    case .shutdown: "the serve is stopping"
                    }
                    notes.append(why)
                } else if sent {
                    name = "sent"
                    if placement == nil { notes.append("waiting at its worker") }
                }
                if let placement { notes.append(placement) }
                if job.maxAttempts > 1 { notes.append("attempt \(attempt) of \(job.maxAttempts)") }
            case .scheduled(let until):
                notes.append("in \(formatDuration(max(.zero, until - now)))")
            case .waitingForRetry(let until, let failedAttempt, _):
                notes.append("in \(formatDuration(max(.zero, until - now)))")
                notes.append("attempt \(failedAttempt + 1) of \(job.maxAttempts) next")
            case .skipped(let reason):
                notes.append("\(reason)")
            case .succeeded, .failed, .cancelled:
                if job.attempts > 1 { notes.append("\(job.attempts) attempts") }
            case .queued, .blocked:
                break
            }
            return notes.isEmpty ? name : "\(name) (\(notes.joined(separator: "; ")))"
        }

        /// The rows as lines of aligned columns, each as wide as its widest cell (in terminal
        /// cells) plus two spaces; the last column (the job's name) as it is, on one line.
        static func table(header: [String], rows: [[String]]) -> [String] {
            let all = [header] + rows.map { row in row.map { $0.replacingOccurrences(of: "\n", with: " ") } }
            let widths = (0..<header.count - 1).map { column in all.map { terminalWidth(of: $0[column]) }.max() ?? 0 }
            return all.map { row in
                var line = ""
                for (column, width) in widths.enumerated() {
                    line += row[column] + String(repeating: " ", count: width - terminalWidth(of: row[column]) + 2)
                }
                return line + row[header.count - 1]
            }
        }
    }

    /// `jobtop cancel ID...`.
    struct Cancel: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "cancel",
            abstract: "Cancel jobs of the serve (running ones: their process groups are stopped).",
            discussion: "Exit status: 0 done; 1 the serve refused one (it had ended, say); 2 an unknown or ambiguous id (nothing done); 3 no serve.")
        @Argument(help: ArgumentHelp("Job ids, unique prefixes or names.", valueName: "id"))
        var ids: [String]
        @OptionGroup var connection: ConnectOptions

        mutating func run() async throws {
            let references = ids
            let refused: Bool = try await withServe(connection) { client in
                // One command for all of them (a job named twice is cancelled once): sent one by
                // one, a queued job named after a running one could start in the slot the first
                // cancel freed, and then be killed.
                let jobs = try await resolve(references, with: client)
                guard case .refused(let refusals) = try await client.send(.cancelJobs(jobs.map(\.id))) else { return false }
                for refusal in refusals {
                    StandardError.write(refusalLine(refusal.error.message, id: refusal.id, name: jobs.first { $0.id == refusal.id }?.name))
                }
                return !refusals.isEmpty
            }
            if refused { throw ExitCode(ExitStatus.someFailed) }
        }
    }

    /// `jobtop signal SIG ID...`.
    struct Signal: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "signal",
            abstract: "Send a signal to running jobs' process groups (local jobs; the job's state stays as it is).",
            discussion: """
                SIG is a name (TERM, KILL, INT, HUP, STOP, CONT, USR1, USR2, QUIT, with or without
                SIG) or a number from 1 to 64. A signal that ends the job ends it as any exit does
                (it fails, or is retried). Jobs on remote or Slurm workers are refused.

                Exit status: 0 done; 1 the serve refused one (not running, remote); 2 a bad signal,
                or an unknown or ambiguous id (nothing done); 3 no serve.
                """)
        @Argument(help: ArgumentHelp("The signal: TERM, KILL, STOP, CONT, ... or a number.", valueName: "sig"))
        var signal: String
        @Argument(help: ArgumentHelp("Job ids, unique prefixes or names.", valueName: "id"))
        var ids: [String]
        @OptionGroup var connection: ConnectOptions

        func validate() throws {
            if SignalName.parse(signal) == nil {
                throw ValidationError("'\(signal)' is not a signal: give a name (TERM, KILL, INT, HUP, STOP, CONT, USR1, USR2, QUIT) or a number from 1 to 64")
            }
        }

        mutating func run() async throws {
            guard let number = SignalName.parse(signal) else { throw ExitCode(ExitStatus.usage) }
            try await perJob(ids, connection) { .signal($0.id, number) }
        }
    }

    /// `jobtop retry ID...`.
    struct Retry: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "retry",
            abstract: "Queue failed, cancelled or skipped jobs of the serve again.",
            discussion: "Exit status: 0 done; 1 the serve refused one; 2 an unknown or ambiguous id (nothing done); 3 no serve.")
        @Argument(help: ArgumentHelp("Job ids, unique prefixes or names.", valueName: "id"))
        var ids: [String]
        @OptionGroup var connection: ConnectOptions

        mutating func run() async throws {
            try await perJob(ids, connection) { .retry($0.id) }
        }
    }

    /// `jobtop prio ID N`.
    struct Prio: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "prio",
            abstract: "Set a job's priority (higher runs first): a queued job moves in the queue; a running or waiting one keeps it for its next attempt.",
            // Its own usage line: the value is read as every input no option takes, which the
            // generated line showed as `[<n> ...]`.
            usage: "jobtop prio <id> <n> [<connection options>]",
            discussion: "Exit status: 0 done; 1 refused (the job has ended); 2 bad usage or unknown id; 3 no serve.")
        @Argument(help: ArgumentHelp("The job: id, unique prefix or name.", valueName: "id"))
        var id: String
        // Every input no option takes, so that a negative priority (`prio build -5`) is the
        // value, not an unknown option `-5`.
        @Argument(parsing: .allUnrecognized, help: ArgumentHelp("The new priority (may be negative).", valueName: "n"))
        var priorityArguments: [String] = []
        @OptionGroup var connection: ConnectOptions

        var priority: Int { Int(priorityArguments.first { $0 != "--" } ?? "") ?? 0 }

        func validate() throws {
            let text = try singleValue(priorityArguments, "the new priority")
            guard Int(text) != nil else { throw ValidationError("the priority must be a whole number, not '\(text)'") }
            // `+5` reads as a change (the dashboard's `+` raises it by one) but would set 5.
            if text.hasPrefix("+") {
                throw ValidationError("the priority is the new value, not a change: '\(text)' would set \(priority); write \(priority) if that is meant")
            }
            if !JobSpec.priorityRange.contains(priority) {
                throw ValidationError("the priority must be between \(JobSpec.priorityRange.lowerBound) and \(JobSpec.priorityRange.upperBound), not \(priority)")
            }
        }

        mutating func run() async throws {
            let priority = priority
            try await perJob([id], connection) { .setPriority($0.id, priority) }
        }
    }

    /// `jobtop edit ID CMD` (pueue's `edit`, the dashboard's `e`).
    struct Edit: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "edit",
            abstract: "Give a job that is not running a new shell command.",
            discussion: """
                A queued, blocked, scheduled or retry-waiting job keeps its place and runs the \
                new command next; a failed, cancelled or skipped job is retried with it. A \
                running or succeeded job is refused (running: cancel it first). The serve \
                stores the command, so a restart runs the new one.

                Exit status: 0 done; 1 refused (the job runs or succeeded); 2 bad usage or an \
                unknown or ambiguous id; 3 no serve.
                """)
        @Argument(help: ArgumentHelp("The job: id, unique prefix or name.", valueName: "id"))
        var id: String
        @Argument(help: ArgumentHelp("The new command (run with sh -c).", valueName: "command"))
        var command: String
        @OptionGroup var connection: ConnectOptions

        func validate() throws {
            if command.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty {
                throw ValidationError("the command must not be empty")
            }
        }

        mutating func run() async throws {
            let command = command
            try await perJob([id], connection) { .edit($0.id, command: command) }
        }
    }

    /// `jobtop pause [--group G]`.
    struct Pause: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "pause",
            abstract: "Start no new jobs (of one group with --group); running jobs go on.",
            discussion: "Exit status: 0 done; 1 refused; 2 bad usage; 3 no serve.")
        @Option(help: ArgumentHelp("Only this group.", valueName: "name"))
        var group: String?
        @OptionGroup var connection: ConnectOptions

        func validate() throws {
            try validateGroupOption(group)
        }

        mutating func run() async throws {
            try await sendToGroup(group, connection, whole: .pause, group: { .pauseGroup($0) })
        }
    }

    /// `jobtop resume [--group G]`.
    struct Resume: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "resume",
            abstract: "Start jobs again (of one group with --group).",
            discussion: "Exit status: 0 done; 1 refused; 2 bad usage; 3 no serve.")
        @Option(help: ArgumentHelp("Only this group.", valueName: "name"))
        var group: String?
        @OptionGroup var connection: ConnectOptions

        func validate() throws {
            try validateGroupOption(group)
        }

        mutating func run() async throws {
            try await sendToGroup(group, connection, whole: .resume, group: { .resumeGroup($0) })
        }
    }

    /// `jobtop limit GROUP N|none` (pueue's `parallel`).
    struct Limit: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "limit",
            abstract: "Set how many of a group's jobs run at once ('none': no limit beyond the slots).",
            usage: "jobtop limit <group> <n>|none [<connection options>]",
            discussion: """
                Prints the group's line as status shows it. The group is made if it does not \
                exist yet (its jobs may come later; a note on stderr says so). The serve keeps \
                the limit across restarts; a running job over a lowered limit runs on.

                Exit status: 0 done; 1 refused; 2 bad usage; 3 no serve.
                """)
        @Argument(help: ArgumentHelp("The group (a job file's [groups.NAME], submit --group).", valueName: "group"))
        var group: String
        // Every input no option takes: `limit gpu -1` is a limit refused by name, not an unknown
        // option `-1`.
        @Argument(parsing: .allUnrecognized, help: ArgumentHelp("At most this many of its jobs at once (1 or more), or 'none'.", valueName: "n"))
        var limitArguments: [String] = []
        @OptionGroup var connection: ConnectOptions

        var limit: String { limitArguments.first { $0 != "--" } ?? "" }

        /// The limit asked for: `nil` for none.
        static func parseLimit(_ text: String) throws -> Int? {
            if text == "none" { return nil }
            guard let limit = Int(text), limit >= 1 else {
                throw ValidationError("the limit must be a whole number of at least 1, or 'none', not '\(text)'")
            }
            return limit
        }

        func validate() throws {
            do {
                try SchedulerCore.validateGroupName(group)
            } catch {
                throw ValidationError(error.message)
            }
            _ = try Self.parseLimit(try singleValue(limitArguments, "the limit, or 'none'"))
        }

        mutating func run() async throws {
            let group = group
            let limit = try Self.parseLimit(limit)
            try await withServe(connection) { client in
                // A group the serve did not have may be a typo (one it had, with no job in it now,
                // is not new: it was said to be every time its limit changed).
                let isNew = try await !client.fetchSnapshot().groups.contains { $0.group.name == group }
                _ = try await send(client, .setGroupLimit(group, limit))
                // What the group is now, as status shows it.
                let snapshot = try await client.fetchSnapshot()
                if let now = snapshot.groups.first(where: { $0.group.name == group }) {
                    print(Status.groupLine(now, sent: Status.sentByGroup(snapshot)[group, default: 0]))
                }
                if isNew { sayGroupIsNew(group, "the limit applies to the jobs submitted to it") }
            }
        }
    }

    /// `jobtop wait [ID...]` (pueue's `wait`).
    struct Wait: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "wait",
            abstract: "Wait until jobs of the serve end (with no id: every job not ended yet).",
            discussion: """
                With ids, waits for those jobs (an id of a job that has already ended counts \
                at once, with its outcome). With none, waits for every job the serve has not \
                ended when wait starts, held ones included; jobs submitted later are not waited \
                for. A job with retries left is waited for until its last attempt ends. Prints \
                'waiting for N jobs' once it is listening for their ends (with '(M already \
                ended)' for named jobs that had; nothing when every one had).

                Exit status: 0 every job succeeded; 1 some job failed, was cancelled or was \
                skipped; 2 bad usage or an unknown or ambiguous id; 3 no serve (or it went away).
                """)
        @Argument(help: ArgumentHelp("The jobs: ids, unique prefixes or names.", valueName: "id"))
        var ids: [String] = []
        @OptionGroup var connection: ConnectOptions

        mutating func run() async throws {
            let references = ids
            try await withServe(connection) { client in
                // Subscribed first, so that no end comes between looking and listening; the
                // subscription's own first snapshot then settles the jobs that have ended.
                let events = client.events(bufferLimit: 100_000, includeOutput: false, delivery: .latest)
                let jobs: Set<JobID>
                // Named jobs that had ended when looked up: settled at once by the snapshot, not
                // waited for (nor counted as such).
                var ended = 0
                // Named jobs that had ended and did not succeed (settled at once, as the ones the
                // serve no longer keeps are not in its snapshot: the wait for them never ended).
                var endedBadly: [JobInfo] = []
                if references.isEmpty {
                    jobs = Set(try await client.fetchSnapshot().jobs.lazy.filter { !$0.state.isFinished }.map(\.id))
                } else {
                    let named = try await resolve(references, with: client)
                    var finished: [JobID: JobInfo] = [:]
                    for job in named where job.state.isFinished { finished[job.id] = job }
                    ended = finished.count
                    endedBadly = finished.values.filter { $0.state.kind != .succeeded }.sorted { $0.id.description < $1.id.description }
                    jobs = Set(named.lazy.filter { !$0.state.isFinished }.map(\.id))
                }
                if !jobs.isEmpty {
                    let waiting = jobs.count
                    print("waiting for \(waiting) job\(waiting == 1 ? "" : "s")\(ended > 0 ? " (\(ended) already ended)" : "")")
                }
                fflush(nil)
                let status = await Submit.waitForEnd(of: jobs, events: events, endedBefore: endedBadly)
                if status == ExitStatus.success && !endedBadly.isEmpty { throw ExitCode(ExitStatus.someFailed) }
                if status != ExitStatus.success { throw ExitCode(status) }
            }
        }
    }

    /// `jobtop log ID`.
    struct Log: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "log",
            abstract: "Print a job's output (stdout and stderr, as the job wrote them).",
            discussion: """
                The serve keeps each job's whole output (every attempt) in a file in its state \
                directory, up to a cap per job; a job with no file gets the last lines the \
                scheduler holds, with a note on stderr saying how many earlier lines were dropped. \
                A job that never ran has no output: a note on stderr says why (blocked, \
                scheduled, skipped, cancelled).

                Exit status: 0 printed; 2 unknown or ambiguous id; 3 no serve; 141 stdout was closed \
                (`| head`).
                """)
        @Argument(help: ArgumentHelp("The job: id, unique prefix or name.", valueName: "id"))
        var id: String
        @OptionGroup var connection: ConnectOptions

        mutating func run() async throws {
            signal(SIGPIPE, SIG_IGN)
            let reference = id
            try await withServe(connection) { client in
                let job = try await resolve([reference], with: client)[0]
                let dropped = Locked(0)
                let printed = Locked(false)
                let out = Stdout()
                do {
                    try await client.fetchLog(of: job.id) { part in
                        switch part {
                        case .bytes(let data):
                            if !data.isEmpty { printed.withLock { $0 = true } }
                            try out.write(Array(data))
                        case .tail(let lines, let count):
                            dropped.withLock { $0 = count }
                            if !lines.isEmpty { printed.withLock { $0 = true } }
                            try out.write(lines.flatMap(\.rawBytes))
                        case .unknownJob: break
                        }
                    }
                } catch {
                    if out.isClosed { throw ExitCode(ExitStatus.logLost) }
                    throw error
                }
                let count = dropped.withLock { $0 }
                if count > 0 {
                    StandardError.write("jobtop: the serve no longer holds the first \(count) line\(count == 1 ? "" : "s") of \(job.id.short)'s output\n")
                }
                if !printed.withLock({ $0 }) {
                    // Nothing to print because it never ran: say so, rather than print nothing.
                    // Its attempts do not tell: one lost with its worker does not count, though
                    // it ran. Its start does: none, or one its worker still holds.
                    if job.startedAt == nil {
                        StandardError.write("jobtop: job \(job.id.short) has no output: it has not run (it \(Self.notRun(job.state)))\n")
                    } else if case .running = job.state, try await client.fetchSnapshot().heldAttempts.contains(job.id) {
                        StandardError.write("jobtop: job \(job.id.short) has no output: it has not begun (it was sent to its worker and waits there for a free slot)\n")
                    } else if case .failed(let reason, _) = job.state {
                        // One that failed before its command could run (refused by its worker:
                        // keep_background on Slurm) printed nothing, and nothing said why.
                        StandardError.write("jobtop: job \(job.id.short) printed nothing; it failed: \(printable(reason.description))\n")
                    }
                }
            }
        }
    }
}

extension Jobtop.Log {
    /// Why a job that has never started has no output: "is blocked: it waits for its
    /// dependencies", "was skipped: dependency 'build' failed".
    static func notRun(_ state: JobState) -> String {
        switch state {
        case .blocked: "is blocked: it waits for its dependencies"
        case .scheduled: "is scheduled for later"
        case .skipped(let reason): "was skipped: \(reason)"
        default: state.predicate
        }
    }
}

extension Jobtop {
    /// `jobtop follow ID`.
    struct Follow: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "follow",
            abstract: "Print a job's output from its start, then as it comes, until the job ends.",
            discussion: """
                Prints the job's whole output so far (every attempt, as `jobtop log` does), then \
                what it writes, and exits when the job ends. A job already ended prints its output \
                and exits at once.

                Exit status: 0 the job succeeded; 1 it failed, was cancelled or skipped; 2 unknown \
                or ambiguous id; 3 no serve, or it went away; 141 stdout was closed (`| head`).
                """)
        @Argument(help: ArgumentHelp("The job: id, unique prefix or name.", valueName: "id"))
        var id: String
        @OptionGroup var connection: ConnectOptions

        mutating func run() async throws {
            signal(SIGPIPE, SIG_IGN)
            let reference = id
            let status: Int32 = try await withServe(connection) { client in
                let job = try await resolve([reference], with: client)[0]
                // A job that has not begun prints nothing for as long as it waits: why is said.
                if !job.state.isFinished {
                    let snapshot = try await client.fetchSnapshot()
                    let now = snapshot.jobs.first { $0.id == job.id } ?? job
                    if case .running(let worker, _, _, _) = now.state, snapshot.heldAttempts.contains(job.id) {
                        let name = snapshot.workers.first { $0.descriptor.id == worker }?.descriptor.name ?? worker.short
                        StandardError.write("jobtop: \(job.id.short) is sent to worker \(printable(name)), waiting for a slot there; its output follows once it begins\n")
                    } else if now.state.kind != .running {
                        StandardError.write("jobtop: \(job.id.short) is \(now.state.name); its output follows once it runs\n")
                    }
                }
                let end = Locked<FollowPart?>(nil)
                let out = Stdout()
                do {
                    try await client.follow(job.id) { part in
                        switch part {
                        case .bytes(let data): try out.write(Array(data))
                        case .lagged(let missed): StandardError.write("jobtop: fell behind the job's output; \(missed) events missed\n")
                        case .ended, .unknownJob: end.withLock { $0 = part }
                        }
                    }
                } catch let error as ControlError where error.code == .connectionLost || error.code == .notRunning || out.isClosed {
                    // The serve went away while it streamed (a stopping serve may cancel the
                    // call rather than end it: "the call was cancelled" was said instead): said
                    // below, as when the stream ends without the job's end.
                }
                if out.isClosed { return ExitStatus.logLost }
                switch end.withLock({ $0 }) {
                case .ended(.succeeded): return ExitStatus.success
                case .ended(let kind):
                    // Said on stderr: the output alone does not say it (a skipped job has none).
                    let how = kind == .skipped ? "was skipped ('jobtop log \(job.id.short)' says why)" : kind == .cancelled ? "was cancelled" : "failed"
                    StandardError.write("jobtop: \(job.id.short) \(how)\n")
                    return ExitStatus.someFailed
                case .unknownJob:
                    StandardError.write("jobtop: \(job.id.short) is no longer listed by the serve\n")
                    return ExitStatus.usage
                case .bytes, .lagged, nil:
                    StandardError.write("jobtop: jobtop serve went away before \(job.id.short) ended\n")
                    return ExitStatus.noServe
                }
            }
            if status != ExitStatus.success { throw ExitCode(status) }
        }
    }

    /// `jobtop clean`.
    struct Clean: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "clean",
            abstract: "Forget the serve's finished jobs (succeeded, failed, cancelled, skipped).",
            discussion: "Exit status: 0 done; 3 no serve.")
        @OptionGroup var connection: ConnectOptions

        mutating func run() async throws {
            try await withServe(connection) { client in
                if case .forgotten(let count) = try await send(client, .forgetFinished) {
                    print("forgot \(count) finished job\(count == 1 ? "" : "s")")
                }
            }
        }
    }

    /// `jobtop shutdown [--drain]`.
    struct Shutdown: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "shutdown",
            abstract: "Stop jobtop serve: start nothing new, let running jobs finish (--drain: run the queue first; --now: stop them).",
            discussion: """
                Waits until the serve has stopped. During a drain, jobs submitted or retried are \
                still taken and run before it stops; during a plain shutdown they are refused. \
                With --now the running jobs are stopped at once (SIGTERM to each process group, \
                SIGKILL after the grace period), as a second SIGTERM to the serve does: the queue \
                stays on disk, and the next serve counts each cut-off attempt as failed ('jobtop \
                stopped') and runs it again as its retries allow. A shutdown under way only gives \
                way to a stronger one (--drain, plain, --now).

                Exit status: 0 stopped; 2 --drain with --now; 3 no serve.
                """)
        @Flag(help: "Run every queued job first.")
        var drain = false
        @Flag(help: "Stop the running jobs now; the queue stays for the next serve.")
        var now = false
        @OptionGroup var connection: ConnectOptions

        mutating func run() async throws {
            let drain = drain
            if drain && now {
                StandardError.write("jobtop: shutdown --drain runs the queue first and --now stops the running jobs: give one of them\n")
                throw ExitCode(ExitStatus.usage)
            }
            let mode: ShutdownMode = drain ? .drain : now ? .stopRunning : .graceful
            try await withServe(connection) { client in
                // Subscribed first: the end of the events is the serve's end.
                let events = client.events(bufferLimit: nil, includeOutput: false, delivery: .latest)
                // Looked at first (a serve with nothing to wait for is gone once it is told).
                let underWay = try await client.fetchSnapshot()
                _ = try await send(client, .shutdown(mode))
                // A shutdown under way gives way only to a stronger one: a weaker one asked
                // now is not what happens (a --drain during a plain shutdown promised to run
                // the scheduled jobs, and the serve stopped without them).
                let isWeaker = underWay.shutdown.map { $0.strength > mode.strength } ?? false
                if isWeaker, let current = underWay.shutdown {
                    StandardError.write("jobtop: a shutdown is under way already (\(current.summary)), and it goes on as it is: this one would not be stronger\n")
                } else if drain {
                    // A drain runs what is queued: while the serve (or a group with queued jobs)
                    // is paused it cannot end, and the wait would say nothing.
                    let snapshot = underWay
                    let pausedGroups = snapshot.groups.filter { $0.group.isPaused && $0.queued > 0 }.map(\.group.name)
                    if snapshot.isPaused && snapshot.count(.queued) > 0 {
                        StandardError.write("jobtop: the serve is paused: the drain waits until 'jobtop resume' lets its queued jobs run\n")
                    } else if !pausedGroups.isEmpty {
                        let names = pausedGroups.map { "'\($0)'" }
                        // ("group 'a', 'b' is paused" of two.)
                        let list = names.count == 1 ? "group \(names[0]) is" : "groups \(names.dropLast().joined(separator: ", ")) and \(names.last!) are"
                        StandardError.write("jobtop: \(list) paused: the drain waits until 'jobtop resume --group' lets \(names.count == 1 ? "its" : "their") queued jobs run\n")
                    }
                    // Scheduled jobs run too, at their time: an hour's wait said nothing.
                    let scheduled = snapshot.jobs.compactMap { job -> SchedulerTime? in
                        if case .scheduled(let until) = job.state { until } else { nil }
                    }
                    if let last = scheduled.max() {
                        let count = scheduled.count == 1 ? "1 scheduled job" : "\(scheduled.count) scheduled jobs"
                        let wait = max(.zero, last - snapshot.time)
                        StandardError.write("jobtop: the drain also runs \(count) at \(scheduled.count == 1 ? "its" : "their") time (the last in \(formatDuration(wait))); 'jobtop cancel' them or 'jobtop shutdown' to stop sooner\n")
                    }
                }
                for await _ in events {}
                // Its jobs have ended; it still closes its state and its socket. Stopped is
                // when it no longer answers: a serve started at once after this returned found
                // the state directory still in use ("database is locked").
                let deadline = ContinuousClock.now + .seconds(60)
                while ContinuousClock.now < deadline, (try? await client.ping()) != nil {
                    try? await Task.sleep(for: .milliseconds(20))
                }
                StandardError.write("jobtop: jobtop serve stopped\n")
                if isWeaker { throw ExitCode(ExitStatus.someFailed) }
            }
        }
    }
}

/// Refuses a `--group` name no screen or log could show, as bad usage (status 2), before the
/// serve is asked (which would refuse it with status 1).
private func validateGroupOption(_ group: String?) throws {
    guard let group else { return }
    do { try SchedulerCore.validateGroupName(group) } catch { throw ValidationError("--group: \(error.message)") }
}

/// Says that a group no job of the serve is in was made by a setting: the name may be a typo.
private func sayGroupIsNew(_ group: String, _ what: String) {
    StandardError.write("jobtop: group '\(group)' is new (no job was in it before); \(what)\n")
}

/// The one value of a positional argument that takes every input no option takes (so that a
/// negative number is a value, not an unknown option); `--`, which a negative value needed
/// before, is taken as said.
private func singleValue(_ arguments: [String], _ what: String) throws -> String {
    let values = arguments.filter { $0 != "--" }
    guard let value = values.first else { throw ValidationError("Missing expected argument '<n>' (\(what))") }
    guard values.count == 1 else {
        throw ValidationError("one value (\(what)), not \(values.count): \(values.joined(separator: " "))")
    }
    return value
}

/// Cancel, retry, prio: resolve every reference first (nothing is done if one is unknown or
/// ambiguous), then send one command per job; a refusal is reported and the rest go on.
/// `pause`/`resume`: the whole serve's command, or with `--group` the group's (a group no job
/// has yet is said to be new).
private func sendToGroup(
    _ group: String?, _ connection: ConnectOptions, whole: SchedulerCommand, group groupCommand: @escaping @Sendable (String) -> SchedulerCommand
) async throws {
    try await withServe(connection) { client in
        guard let group else {
            _ = try await send(client, whole)
            return
        }
        let isNew = try await !client.fetchSnapshot().groups.contains { $0.group.name == group }
        _ = try await send(client, groupCommand(group))
        if isNew { sayGroupIsNew(group, "this applies to the jobs submitted to it") }
    }
}

/// The line for a command the serve refused for one job. The serve's message names the job
/// by its id ("job 1f2e3d4c has already ended"): the id is not said twice, and a named job's
/// name, which the user may have typed, goes first.
func refusalLine(_ message: String, id: JobID, name: String?) -> String {
    let namesIt = message.contains(id.short)
    let prefix = [name, namesIt ? nil : id.short].compactMap { $0 }.map { "\($0): " }.joined()
    return "jobtop: \(printable(prefix + message))\n"
}

private func perJob(_ references: [String], _ connection: ConnectOptions, _ command: @escaping (JobInfo) -> SchedulerCommand) async throws {
    let refused: Bool = try await withServe(connection) { client in
        // A job named twice (`cancel a a`, or its name and its id) gets the command once.
        var seen: Set<JobID> = []
        let jobs = try await resolve(references, with: client).filter { seen.insert($0.id).inserted }
        var refused = false
        for job in jobs {
            do {
                _ = try await client.send(command(job))
            } catch let error as SchedulerError {
                StandardError.write(refusalLine(error.message, id: job.id, name: job.name))
                refused = true
            }
        }
        return refused
    }
    if refused { throw ExitCode(ExitStatus.someFailed) }
}

/// Writes bytes to stdout, unbuffered.
/// A client's stdout for a job's output. Once a write fails (its reader closed it: `jobtop follow
/// ID | head`) it throws, so the stream stops, and says so: the command exits 141, as a
/// pipeline's writer that SIGPIPE ended (`follow` kept following, blocked, until the job ended).
/// The stream's call hands back its body's error as one of its own: `isClosed` says it was this.
private final class Stdout: Sendable {
    struct Closed: Error {}

    private let closed = Locked(false)

    var isClosed: Bool { closed.withLock { $0 } }

    func write(_ bytes: [UInt8]) throws(Closed) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { Glibc.write(1, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0 {
                if errno == EINTR { continue }
                closed.withLock { $0 = true }
                throw Closed()
            }
            offset += written
        }
    }
}

/// The directory this process runs in as the user's shell names it: `$PWD` when it is that
/// directory (a path through a symbolic link stays one), else the physical path. A job submitted
/// from here runs there, and its `pwd` prints what the user's did.
func logicalCurrentDirectory() -> String {
    let physical = FileManager.default.currentDirectoryPath
    guard let pwd = ProcessInfo.processInfo.environment["PWD"].flatMap(plainAbsolutePath) else { return physical }
    var here = stat()
    var there = stat()
    guard stat(".", &here) == 0, stat(pwd, &there) == 0, here.st_dev == there.st_dev, here.st_ino == there.st_ino else { return physical }
    return pwd
}
