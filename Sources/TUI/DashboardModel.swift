import Foundation
import Scheduler

/// How the job table is ordered.
enum SortKey: String, CaseIterable, Sendable {
    /// Running (in submission order), then queued in run order, then waiting to retry, then
    /// finished newest first.
    case state
    /// Highest priority first.
    case priority
    /// By name or command, A to Z.
    case name
    /// Newest submission first.
    case newest
}

/// Something the dashboard asks the scheduler (or the screen's owner) to do.
enum DashboardCommand: Equatable, Sendable {
    /// Submit a shell command, in `group` (`nil`: the default one), after the jobs `after`.
    case submit(command: String, priority: Int, group: String? = nil, after: [JobID] = [])
    /// Cancel these jobs, in one step (tagged ones: none starts in a slot another frees).
    case cancel([JobID])
    case reprioritize(JobID, to: Int)
    /// Retry these jobs.
    case retry([JobID])
    case pause
    case resume
    case setLocalSlots(Int)
    case pauseGroup(String)
    case resumeGroup(String)
    /// `nil` is no limit.
    case setGroupLimit(String, Int?)
    /// Fetch the job's output for the output view.
    case showOutput(JobID)
    /// Write the job's output (its kept tail) to a file.
    case saveOutput(JobID, path: String)
    /// Quit; active jobs are cancelled by the caller.
    case quit
    /// Quit at once (a second Ctrl-C).
    case forceQuit
    /// Ctrl-Z: stop jobtop as a shell's job (its jobs run on); `fg` brings the screen back.
    case suspend
    /// Attached: shut `jobtop serve` down (its running jobs finish, queued ones stay).
    case shutdownServe
    /// Send a signal to these running jobs' process groups.
    case signal([JobID], Int32)
    /// Give a job a new shell command (a failed or cancelled one is retried with it).
    case edit(JobID, command: String)
}

/// The dashboard's state: what the scheduler reported plus what the user is doing. Pure: keys
/// and events go in, commands come out; drawing reads it.
struct DashboardModel: Sendable {
    /// A question waiting for y/n.
    enum Confirmation: Equatable, Sendable {
        case cancel(JobID, name: String)
        /// Cancel every one of these (the tagged jobs still active).
        case cancelTagged([JobID])
        case quit(active: Int)
        /// Attached: shut the serve down.
        case shutdownServe
    }

    /// A text prompt on the status line.
    struct Prompt: Equatable, Sendable {
        enum Kind: Equatable, Sendable {
            case newJob, filter
            /// The limit of this group (the text is in `command`).
            case groupLimit(String)
            /// A priority for these jobs (the text is in `priority`).
            case setPriority([JobID])
            /// The file to write this job's output to (the text is in `command`).
            case saveOutput(JobID)
            /// This job's new command (the text is in `command`).
            case editCommand(JobID)
        }
        enum Field: Equatable, Sendable { case command, priority }
        var kind: Kind
        var command: LineEditor
        var priority: LineEditor
        var field: Field = .command
    }

    /// The output view of one job.
    struct OutputView: Equatable, Sendable {
        var id: JobID
        /// The lines as shown (see ``displayLines(_:)``).
        var lines: [OutputLine] = []
        var dropped = 0
        var isLoaded = false
        /// The first line shown, or `nil` to follow the end.
        var top: Int?
        /// Cells scrolled sideways (←/→), for lines wider than the screen.
        var left = 0
        /// Whether the job's details show above its output (`d` toggles).
        var showsDetails = true
        /// The search being typed after `/`, if any.
        var search: LineEditor?
        /// The last search (`n`/`N` go on with it).
        var query = ""
    }

    /// A job's output as the output view shows it: the pieces of a line longer than the engine
    /// hands on at once joined again, and a line that a `\r` redrew (a progress counter)
    /// replaced by its redraw, as a terminal would show it.
    static func displayLines(_ raw: [OutputLine]) -> [OutputLine] {
        var result: [OutputLine] = []
        result.reserveCapacity(raw.count)
        for line in raw {
            guard let last = result.last, last.stream == line.stream else {
                result.append(line)
                continue
            }
            switch last.ending {
            case .none:
                // The rest of a long line.
                result[result.count - 1].text += line.text
                result[result.count - 1].ending = line.ending
            case .carriageReturn:
                if line.text.isEmpty && line.ending == .newline {
                    // `\r\n` split between two reads: the line just ends.
                    result[result.count - 1].ending = .carriageReturnNewline
                } else {
                    // The line redrawn.
                    result[result.count - 1] = line
                }
            default:
                result.append(line)
            }
        }
        return result
    }

    /// What the screen shows.
    enum Mode: Equatable, Sendable {
        case table
        case help
        case prompt(Prompt)
        case confirm(Confirmation)
        case output(OutputView)
        /// Every event kept, full screen (`E`).
        case events
        /// One lane per worker slot, jobs as bars over time (`t`).
        case timeline
        /// `x`: which signal to send to these running jobs.
        case signalMenu(SignalMenu)
    }

    /// The `x` menu: the signals of ``SignalName/common``, one selected.
    struct SignalMenu: Equatable, Sendable {
        /// The running jobs it is for (the selected one, or the tagged ones).
        var targets: [JobID]
        /// The signal selected (an index into ``SignalName/common``).
        var index = 0
    }

    var title: String
    /// Attached to `jobtop serve`: `q` detaches without asking, `X` shuts the serve down.
    var isAttached = false
    /// How many jobs the run has in all, when known before they are all submitted
    /// (``DashboardOptions/expectedJobs``).
    var expectedJobs: Int?
    private(set) var board = JobBoard()
    var mode: Mode = .table
    private(set) var sort: SortKey = .state
    private(set) var filter = ""
    /// A one-off note on the status line, cleared by the next key.
    var message: Segment? {
        didSet { messageJob = nil }
    }
    /// The job a "cancelling …" message is about: its end replaces the message.
    private var messageJob: JobID?

