import Scheduler

/// Turns the model into a frame of text: pure, so tests read the screen as strings.
enum DashboardView {
    /// The smallest terminal the dashboard draws in; below it a message says so.
    static let minimumSize = TerminalSize(rows: 12, columns: 50)

    /// Whether a screen of `size` can draw the dashboard (else it shows only a message, and
    /// keys act only as that message says).
    static func fits(_ size: TerminalSize) -> Bool {
        size.rows >= minimumSize.rows && size.columns >= minimumSize.columns
    }

    /// Where things go on a screen of a given size.
    struct Layout: Equatable {
        var size: TerminalSize
        /// The first row of jobs.
        var tableTop: Int { 3 }
        /// Rows of jobs.
        var tableRows: Int
        /// Lines of the worker and event panels (their title row not counted); 0 hides them.
        var panelRows: Int
        var statusRow: Int { size.rows - 2 }
        var footerRow: Int { size.rows - 1 }

        init(size: TerminalSize) {
            self.size = size
            let free = size.rows - 5
            panelRows = size.rows >= 20 ? min(10, max(3, free / 4)) : 0
            tableRows = max(1, free - (panelRows > 0 ? panelRows + 1 : 0))
        }
    }

    /// One column of the job table.
    struct Column {
        enum Field { case id, name, group, state, priority, progress, attempts, worker, time, reason }
        var field: Field
        var title: String
        var width: Int
        var alignRight = false
    }

    /// The frame for `model` on a screen of `size` at scheduler time `now`.
    static func render(_ model: DashboardModel, size: TerminalSize, now: SchedulerTime) -> Frame {
        guard fits(size) else {
            return tooSmall(size, mode: model.mode)
        }
        switch model.mode {
        case .help: return help(size: size, top: model.helpTop, attached: model.isAttached)
        case .events: return events(model, size: size)
        case .timeline: return timeline(model, size: size, now: now)
        case .output(let view): return output(view, model: model, size: size, now: now)
        default: return main(model, size: size, now: now)
        }
    }

    // MARK: - Main screen

    private static func main(_ model: DashboardModel, size: TerminalSize, now: SchedulerTime) -> Frame {
        let layout = Layout(size: size)
        let width = size.columns
        var lines: [ScreenLine] = []
        lines.reserveCapacity(size.rows)
        lines.append(fitted(headerCounts(model, width: width), width: width))
        lines.append(fitted(headerStatus(model, now: now, width: width), width: width))
        // Only the rows on screen (not every id in order: 100,000 of them a frame).
        let shown = model.table.ids(model.top..<(model.top + layout.tableRows))
        let rowCount = model.table.count
        // PRI is as wide as the widest priority on screen (up to -1000000): never cut. WORKER
        // widens for the longest placement on screen (a Slurm id and Slurm's reason,
        // `4712 ReqNodeNotAvail`), so a reason is not cut to a few letters.
        var priorityWidth = 0
        var placementWidth = 0
        var reasonWidth = 0
        var groupWidth = 0
        let hasPlacements = !model.board.mirror.placements.isEmpty
        let hasGroups = model.board.hasGroups
        for id in shown {
            if let job = model.board.jobs[id] {
                priorityWidth = max(priorityWidth, String(job.priority).count)
                if hasGroups { groupWidth = max(groupWidth, TextWidth.width(TextWidth.visible(job.group))) }
                // WHY widens for the longest reason on screen (`dependency 'fetch-a' failed`).
                if let reason = reasonText(job) { reasonWidth = max(reasonWidth, TextWidth.width(TextWidth.visible(reason))) }
            }
            if hasPlacements, let placement = model.board.placement(id) {
                placementWidth = max(placementWidth, TextWidth.width(TextWidth.visible(placement)))
            }
        }
        // Beyond JobSpec.priorityRange (which the scheduler never reports) it is cut.
        priorityWidth = min(priorityWidth, 8)
        let board = model.board
        let reasons = board.count(.failed) + board.count(.waiting) + board.count(.skipped) > 0
        let columns = tableColumns(
            width: width, groups: board.hasGroups, priorityWidth: priorityWidth, reasons: reasons, placementWidth: placementWidth,
            reasonWidth: reasonWidth, groupWidth: groupWidth)
        lines.append(tableHeader(columns, width: width))
        for row in 0..<layout.tableRows {
            let index = model.top + row
            if row < shown.count, let job = model.board.jobs[shown[row]] {
                lines.append(jobRow(job, columns: columns, model: model, selected: index == model.selectedIndex, now: now, width: width))
            } else if index == 0 && rowCount == 0 && row == 0 {
                let text = model.filter.isEmpty
                    ? "  No jobs yet. Press n to enqueue a shell command."
                    : "  No job matches the filter '\(model.filter)'. Press / then Esc to clear it."
                lines.append(fitted([Segment(text, .dim)], width: width))
            } else {
                lines.append(fitted([], width: width))
            }
        }
        if layout.panelRows > 0 {
            lines.append(contentsOf: panels(model, rows: layout.panelRows, width: width, now: now))
        }
        if case .signalMenu(let menu) = model.mode {
            // The menu over the table (htop's F9): rows from the table's first on.
            let menuLines = signalMenu(menu, model: model, width: width, rows: layout.statusRow - 3)
            for (offset, line) in menuLines.enumerated() where 3 + offset < layout.statusRow {
                lines[3 + offset] = line
            }
        }
        var cursor: ScreenPosition?
        let status = statusLine(model, width: width, now: now, cursor: &cursor)
        if cursor != nil { cursor!.row = layout.statusRow }
        lines.append(status)
        if case .prompt(let prompt) = model.mode {
            lines.append(promptFooter(prompt, message: model.message, width: width))
        } else {
            lines.append(footer(width: width))
        }
        return Frame(lines: lines, cursor: cursor)
    }

    static func stateRole(_ state: JobState) -> Role {
        switch state.kind {
        case .running: .running
        case .queued: .queued
        case .waiting, .scheduled: .waiting
        case .blocked: .blocked
        case .succeeded: .succeeded
        case .failed: .failed
        case .skipped: .skipped
        case .cancelled: .cancelled
        }
    }

    private static func headerCounts(_ model: DashboardModel, width: Int) -> [Segment] {
        let board = model.board
        var segments: [Segment] = []
        // (nil: `sent`, running jobs their workers hold and have not begun: counted apart, not
        // as running, and shown only when there are some.)
        var parts: [(JobStateKind?, String, Role)] = [
            (.running, "running", .running), (nil, "sent", .queued), (.queued, "queued", .queued), (.waiting, "waiting", .waiting),
            (.blocked, "blocked", .blocked), (.scheduled, "scheduled", .waiting),
            (.succeeded, "done", .succeeded), (.failed, "failed", .failed), (.cancelled, "cancelled", .cancelled),
            (.skipped, "skipped", .skipped),
        ]
        let sent = board.sentCount
        func count(_ kind: JobStateKind?) -> Int {
            guard let kind else { return sent }
            return kind == .running ? board.count(.running) - sent : board.count(kind)
        }
        // The workflow states only when some job is in them: a run without them keeps its
        // header as it was. When that is too wide, every empty one goes.
        parts.removeAll { ($0.0 == nil || [.blocked, .scheduled, .skipped].contains($0.0!)) && count($0.0) == 0 }
        let title = TextWidth.width(model.title) + 3
        let full = parts.reduce(title) { $0 + TextWidth.width("\(count($1.0)) \($1.1)") + 3 }
        if full > width { parts.removeAll { count($0.0) == 0 } }
        // The counts are never cut: the title gives way first (shortened, then gone), then the
        // words shorten (`2 run · 1 fail`), then the separators narrow.
        func countsWidth(separator: Int) -> Int {
            parts.reduce(0) { $0 + TextWidth.width("\(count($1.0)) \($1.1)") + separator } - separator
        }
        var separator = " · "
        var counts = countsWidth(separator: 3)
        if counts + 1 > width {
            parts = parts.map { ($0.0, $0.0.map(Self.shortCountLabel) ?? "sent", $0.2) }
            counts = countsWidth(separator: 3)
            if counts + 1 > width {
                separator = "·"
                counts = countsWidth(separator: 1)
            }
        }
        let titleRoom = width - counts - 2
        if titleRoom >= 6 {
            segments += [Segment(" \(TextWidth.truncate(model.title, to: titleRoom - 2)) ", .title), Segment(" ")]
        } else {
            segments.append(Segment(" "))
        }
        for (offset, part) in parts.enumerated() {
            if offset > 0 { segments.append(Segment(separator, .dim)) }
            let number = count(part.0)
            segments.append(Segment("\(number) \(part.1)", number == 0 ? .dim : part.2))
        }
        return segments
    }

