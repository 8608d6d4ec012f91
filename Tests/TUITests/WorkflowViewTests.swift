import Scheduler
import Testing
@testable import TUI

/// Groups, dependencies and start times on the dashboard: the rows, the detail on the status
/// line, the GROUP column, the groups panel, and the keys that steer groups.
@Suite("Dashboard workflows")
@MainActor
struct WorkflowViewTests {
    /// Given `fetch-a` running in group `download` (limit 2), `train` blocked on it in `gpu`
    /// (limit 1), `report` scheduled for 600 s, `publish` skipped because `lint` failed, and a
    /// plain queued job.
    func workflowBoard() -> ModelBuilder {
        var builder = ModelBuilder()
        builder.apply(.groupChanged(JobGroup(name: "download", limit: 2)))
        builder.apply(.groupChanged(JobGroup(name: "gpu", limit: 1)))
        builder.submit(1, "curl a", name: "fetch-a", group: "download", at: 0)
        builder.start(1, at: 0)
        builder.submit(2, "python train.py", name: "train", group: "gpu", after: [1], state: .blocked, at: 1)
        builder.submit(3, "make report", name: "report", state: .scheduled(until: .seconds(600)), at: 1)
        builder.submit(4, "false", name: "lint", at: 1)
        builder.start(4, on: localTwo, at: 1)
        builder.apply(.failed(jobID(4), reason: .exitStatus(1), attempts: 1), at: 1.5)
        builder.submit(5, "make publish", name: "publish", after: [4], state: .blocked, at: 1.5)
        builder.apply(.skipped(jobID(5), reason: SkipReason(dependency: jobID(4), dependencyName: "lint", outcome: .failed)), at: 1.5)
        builder.submit(6, "echo plain", at: 1.6)
        return builder
    }

    @Test("Seven states' counts fit the header at 80 columns (the title gives way) and at 60 and 52 (shorter words): none is cut")
    func headerCountsWithEveryState() {
        var builder = workflowBoard()
        builder.model.title = "jobtop dash.toml"
        builder.submit(7, "true", name: "quick", at: 1.7)
        builder.start(7, on: localTwo, at: 1.7)
        builder.apply(.succeeded(jobID(7), attempts: 1), at: 1.8)
        let model = builder.prepared()
        let wide = screen(model, rows: 24, columns: 80).lines[0]
        for count in ["1 running", "1 queued", "1 blocked", "1 scheduled", "1 done", "1 failed", "1 skipped"] {
            #expect(wide.contains(count), "\(wide)")
        }
        for columns in [60, 52] {
            let narrow = screen(model, rows: 24, columns: columns).lines[0]
            for count in ["1 run", "1 queue", "1 block", "1 sched", "1 done", "1 fail", "1 skip"] {
                #expect(narrow.contains(count), "\(columns): \(narrow)")
            }
        }
    }

    @Test("The events pane's halt line names the failed job, as every other line does (it gave the id)")
    func haltLineNamesTheJob() {
        var builder = ModelBuilder()
        builder.submit(1, "make", name: "build", at: 0)
        builder.start(1, at: 0)
        builder.apply(.failed(jobID(1), reason: .exitStatus(2), attempts: 1), at: 1)
        builder.apply(.batchHalted(BatchID(rawValue: 1), failedJob: jobID(1)), at: 1)
        let lines = screen(builder.prepared(), rows: 24, columns: 100).lines
        #expect(lines.contains { $0.contains("build failed: halting the run") }, "\(lines.joined(separator: "\n"))")
    }

    /// Moves the selection to job `n`.
    func select(_ n: Int, in model: inout DashboardModel) {
        _ = model.handle(.home)
        while model.selectedID != jobID(n) {
            let before = model.selectedIndex
            _ = model.handle(.down)
            precondition(model.selectedIndex != before, "job \(n) not in the table")
        }
    }

    /// The table row of the job whose name is `name`.
    func row(_ name: String, in lines: [String]) -> String? {
        lines.first { $0.hasPrefix(" 0000000") && $0.contains(name) }
    }