    private(set) var selectedID: JobID?
    private(set) var selectedIndex = 0
    /// The selected job's state when last seen: a job that changes state (it finished, it
    /// started) moves to another part of the table, and the cursor keeps its place on screen
    /// instead of dragging the view there (htop's rule), unless ``isFollowing``.
    private var selectedKind: JobStateKind?
    /// `F`: the cursor follows the selected job wherever it moves.
    private(set) var isFollowing = false
    /// The next placing of the cursor follows the selected job once: the user moved it (a new
    /// priority, reported back; a new sort order).
    private var followsOnce = false
    /// What was open when a `q` on a screen too small asked to quit: back if the answer is no.
    private var modeBeforeQuit: Mode?
    /// Jobs tagged with Space: `c`, `+`, `-` and `r` act on all of them.
    private(set) var tagged: Set<JobID> = []
    /// Priorities asked for and not yet reported back: `++++` typed in one burst counts four
    /// steps, not one (each key starts from what the last one asked for).
    private var pendingPriorities: [JobID: Int] = [:]
    /// The local slots asked for and not yet reported back: `>>>` in one burst adds three, as
    /// `+++` raises a priority three steps (each key counted from what the last asked for).
    private var pendingLocalSlots: Int?
    /// The first table row shown.
    private(set) var top = 0
    /// Rows the table shows; set by ``prepare(tableRows:)``.
    private(set) var pageSize = 10

    /// The table's rows in display order, moved one job at a time as events come (never a
    /// whole sort per event or per frame; a new sort key or filter sorts once).
    private(set) var table = TableOrder()

    /// - Parameters:
    ///   - title: The header's title.
    ///   - finishedRetention: Finished jobs kept for display (older ones are dropped).
    init(title: String = "jobtop", finishedRetention: Int = 10_000) {
        self.title = title
        board = JobBoard(finishedRetention: finishedRetention)
    }

    // MARK: - Events

    /// Applies a scheduler event: O(1) for every kind but a snapshot (the board is a stored
    /// property, changed in place, never copied).
    mutating func apply(_ event: SchedulerEvent) {
        let evicted = board.apply(event)
        if isAttached, case .shuttingDown(let mode) = event.kind, mode.stopsRunningJobs {
            // A serve told to stop now (a second SIGTERM, `shutdown --now`) cancels nothing on
            // disk: the jobs it stops go back to the queue here, and the rest stays as it is (a
            // client's `.cancelRunning` turns the rows `cancelled` here, not on disk).
            message = Segment("jobtop serve is stopping now: nothing is cancelled on disk; the next serve runs its jobs again as their retries allow", .message)
        }
        if case .snapshot(let snapshot) = event.kind {
            // In the snapshot's order (the scheduler's: running, queued in run order, waiting,
            // ... finished newest first), which is nearly the table's: the sort finds it in
            // runs and merges them in about one pass, where the dictionary's order made it a
            // full O(n log n) sort of 100,000 rows before attach's first frame.
            let kept = board.jobs
            if kept.count == snapshot.jobs.count {
                table.rebuild(snapshot.jobs, ordinals: board.ordinals, sort: sort, filter: filter)
            } else {
                table.rebuild(snapshot.jobs.filter { kept[$0.id] != nil }, ordinals: board.ordinals, sort: sort, filter: filter)
            }
        } else {
            for id in evicted { table.update(id, job: nil, ordinal: 0) }
            if let id = event.kind.jobID { table.update(id, job: board.jobs[id], ordinal: board.ordinals[id] ?? 0) }
        }
        if let id = messageJob, event.kind.jobID == id, let job = board.jobs[id], job.state.isFinished {
            message = Segment("\(id.short) \(job.state.name)", stateRoleName(job.state))
        }
        if case .confirm(.quit(let asked)) = mode, board.activeCount != asked {
            // The question counts the jobs as they are: none left, nothing to ask.
            let active = board.activeCount
            if active == 0 {
                mode = modeBeforeQuit ?? .table
                modeBeforeQuit = nil
                message = Segment("every job has ended: q quits", .message)
            } else {
                mode = .confirm(.quit(active: active))
            }
        }
        if let pending = pendingLocalSlots, board.localSlots == pending { pendingLocalSlots = nil }
        // A priority the user asked for the selected job, reported: the cursor goes with it.
        if case .reprioritized(let id, _, _) = event.kind, id == selectedID, pendingPriorities[id] != nil { followsOnce = true }
        if !pendingPriorities.isEmpty, let id = event.kind.jobID, let pending = pendingPriorities[id] {
            if case .reprioritized(_, _, let to) = event.kind, to == pending { pendingPriorities[id] = nil }
            if board.jobs[id].map({ $0.state.isFinished }) ?? true { pendingPriorities[id] = nil }
        }
    }

    private func stateRoleName(_ state: JobState) -> Role { DashboardView.stateRole(state) }

    /// The tagged jobs still on the board, in table order.
    var liveTagged: [JobID] {
        guard !tagged.isEmpty else { return [] }
        // Tagged jobs a filter hides are acted on too (after the rows shown).
        return table.inOrder(tagged.filter { board.jobs[$0] != nil })
    }

    /// A notice from whoever runs the dashboard (a list line refused, say): shown in the status
    /// line and kept in the events pane, where a later message cannot push it away.
    mutating func notice(_ text: String) {
        message = Segment(text, .error)
        board.note(text, role: .error)
    }

    /// A priority change the scheduler refused: the next `+`/`-` starts from the job's own.
    mutating func priorityRefused(_ id: JobID) {
        pendingPriorities[id] = nil
    }

    /// The `w` prompt's file could not be written (a file is there, a directory is missing):
    /// the prompt comes back with the name, to be mended, unless another view was opened since.
    mutating func saveRefused(_ id: JobID, path: String) {
        guard mode == .table else { return }
        mode = .prompt(Prompt(kind: .saveOutput(id), command: LineEditor(path), priority: LineEditor()))
    }

    /// A change of the local slots the scheduler refused: the next `<`/`>` starts from the
    /// count it reports.
    mutating func slotsRefused() {
        pendingLocalSlots = nil
    }

    /// Replaces the board with a fresh snapshot (after an event named an unknown job).
    mutating func apply(snapshot: SchedulerSnapshot, seq: UInt64) {
        apply(SchedulerEvent(seq: seq, time: snapshot.time, kind: .snapshot(snapshot)))
    }

    /// Whether the board asks for a fresh snapshot.
    var needsSnapshot: Bool { board.needsSnapshot }

    /// Shows a job's output once fetched.
    mutating func setOutput(of id: JobID, lines: [OutputLine], dropped: Int) {
        guard case .output(var view) = mode, view.id == id else { return }
        // Scrolled back, the text stays put when the tail drops its oldest lines.
        if let top = view.top, view.isLoaded, dropped > view.dropped {
            view.top = max(0, top - (dropped - view.dropped))
        }
        view.lines = Self.displayLines(lines)
        view.dropped = dropped
        view.isLoaded = true
        if let top = view.top { view.top = min(top, max(0, view.lines.count - 1)) }
        mode = .output(view)
    }