    /// A state's word in the header's counts when the whole words do not fit.
    private static func shortCountLabel(_ kind: JobStateKind) -> String {
        switch kind {
        case .running: "run"
        case .queued: "queue"
        case .waiting: "wait"
        case .blocked: "block"
        case .scheduled: "sched"
        case .succeeded: "done"
        case .failed: "fail"
        case .cancelled: "cancel"
        case .skipped: "skip"
        }
    }

    private static func headerStatus(_ model: DashboardModel, now: SchedulerTime, width: Int) -> [Segment] {
        let board = model.board
        let remote = board.workers.filter { $0.kind == .remote }
        // The slots running jobs (a job its worker holds behind a busy slot holds none).
        let busy = board.count(.running) - board.sentCount
        var left: [Segment] = []
        // The run at a glance: done/total with a bar, ETA from the last minute's finish rate,
        // the finish rate as a sparkline, the slots in use as a bar.
        let finished = board.count(.succeeded) + board.count(.failed) + board.count(.cancelled) + board.count(.skipped)
        // The jobs a list file still has to give count too (it is submitted a window at a time:
        // 50,000 jobs showed 8703/19251 and an ETA of 12 s with 40 s to go), until a shutdown
        // says they will not come.
        let toCome = board.shutdown == nil ? max(0, (model.expectedJobs ?? 0) - finished - board.activeCount) : 0
        let total = finished + board.activeCount + toCome
        if total > 0 {
            let fraction = Double(finished) / Double(total)
            let bar = Formatting.bar(fraction, width: width >= 100 ? 12 : 8)
            left += [
                Segment(" "), Segment(bar.filled, .progressFill), Segment(bar.empty, .progressEmpty),
                Segment(" \(finished)/\(total) \(Formatting.percent(fraction))"),
            ]
            let rate = board.minuteRate(now: now)
            let active = board.activeCount + toCome
            if active > 0 && rate > 0 {
                left += [Segment(" · ", .dim), Segment("ETA \(Formatting.compact(seconds: Double(active) / rate))")]
            }
            left.append(Segment(" · ", .dim))
        } else {
            left.append(Segment(" "))
        }
        let counts = board.finishes(lastSeconds: width >= 100 ? 20 : 10, now: now)
        left += [
            Segment(sparkline(counts), .running), Segment(" \(Formatting.rate(board.jobsPerSecond(now: now)))/s"),
            Segment(" · ", .dim), Segment("slots "),
        ]
        // Of them, the slots that run jobs: remote workers' prefetch is not counted as slots (a
        // retiring worker's slots are out of the total already, its prefetch too).
        let retiring = board.retiring
        let slots = board.totalSlots - board.workers.reduce(0) { $0 + (retiring.contains($1.id) ? 0 : $1.prefetchDepth) }
        if width >= 100 {
            let slotBar = Formatting.bar(slots > 0 ? Double(busy) / Double(slots) : 0, width: 6)
            left += [Segment(slotBar.filled, .progressFill), Segment(slotBar.empty, .progressEmpty), Segment(" ")]
        }
        left += [
            Segment("\(busy)/\(slots)"),
            Segment(" · ", .dim), Segment("up \(isIdle(board, now: now) ? Formatting.minutes(now) : Formatting.compact(now))"),
            Segment(" · ", .dim), Segment("workers \(board.localSlots) local, \(remote.count) remote"),
        ]
        if board.shutdown != nil { left.append(Segment(" · shutting down", .waiting)) }
        var right: [Segment] = []
        if !model.filter.isEmpty { right.append(Segment("filter: \(TextWidth.visible(model.filter)) ", .message)) }
        if model.sort != .state { right.append(Segment("sort: \(model.sort.rawValue) ", .message)) }
        if model.isFollowing { right.append(Segment("FOLLOW ", .message)) }
        if board.isPaused { right.append(Segment(" PAUSED ", .paused)) }
        let rightWidth = right.reduce(0) { $0 + TextWidth.width($1.text) }
        let leftLine = fitted(left, width: max(0, width - rightWidth - 1))
        return leftLine.segments + [Segment(" ")] + right
    }

    /// Whether nothing on screen moves with time (the dashboard then ticks once a minute).
    static func isIdle(_ board: JobBoard, now: SchedulerTime) -> Bool {
        board.count(.running) + board.count(.waiting) + board.count(.scheduled) == 0 && board.jobsPerSecond(now: now) == 0
    }

    /// `▁▃█` for counts: each one cell, scaled to the largest (all zero: the lowest bar).
    static func sparkline(_ counts: [Int]) -> String {
        let bars = Array("▁▂▃▄▅▆▇█")
        let top = counts.max() ?? 0
        guard top > 0 else { return String(repeating: bars[0], count: counts.count) }
        return String(counts.map { count in
            count == 0 ? bars[0] : bars[min(bars.count - 1, max(1, Int((Double(count) / Double(top) * Double(bars.count - 1)).rounded(.up))))]
        })
    }

    /// The table's columns for a screen `width` wide; GROUP only when `groups` are in use.
    /// WORKER is at least `placementWidth` wide on a wide screen (up to 28 cells), 10 on a
    /// narrow one, while the name keeps 16 cells or more; WHY grows to `reasonWidth` (up to 48
    /// cells) while the name keeps 32, and GROUP to `groupWidth` (up to 24) while the name keeps
    /// 32.
    static func tableColumns(
        width: Int, groups: Bool, priorityWidth: Int = 0, reasons: Bool = false, placementWidth: Int = 0, reasonWidth: Int = 0,
        groupWidth: Int = 0
    ) -> [Column] {
        let wide = width >= 100
        let barWidth = wide ? 10 : 6
        var columns = [
            Column(field: .id, title: "ID", width: 8),
            Column(field: .name, title: "NAME / COMMAND", width: 0),
        ]
        if groups { columns.append(Column(field: .group, title: "GROUP", width: wide ? 10 : 8)) }
        columns += [
            Column(field: .state, title: "STATE", width: 9),
            Column(field: .priority, title: "PRI", width: max(wide ? 4 : 3, priorityWidth), alignRight: true),
            Column(field: .progress, title: "PROGRESS", width: barWidth + 5),
            Column(field: .attempts, title: "TRY", width: wide ? 5 : 4),
            Column(field: .worker, title: "WORKER", width: wide ? 12 : 7),
            Column(field: .time, title: "TIME", width: wide ? 13 : 10),
        ]
        // Why failed jobs failed, on a screen wide enough, while some job has a reason.
        if reasons && width >= 110 { columns.append(Column(field: .reason, title: "WHY", width: 14)) }
        func nameWidth() -> Int {
            width - columns.filter { $0.field != .name }.reduce(0) { $0 + $1.width + 1 } - 1
        }
        // Narrow screens give up the least useful columns before the name gets too short.
        for dropped in [Column.Field.reason, .worker, .attempts, .priority, .group] where nameWidth() < 16 {
            columns.removeAll { $0.field == dropped }
        }
        if let index = columns.firstIndex(where: { $0.field == .worker }), placementWidth > columns[index].width {
            let wanted = min(placementWidth, wide ? 28 : 10)
            columns[index].width = max(columns[index].width, min(wanted, columns[index].width + nameWidth() - 16))
        }
        if let index = columns.firstIndex(where: { $0.field == .reason }), reasonWidth > columns[index].width {
            // It stayed 14 cells on a screen of 200 (`dependency 'f…`), the name's column wide and empty.
            let wanted = min(reasonWidth, 48)
            columns[index].width = max(columns[index].width, min(wanted, columns[index].width + nameWidth() - 32))
        }
        if let index = columns.firstIndex(where: { $0.field == .group }), groupWidth > columns[index].width {
            // It stayed 10 cells on a screen of 250 (`a-very-lo…`), the name's column wide and empty.
            let wanted = min(groupWidth, 24)
            columns[index].width = max(columns[index].width, min(wanted, columns[index].width + nameWidth() - 32))
        }
        if let index = columns.firstIndex(where: { $0.field == .name }) { columns[index].width = max(4, nameWidth()) }
        return columns
    }

