import Foundation
import Scheduler

/// How the job table is ordered.
enum SortKey: String, CaseIterable, Sendable {
    /// Running, then queued in run order, then waiting to retry, then finished newest first.
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
    case cancel(JobID)
    case reprioritize(JobID, to: Int)
    case retry(JobID)
    case pause
    case resume
    case setLocalSlots(Int)
    case pauseGroup(String)
    case resumeGroup(String)
    /// `nil` is no limit.
    case setGroupLimit(String, Int?)
    /// Fetch the job's output for the output view.
    case showOutput(JobID)
    /// Quit; active jobs are cancelled by the caller.
    case quit
    /// Quit at once (a second Ctrl-C).
    case forceQuit
    /// Attached: shut `jobtop serve` down (its running jobs finish, queued ones stay).
    case shutdownServe
}

/// The dashboard's state: what the scheduler reported plus what the user is doing. Pure: keys
/// and events go in, commands come out; drawing reads it.
struct DashboardModel: Sendable {
    /// A question waiting for y/n.
    enum Confirmation: Equatable, Sendable {
        case cancel(JobID, name: String)
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
        var lines: [OutputLine] = []
        var dropped = 0
        var isLoaded = false
        /// The first line shown, or `nil` to follow the end.
        var top: Int?
    }

    /// What the screen shows.
    enum Mode: Equatable, Sendable {
        case table
        case help
        case prompt(Prompt)
        case confirm(Confirmation)
        case output(OutputView)
    }

    var title: String
    /// Attached to `jobtop serve`: `q` detaches without asking, `X` shuts the serve down.
    var isAttached = false
    private(set) var board = JobBoard()
    var mode: Mode = .table
    private(set) var sort: SortKey = .state
    private(set) var filter = ""
    /// A one-off note on the status line, cleared by the next key.
    var message: Segment?

    private(set) var selectedID: JobID?
    private(set) var selectedIndex = 0
    /// The first table row shown.
    private(set) var top = 0
    /// Rows the table shows; set by ``prepare(tableRows:)``.
    private(set) var pageSize = 10

    private var order: [JobID] = []
    private var orderStamp: (version: Int, sort: SortKey, filter: String)?

    init(title: String = "jobtop") {
        self.title = title
    }

    // MARK: - Events

    /// Applies a scheduler event: O(1) for every kind but a snapshot (the board is a stored
    /// property, changed in place, never copied).
    mutating func apply(_ event: SchedulerEvent) {
        board.apply(event)
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
        view.lines = lines
        view.dropped = dropped
        view.isLoaded = true
        if let top = view.top { view.top = min(top, max(0, lines.count - 1)) }
        mode = .output(view)
    }

    /// The job the output view shows, if it is open.
    var outputJob: JobID? {
        if case .output(let view) = mode { return view.id }
        return nil
    }

    // MARK: - The table

    /// The table's jobs in display order (filtered and sorted), as of the last ``prepare(tableRows:reorder:)``.
    var orderedIDs: [JobID] {
        orderStamp == nil ? Self.ordered(board.jobs.values, sort: sort, filter: filter, ordinals: board.ordinals) : order
    }

    /// Whether jobs changed state or priority since the order was last computed.
    var isOrderStale: Bool {
        guard let stamp = orderStamp else { return true }
        return stamp.version != board.orderVersion || stamp.sort != sort || stamp.filter != filter
    }

    /// The selected job, if any.
    var selectedJob: JobInfo? { selectedID.flatMap { board.jobs[$0] } }

    /// Refreshes the order and keeps the selection on the same job and in view.
    ///
    /// - Parameters:
    ///   - tableRows: The rows the table shows.
    ///   - reorder: Whether to sort again if jobs changed; `false` keeps the last order (a big,
    ///     busy table is re-sorted a few times a second, not on every frame). A new sort key or
    ///     filter always applies.
    mutating func prepare(tableRows: Int, reorder: Bool = true) {
        pageSize = max(1, tableRows)
        if reorder || orderStamp == nil || orderStamp?.sort != sort || orderStamp?.filter != filter {
            refreshOrder()
        }
        clampSelection()
    }