    /// The job the output view shows, if it is open.
    var outputJob: JobID? {
        if case .output(let view) = mode { return view.id }
        return nil
    }

    // MARK: - The table

    /// The table's jobs in display order (filtered and sorted). O(jobs): the screen reads
    /// only its rows from ``table``.
    var orderedIDs: [JobID] { table.all }

    /// The selected job, if any.
    var selectedJob: JobInfo? { selectedID.flatMap { board.jobs[$0] } }

    /// Keeps the selection on the same job and in view (the order itself is always current).
    ///
    /// - Parameter tableRows: The rows the table shows.
    mutating func prepare(tableRows: Int) {
        pageSize = max(1, tableRows)
        clampSelection()
    }

    /// Sorts the whole table again: a new sort key or filter.
    private mutating func resort() {
        table.rebuild(board.jobs.values, ordinals: board.ordinals, sort: sort, filter: filter)
    }

    /// Makes the table's index of rows by job, which a snapshot or a new order leaves for after
    /// the frame that shows it.
    mutating func indexTable() {
        table.indexRows()
    }

    private mutating func clampSelection() {
        let follows = isFollowing || followsOnce
        followsOnce = false
        if let id = selectedID, selectedIndex < table.count, table[selectedIndex] == id {
            // Unchanged.
        } else if let id = selectedID, follows, board.jobs[id]?.state.kind == selectedKind || isFollowing,
                  let index = table.position(of: id) {
            // Moved by what the user did to it or to the order (a new priority, a new sort), or
            // followed (F): the cursor goes with it.
            selectedIndex = index
        } else {
            // Rows above it came or went, or it changed state (or left): the cursor stays on its
            // row, as htop's does (it drifted to the top of a busy table, row by row).
            selectedIndex = min(selectedIndex, max(0, table.count - 1))
        }
        selectedID = table.isEmpty ? nil : table[selectedIndex]
        selectedKind = selectedID.flatMap { board.jobs[$0]?.state.kind }
        if selectedIndex < top { top = selectedIndex }
        if selectedIndex >= top + pageSize { top = selectedIndex - pageSize + 1 }
        top = max(0, min(top, max(0, table.count - pageSize)))
    }

    /// Back from a view of one job (its output): the cursor is on that job again, wherever it
    /// moved meanwhile (rows above it came or went while it was read; `c` right after `Esc`
    /// asked to cancel the job that took its row). One that left the table leaves the cursor
    /// on its row.
    private mutating func reselect(_ id: JobID) {
        guard let index = table.position(of: id) else { return }
        selectedIndex = index
        selectedID = id
        clampSelection()
    }

    private mutating func select(index: Int) {
        guard !table.isEmpty else { return }
        selectedIndex = max(0, min(index, table.count - 1))
        selectedID = table[selectedIndex]
        clampSelection()
    }

    /// Sorts and filters jobs for the table; returns their ids in display order (what
    /// ``table`` keeps, computed at once).
    static func ordered(
        _ jobs: some Collection<JobInfo>, sort: SortKey, filter: String, ordinals: [JobID: Int] = [:]
    ) -> [JobID] {
        var table = TableOrder()
        table.rebuild(jobs, ordinals: ordinals, sort: sort, filter: filter)
        return table.all
    }

    /// A job's place in the table as numbers compared in order.
    ///
    /// By state: running (in submission order), queued in run order (priority, then
    /// submission), waiting (soonest retry first), finished (newest first).
    ///
    /// "Descending" fields are stored as their bitwise complement (`~x`, which is `-x - 1`):
    /// it reverses the order like a negation but cannot overflow, so a priority or a time at
    /// the very end of `Int64`'s range still sorts instead of trapping.
    struct OrderKey: Comparable {
        var first: Int64 = 0
        var rank: Int64
        var a: Int64
        var b: Int64
        var c: Int64
        var id: JobID

        init(_ job: JobInfo, sort: SortKey, ordinal: Int) {
            // Submission order: the scheduler's own (jobs of one submission share their time),
            // else the time (a job no scheduler made, as a view test's).
            let submitted = job.order > 0 ? Int64(truncatingIfNeeded: job.order) : Self.nanoseconds(job.submittedAt)
            let ordinal = Int64(truncatingIfNeeded: ordinal)
            let priority = Int64(truncatingIfNeeded: job.priority)
            id = job.id
            switch job.state {
            case .running:
                // Submission order: the same from one run to the next (start times a few
                // microseconds apart come in whatever order the slots report them).
                (rank, a, b, c) = (0, submitted, ordinal, 0)
            case .queued:
                (rank, a, b, c) = (1, ~priority, submitted, ordinal)
            case .waitingForRetry(let until, _, _), .scheduled(let until):
                (rank, a, b, c) = (2, Self.nanoseconds(until), submitted, ordinal)
            case .blocked:
                (rank, a, b, c) = (2, Int64.max, submitted, ordinal)
            case .succeeded, .failed, .cancelled, .skipped:
                (rank, a, b, c) = (3, ~Self.nanoseconds(job.finishedAt ?? .zero), ~ordinal, 0)
            }
            switch sort {
            case .state, .name: break
            case .priority: first = ~priority
            case .newest: (first, rank, a, b, c) = (~submitted, ~ordinal, 0, 0, 0)
            }
        }

        static func < (l: OrderKey, r: OrderKey) -> Bool {
            if l.first != r.first { return l.first < r.first }
            if l.rank != r.rank { return l.rank < r.rank }
            if l.a != r.a { return l.a < r.a }
            if l.b != r.b { return l.b < r.b }
            if l.c != r.c { return l.c < r.c }
            return l.id < r.id
        }

        /// Nanoseconds, saturated at `Int64`'s ends (a time beyond ±292 years sorts as the end).
        private static func nanoseconds(_ duration: Duration) -> Int64 {
            let (seconds, attoseconds) = duration.components
            let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
            if overflow { return seconds < 0 ? .min : .max }
            let (sum, overflowToo) = whole.addingReportingOverflow(attoseconds / 1_000_000_000)
            if overflowToo { return whole < 0 ? .min : .max }
            return sum
        }
    }