    private static func tableHeader(_ columns: [Column], width: Int) -> ScreenLine {
        var text = ""
        for column in columns {
            text += " " + TextWidth.fit(column.title, to: column.width, alignRight: column.alignRight)
        }
        return fitted([Segment(text, .tableHeader)], width: width, padRole: .tableHeader)
    }

    private static func jobRow(
        _ job: JobInfo, columns: [Column], model: DashboardModel, selected: Bool, now: SchedulerTime, width: Int
    ) -> ScreenLine {
        var segments: [Segment] = []
        let isTagged = model.tagged.contains(job.id)
        for (index, column) in columns.enumerated() {
            // A tagged row is marked in its first cell.
            segments.append(index == 0 && isTagged ? Segment("*", .message) : Segment(" "))
            let w = column.width
            switch column.field {
            case .id:
                segments.append(Segment(TextWidth.fit(job.id.short, to: w), .dim))
            case .name:
                segments.append(Segment(TextWidth.fit(TextWidth.visible(job.displayName), to: w)))
            case .group:
                let paused = model.board.mirror.groups[job.group]?.isPaused == true
                segments.append(Segment(TextWidth.fit(TextWidth.visible(job.group), to: w), paused ? .paused : .dim))
            case .state:
                segments.append(Segment(TextWidth.fit(model.board.stateName(of: job), to: w), stateRole(job.state)))
            case .priority:
                segments.append(Segment(TextWidth.fit("\(job.priority)", to: w, alignRight: true)))
            case .progress:
                segments.append(contentsOf: progressCell(job, width: w))
            case .attempts:
                let text = job.attempts == 0 ? "-/\(job.maxAttempts)" : "\(job.attempts)/\(job.maxAttempts)"
                segments.append(Segment(TextWidth.fit(text, to: w), job.attempts > 1 ? .waiting : .normal))
            case .worker:
                var name = ""
                if case .running(let worker, _, _, _) = job.state {
                    name = model.board.placement(job.id) ?? model.board.workerName(worker) ?? worker.short
                }
                segments.append(Segment(TextWidth.fit(TextWidth.visible(name), to: w), .dim))
            case .time:
                segments.append(Segment(TextWidth.fit(timeCell(job, now: now), to: w)))
            case .reason:
                segments.append(Segment(TextWidth.fit(TextWidth.visible(reasonText(job) ?? ""), to: w), stateRole(job.state)))
            }
        }
        var line = fitted(segments, width: width)
        if selected {
            line = ScreenLine([Segment(line.text, .selected)])
        }
        return line
    }

    /// `████░░ 66%` for a running job whose progress is known; blank otherwise.
    static func progressCell(_ job: JobInfo, width: Int) -> [Segment] {
        let barWidth = width - 5
        switch job.state {
        case .running:
            guard let progress = job.progress else { return [Segment(String(repeating: " ", count: width))] }
            let bar = Formatting.bar(progress, width: barWidth)
            return [
                Segment(bar.filled, .progressFill), Segment(bar.empty, .progressEmpty),
                Segment(TextWidth.fit(Formatting.percent(progress), to: 5, alignRight: true)),
            ]
        case .succeeded:
            let bar = Formatting.bar(1, width: barWidth)
            return [Segment(bar.filled, .progressFill), Segment(" 100%", .dim)]
        default:
            return [Segment(String(repeating: " ", count: width))]
        }
    }

    /// Elapsed time (with `~ETA` when progress is known), time to the next retry, or the
    /// run time of a finished job.
    static func timeCell(_ job: JobInfo, now: SchedulerTime) -> String {
        switch job.state {
        case .running(_, _, let since, _):
            let elapsed = max(.zero, now - since)
            if let progress = job.progress, progress > 0.001, progress < 1 {
                let remaining = elapsed.seconds * (1 - progress) / progress
                return "\(Formatting.compact(elapsed)) ~\(Formatting.compact(seconds: remaining))"
            }
            return Formatting.compact(elapsed)
        case .waitingForRetry(let until, _, _), .scheduled(let until):
            return "in \(Formatting.compact(max(.zero, until - now)))"
        case .queued, .blocked, .skipped:
            return ""
        case .succeeded, .failed, .cancelled:
            guard let started = job.startedAt, let finished = job.finishedAt, finished >= started else { return "" }
            return Formatting.compact(finished - started)
        }
    }