    private mutating func refreshOrder() {
        if let stamp = orderStamp, stamp.version == board.orderVersion, stamp.sort == sort, stamp.filter == filter {
            return
        }
        order = Self.ordered(board.jobs.values, sort: sort, filter: filter, ordinals: board.ordinals)
        orderStamp = (board.orderVersion, sort, filter)
    }

    private mutating func clampSelection() {
        if let id = selectedID, selectedIndex < order.count, order[selectedIndex] == id {
            // Unchanged.
        } else if let id = selectedID, let index = order.firstIndex(of: id) {
            selectedIndex = index
        } else {
            selectedIndex = min(selectedIndex, max(0, order.count - 1))
        }
        selectedID = order.isEmpty ? nil : order[selectedIndex]
        if selectedIndex < top { top = selectedIndex }
        if selectedIndex >= top + pageSize { top = selectedIndex - pageSize + 1 }
        top = max(0, min(top, max(0, order.count - pageSize)))
    }

    private mutating func select(index: Int) {
        guard !order.isEmpty else { return }
        selectedIndex = max(0, min(index, order.count - 1))
        selectedID = order[selectedIndex]
        clampSelection()
    }

    /// Sorts and filters jobs for the table; returns their ids in display order.
    static func ordered(
        _ jobs: some Collection<JobInfo>, sort: SortKey, filter: String, ordinals: [JobID: Int] = [:]
    ) -> [JobID] {
        let needle = filter.lowercased()
        func matches(_ job: JobInfo) -> Bool {
            needle.isEmpty || job.displayName.lowercased().contains(needle) || job.command.lowercased().contains(needle)
                || job.id.short.hasPrefix(needle) || job.state.name.hasPrefix(needle)
                || (job.group != JobSpec.defaultGroup && job.group.lowercased().contains(needle))
        }
        // Sorting compact keys instead of whole job records keeps a 10,000-job table cheap to
        // reorder on every frame that needs it.
        if sort == .name {
            var keyed: [(name: String, key: OrderKey)] = []
            keyed.reserveCapacity(jobs.count)
            for job in jobs where matches(job) {
                keyed.append((job.displayName.lowercased(), OrderKey(job, sort: sort, ordinal: ordinals[job.id] ?? 0)))
            }
            keyed.sort { a, b in a.name != b.name ? a.name < b.name : a.key < b.key }
            return keyed.map(\.key.id)
        }
        var keys: [OrderKey] = []
        keys.reserveCapacity(jobs.count)
        for job in jobs where matches(job) {
            keys.append(OrderKey(job, sort: sort, ordinal: ordinals[job.id] ?? 0))
        }
        keys.sort()
        return keys.map(\.id)
    }