    // MARK: - Keys

    /// Handles a key and returns what should be done.
    /// A key on a screen too small to draw the dashboard, which shows only what it says: `q`
    /// (or F10, Ctrl-C) quits as in the table, whatever was open, and a question asked shows
    /// and takes its answer; Ctrl-Z suspends. Any other key does nothing: it acted unseen (a
    /// `q` typed into a hidden prompt, then Enter, submitted `echo abcq`; `p` paused the serve).
    /// A quit answered `n` gives back what was open (a prompt with its text: it was dropped).
    mutating func handleOnTooSmallScreen(_ key: Key) -> [DashboardCommand] {
        if case .confirm = mode { return handle(key) }
        switch key {
        case .char("q"), .function(10), .control("c"):
            let open = mode
            mode = .table
            let commands = handle(key)
            if case .confirm(.quit) = mode, open != .table { modeBeforeQuit = open }
            return commands
        case .control("z"):
            return handle(key)
        default:
            return []
        }
    }

    mutating func handle(_ key: Key) -> [DashboardCommand] {
        clampSelection()
        if key != .control("c") { message = nil }
        // Ctrl-Z in any view, as in htop: the terminal is raw, so the key must do it.
        if key == .control("z") { return [.suspend] }
        if case .paste(let text) = key {
            guard case .prompt = mode else {
                message = Segment("pasted text goes into a prompt (n, /, e, w, L, =): it is never read as keys", .message)
                return []
            }
            return paste(text)
        }
        switch mode {
        case .table: return handleTable(key)
        case .help:
            // A screen too short for every line scrolls; any other key returns.
            let last = max(0, DashboardView.helpLineCount - outputRows)
            switch key {
            case .control("c"): return interrupt()
            case .up, .char("k"): helpTop = max(0, helpTop - 1)
            case .down, .char("j"): helpTop = min(last, helpTop + 1)
            case .pageUp: helpTop = max(0, helpTop - outputRows)
            case .pageDown, .char(" "): helpTop = min(last, helpTop + outputRows)
            default: mode = .table
            }
            return []
        case .prompt(let prompt): return handlePrompt(key, prompt)
        case .confirm(let confirmation): return handleConfirm(key, confirmation)
        case .output(let view): return handleOutput(key, view)
        case .events: return handleEvents(key)
        case .signalMenu(let menu): return handleSignalMenu(key, menu)
        case .timeline:
            switch key {
            case .control("c"): return interrupt()
            case .char("+"), .char("="): timelineMinutes = max(1, timelineMinutes / 2)
            case .char("-"): timelineMinutes = min(60, timelineMinutes * 2)
            default: mode = .table
            }
            return []
        }
    }