    private static func panels(_ model: DashboardModel, rows: Int, width: Int, now: SchedulerTime) -> [ScreenLine] {
        let board = model.board
        // With groups, three panels: workers, groups, events; the events give up their place
        // on a screen too narrow for all three.
        var groupWidth = 0
        let workerWidth: Int
        var eventWidth: Int
        if board.hasGroups {
            groupWidth = min(40, max(34, width * 3 / 10))
            workerWidth = min(36, max(20, width / 4))
            eventWidth = width - workerWidth - groupWidth - 2
            if eventWidth < 20 {
                groupWidth = width - workerWidth - 1
                eventWidth = 0
            }
        } else {
            workerWidth = min(44, max(24, width * 2 / 5))
            eventWidth = width - workerWidth - 1
        }
        var lines: [ScreenLine] = []
        let localCount = board.workers.filter { $0.kind == .local }.count
        let remoteCount = board.workers.count - localCount
        var workerTitle = " Workers (\(localCount) local, \(remoteCount) remote)"
        if TextWidth.width(workerTitle) > workerWidth { workerTitle = " Workers (\(localCount)+\(remoteCount))" }
        var title = fitted([Segment(workerTitle, .panelTitle)], width: workerWidth, padRole: .panelTitle).segments
        if groupWidth > 0 { title += [Segment("│", .dim)] + groupTitle(width: groupWidth).segments }
        if eventWidth > 0 {
            title += [Segment("│", .dim)] + fitted([Segment(" Events", .panelTitle)], width: eventWidth, padRole: .panelTitle).segments
        }
        lines.append(ScreenLine(title))
        // Workers: one line each, busy ones with their job. The running jobs are grouped by
        // worker once (searching them again for each worker cost O(workers × running) a frame:
        // millions with -j 2000), and only the lines that fit are made.
        var jobsByWorker: [WorkerID: [JobInfo]] = [:]
        for id in board.running {
            guard let job = board.jobs[id], case .running(let worker, _, _, _) = job.state else { continue }
            jobsByWorker[worker, default: []].append(job)
        }
        let shownWorkers = board.workers.count > rows ? max(0, rows - 1) : board.workers.count
        var workerLines: [[Segment]] = []
        // Names get 10 cells, more when one is longer (`slurm:PARTITION`) and the pane has room
        // beside the load bar.
        var workerNameWidth = 10
        for worker in board.workers.prefix(shownWorkers) where worker.name.utf8.count > workerNameWidth {
            workerNameWidth = max(workerNameWidth, TextWidth.width(TextWidth.visible(worker.name)))
        }
        workerNameWidth = min(workerNameWidth, max(10, workerWidth - 22))
        for worker in board.workers.prefix(shownWorkers) {
            // Those it runs first, oldest first: a job sent to it and held there is named only
            // when it runs nothing else.
            let jobs = (jobsByWorker[worker.id] ?? []).sorted {
                (board.isSent($0.id) ? 1 : 0, $0.startedAt ?? .zero) < (board.isSent($1.id) ? 1 : 0, $1.startedAt ?? .zero)
            }
            let name = TextWidth.fit(TextWidth.visible(worker.name), to: workerNameWidth)
            let retiring = board.retiring.contains(worker.id) ? " (leaving)" : ""
            if let job = jobs.first {
                // Its own slots, and apart from them what it holds behind them (a 1-slot worker
                // with one job sent showed `2/2`).
                let sent = jobs.count { board.isSent($0.id) }
                let (running, slots) = (jobs.count - sent, worker.runningSlots)
                var load = [Segment(running > 0 ? "busy" : "idle", running > 0 ? .running : .dim)]
                if slots > 1 {
                    // A worker of several slots: how full it is, as a bar.
                    let bar = Formatting.bar(Double(running) / Double(slots), width: min(8, slots))
                    load = [Segment(bar.filled, .progressFill), Segment(bar.empty, .progressEmpty),
                            Segment(" \(running)/\(slots)", .running)]
                }
                if sent > 0 { load.append(Segment(" +\(sent) sent", .dim)) }
                workerLines.append([Segment(" \(name) ")] + load + [
                    Segment(retiring, .dim), Segment(" " + TextWidth.visible(job.displayName)),
                ])
            } else {
                workerLines.append([Segment(" \(name) "), Segment("idle", .dim), Segment(retiring, .dim)])
            }
        }
        if board.workers.count > shownWorkers {
            workerLines.append([Segment(" … \(board.workers.count - shownWorkers) more", .dim)])
        }
        // A narrow pane keeps the text and drops the times. A line too long for the pane goes
        // on in a second row (a number at its end is never cut); the newest lines that fit show.
        let showsTimes = eventWidth >= 30
        var eventLines: [[Segment]] = []
        if eventWidth > 0 {
            for entry in board.log.reversed() {
                let prefix = showsTimes ? " \(Formatting.clock(entry.time)) " : " "
                let indent = String(repeating: " ", count: TextWidth.width(prefix))
                let room = max(1, eventWidth - TextWidth.width(prefix))
                let chunks = wrap(TextWidth.visible(entry.text), width: room, rows: 2)
                let entryLines = chunks.enumerated().map { index, chunk in
                    [Segment(index == 0 ? prefix : indent, .dim), Segment(chunk, entry.role)]
                }
                if eventLines.count + entryLines.count > rows {
                    if eventLines.isEmpty { eventLines = Array(entryLines.prefix(rows)) }
                    break
                }
                eventLines.insert(contentsOf: entryLines, at: 0)
            }
        }
        let groupLines = groupWidth > 0 ? groupRows(model, rows: rows, width: groupWidth) : []
        for row in 0..<rows {
            let left = row < workerLines.count ? workerLines[row] : []
            var line = fitted(left, width: workerWidth).segments
            if groupWidth > 0 {
                line += [Segment("│", .dim)] + fitted(row < groupLines.count ? groupLines[row] : [], width: groupWidth).segments
            }
            if eventWidth > 0 {
                line += [Segment("│", .dim)] + fitted(row < eventLines.count ? eventLines[row] : [], width: eventWidth).segments
            }
            lines.append(ScreenLine(line))
        }
        return lines
    }

    /// `text` in pieces of at most `width` cells, at most `rows` of them (the last cut with
    /// `…` if the text goes on). Breaks after a space when there is one in the second half.
    static func wrap(_ text: String, width: Int, rows: Int) -> [String] {
        var pieces: [String] = []
        var rest = Substring(text)
        while !rest.isEmpty {
            if pieces.count == rows - 1 || TextWidth.width(rest) <= width {
                pieces.append(TextWidth.truncate(String(rest), to: width))
                break
            }
            var piece = ""
            var used = 0
            var index = rest.startIndex
            while index < rest.endIndex {
                let cells = TextWidth.width(String(rest[index]))
                if used + cells > width { break }
                piece.append(rest[index])
                used += cells
                index = rest.index(after: index)
            }
            if index == rest.startIndex { break }
            // A word is not split when a space in the second half of the piece allows.
            if index < rest.endIndex, rest[index] != " ", let space = piece.lastIndex(of: " "),
               piece.distance(from: piece.startIndex, to: space) >= piece.count / 2 {
                let keep = piece.distance(from: piece.startIndex, to: space) + 1
                piece = String(piece.prefix(keep))
                index = rest.index(rest.startIndex, offsetBy: keep)
            }
            pieces.append(piece)
            rest = rest[index...]
        }
        return pieces
    }

    // MARK: - Groups panel

    /// Cells of the groups panel's number columns: RUN (running/limit), QUEUE, HELD.
    private static let groupColumns = (run: 5, queued: 5, held: 4)

    /// The cells left for a group's name in a panel `width` wide (its first cell marks the
    /// selected job's group).
    private static func groupNameWidth(_ width: Int) -> Int {
        max(4, width - 2 - groupColumns.run - groupColumns.queued - groupColumns.held - 3)  // marker, margin, spaces
    }

    private static func groupTitle(width: Int) -> ScreenLine {
        let columns = groupColumns
        let text = TextWidth.fit(" Groups", to: groupNameWidth(width) + 1)
            + " " + TextWidth.fit("RUN", to: columns.run, alignRight: true)
            + " " + TextWidth.fit("QUEUE", to: columns.queued, alignRight: true)
            + " " + TextWidth.fit("HELD", to: columns.held, alignRight: true)
        return fitted([Segment(text, .panelTitle)], width: width, padRole: .panelTitle)
    }

    /// The groups shown: every one but the default group while it is plain, empty and not the
    /// selected job's.
    static func shownGroups(_ model: DashboardModel) -> [GroupStatus] {
        let selected = model.selectedJob?.group
        return model.board.mirror.groupStatuses.filter { status in
            status.group != JobGroup(name: JobSpec.defaultGroup) || status.running + status.queued + status.held > 0
                || status.group.name == selected
        }
    }

    /// One line per group: `>` marks the selected job's group (the one `P` and `L` act on), then
    /// its name (and PAUSED), running/limit (`2/2`, `1/∞`), queued, held (blocked or scheduled).
    private static func groupRows(_ model: DashboardModel, rows: Int, width: Int) -> [[Segment]] {
        let groups = shownGroups(model)
        let selected = model.selectedJob?.group
        let shown = groups.count > rows ? max(0, rows - 1) : groups.count
        let nameWidth = groupNameWidth(width)
        let columns = groupColumns
        var lines: [[Segment]] = []
        // More groups than rows: the window keeps the selected job's group in sight (`P` and
        // `L` act on it; it was below the fold, with no `>` shown).
        var start = 0
        if let selected, let index = groups.firstIndex(where: { $0.group.name == selected }), index >= shown {
            start = index - shown + 1
        }
        for status in groups[start...].prefix(shown) {
            let group = status.group
            var line = [Segment(group.name == selected ? ">" : " ", .message)]
            let name = TextWidth.visible(group.name)
            if group.isPaused {
                let mark = "PAUSED"
                let shortName = TextWidth.truncate(name, to: max(1, nameWidth - mark.count - 1))
                line += [Segment(shortName), Segment(" "), Segment(mark, .paused)]
                let used = TextWidth.width(shortName) + 1 + mark.count
                if used < nameWidth { line.append(Segment(String(repeating: " ", count: nameWidth - used))) }
            } else {
                line.append(Segment(TextWidth.fit(name, to: nameWidth)))
            }
            let run = "\(status.running)/\(group.limit.map(String.init) ?? "∞")"
            line += [
                Segment(" "), Segment(TextWidth.fit(run, to: columns.run, alignRight: true), status.running > 0 ? .running : .dim),
                Segment(" "), Segment(TextWidth.fit("\(status.queued)", to: columns.queued, alignRight: true), status.queued > 0 ? .queued : .dim),
                Segment(" "), Segment(TextWidth.fit("\(status.held)", to: columns.held, alignRight: true), status.held > 0 ? .blocked : .dim),
            ]
            lines.append(line)
        }
        if groups.count > shown { lines.append([Segment(" … \(groups.count - shown) more", .dim)]) }
        return lines
    }