    @Test("STATE says blocked, scheduled (TIME counts down) and skipped")
    func states() throws {
        let lines = screen(workflowBoard().model, now: 2).lines
        #expect(try #require(row("train", in: lines)).contains("blocked"))
        let report = try #require(row("report", in: lines))
        #expect(report.contains("scheduled"))
        #expect(report.contains("in 9m58s"))
        #expect(try #require(row("publish", in: lines)).contains("skipped"))
        // The header counts the workflow states that have jobs.
        #expect(lines[0].contains("1 blocked"))
        #expect(lines[0].contains("1 scheduled"))
        #expect(lines[0].contains("1 skipped"))
        #expect(DashboardView.stateRole(.blocked) == .blocked)
        #expect(DashboardView.stateRole(.scheduled(until: .zero)) == .waiting)
        #expect(DashboardView.stateRole(.skipped(SkipReason(dependency: jobID(4), dependencyName: "lint", outcome: .failed))) == .skipped)
    }

    @Test("The selected blocked job's detail names its dependencies and their states")
    func blockedDetail() {
        var model = workflowBoard().prepared(rows: 10)
        select(2, in: &model)
        let status = screen(model, now: 2).lines[22]
        #expect(status.contains("00000002 blocked: waits for fetch-a (running)"))
    }

    @Test("A dependency that succeeded drops out of the detail and is counted as done")
    func blockedDetailCountsDone() {
        var builder = ModelBuilder()
        builder.submit(1, "a", name: "a")
        builder.submit(2, "b", name: "b")
        builder.start(1)
        builder.apply(.succeeded(jobID(1), attempts: 1), at: 1)
        builder.submit(3, "c", after: [1, 2], state: .blocked, at: 1)
        let job = builder.model.board.jobs[jobID(3)]!
        let text = DashboardView.detail(of: job, board: builder.model.board, now: .seconds(2)).map(\.text).joined()
        #expect(text == " 00000003 blocked: waits for b (queued) · 1 of 2 done")
    }

    @Test("The selected scheduled job says when it starts; a skipped one why it will not run")
    func scheduledAndSkippedDetail() {
        var model = workflowBoard().prepared(rows: 10)
        select(3, in: &model)
        #expect(screen(model, now: 2).lines[22].contains("00000003 scheduled: starts in 9m58s"))
        select(5, in: &model)
        let status = screen(model, now: 2).lines[22]
        #expect(status.contains("00000005 skipped: dependency 'lint' failed"))
    }

    @Test("A queued job held by its paused group, by its group's limit, or by the pause of everything, says so")
    func heldByGroupDetail() {
        var builder = ModelBuilder()
        builder.apply(.groupChanged(JobGroup(name: "gpu", limit: 1)))
        builder.submit(1, "train one", group: "gpu")
        builder.start(1)
        builder.submit(2, "train two", group: "gpu", at: 1)
        var job = builder.model.board.jobs[jobID(2)]!
        var text = DashboardView.detail(of: job, board: builder.model.board, now: .seconds(2)).map(\.text).joined()
        #expect(text.contains("queued: group gpu runs 1 of 1 at once"))
        builder.apply(.groupChanged(JobGroup(name: "gpu", limit: 1, isPaused: true)), at: 2)
        job = builder.model.board.jobs[jobID(2)]!
        text = DashboardView.detail(of: job, board: builder.model.board, now: .seconds(2)).map(\.text).joined()
        #expect(text.contains("queued: group gpu is paused"))
        // Everything paused (p): that is what it waits for (the line was empty).
        builder.apply(.paused, at: 3)
        text = DashboardView.detail(of: job, board: builder.model.board, now: .seconds(3)).map(\.text).joined()
        #expect(text.contains("queued: all starts are paused (p resumes)"), "\(text)")
    }

    @Test("A message on the status line wins over the detail")
    func messageWins() {
        var model = workflowBoard().prepared(rows: 10)
        select(2, in: &model)
        _ = model.handle(.char("c"))  // Cancel? …
        _ = model.handle(.escape)  // …no.
        _ = model.handle(.char("r"))  // refused: a blocked job cannot be retried
        let status = screen(model, now: 2).lines[22]
        #expect(status.contains("only failed, cancelled or skipped jobs can be retried"))
        #expect(!status.contains("waits for"))
    }