    private mutating func handleTable(_ key: Key) -> [DashboardCommand] {
        guard let action = KeyBindings.action(for: key) else { return [] }
        switch action {
        case .moveUp: select(index: selectedIndex - 1)
        case .moveDown: select(index: selectedIndex + 1)
        case .pageUp: select(index: selectedIndex - pageSize)
        case .pageDown: select(index: selectedIndex + pageSize)
        case .moveToTop: select(index: 0)
        case .moveToBottom: select(index: table.count - 1)
        case .toggleTag:
            guard let job = selectedJob else { return noSelection() }
            if tagged.remove(job.id) == nil { tagged.insert(job.id) }
            // As in htop: the cursor moves on, so that Space Space Space tags a run of rows.
            select(index: selectedIndex + 1)
            message = Segment("\(tagged.count) tagged (c + - r act on them; U untags)", .message)
        case .untagAll:
            tagged = []
            message = Segment("no job tagged", .message)
        case .toggleFollow:
            isFollowing.toggle()
            if isFollowing, let job = selectedJob {
                message = Segment("following \(TextWidth.truncate(TextWidth.visible(job.displayName), to: 40)) (F stops)", .message)
            } else {
                message = Segment("the cursor keeps its row (F follows the selected job)", .message)
            }
        case .showOutput:
            guard let job = selectedJob else { return [] }
            mode = .output(OutputView(id: job.id))
            return [.showOutput(job.id)]
        case .enqueue:
            mode = .prompt(Prompt(kind: .newJob, command: LineEditor(), priority: LineEditor("0", selected: true)))
        case .cancel where !liveTagged.isEmpty:
            let active = liveTagged.filter { board.jobs[$0].map { !$0.state.isFinished } ?? false }
            guard !active.isEmpty else {
                message = Segment("every tagged job has already ended", .error)
                return []
            }
            mode = .confirm(.cancelTagged(active))
        case .raisePriority where !liveTagged.isEmpty, .lowerPriority where !liveTagged.isEmpty:
            var commands: [DashboardCommand] = []
            var refusal: Segment?
            for id in liveTagged {
                guard let job = board.jobs[id], !job.state.isFinished else { continue }
                let saved = message
                commands += changePriority(of: job, raise: action == .raisePriority)
                if message != saved, refusal == nil { refusal = message }
                message = saved
            }
            // None moved: why, as for one job (it said "0 tagged jobs raised" of jobs at the
            // highest priority).
            if commands.isEmpty, let refusal {
                message = refusal
                return []
            }
            message = Segment("\(commands.count) tagged job\(commands.count == 1 ? "" : "s") \(action == .raisePriority ? "raised" : "lowered")", .message)
            return commands
        case .retry where !liveTagged.isEmpty:
            let retried = liveTagged.filter { id in
                guard let kind = board.jobs[id]?.state.kind else { return false }
                return kind == .failed || kind == .cancelled || kind == .skipped
            }
            message = Segment("\(retried.count) tagged job\(retried.count == 1 ? "" : "s") retried", .message)
            return retried.isEmpty ? [] : [.retry(retried)]
        case .cancel:
            guard let job = selectedJob else { return noSelection() }
            guard !job.state.isFinished else {
                message = Segment("\(job.id.short) has already ended (\(job.state.name))", .error)
                return []
            }
            mode = .confirm(.cancel(job.id, name: job.displayName))
        case .raisePriority, .lowerPriority:
            guard let job = selectedJob else { return noSelection() }
            guard !job.state.isFinished else {
                message = Segment("\(job.id.short) has ended; only active jobs have a priority to change", .error)
                return []
            }
            return changePriority(of: job, raise: action == .raisePriority)
        case .retry:
            guard let job = selectedJob else { return noSelection() }
            switch job.state.kind {
            case .failed, .cancelled, .skipped: return [.retry([job.id])]
            default:
                message = Segment("only failed, cancelled or skipped jobs can be retried; \(job.id.short) \(job.state.predicate)", .error)
            }
        case .togglePause:
            return [board.isPaused ? .resume : .pause]
        case .toggleGroupPause:
            guard let job = selectedJob else { return noSelection() }
            let isPaused = board.mirror.groups[job.group]?.isPaused ?? false
            return [isPaused ? .resumeGroup(job.group) : .pauseGroup(job.group)]
        case .setGroupLimit:
            guard let job = selectedJob else { return noSelection() }
            let limit = board.mirror.groups[job.group]?.limit.map(String.init) ?? ""
            mode = .prompt(Prompt(kind: .groupLimit(job.group), command: LineEditor(limit, selected: true), priority: LineEditor()))
        case .fewerSlots:
            let current = pendingLocalSlots ?? board.localSlots
            // Down to none while another worker runs jobs (a `serve -j 0` given a local slot
            // could not go back to remote workers only); never to none with nothing else, where
            // nothing would run.
            let hasOtherWorkers = board.workers.contains { $0.kind != .local }
            guard current > (hasOtherWorkers ? 0 : 1) else {
                message = Segment(hasOtherWorkers ? "no local slot is left" : "at least one local slot is needed (no remote worker is connected)", .error)
                return []
            }
            pendingLocalSlots = current - 1
            return [.setLocalSlots(current - 1)]
        case .moreSlots:
            let current = pendingLocalSlots ?? board.localSlots
            let (more, overflow) = current.addingReportingOverflow(1)
            guard !overflow else {
                message = Segment("no more local slots can be added", .error)
                return []
            }
            pendingLocalSlots = more
            return [.setLocalSlots(more)]
        case .filter:
            mode = .prompt(Prompt(kind: .filter, command: LineEditor(filter), priority: LineEditor()))
        case .cycleSort:
            let all = SortKey.allCases
            sort = all[(all.firstIndex(of: sort)! + 1) % all.count]
            resort()
            followsOnce = true
            clampSelection()
            message = Segment("sorted by \(sort.rawValue)", .message)
        case .help:
            helpTop = 0
            mode = .help
        case .eventsView:
            eventsTop = nil
            mode = .events
        case .timeline:
            mode = .timeline
        case .signal:
            let targets = liveTagged.isEmpty ? selectedJob.map { [$0.id] } ?? [] : liveTagged
            let running = targets.filter { board.jobs[$0]?.state.kind == .running }
            guard !running.isEmpty else {
                message = Segment(targets.isEmpty ? "no job selected" : "only a running job can be sent a signal", .error)
                return []
            }
            // Signals reach only the process groups of local jobs: said before the menu, not
            // after a signal is chosen from it.
            if running.count == 1, case .running(let worker, _, _, _)? = board.jobs[running[0]]?.state,
               let descriptor = board.mirror.worker(worker), descriptor.kind != .local {
                message = Segment("signals reach only local jobs; job \(running[0].short) runs on worker \(descriptor.name)", .error)
                return []
            }
            mode = .signalMenu(SignalMenu(targets: running))
        case .setPriority:
            let targets = liveTagged.isEmpty ? selectedJob.map { [$0.id] } ?? [] : liveTagged
            let active = targets.filter { board.jobs[$0].map { !$0.state.isFinished } ?? false }
            guard !active.isEmpty else {
                message = Segment(targets.isEmpty ? "no job selected" : "only active jobs have a priority to change", .error)
                return []
            }
            let current = board.jobs[active[0]].map { String(pendingPriorities[$0.id] ?? $0.priority) } ?? "0"
            mode = .prompt(Prompt(kind: .setPriority(active), command: LineEditor(), priority: LineEditor(current, selected: true), field: .priority))
        case .editCommand:
            guard let job = selectedJob else { return noSelection() }
            switch job.state.kind {
            case .running:
                // One being stopped says so, as the engine does ("is running: cancel it first"
                // of a job just cancelled).
                if case .running(_, _, _, _?) = job.state {
                    message = Segment("\(job.id.short) \(job.state.predicate): edit it once it has ended", .error)
                } else {
                    message = Segment("\(job.id.short) is running: cancel it first, or edit it once it has ended", .error)
                }
                return []
            case .succeeded:
                message = Segment("\(job.id.short) has succeeded: n submits a new job", .error)
                return []
            case .skipped:
                // It stays skipped while what it waits for has not been retried, and the engine
                // would refuse the edit then: said now, not after the command was typed.
                // Through skipped ones to the job that really ended badly, as the engine says it.
                guard case .skipped(let reason) = job.state else { return [] }
                var root = reason
                var seen: Set<JobID> = [job.id]
                while root.outcome == .skipped, seen.insert(root.dependency).inserted,
                      case .skipped(let next)? = board.mirror.jobs[root.dependency]?.state {
                    root = next
                }
                message = Segment("\(job.id.short) was skipped: \(reason); retry '\(root.dependencyName)' first, then edit this one", .error)
                return []
            default:
                // The cursor at the end of the command as it is, to mend it.
                mode = .prompt(Prompt(kind: .editCommand(job.id), command: LineEditor(job.command), priority: LineEditor()))
            }
        case .saveOutput:
            guard let job = selectedJob else { return noSelection() }
            mode = .prompt(Prompt(kind: .saveOutput(job.id), command: LineEditor("jobtop-\(job.id.short).log", selected: true), priority: LineEditor()))
        case .quit:
            return quit()
        case .interrupt:
            return interrupt()
        case .repaint:
            // The controller repaints (it owns the terminal); in every view, as a resize does.
            break
        case .shutdownServe:
            guard isAttached else {
                message = Segment("X shuts down jobtop serve; this dashboard runs its own jobs (q quits)", .error)
                return []
            }
            mode = .confirm(.shutdownServe)
        }
        return []
    }