    /// A job's place in the table as numbers compared in order.
    ///
    /// By state: running (oldest start first), queued in run order (priority, then
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
            let submitted = Self.nanoseconds(job.submittedAt)
            let ordinal = Int64(truncatingIfNeeded: ordinal)
            let priority = Int64(truncatingIfNeeded: job.priority)
            id = job.id
            switch job.state {
            case .running(_, _, let since, _):
                (rank, a, b, c) = (0, Self.nanoseconds(job.startedAt ?? since), submitted, ordinal)
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
    mutating func handle(_ key: Key) -> [DashboardCommand] {
        refreshOrder()
        clampSelection()
        if key != .control("c") { message = nil }
        switch mode {
        case .table: return handleTable(key)
        case .help:
            if key == .control("c") { return interrupt() }
            mode = .table
            return []
        case .prompt(let prompt): return handlePrompt(key, prompt)
        case .confirm(let confirmation): return handleConfirm(key, confirmation)
        case .output(let view): return handleOutput(key, view)
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
        case .moveToBottom: select(index: order.count - 1)
        case .showOutput:
            guard let job = selectedJob else { return [] }
            mode = .output(OutputView(id: job.id))
            return [.showOutput(job.id)]
        case .enqueue:
            mode = .prompt(Prompt(kind: .newJob, command: LineEditor(), priority: LineEditor("0")))
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
            case .failed, .cancelled, .skipped: return [.retry(job.id)]
            default:
                message = Segment("only failed, cancelled or skipped jobs can be retried; \(job.id.short) is \(job.state.name)", .error)
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
            mode = .prompt(Prompt(kind: .groupLimit(job.group), command: LineEditor(limit), priority: LineEditor()))
        case .fewerSlots:
            guard board.localSlots > 1 else {
                message = Segment("at least one local slot is needed", .error)
                return []
            }
            return [.setLocalSlots(board.localSlots - 1)]
        case .moreSlots:
            let (more, overflow) = board.localSlots.addingReportingOverflow(1)
            guard !overflow else {
                message = Segment("no more local slots can be added", .error)
                return []
            }
            return [.setLocalSlots(more)]
        case .filter:
            mode = .prompt(Prompt(kind: .filter, command: LineEditor(filter), priority: LineEditor()))
        case .cycleSort:
            let all = SortKey.allCases
            sort = all[(all.firstIndex(of: sort)! + 1) % all.count]
            refreshOrder()
            clampSelection()
            message = Segment("sorted by \(sort.rawValue)", .message)
        case .help:
            mode = .help
        case .quit:
            return quit()
        case .interrupt:
            return interrupt()
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
        let (stepped, overflow) = job.priority.addingReportingOverflow(raise ? 1 : -1)
        let target = overflow ? job.priority : min(max(stepped, range.lowerBound), range.upperBound)
        guard raise ? target > job.priority : target < job.priority else {
            let end = raise ? "highest" : "lowest"
            message = Segment("\(job.id.short) is already at the \(end) priority (\(job.priority)); priorities go from \(range.lowerBound) to \(range.upperBound)", .error)
            return []
        }
        return [.reprioritize(job.id, to: target)]
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
            guard !isOutOfRange else { return "limit out of range: at least 1 (empty or - for no limit)" }
            let shown = text.count > 12 ? String(text.prefix(11)) + "…" : text
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
        refreshOrder()
        selectedIndex = 0
        if let id = selectedID, let index = order.firstIndex(of: id) { selectedIndex = index }
        selectedID = order.isEmpty ? nil : order[min(selectedIndex, order.count - 1)]
        clampSelection()
    }

    private mutating func handleConfirm(_ key: Key, _ confirmation: Confirmation) -> [DashboardCommand] {
        switch key {
        case .char("y"), .char("Y"):
            mode = .table
            switch confirmation {
            case .cancel(let id, _):
                message = Segment("cancelling \(id.short)…", .message)
                return [.cancel(id)]
            case .quit:
                return [.quit]
            case .shutdownServe:
                message = Segment("asking jobtop serve to shut down…", .message)
                return [.shutdownServe]
            }
        case .char("n"), .char("N"), .escape, .char("q"):
            mode = .table
        case .control("c"):
            return interrupt()
        default:
            break
        }
        return []
    }

    private mutating func handleOutput(_ key: Key, _ view: OutputView) -> [DashboardCommand] {
        var view = view
        let last = max(0, view.lines.count - outputRows)
        let current = view.top ?? last
        switch key {
        case .escape, .char("q"), .enter, .function(10):
            mode = .table
            return []
        case .control("c"):
            mode = .table
            return interrupt()
        case .up, .char("k"): view.top = max(0, current - 1)
        case .down, .char("j"): view.top = current + 1
        case .pageUp: view.top = max(0, current - outputRows)
        case .pageDown: view.top = current + outputRows
        case .home, .char("g"): view.top = 0
        case .end, .char("G"), .char("f"): view.top = nil
        default: return []
        }
        if let top = view.top, top >= last { view.top = nil }
        mode = .output(view)
        return []
    }

    /// Rows of output the output view shows (the screen minus its header and footer).
    var outputRows: Int = 20
}