    private static func statusLine(_ model: DashboardModel, width: Int, now: SchedulerTime, cursor: inout ScreenPosition?) -> ScreenLine {
        switch model.mode {
        case .prompt(let prompt):
            switch prompt.kind {
            case .setPriority(let ids):
                let label = ids.count == 1 ? " Priority of \(ids[0].short): " : " Priority of \(ids.count) tagged jobs: "
                let fieldWidth = 9
                let field = prompt.priority.visible(width: fieldWidth)
                cursor = ScreenPosition(row: 0, column: TextWidth.width(label) + field.cursorColumn)
                let shown = prompt.priority.isSelected ? Segment(TextWidth.fit(field.text, to: fieldWidth), .selected)
                    : Segment(TextWidth.fit(field.text, to: fieldWidth))
                let range = JobSpec.priorityRange
                return fitted([Segment(label, .prompt), shown, Segment("  \(range.lowerBound) to \(range.upperBound), higher runs first", .dim)], width: width)
            case .editCommand(let id):
                let label = " Command of \(id.short): "
                let fieldWidth = max(4, width - TextWidth.width(label) - 1)
                let field = prompt.command.visible(width: fieldWidth)
                cursor = ScreenPosition(row: 0, column: TextWidth.width(label) + field.cursorColumn)
                return fitted([Segment(label, .prompt), Segment(TextWidth.fit(field.text, to: fieldWidth))], width: width)
            case .saveOutput(let id):
                let label = " Write the output of \(id.short) to: "
                let fieldWidth = max(4, width - TextWidth.width(label) - 1)
                let field = prompt.command.visible(width: fieldWidth)
                cursor = ScreenPosition(row: 0, column: TextWidth.width(label) + field.cursorColumn)
                return fitted([Segment(label, .prompt), Segment(TextWidth.fit(field.text, to: fieldWidth), prompt.command.isSelected ? .selected : .normal)], width: width)
            case .groupLimit(let group):
                let label = " Limit of group \(TextWidth.truncate(TextWidth.visible(group), to: 24)): "
                let hint = "  1 or more · empty or - for none"
                let fieldWidth = 12
                let field = prompt.command.visible(width: fieldWidth)
                cursor = ScreenPosition(row: 0, column: TextWidth.width(label) + field.cursorColumn)
                return fitted([
                    Segment(label, .prompt), Segment(TextWidth.fit(field.text, to: fieldWidth)), Segment(hint, .dim),
                ], width: width)
            case .filter:
                let label = " Filter: "
                let hint = "  Enter keeps · Esc clears"
                let fieldWidth = max(4, width - TextWidth.width(label) - TextWidth.width(hint))
                let field = prompt.command.visible(width: fieldWidth)
                cursor = ScreenPosition(row: 0, column: TextWidth.width(label) + field.cursorColumn)
                return fitted([
                    Segment(label, .prompt), Segment(TextWidth.fit(field.text, to: fieldWidth)), Segment(hint, .dim),
                ], width: width)
            case .newJob:
                let label = " New job: "
                let priorityLabel = "  priority: "
                // "-1000000" and the cursor after it.
                let priorityWidth = 9
                let fieldWidth = max(4, width - TextWidth.width(label) - TextWidth.width(priorityLabel) - priorityWidth)
                let command = prompt.command.visible(width: fieldWidth)
                let priority = prompt.priority.visible(width: priorityWidth)
                if prompt.field == .command {
                    cursor = ScreenPosition(row: 0, column: TextWidth.width(label) + command.cursorColumn)
                } else {
                    cursor = ScreenPosition(
                        row: 0,
                        column: TextWidth.width(label) + fieldWidth + TextWidth.width(priorityLabel) + priority.cursorColumn)
                }
                // A default shows selected: typing replaces it.
                let shown = prompt.priority.isSelected
                    ? [Segment(priority.text, .selected), Segment(String(repeating: " ", count: max(0, priorityWidth - TextWidth.width(priority.text))))]
                    : [Segment(TextWidth.fit(priority.text, to: priorityWidth))]
                return fitted([
                    Segment(label, .prompt), Segment(TextWidth.fit(command.text, to: fieldWidth)),
                    Segment(priorityLabel, .dim),
                ] + shown, width: width)
            }
        case .confirm(let confirmation):
            var text: String
            switch confirmation {
            case .cancel(let id, let name):
                // The name is cut short so that the y/n choice always shows at 80 columns, and
                // shorter still (down to nothing) on a narrow screen.
                let shown = TextWidth.truncate(TextWidth.visible(name), to: 24)
                text = " Cancel job \(id.short) (\(shown))? y = cancel it, n = keep it "
                if TextWidth.width(text) > width {
                    let room = width - TextWidth.width(" Cancel \(id.short) ()? y/n ")
                    text = room >= 4
                        ? " Cancel \(id.short) (\(TextWidth.truncate(TextWidth.visible(name), to: room)))? y/n "
                        : " Cancel \(id.short)? y/n "
                }
            case .quit(let active):
                text = confirmQuitText(active: active, width: width)
            case .shutdownServe:
                text = " Shut down jobtop serve? Running jobs finish first. y = shut down, n = stay "
                if TextWidth.width(text) > width { text = " Shut down serve? y/n " }
            case .cancelTagged(let ids):
                let jobs = ids.count == 1 ? "1 tagged job" : "\(ids.count) tagged jobs"
                text = " Cancel \(jobs)? y = cancel them, n = keep them "
                if TextWidth.width(text) > width { text = " Cancel \(jobs)? y/n " }
            }
            return fitted([Segment(text, .prompt)], width: width)
        case .signalMenu:
            return fitted([Segment(" ↑↓ or 1-9 choose · Enter sends to the job's process group · Esc cancels ", .prompt)], width: width)
        default:
            if let message = model.message {
                return fitted([Segment(" "), Segment(TextWidth.visible(message.text), message.role)], width: width)
            }
            if model.mode == .table, let job = model.selectedJob {
                return fitted(detail(of: job, board: model.board, now: now), width: width)
            }
            return fitted([], width: width)
        }
    }

    /// The `x` menu's lines, at most `rows`: a title naming the jobs, then the signals, the chosen
    /// one in reverse video, in as many columns as it takes to show every one (a small window hid
    /// the last three, which `8` still sent).
    static func signalMenu(_ menu: DashboardModel.SignalMenu, model: DashboardModel, width: Int, rows: Int = .max) -> [ScreenLine] {
        let jobs = menu.targets.count == 1
            // Its name, else its command (a job with neither showed its id twice).
            ? "\(menu.targets[0].short) (\(TextWidth.truncate(TextWidth.visible(model.board.tag(menu.targets[0])), to: 24)))"
            : "\(menu.targets.count) tagged jobs"
        var lines = [fitted([Segment(" Send a signal to \(jobs)", .panelTitle)], width: width)]
        let signals = SignalName.common
        let perColumn = max(1, min(signals.count, rows - 1))
        let columns = (signals.count + perColumn - 1) / perColumn
        for row in 0..<perColumn {
            var segments = [Segment(" ")]
            for column in 0..<columns {
                let index = column * perColumn + row
                guard index < signals.count else { break }
                let signal = signals[index]
                let text = " \(index + 1)  SIG\(signal.name)" + String(repeating: " ", count: max(1, 6 - signal.name.count)) + "\(signal.number) "
                if column > 0 { segments.append(Segment(" ")) }
                segments.append(Segment(TextWidth.fit(text, to: 18), index == menu.index ? .selected : .normal))
            }
            lines.append(fitted(segments, width: width))
        }
        return lines
    }

    /// The quit question, in the words that fit `width`.
    static func confirmQuitText(active: Int, width: Int) -> String {
        let jobs = active == 1 ? "1 job is" : "\(active) jobs are"
        let text = " \(jobs) still queued or running. Cancel \(active == 1 ? "it" : "them") and quit? y = quit, n = stay "
        guard TextWidth.width(text) > width else { return text }
        return " Cancel \(active == 1 ? "1 active job" : "\(active) active jobs") and quit? y/n "
    }