    /// `+`/`-`: one step up or down, saturated at the ends of ``JobSpec/priorityRange``. A job
    /// already at the end gets a message instead; one outside the range (which the scheduler
    /// should never report) moves to the nearest end.
    private mutating func changePriority(of job: JobInfo, raise: Bool) -> [DashboardCommand] {
        let range = JobSpec.priorityRange
        let current = pendingPriorities[job.id] ?? job.priority
        let (stepped, overflow) = current.addingReportingOverflow(raise ? 1 : -1)
        let target = overflow ? current : min(max(stepped, range.lowerBound), range.upperBound)
        guard raise ? target > current : target < current else {
            let end = raise ? "highest" : "lowest"
            message = Segment("\(job.id.short) is already at the \(end) priority (\(current)); priorities go from \(range.lowerBound) to \(range.upperBound)", .error)
            return []
        }
        pendingPriorities[job.id] = target
        return [.reprioritize(job.id, to: target)]
    }

    /// A mouse event on a screen of `size`: a click on a table row selects it, a click on a
    /// footer entry acts as its key, and the wheel moves three lines (the selection, or the
    /// text of the output, events and help views).
    mutating func handleMouse(_ event: MouseEvent, size: TerminalSize) -> [DashboardCommand] {
        switch event.kind {
        case .wheelUp: return (0..<3).flatMap { _ in handle(.up) }
        case .wheelDown: return (0..<3).flatMap { _ in handle(.down) }
        case .click:
            guard mode == .table, DashboardView.fits(size) else {
                return []
            }
            if event.row == size.rows - 1 {
                // The footer, laid out as the view draws it (one cell short of the width).
                guard let action = KeyBindings.footerAction(at: event.column, width: size.columns - 1),
                      let key = KeyBindings.table.first(where: { $0.action == action })?.keys.first
                else { return [] }
                return handle(key)
            }
            // Table rows start below the two header lines and the column titles.
            let row = event.row - 3
            guard row >= 0, row < DashboardView.Layout(size: size).tableRows, top + row < table.count else { return [] }
            message = nil
            select(index: top + row)
            return []
        }
    }

    private mutating func handleSignalMenu(_ key: Key, _ menu: SignalMenu) -> [DashboardCommand] {
        var menu = menu
        let count = SignalName.common.count
        switch key {
        case .control("c"): return interrupt()
        case .up, .char("k"): menu.index = (menu.index + count - 1) % count
        case .down, .char("j"): menu.index = (menu.index + 1) % count
        case .home, .char("g"): menu.index = 0
        case .end, .char("G"): menu.index = count - 1
        case .char(let character) where character.isNumber:
            // 1-9: that line of the menu is chosen; Enter sends it, as the menu's footer says (a
            // mistyped digit, 2 for SIGKILL, can still be taken back with Esc).
            if let number = character.wholeNumberValue, number >= 1, number <= count { menu.index = number - 1 }
        case .enter:
            return sendSignal(menu)
        case .escape, .char("q"), .char("x"):
            mode = .table
            return []
        default:
            break
        }
        mode = .signalMenu(menu)
        return []
    }

    private mutating func sendSignal(_ menu: SignalMenu) -> [DashboardCommand] {
        mode = .table
        // Jobs that ended while the menu was open are left out.
        let running = menu.targets.filter { board.jobs[$0]?.state.kind == .running }
        let signal = SignalName.common[menu.index]
        guard !running.isEmpty else {
            message = Segment("no longer running: SIG\(signal.name) not sent", .error)
            return []
        }
        let jobs = running.count == 1 ? running[0].short : "\(running.count) jobs"
        message = Segment("sending SIG\(signal.name) to \(jobs)…", .message)
        return [.signal(running, signal.number)]
    }

    private mutating func noSelection() -> [DashboardCommand] {
        message = Segment("no job selected", .error)
        return []
    }

    private mutating func quit() -> [DashboardCommand] {
        // Attached, quitting only detaches: the jobs go on in the serve.
        if isAttached { return [.quit] }
        let active = board.activeCount
        guard active > 0 else { return [.quit] }
        mode = .confirm(.quit(active: active))
        return []
    }

    private mutating func interrupt() -> [DashboardCommand] {
        if case .confirm(.quit) = mode { return [.forceQuit] }
        return quit()
    }

    /// Pasted text typed into the open prompt, one character at a time: a line break or a tab
    /// is a space (a prompt is one line, and a pasted newline must not submit it), other
    /// control characters are dropped.
    private mutating func paste(_ text: String) -> [DashboardCommand] {
        var commands: [DashboardCommand] = []
        for character in text {
            guard case .prompt(let prompt) = mode else { break }
            let typed: Character
            if character.isWhitespace && Self.takesANumber(prompt) {
                // A number's field: a pasted line break or space is no part of it.
                continue
            } else if character == "\n" || character == "\r" || character == "\r\n" || character == "\t" {
                typed = " "
            } else if character.unicodeScalars.allSatisfy({ $0.properties.generalCategory == .control }) {
                continue
            } else {
                typed = character
            }
            commands += handlePrompt(.char(typed), prompt)
        }
        return commands
    }

    /// Whether the prompt's field being typed in holds a number (a priority, a group limit).
    private static func takesANumber(_ prompt: Prompt) -> Bool {
        switch prompt.kind {
        case .groupLimit, .setPriority: true
        case .newJob: prompt.field == .priority
        default: false
        }
    }