    @Test("No GROUP column and no groups panel while only the default group is used")
    func noGroupsNoColumn() {
        var builder = ModelBuilder()
        builder.submit(1, "echo a")
        builder.submit(2, "echo b", after: [1], state: .blocked)
        #expect(!builder.model.board.hasGroups)
        let lines = screen(builder.model).lines
        #expect(!lines[2].contains("GROUP"))
        #expect(!lines.contains { $0.contains("Groups") })
        #expect(lines[2].contains("WORKER"))
    }

    @Test("With groups, a GROUP column fits 80×24 (WORKER gives way) and 100×30; every row fits narrower screens exactly", arguments: [(24, 80), (30, 100), (12, 50), (24, 60)])
    func groupColumnFits(rows: Int, columns: Int) throws {
        let builder = workflowBoard()
        let terminal = screen(builder.model, rows: rows, columns: columns, now: 2)
        #expect(terminal.overflows.isEmpty)
        for line in DashboardView.render(builder.prepared(), size: .init(rows: rows, columns: columns), now: .seconds(2)).lines {
            #expect(TextWidth.width(line.text) == columns)
        }
        let header = terminal.lines[2]
        // Narrow screens give up GROUP after WORKER, TRY and PRI (the groups panel stays).
        guard columns >= 80 else {
            #expect(!header.contains("GROUP"))
            return
        }
        #expect(header.contains("GROUP"))
        let train = try #require(row("train", in: terminal.lines))
        #expect(train.contains("gpu"))
        // GROUP sits right after the name: the same column in the header and the rows.
        let headerColumn = try #require(terminal.column(of: "GROUP", row: 2))
        let trainRow = try #require(terminal.lines.firstIndex(of: train))
        #expect(terminal.column(of: "gpu", row: trainRow) == headerColumn)
        if columns == 80 {
            #expect(!header.contains("WORKER"))
            #expect(header.contains("NAME / COMMAND") && header.contains("TIME"))
        }
    }

    @Test("The groups panel shows running/limit, queued, held and PAUSED per group, beside the workers")
    func groupsPanel() throws {
        var builder = workflowBoard()
        builder.submit(7, "curl b", name: "fetch-b", group: "download", at: 2)
        builder.submit(8, "curl c", name: "fetch-c", group: "download", at: 2)
        builder.start(7, on: localTwo, at: 2)
        builder.apply(.groupChanged(JobGroup(name: "gpu", limit: 1, isPaused: true)), at: 3)
        let terminal = screen(builder.model, rows: 24, columns: 80, now: 3)
        let lines = terminal.lines
        let title = try #require(lines.firstIndex { $0.contains("Workers") })
        #expect(lines[title].contains("Groups") && lines[title].contains("RUN") && lines[title].contains("QUEUE"))
        #expect(lines[title].contains("HELD") && lines[title].contains("Events"))
        // download: 2 running of 2, 1 queued; gpu: paused, none running of 1, 1 held (train);
        // default: report (scheduled) and publish's neighbours: 1 queued, 1 held.
        #expect(lines.contains { $0.contains("download") && $0.contains("2/2     1    0") })
        let gpu = try #require(lines.first { $0.contains("gpu PAUSED") })
        #expect(gpu.contains("0/1     0    1"))
        #expect(lines.contains { $0.contains(" default ") && $0.contains("0/∞     1    1") })
        // Beside the workers: the same rows hold the worker lines.
        #expect(lines[title + 1].contains("local-1"))
        #expect(terminal.overflows.isEmpty)
    }