    /// The status line's word on the selected job when it waits for something other than a
    /// slot, or will not run: what a blocked job waits for (each dependency and its state), when
    /// a scheduled one starts, why one was skipped, why a queued one is held by its group.
    /// Empty for the rest.
    static func detail(of job: JobInfo, board: JobBoard, now: SchedulerTime) -> [Segment] {
        let head = [Segment(" \(job.id.short) "), Segment(job.state.name, stateRole(job.state)), Segment(": ")]
        // `fetch-a (running), fetch-b (queued)`: the dependencies that have not succeeded.
        func pending() -> [Segment] {
            var segments: [Segment] = []
            let waiting = job.dependencies.filter { board.jobs[$0]?.state.kind != .succeeded && board.jobs[$0] != nil }
            for (index, id) in waiting.enumerated() {
                guard let other = board.jobs[id] else { continue }
                if index > 0 { segments.append(Segment(", ")) }
                segments.append(Segment(TextWidth.truncate(TextWidth.visible(board.label(of: id)), to: 24)))
                segments.append(Segment(" ("))
                segments.append(Segment(board.stateName(of: other), stateRole(other.state)))
                segments.append(Segment(")"))
            }
            let done = job.dependencies.count - waiting.count
            if done > 0 { segments.append(Segment(" · \(done) of \(job.dependencies.count) done", .dim)) }
            return segments
        }
        switch job.state {
        case .blocked:
            return head + [Segment("waits for ")] + pending()
        case .scheduled(let until):
            var segments = head + [Segment("starts in \(Formatting.compact(max(.zero, until - now)))")]
            let waits = pending()
            if !waits.isEmpty { segments += [Segment(", once done: ")] + waits }
            return segments
        case .skipped(let reason):
            // Retrying the dependency brings it back (a retry of this one is refused while the
            // dependency stays failed).
            let dependency = TextWidth.truncate(TextWidth.visible(reason.dependencyName), to: 24)
            return head + [Segment(TextWidth.visible(reason.description)), Segment(" (r on \(dependency) brings it back)", .dim)]
        case .queued:
            // Everything paused (`p`): that is what it waits for, whatever its group says.
            if board.isPaused { return head + [Segment("all starts are paused "), Segment("(p resumes)", .dim)] }
            guard let group = board.mirror.groups[job.group] else { return [] }
            let name = TextWidth.truncate(TextWidth.visible(group.name), to: 24)
            if group.isPaused {
                return head + [Segment("group \(name) is paused "), Segment("(P resumes it)", .dim)]
            }
            if let limit = group.limit,
               let status = board.mirror.groupStatuses.first(where: { $0.group.name == group.name }), status.running >= limit {
                return head + [Segment("group \(name) runs \(status.running) of \(limit) at once "), Segment("(L changes it)", .dim)]
            }
            return []
        default:
            return []
        }
    }

    /// Under a prompt: what went wrong with the input (the status line holds the prompt
    /// itself), or the prompt's keys.
    private static func promptFooter(_ prompt: DashboardModel.Prompt, message: Segment?, width: Int) -> ScreenLine {
        if let message {
            return fitted([Segment(" "), Segment(TextWidth.visible(message.text), message.role)], width: width)
        }
        switch prompt.kind {
        case .filter:
            return footer(width: width)
        case .groupLimit:
            return fitted([Segment(" Enter sets it · Esc aborts · lowering it stops no running job", .dim)], width: width)
        case .setPriority:
            return fitted([Segment(" Enter sets it · Esc aborts · typing replaces the current one", .dim)], width: width)
        case .saveOutput:
            return fitted([Segment(" Enter writes the kept output (stdout and stderr, as written) · Esc aborts", .dim)], width: width)
        case .editCommand:
            return fitted([Segment(" Enter saves it (a failed or cancelled job runs again) · Esc aborts · Ctrl-U clears", .dim)], width: width)
        case .newJob:
            let range = JobSpec.priorityRange
            let hint = prompt.field == .command
                ? " Enter submits · Esc aborts · Tab: priority · prefix: @group after:name,name"
                : " Enter submits · Esc aborts · Tab: command · priority \(range.lowerBound) to \(range.upperBound), higher runs first"
            return fitted([Segment(hint, .dim)], width: width)
        }
    }

    private static func footer(width: Int) -> ScreenLine {
        var segments: [Segment] = []
        let footer = KeyBindings.footer(width: width - 1)
        for (index, entry) in footer.entries.enumerated() {
            if footer.isCompact {
                segments.append(Segment((index == 0 ? "" : " ") + entry.key, .footerKey))
                segments.append(Segment(entry.label, .footerLabel))
            } else {
                segments.append(Segment(" " + entry.key, .footerKey))
                segments.append(Segment(" " + entry.label + " ", .footerLabel))
            }
        }
        return fitted(segments, width: width)
    }

    // MARK: - Other screens

    private static func output(_ view: DashboardModel.OutputView, model: DashboardModel, size: TerminalSize, now: SchedulerTime) -> Frame {
        let width = size.columns
        let rows = size.rows - 2
        var lines: [ScreenLine] = []
        let job = model.board.jobs[view.id]
        let isFinished = job?.state.isFinished ?? true
        var title = " Output of \(view.id.short)"
        var reason = ""
        if let job {
            title += " · \(TextWidth.visible(job.displayName)) · \(model.board.stateName(of: job))"
            // Why it failed, said where its output is read.
            switch job.state {
            case .failed(let why, _): reason = ": \(why)"
            case .waitingForRetry(_, let attempt, let why): reason = " (attempt \(attempt): \(why))"
            case .skipped(let why): reason = ": \(why)"
            default: break
            }
            title += TextWidth.visible(reason)
        }
        var detail = " · \(view.lines.count) \(view.lines.count == 1 ? "line" : "lines")"
        if view.dropped > 0 { detail += " (\(view.dropped) earlier dropped)" }
        if view.left > 0 { detail += " · →\(view.left)" }
        if view.top != nil {
            detail += " · scrolled "
        } else {
            detail += isFinished ? " · ended " : " · following "
        }
        let detailWidth = TextWidth.width(detail)
        lines.append(ScreenLine(
            fitted([Segment(title, .title)], width: max(0, width - detailWidth), padRole: .title).segments
                + fitted([Segment(detail, .title)], width: min(width, detailWidth), padRole: .title).segments))
        // The job's details, then a rule, then as much output as fits.
        var details: [ScreenLine] = []
        if view.showsDetails, let job {
            let room = max(2, (size.rows - 2) / 2)
            details = jobDetails(job, board: model.board, width: width, now: now, rows: room - 1)
            details.append(fitted([Segment(String(repeating: "─", count: width), .dim)], width: width))
        }
        lines.append(contentsOf: details)
        let outputRows = max(1, rows - details.count)
        let last = max(0, view.lines.count - outputRows)
        let top = min(view.top ?? last, last)
        for row in 0..<outputRows {
            let index = top + row
            if index < view.lines.count {
                let line = view.lines[index]
                // The line jobtop puts between two attempts stands apart from the job's own.
                let isSeparator = line.stream == .stdout && OutputLine.isSeparator(line.text)
                let segments = isSeparator ? [Segment(line.text, .panelTitle)]
                    : ANSIText.segments(line.text, base: line.stream == .stderr ? .failed : .normal)
                lines.append(fitted(ANSIText.dropCells(segments, view.left), width: width))
            } else if row == 0 {
                let empty = isFinished ? " (no output)" : " (no output yet)"
                lines.append(fitted([Segment(view.isLoaded ? empty : " loading…", .dim)], width: width))
            } else {
                lines.append(fitted([], width: width))
            }
        }
        if let search = view.search {
            let label = " Search: "
            let field = search.visible(width: max(4, width - TextWidth.width(label) - 1))
            lines.append(fitted([Segment(label, .prompt), Segment(field.text, search.isSelected ? .selected : .normal)], width: width))
            return Frame(lines: lines, cursor: ScreenPosition(row: size.rows - 1, column: TextWidth.width(label) + field.cursorColumn))
        }
        if let message = model.message {
            lines.append(fitted([Segment(" "), Segment(TextWidth.visible(message.text), message.role)], width: width))
            return Frame(lines: lines, cursor: nil)
        }
        lines.append(fitted([
            Segment("Esc", .footerKey), Segment("Back ", .footerLabel), Segment("↑↓", .footerKey), Segment("Scroll ", .footerLabel),
            Segment("/", .footerKey), Segment("Search ", .footerLabel),
            Segment("←→", .footerKey), Segment("Sideways ", .footerLabel), Segment("d", .footerKey), Segment("Details ", .footerLabel),
            Segment("PgUp/PgDn", .footerKey), Segment("Page ", .footerLabel), Segment("End", .footerKey),
            Segment("Follow ", .footerLabel),
        ], width: width, padRole: .footerLabel))
        return Frame(lines: lines, cursor: nil)
    }