    private mutating func handlePrompt(_ key: Key, _ prompt: Prompt) -> [DashboardCommand] {
        var prompt = prompt
        switch key {
        case .control("c"):
            mode = .table
            return interrupt()
        case .escape:
            if prompt.kind == .filter { setFilter("") }
            mode = .table
            return []
        case .enter:
            mode = .table
            switch prompt.kind {
            case .filter:
                setFilter(prompt.command.text)
                return []
            case .setPriority(let ids):
                switch Self.priority(from: prompt.priority.text) {
                case .success(let priority):
                    for id in ids { pendingPriorities[id] = priority }
                    // Said, as + and - say it (nothing was said, and an older message stayed).
                    let jobs = ids.count == 1 ? ids[0].short : "\(ids.count) tagged jobs"
                    message = Segment("priority of \(jobs): \(priority)", .message)
                    return ids.map { .reprioritize($0, to: priority) }
                case .failure(let problem):
                    mode = .prompt(prompt)
                    message = Segment("priority not changed: \(problem.description)", .error)
                    return []
                }
            case .saveOutput(let id):
                let path = prompt.command.text.trimmingCharacters(in: .whitespaces)
                guard !path.isEmpty else {
                    mode = .prompt(prompt)
                    message = Segment("nothing written: give a file name", .error)
                    return []
                }
                return [.saveOutput(id, path: path)]
            case .editCommand(let id):
                let command = prompt.command.text
                guard !command.allSatisfy(\.isWhitespace) else {
                    mode = .prompt(prompt)
                    message = Segment("not changed: the command is empty", .error)
                    return []
                }
                guard command != board.jobs[id]?.command || board.jobs[id]?.state.isFinished == true else {
                    message = Segment("\(id.short): the command is unchanged", .message)
                    return []
                }
                return [.edit(id, command: command)]
            case .groupLimit(let group):
                switch Self.groupLimit(from: prompt.command.text) {
                case .success(let limit):
                    return [.setGroupLimit(group, limit)]
                case .failure(let problem):
                    mode = .prompt(prompt)
                    message = Segment("limit not changed: \(problem.description)", .error)
                    return []
                }
            case .newJob:
                let entry: NewJobEntry
                switch NewJobEntry.parse(prompt.command.text, board: board) {
                case .success(let parsed): entry = parsed
                case .failure(let problem):
                    // Refused: the prompt stays open so the line can be mended.
                    prompt.field = .command
                    mode = .prompt(prompt)
                    message = Segment("not submitted: \(problem.description)", .error)
                    return []
                }
                guard !entry.command.isEmpty else {
                    message = Segment("nothing submitted: the command was empty", .error)
                    if entry.group != nil || !entry.after.isEmpty { mode = .prompt(prompt) }
                    return []
                }
                switch Self.priority(from: prompt.priority.text) {
                case .success(let priority):
                    return [.submit(command: entry.command, priority: priority, group: entry.group, after: entry.after)]
                case .failure(let problem):
                    // Refused, not clamped: the prompt stays open on the priority field.
                    prompt.field = .priority
                    mode = .prompt(prompt)
                    message = Segment("not submitted: \(problem.description)", .error)
                    return []
                }
            }
        case .tab, .up, .down:
            if prompt.kind == .newJob { prompt.field = prompt.field == .command ? .priority : .command }
        default:
            if case .groupLimit = prompt.kind {
                if case .char(let c) = key, !(("0"..."9").contains(c) || c == "-") {
                    message = Segment(GroupLimitProblem(text: String(c), isOutOfRange: false).description, .error)
                } else {
                    prompt.command.handle(key)
                    if case .failure(let problem) = Self.groupLimit(from: prompt.command.text), problem.isOutOfRange {
                        message = Segment(problem.description, .error)
                    }
                }
            } else if case .saveOutput = prompt.kind {
                prompt.command.handle(key)
            } else if case .editCommand = prompt.kind {
                prompt.command.handle(key)
            } else if prompt.field == .command || prompt.kind == .filter {
                prompt.command.handle(key)
            } else if case .char(let c) = key, !(("0"..."9").contains(c) || c == "-") {
                message = Segment("priority is a whole number from \(JobSpec.priorityRange.lowerBound) to \(JobSpec.priorityRange.upperBound)", .error)
            } else {
                prompt.priority.handle(key)
                // Said as soon as it is typed, not only on Enter.
                if case .failure(let problem) = Self.priority(from: prompt.priority.text), problem.isOutOfRange {
                    message = Segment(problem.description, .error)
                }
            }
        }
        mode = .prompt(prompt)
        if prompt.kind == .filter { setFilter(prompt.command.text) }
        return []
    }

    /// Why the `n` prompt's priority field holds no priority.
    struct PriorityProblem: Error, Equatable, CustomStringConvertible {
        var text: String
        /// A whole number, but outside ``JobSpec/priorityRange`` (or beyond `Int`).
        var isOutOfRange: Bool

        var description: String {
            let range = JobSpec.priorityRange
            guard !isOutOfRange else { return "priority out of range: must be from \(range.lowerBound) to \(range.upperBound)" }
            let shown = text.count > 12 ? String(text.prefix(11)) + "…" : text
            return "priority '\(shown)' is not a whole number from \(range.lowerBound) to \(range.upperBound)"
        }
    }

    /// The priority typed in the `n` prompt: empty means 0; anything else must be a whole
    /// number within ``JobSpec/priorityRange``.
    static func priority(from text: String) -> Result<Int, PriorityProblem> {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed.isEmpty { return .success(0) }
        let digits = trimmed.hasPrefix("-") ? trimmed.dropFirst() : trimmed[...]
        guard !digits.isEmpty, digits.allSatisfy({ ("0"..."9").contains($0) }) else {
            return .failure(PriorityProblem(text: trimmed, isOutOfRange: false))
        }
        guard let value = Int(trimmed), JobSpec.priorityRange.contains(value) else {
            return .failure(PriorityProblem(text: trimmed, isOutOfRange: true))
        }
        return .success(value)
    }

    /// Why the `L` prompt holds no limit.
    struct GroupLimitProblem: Error, Equatable, CustomStringConvertible {
        var text: String
        /// A whole number, but below 1 (or beyond `Int`).
        var isOutOfRange: Bool

        var description: String {
            let shown = text.count > 12 ? String(text.prefix(11)) + "…" : text
            if isOutOfRange {
                // Beyond Int: too large (it said "at least 1" of 99999999999999999999).
                return text.hasPrefix("-") || Int(text) != nil
                    ? "limit out of range: at least 1 (empty or - for no limit)"
                    : "limit '\(shown)' is too large (empty or - for no limit)"
            }
            return "limit '\(shown)' is not a whole number of at least 1 (empty or - for no limit)"
        }
    }

    /// The limit typed in the `L` prompt: empty or `-` means no limit; anything else must be a
    /// whole number of at least 1.
    static func groupLimit(from text: String) -> Result<Int?, GroupLimitProblem> {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed.isEmpty || trimmed == "-" { return .success(nil) }
        let digits = trimmed.hasPrefix("-") ? trimmed.dropFirst() : trimmed[...]
        guard !digits.isEmpty, digits.allSatisfy({ ("0"..."9").contains($0) }) else {
            return .failure(GroupLimitProblem(text: trimmed, isOutOfRange: false))
        }
        guard let value = Int(trimmed), value >= 1 else {
            return .failure(GroupLimitProblem(text: trimmed, isOutOfRange: true))
        }
        return .success(value)
    }

    private mutating func setFilter(_ text: String) {
        guard text != filter else { return }
        filter = text
        resort()
        selectedIndex = 0
        if let id = selectedID, let index = table.position(of: id) { selectedIndex = index }
        selectedID = table.isEmpty ? nil : table[min(selectedIndex, table.count - 1)]
        clampSelection()
    }