    @Test("More groups than the panel has rows: those that fit, then how many more")
    func manyGroups() {
        var builder = ModelBuilder()
        for n in 1...10 { builder.submit(n, "job \(n)", group: "g\(n < 10 ? "0" : "")\(n)") }
        let terminal = screen(builder.model, rows: 24, columns: 80)
        // Four panel rows at 80×24: three groups (g01, g02, g03), then the rest counted.
        #expect(terminal.lines.contains { $0.contains(">g01") })
        // (The panel's rows are the ones with running/limit; the table names the groups too.)
        #expect(terminal.lines.contains { $0.contains(" g03 ") && $0.contains("0/∞") })
        #expect(!terminal.lines.contains { $0.contains(" g04 ") && $0.contains("0/∞") })
        #expect(terminal.lines.contains { $0.contains("… 7 more") })
        #expect(terminal.overflows.isEmpty)
        // The selected job's group (g09, below the fold) comes into the panel with its `>`.
        var model = builder.prepared()
        select(9, in: &model)
        let moved = screen(model, rows: 24, columns: 80)
        #expect(moved.lines.contains { $0.contains(">g09") && $0.contains("0/∞") }, "\(moved.lines.joined(separator: "\n"))")
        #expect(moved.lines.contains { $0.contains("… 7 more") })
    }

    @Test("> marks the selected job's group in the panel: the one P and L act on")
    func panelMarksSelectedGroup() throws {
        var model = workflowBoard().prepared(rows: 10)
        select(2, in: &model)
        let lines = screen(model, now: 2).lines
        #expect(lines.contains { $0.contains(">gpu ") })
        #expect(!lines.contains { $0.contains(">download") })
    }

    @Test("An empty, plain default group stays out of the panel unless the selected job is in it")
    func defaultGroupHidden() {
        var builder = ModelBuilder()
        builder.apply(.groupChanged(JobGroup(name: "gpu", limit: 1)))
        builder.submit(1, "train", group: "gpu")
        let lines = screen(builder.model).lines
        #expect(lines.contains { $0.contains(">gpu") })
        #expect(!lines.contains { $0.contains(" default ") })
    }

    @Test("P pauses the selected job's group, and resumes it once paused")
    func groupPauseKey() {
        var model = workflowBoard().prepared(rows: 10)
        select(2, in: &model)
        #expect(model.handle(.char("P")) == [.pauseGroup("gpu")])
        model.apply(SchedulerEvent(seq: 100, time: .seconds(3), kind: .groupChanged(JobGroup(name: "gpu", limit: 1, isPaused: true))))
        #expect(model.handle(.char("P")) == [.resumeGroup("gpu")])
        #expect(model.board.log.last?.text == "group gpu: paused")
    }

    @Test("P and L with no job selected say so")
    func groupKeysNeedASelection() {
        var model = ModelBuilder().prepared()
        #expect(model.handle(.char("P")).isEmpty)
        #expect(model.message?.text == "no job selected")
        #expect(model.handle(.char("L")).isEmpty)
        #expect(model.message?.text == "no job selected")
        #expect(model.mode == .table)
    }

    @Test("L opens a prompt with the group's limit; a number sets it, empty or - removes it")
    func groupLimitPrompt() {
        var model = workflowBoard().prepared(rows: 10)
        select(2, in: &model)
        _ = model.handle(.char("L"))
        guard case .prompt(let prompt) = model.mode, case .groupLimit("gpu") = prompt.kind else {
            Issue.record("no limit prompt: \(model.mode)")
            return
        }
        #expect(prompt.command.text == "1")
        let lines = screen(model, now: 2).lines
        #expect(lines[22].contains("Limit of group gpu: 1"))
        _ = model.handle(.backspace)
        _ = model.handle(.char("3"))
        #expect(model.handle(.enter) == [.setGroupLimit("gpu", 3)])
        for text in ["", "-", " - "] {
            _ = model.handle(.char("L"))
            _ = model.handle(.control("u"))
            for character in text { _ = model.handle(.char(character)) }
            #expect(model.handle(.enter) == [.setGroupLimit("gpu", nil)], "'\(text)'")
        }
    }