    /// The details panel of a job, at most `rows` lines: what it runs, where it belongs, what
    /// it waits for, each attempt (worker, start, duration, outcome) and why it failed.
    static func jobDetails(_ job: JobInfo, board: JobBoard, width: Int, now: SchedulerTime, rows: Int) -> [ScreenLine] {
        func line(_ label: String, _ value: [Segment]) -> ScreenLine {
            fitted([Segment(" " + TextWidth.fit(label, to: 9), .dim)] + value, width: width)
        }
        var lines: [ScreenLine] = []
        lines.append(line("command", [Segment(TextWidth.visible(job.command))]))
        if let directory = job.workingDirectory { lines.append(line("cwd", [Segment(TextWidth.visible(directory))])) }
        if let environment = job.environment, !environment.isEmpty {
            let text = environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
            lines.append(line("env", [Segment(TextWidth.visible(text))]))
        }
        var about = [Segment("\(job.id.short)")]
        if let name = job.name { about.append(Segment(" · name \(TextWidth.visible(name))")) }
        about.append(Segment(" · group \(TextWidth.visible(job.group)) · priority \(job.priority)"))
        if let key = job.key { about.append(Segment(" · key \(TextWidth.visible(key))")) }
        about.append(Segment(" · submitted \(Formatting.clock(job.submittedAt))", .dim))
        lines.append(line("job", about))
        if !job.dependencies.isEmpty {
            var after: [Segment] = []
            for (index, id) in job.dependencies.enumerated() {
                if index > 0 { after.append(Segment(", ")) }
                after.append(Segment(TextWidth.visible(board.label(of: id))))
                if let other = board.jobs[id] {
                    after += [Segment(" ("), Segment(board.stateName(of: other), stateRole(other.state)), Segment(")")]
                }
            }
            lines.append(line("after", after))
        }
        var state: [Segment] = [Segment(job.state.name, stateRole(job.state))]
        if board.isSent(job.id) { state = [Segment("sent", stateRole(job.state)), Segment(": waiting at its worker for a free slot", .dim)] }
        if let reason = reasonText(job) { state.append(Segment(": " + TextWidth.visible(reason), stateRole(job.state))) }
        state.append(Segment(" · attempts \(job.attempts)/\(job.maxAttempts)", .dim))
        lines.append(line("state", state))
        var attempts = board.attempts[job.id] ?? []
        if attempts.isEmpty, let started = job.startedAt {
            // Started before the dashboard watched: what the job record says (the worker of a
            // running one by name).
            var worker = ""
            if case .running(let id, _, _, _) = job.state { worker = board.workerName(id) ?? id.short }
            attempts = [JobBoard.Attempt(number: job.attempts, worker: worker, start: started, end: job.finishedAt,
                                         outcome: job.state.isFinished ? (reasonText(job) ?? job.state.name) : nil,
                                         began: !board.isSent(job.id))]
        }
        let room = max(0, rows - lines.count)
        if attempts.count > room, room > 0 {
            attempts = Array(attempts.suffix(room - 1))
            lines.append(line("", [Segment("… earlier attempts not shown", .dim)]))
        }
        for attempt in attempts.suffix(room) {
            let duration = Formatting.compact(max(.zero, (attempt.end ?? now) - attempt.start))
            var text = "\(attempt.number)"
            // One its worker held and never began did not run: when it was sent, no run time.
            if !attempt.worker.isEmpty { text += " \(attempt.began ? "on" : "sent to") \(TextWidth.visible(attempt.worker))" }
            text += " at \(Formatting.clock(attempt.start))" + (attempt.began ? ", \(duration)" : "")
            let outcome = attempt.began
                ? attempt.outcome ?? "running"
                : attempt.outcome.map { "\($0) before it began" } ?? "waiting at its worker for a free slot"
            let role: Role = attempt.outcome == nil ? .running : (outcome == "succeeded" ? .succeeded : .failed)
            lines.append(line("attempt", [Segment(text + ": "), Segment(TextWidth.visible(outcome), role)]))
        }
        return Array(lines.prefix(rows))
    }

    /// Why a job failed, waits to retry, or was skipped; `nil` for the others.
    static func reasonText(_ job: JobInfo) -> String? {
        switch job.state {
        case .failed(let reason, _): reason.description
        case .waitingForRetry(_, _, let reason): reason.description
        case .skipped(let reason): reason.description
        default: nil
        }
    }

    /// `t`: one lane per worker slot, each job's attempts as bars over the last minutes, colored
    /// by outcome (running, succeeded, failed, cancelled): where the time went.
    static func timeline(_ model: DashboardModel, size: TerminalSize, now: SchedulerTime) -> Frame {
        let width = size.columns
        let board = model.board
        let span = Duration.seconds(model.timelineMinutes * 60)
        let labelWidth = 12
        let cells = max(1, width - labelWidth - 2)
        let start = now - span
        var lines = [fitted([
            Segment(" Timeline", .title),
            Segment(" · the last \(model.timelineMinutes) min, \(formatDuration(span / cells)) a cell · + zooms in, - out, any other key returns ", .title),
        ], width: width, padRole: .title)]
        // Lanes: each worker's slots; an attempt goes in the first lane of its worker free at its start.
        var lanes: [(label: String, cells: [(Character, Role)])] = []
        var lanesOf: [String: [Int]] = [:]
        func addLane(_ label: String) -> Int {
            lanes.append((TextWidth.fit(TextWidth.visible(label), to: labelWidth), Array(repeating: ("·", .dim), count: cells)))
            return lanes.count - 1
        }
        for worker in board.workers {
            lanesOf[worker.name] = (0..<max(1, worker.slots)).map { slot in
                addLane(worker.slots > 1 ? "\(worker.name)/\(slot + 1)" : worker.name)
            }
        }
        var spans: [(worker: String, attempt: JobBoard.Attempt)] = []
        for (_, attempts) in board.attempts {
            for attempt in attempts where (attempt.end ?? now) >= start { spans.append((attempt.worker, attempt)) }
        }
        spans.sort { $0.attempt.start < $1.attempt.start }
        // A worker that has left (a local slot taken away, a remote worker gone) keeps lanes for
        // what it ran, below the others: as many as it ran at once.
        let present = Set(lanesOf.keys)
        var busyByLane: [SchedulerTime] = Array(repeating: .zero, count: lanes.count)
        for (worker, attempt) in spans {
            let own = lanesOf[worker] ?? []
            var lane = own.first { busyByLane[$0] <= attempt.start }
            if lane == nil && !present.contains(worker) {
                lane = addLane("\(worker) left")
                lanesOf[worker, default: []].append(lane!)
                busyByLane.append(.zero)
            }
            guard let lane = lane ?? own.first else { continue }
            let end = attempt.end ?? now
            busyByLane[lane] = max(busyByLane[lane], end)
            let role: Role = switch attempt.outcome {
            case nil: .running
            case "succeeded": .succeeded
            case "cancelled": .cancelled
            default: .failed
            }
            let from = max(0, Int(((attempt.start - start) / span) * Double(cells)))
            let to = min(cells - 1, max(from, Int(((end - start) / span) * Double(cells))))
            guard from < cells else { continue }
            // The character says the outcome too, for a screen without colors.
            let mark: Character = role == .failed ? "▒" : (role == .cancelled ? "░" : "█")
            for cell in from...to { lanes[lane].cells[cell] = (mark, role) }
        }
        let rows = size.rows - 3
        for row in 0..<rows {
            if row < lanes.count {
                let lane = lanes[row]
                var segments = [Segment(" " + lane.label + " ")]
                var run = ""
                var role = lane.cells.first?.1 ?? .dim
                for (character, cellRole) in lane.cells {
                    if cellRole != role {
                        segments.append(Segment(run, role))
                        run = ""
                        role = cellRole
                    }
                    run.append(character)
                }
                segments.append(Segment(run, role))
                lines.append(fitted(segments, width: width))
            } else {
                lines.append(fitted([], width: width))
            }
        }
        // The time axis under the lanes.
        let axis = " " + String(repeating: " ", count: labelWidth + 1) + "-\(model.timelineMinutes)m"
        lines.append(fitted([Segment(axis, .dim), Segment(String(repeating: " ", count: max(0, width - TextWidth.width(axis) - 4)) + "now", .dim)], width: width))
        lines.append(fitted([
            Segment(" █", .running), Segment(" running ", .footerLabel), Segment("█", .succeeded), Segment(" succeeded ", .footerLabel),
            Segment("▒", .failed), Segment(" failed ", .footerLabel), Segment("░", .cancelled), Segment(" cancelled ", .footerLabel),
        ], width: width, padRole: .footerLabel))
        return Frame(lines: lines, cursor: nil)
    }