    private mutating func handleConfirm(_ key: Key, _ confirmation: Confirmation) -> [DashboardCommand] {
        switch key {
        case .char("y"), .char("Y"):
            mode = .table
            switch confirmation {
            case .cancel(let id, _):
                message = Segment("cancelling \(id.short)…", .message)
                messageJob = id
                return [.cancel([id])]
            case .cancelTagged(let ids):
                message = Segment("cancelling \(ids.count) tagged job\(ids.count == 1 ? "" : "s")…", .message)
                // One: its end says how it went, as for the selected job (the reply says
                // nothing of one job, and "cancelling 1 tagged job…" stayed for good).
                if ids.count == 1 { messageJob = ids[0] }
                tagged = []
                return [.cancel(ids)]
            case .quit:
                return [.quit]
            case .shutdownServe:
                message = Segment("asking jobtop serve to shut down…", .message)
                return [.shutdownServe]
            }
        case .char("n"), .char("N"), .escape, .char("q"):
            mode = .table
            if case .quit = confirmation, let open = modeBeforeQuit { mode = open }
            modeBeforeQuit = nil
        case .control("c"):
            return interrupt()
        default:
            break
        }
        return []
    }

    private mutating func handleEvents(_ key: Key) -> [DashboardCommand] {
        let last = max(0, board.log.count - outputRows)
        let current = eventsTop ?? last
        switch key {
        case .escape, .char("q"), .char("E"), .enter, .function(10):
            mode = .table
            return []
        case .control("c"):
            mode = .table
            return interrupt()
        case .up, .char("k"): eventsTop = max(0, current - 1)
        case .down, .char("j"): eventsTop = current + 1
        case .pageUp: eventsTop = max(0, current - outputRows)
        case .pageDown: eventsTop = current + outputRows
        case .home, .char("g"): eventsTop = 0
        case .end, .char("G"): eventsTop = nil
        default: return []
        }
        if let top = eventsTop, top >= last { eventsTop = nil }
        return []
    }

    private mutating func handleOutput(_ key: Key, _ view: OutputView) -> [DashboardCommand] {
        var view = view
        let last = max(0, view.lines.count - outputRows)
        let current = view.top ?? last
        if var search = view.search {
            // Typing a search: Enter finds it, Esc drops it.
            switch key {
            case .escape:
                view.search = nil
            case .enter:
                view.search = nil
                view.query = search.text
                view = Self.find(in: view, from: current, forward: true, columns: outputColumns, message: &message)
            case .control("c"):
                mode = .table
                return interrupt()
            default:
                search.handle(key)
                view.search = search
            }
            mode = .output(view)
            return []
        }
        switch key {
        case .char("/"):
            view.search = LineEditor(view.query, selected: true)
            mode = .output(view)
            return []
        case .char("n"), .char("N"):
            guard !view.query.isEmpty else {
                message = Segment("no search yet: / and a text first", .error)
                return []
            }
            view = Self.find(
                in: view, from: key == .char("n") ? current + 1 : current - 1, forward: key == .char("n"), columns: outputColumns,
                message: &message)
            mode = .output(view)
            return []
        default: break
        }
        switch key {
        case .escape, .char("q"), .enter, .function(10):
            mode = .table
            reselect(view.id)
            return []
        case .control("c"):
            mode = .table
            reselect(view.id)
            return interrupt()
        case .up, .char("k"): view.top = max(0, current - 1)
        case .down, .char("j"): view.top = current + 1
        case .pageUp: view.top = max(0, current - outputRows)
        case .pageDown: view.top = current + outputRows
        case .home, .char("g"): view.top = 0
        case .end, .char("G"), .char("f"): view.top = nil
        case .char("d"), .tab:
            view.showsDetails.toggle()
            mode = .output(view)
            return []
        case .right, .char("l"):
            // Not past the longest line: its last 20 cells stay in view (it scrolled on into
            // an empty pane).
            let widest = view.lines.lazy.map { TextWidth.width($0.text) }.max() ?? 0
            view.left = min(view.left + 20, max(0, widest - 20))
        case .left, .char("h"): view.left = max(0, view.left - 20)
        default: return []
        }
        if let top = view.top, top >= last { view.top = nil }
        mode = .output(view)
        return []
    }

    /// The output view scrolled to the next line (from `start`, wrapping around) that holds its
    /// query, case-insensitively, and sideways to the match when it is out of the `columns`
    /// shown; a message says which match it is, or that there is none.
    static func find(in view: OutputView, from start: Int, forward: Bool, columns: Int, message: inout Segment?) -> OutputView {
        var view = view
        let needle = view.query.lowercased()
        let matches = view.lines.indices.filter { view.lines[$0].text.lowercased().contains(needle) }
        guard !needle.isEmpty, !matches.isEmpty else {
            message = Segment("'\(TextWidth.truncate(TextWidth.visible(view.query), to: 40))' is not in the kept output", .error)
            return view
        }
        let found = forward
            ? (matches.first { $0 >= start } ?? matches[0])
            : (matches.last { $0 <= start } ?? matches[matches.count - 1])
        view.top = found
        // Sideways too, when the match is out of sight (it found one past the screen's edge and
        // left it there): a little of what comes before it stays in view.
        let shown = ANSIText.segments(view.lines[found].text, base: .normal).map(\.text).joined().lowercased()
        if let range = shown.range(of: needle) {
            let start = TextWidth.width(String(shown[..<range.lowerBound]))
            let end = start + TextWidth.width(String(shown[range]))
            if start < view.left || end > view.left + columns {
                view.left = max(0, start - min(10, max(0, columns - (end - start))))
            }
        }
        let position = (matches.firstIndex(of: found) ?? 0) + 1
        message = Segment("'\(TextWidth.truncate(TextWidth.visible(view.query), to: 40))': match \(position) of \(matches.count) (n next, N previous)", .message)
        return view
    }

    /// Rows of output the output view shows (the screen minus its header and footer); help's too.
    var outputRows: Int = 20
    /// Columns of output the output view shows (the screen's width).
    var outputColumns: Int = 80
    /// The first line of help shown.
    private(set) var helpTop = 0
    /// The minutes the timeline spans (`+` zooms in, `-` out).
    private(set) var timelineMinutes = 2
    /// The first event shown in the events view, or `nil` to follow the newest.
    private(set) var eventsTop: Int?
}