    @Test("L refuses a limit below 1 or not a number, as it is typed and on Enter; the prompt stays", arguments: ["0", "-2", "99999999999999999999"])
    func groupLimitOutOfRange(text: String) {
        var model = workflowBoard().prepared(rows: 10)
        select(2, in: &model)
        _ = model.handle(.char("L"))
        _ = model.handle(.control("u"))
        for character in text { _ = model.handle(.char(character)) }
        // Too large for a whole number is not "below 1".
        let problem = text.count > 12 ? "limit '99999999999…' is too large (empty or - for no limit)" : "limit out of range: at least 1 (empty or - for no limit)"
        #expect(model.message?.text == problem)
        #expect(model.handle(.enter).isEmpty)
        #expect(model.message?.text == "limit not changed: \(problem)")
        guard case .prompt(let prompt) = model.mode, case .groupLimit = prompt.kind else {
            Issue.record("the prompt closed")
            return
        }
        // A letter is refused where it is typed.
        _ = model.handle(.char("x"))
        #expect(model.message?.text.contains("not a whole number of at least 1") == true)
        #expect(model.handle(.escape).isEmpty)
        #expect(model.mode == .table)
    }

    @Test("n takes @group and after:names before the command")
    func newJobWithGroupAndAfter() {
        var model = workflowBoard().prepared(rows: 10)
        _ = model.handle(.char("n"))
        for character in "@gpu after:fetch-a,00000006 python eval.py --fast" { _ = model.handle(.char(character)) }
        #expect(model.handle(.enter) == [
            .submit(command: "python eval.py --fast", priority: 0, group: "gpu", after: [jobID(1), jobID(6)]),
        ])
    }

    @Test("n's words parse in any order; names are names, ids, or the command of a nameless job")
    func newJobParsing() throws {
        var builder = workflowBoard()
        builder.submit(9, "make", at: 2)
        let board = builder.model.board
        func parse(_ text: String) -> Result<NewJobEntry, NewJobEntry.Problem> { NewJobEntry.parse(text, board: board) }
        #expect(try parse("after:train @x  echo hi  ").get() == NewJobEntry(command: "echo hi", group: "x", after: [jobID(2)]))
        #expect(try parse("after:00000006,train,train true").get().after == [jobID(6), jobID(2)])
        #expect(try parse("AFTER:00000001 true").get().after == [jobID(1)])
        #expect(try parse("after:make x").get().after == [jobID(9)])
        #expect(try parse("after:\(jobID(3).description) x").get().after == [jobID(3)])
        #expect(try parse("echo @not-a-group after:nothing").get() == NewJobEntry(command: "echo @not-a-group after:nothing", group: nil))
        #expect(try parse("@gpu @gpu x").get().group == "gpu")
    }

    @Test("n's after: reads a name several jobs share as submit --after does: the one of them that has not ended (it refused the name as ambiguous)")
    func newJobAfterASharedName() throws {
        var builder = workflowBoard()
        builder.submit(10, "exit 1", name: "bld", at: 2)
        builder.start(10, at: 2)
        builder.apply(.failed(jobID(10), reason: .exitStatus(1), attempts: 1), at: 3)
        builder.submit(11, "make", name: "bld", at: 4)
        let board = builder.model.board
        #expect(try NewJobEntry.parse("after:bld echo", board: board).get().after == [jobID(11)])
        // Two that have not ended are still ambiguous.
        builder.submit(12, "make again", name: "bld", at: 5)
        #expect(throws: NewJobEntry.Problem.self) { try NewJobEntry.parse("after:bld echo", board: builder.model.board).get() }
    }

    @Test("n refuses an unknown or ambiguous name, a bare @ or after:, and two groups; the prompt stays", arguments: [
        ("after:nope echo", "after:nope: no job has that name or id"),
        ("after:twin echo", "after:twin: 2 jobs go by that name; give the id of the one you mean"),
        ("@ echo", "'@' needs a group name, e.g. @gpu before the command"),
        ("after: echo", "'after:' needs job names, e.g. after:build,lint before the command"),
        ("@a @b echo", "two groups, @a and @b: a job runs in one"),
    ])
    func newJobRefused(text: String, problem: String) {
        var builder = workflowBoard()
        builder.submit(10, "one", name: "twin", at: 2)
        builder.submit(11, "two", name: "twin", at: 2)
        var model = builder.prepared(rows: 10)
        _ = model.handle(.char("n"))
        for character in text { _ = model.handle(.char(character)) }
        #expect(model.handle(.enter).isEmpty)
        #expect(model.message?.text == "not submitted: \(problem)")
        guard case .prompt(let prompt) = model.mode else {
            Issue.record("the prompt closed")
            return
        }
        #expect(prompt.command.text == text)
        // The reason shows under the prompt.
        #expect(screen(model, now: 2).lines[23].contains("not submitted: "))
    }

    @Test("n's hint under the prompt names @group and after:")
    func newJobHint() {
        var model = ModelBuilder().prepared()
        _ = model.handle(.char("n"))
        let lines = screen(model).lines
        #expect(lines[23].contains("@group after:name,name"))
    }

    @Test("r retries a skipped job too")
    func retrySkipped() {
        var model = workflowBoard().prepared(rows: 10)
        select(5, in: &model)
        #expect(model.handle(.char("r")) == [.retry([jobID(5)])])
    }

    @Test("Blocked and scheduled jobs are active: q asks first")
    func heldJobsAreActive() {
        var builder = ModelBuilder()
        builder.submit(1, "later", state: .scheduled(until: .seconds(60)))
        builder.submit(2, "after", after: [1], state: .blocked)
        #expect(builder.model.board.activeCount == 2)
        var model = builder.prepared()
        #expect(model.handle(.char("q")).isEmpty)
        #expect(model.mode == .confirm(.quit(active: 2)))
    }

    @Test("The event pane names dependencies and says what changed in a group")
    func eventLines() {
        var builder = ModelBuilder()
        builder.submit(1, "curl a", name: "fetch-a")
        builder.submit(2, "train", after: [1], state: .blocked)
        builder.submit(3, "report", state: .scheduled(until: .seconds(600)))
        #expect(builder.model.board.log.suffix(2).map(\.text) == [
            "submitted: train (waits for fetch-a)", "submitted: report (starts in 10m)",
        ])
        builder.apply(.blocked(jobID(2), waitingFor: [jobID(1)]))
        builder.apply(.groupChanged(JobGroup(name: "gpu", limit: 2)))
        builder.apply(.groupChanged(JobGroup(name: "gpu", limit: 1)))
        builder.apply(.groupChanged(JobGroup(name: "gpu", limit: nil, isPaused: true)))
        builder.apply(.released(jobID(2)))
        builder.apply(.scheduled(jobID(1), at: .seconds(90)))
        let texts = builder.model.board.log.suffix(6).map(\.text)
        #expect(texts == [
            "train blocked: waits for fetch-a",
            "group gpu made (limit 2)",
            "group gpu: limit 2 → 1",
            "group gpu: paused, limit 1 → none",
            "train released: may start",
            "fetch-a scheduled: starts in 1m30s",
        ])
    }

    @Test("A filter matches a group's name")
    func filterByGroup() {
        let jobs = workflowBoard().model.board.jobs.values
        #expect(Set(DashboardModel.ordered(jobs, sort: .state, filter: "gpu")) == [jobID(2)])
        #expect(Set(DashboardModel.ordered(jobs, sort: .state, filter: "download")) == [jobID(1)])
    }

    @Test("Help lists every key, P and L included, within 80×24")
    func helpFits() {
        var model = ModelBuilder().prepared()
        _ = model.handle(.char("?"))
        let lines = screen(model).lines
        for binding in KeyBindings.table {
            #expect(lines.contains { $0.contains(binding.label) }, "\(binding.label) missing")
        }
        #expect(lines.contains { $0.contains("pause / resume the selected job's group") })
        // The help's last lines are below 24 rows now: it scrolls there.
        let whole = screen(model, rows: 60).lines
        #expect(whole.contains { $0.contains("@GROUP and after:NAME,NAME") })
        #expect(whole.contains { $0.contains("Enter submits, Esc aborts.") })
    }
}