    /// `E`: every event kept, newest last, with times and job names; scrolls like the output view.
    private static func events(_ model: DashboardModel, size: TerminalSize) -> Frame {
        let width = size.columns
        let rows = size.rows - 2
        let log = model.board.log
        let last = max(0, log.count - rows)
        let top = min(model.eventsTop ?? last, last)
        var detail = " · \(log.count) event\(log.count == 1 ? "" : "s") kept"
        detail += model.eventsTop == nil ? " · following " : " · scrolled "
        var lines = [fitted([Segment(" Events", .title), Segment(detail, .title)], width: width, padRole: .title)]
        for row in 0..<rows {
            let index = top + row
            if index < log.count {
                let entry = log[index]
                lines.append(fitted([Segment(" \(Formatting.clock(entry.time)) ", .dim), Segment(TextWidth.visible(entry.text), entry.role)], width: width))
            } else if row == 0 {
                lines.append(fitted([Segment(" (no events yet)", .dim)], width: width))
            } else {
                lines.append(fitted([], width: width))
            }
        }
        lines.append(fitted([
            Segment("Esc", .footerKey), Segment("Back ", .footerLabel), Segment("↑↓", .footerKey), Segment("Scroll ", .footerLabel),
            Segment("PgUp/PgDn", .footerKey), Segment("Page ", .footerLabel), Segment("End", .footerKey), Segment("Follow ", .footerLabel),
        ], width: width, padRole: .footerLabel))
        return Frame(lines: lines, cursor: nil)
    }

    /// Help's body, one entry per line; `attached`, `q` detaches (it said "quit (asks while
    /// jobs are active)" there too).
    private static func helpBody(attached: Bool = false) -> [[Segment]] {
        let entries = KeyBindings.helpLines
        let labelWidth = entries.reduce(0) { max($0, TextWidth.width($1.label)) }
        let quitSummary = KeyBindings.helpPairs.first { $0.first == .quit }?.summary
        var body: [[Segment]] = entries.map { line in
            let summary = attached && line.summary == quitSummary ? "detach at once (the jobs go on in the serve) / the same" : line.summary
            return [Segment("  "), Segment(TextWidth.fit(line.label, to: labelWidth), .footerKey), Segment("  " + summary)]
        }
        body.append([Segment("  n: @GROUP and after:NAME,NAME before the command: @gpu after:fetch train.sh", .dim)])
        body.append([Segment("  Mouse: a click selects a row or acts as a footer key; the wheel scrolls.", .dim)])
        body.append([Segment("  Prompts: ←→ Home End, Ctrl-U clears, Tab: field, Enter submits, Esc aborts.", .dim)])
        return body
    }

    /// Lines of help, for scrolling it.
    static let helpLineCount = helpBody().count

    private static func help(size: TerminalSize, top: Int, attached: Bool) -> Frame {
        let width = size.columns
        var lines: [ScreenLine] = [fitted([Segment(" jobtop keys", .title)], width: width, padRole: .title)]
        let body = helpBody(attached: attached)
        let rows = size.rows - 2
        let top = max(0, min(top, body.count - rows))
        for row in 0..<rows {
            let index = top + row
            lines.append(fitted(index < body.count ? body[index] : [], width: width))
        }
        let footer = body.count > rows
            ? " ↑↓ PgUp PgDn scroll (\(top + 1)–\(min(body.count, top + rows)) of \(body.count)) · any other key returns"
            : " Press any key to return"
        lines.append(fitted([Segment(footer, .footerLabel)], width: width, padRole: .footerLabel))
        return Frame(lines: lines, cursor: nil)
    }

    private static func tooSmall(_ size: TerminalSize, mode: DashboardModel.Mode) -> Frame {
        var message = [
            "Terminal too small: \(size.columns)×\(size.rows)",
            "jobtop needs at least \(minimumSize.columns)×\(minimumSize.rows).",
            "Enlarge the window, or press q to quit.",
        ]
        // A question asked (q with jobs active) must show, or y/n would act unseen.
        if case .confirm(let confirmation) = mode {
            switch confirmation {
            case .quit(let active): message[2] = "Quit, cancelling \(active) job\(active == 1 ? "" : "s")? y/n"
            case .cancel(let id, _): message[2] = "Cancel \(id.short)? y/n"
            case .cancelTagged(let ids): message[2] = "Cancel \(ids.count) tagged? y/n"
            case .shutdownServe: message[2] = "Shut down serve? y/n"
            }
        }
        var lines: [ScreenLine] = []
        let first = max(0, (size.rows - message.count) / 2)
        for row in 0..<max(0, size.rows) {
            let index = row - first
            if index >= 0 && index < message.count && size.columns > 0 {
                let text = message[index]
                let pad = max(0, (size.columns - TextWidth.width(text)) / 2)
                lines.append(fitted([Segment(String(repeating: " ", count: pad) + text, index == 0 ? .error : .normal)], width: size.columns))
            } else {
                lines.append(fitted([], width: max(0, size.columns)))
            }
        }
        return Frame(lines: lines, cursor: nil)
    }

    // MARK: - Fitting

    /// Segments cut (with `…`) or padded to exactly `width` cells.
    static func fitted(_ segments: [Segment], width: Int, padRole: Role = .normal) -> ScreenLine {
        guard width > 0 else { return ScreenLine() }
        let total = totalWidth(segments[...])
        if total <= width {
            var result = segments
            if total < width { result.append(Segment(String(repeating: " ", count: width - total), padRole)) }
            return ScreenLine(result)
        }
        var result: [Segment] = []
        var used = 0
        for segment in segments {
            let cells = TextWidth.width(segment.text)
            if used + cells < width {
                result.append(segment)
                used += cells
                continue
            }
            // The line is too long from here on: cut this segment and end it with an ellipsis
            // (a trailing space forces one when the segment itself would just fit).
            let room = width - used
            result.append(Segment(TextWidth.fit(segment.text + (cells <= room ? " " : ""), to: room), segment.role))
            break
        }
        return ScreenLine(result)
    }

    private static func totalWidth(_ segments: ArraySlice<Segment>) -> Int {
        segments.reduce(0) { $0 + TextWidth.width($1.text) }
    }
}
