import Foundation
import JobtopTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The dashboard of the built binary in a real terminal: tmux runs a shell, the test types
/// into it with `send-keys` and reads the screen with `capture-pane`.
@Suite(
    "Dashboard in a real terminal (tmux)", .serialized, .timeLimit(.minutes(3)),
    .enabled(if: TmuxSession.isAvailable, "tmux is not installed"))
struct DashboardTmuxTests {
    struct Shape: CustomTestStringConvertible, Sendable {
        var columns: Int
        var rows: Int
        var testDescription: String { "\(columns)×\(rows)" }
    }

    static let shapes = [Shape(columns: 100, rows: 30), Shape(columns: 80, rows: 24)]

    @Test("The table shows the jobs, and q (confirmed) gives the shell back clean", arguments: shapes)
    func tableAndQuit(shape: Shape) async throws {
        let tmux = try TmuxSession(shape: shape)
        defer { tmux.close() }
        try await tmux.run("\(TmuxSession.binary) -j 1 -c 'sleep 300' -c 'echo 日本語 🚀' -c 'echo second'; echo \"exit=$?\"")
        let screen = try await tmux.waitForDashboard("one running and two queued jobs") { screen in
            screen.contains { $0.contains("sleep 300") && $0.contains("running") }
                && screen.contains { $0.contains("echo 日本語 🚀") && $0.contains("queued") }
                && screen.contains { $0.contains("echo second") && $0.contains("queued") }
        }
        #expect(screen[0].contains("1 running · 2 queued"))
        #expect(screen.last!.contains("Quit"))
        #expect(screen.count == shape.rows)

        try await tmux.quitCancellingJobs()
        let after = try await tmux.waitFor("the shell prompt after the summary") { screen in
            screen.contains { $0.hasPrefix("exit=") } && screen.last { !$0.isEmpty } == TmuxSession.prompt.trimmingCharacters(in: .whitespaces)
        }
        #expect(after.contains { $0.contains("exit=1") })
        #expect(after.contains { $0.contains("jobtop: 3 jobs") && $0.contains("3 cancelled") })
        // Nothing of the dashboard is left: only the command, the summary and the prompts.
        let leftovers = after.filter {
            !$0.isEmpty && !$0.hasPrefix(TmuxSession.prompt.trimmingCharacters(in: .whitespaces)) && !$0.hasPrefix("exit=")
                && !$0.hasPrefix("jobtop: ") && $0 != "sh run.sh"
        }
        #expect(leftovers.isEmpty, "left on screen: \(leftovers)")
        #expect(!after.joined().contains("\u{1B}"))
        #expect(!after.contains { $0.contains("[?") || $0.contains("running") })
    }

    /// The dashboard starts before its first job does, idle: its ticker then sleeps for the
    /// idle minute. It used to sleep on once the job started, so a job that printed nothing
    /// showed "0s" (and the header "up 0s") until some event redrew the screen.
    @Test("A silent job's elapsed time moves from its first seconds, with no event to redraw it")
    func elapsedTimeTicks() async throws {
        let tmux = try TmuxSession(shape: Self.shapes[0])
        defer { tmux.close() }
        try await tmux.run("\(TmuxSession.binary) -j 1 -c 'sleep 300'")
        try await tmux.waitForDashboard("the job running") { $0.contains { $0.contains("sleep 300") && $0.contains("running") } }
        // Within seconds (the idle minute is the bug), its TIME shows 2 s or more.
        try await tmux.waitFor("the running job's time at 2s or more") { screen in
            screen.contains { row in
                guard row.contains("sleep 300"), let last = row.split(separator: " ").last, last.hasSuffix("s"),
                      let seconds = Int(last.dropLast()) else { return false }
                return seconds >= 2
            }
        }
        try await tmux.quitCancellingJobs()
        try await tmux.waitFor("the shell prompt") { $0.last { !$0.isEmpty } == TmuxSession.prompt.trimmingCharacters(in: .whitespaces) }
    }

    @Test("n, a command and Enter add a job that runs", arguments: shapes)
    func enqueue(shape: Shape) async throws {
        let tmux = try TmuxSession(shape: shape)
        defer { tmux.close() }
        let marker = tmux.file("made-by-n")
        try await tmux.run("\(TmuxSession.binary) -j 2")
        try await tmux.waitForDashboard("the empty dashboard") { $0.contains { $0.contains("No jobs yet. Press n") } }
        tmux.keys("n")
        try await tmux.waitFor("the prompt") { $0.contains { $0.contains("New job:") } }
        tmux.literal("echo typed > \(marker)")
        tmux.keys("Enter")
        let screen = try await tmux.waitFor("the typed job, done") { screen in
            screen.contains { $0.contains("echo typed >") && $0.contains("succeeded") }
        }
        #expect(screen[0].contains("1 done"))
        #expect(try String(contentsOfFile: marker, encoding: .utf8) == "typed\n")
        tmux.keys("q")
        try await tmux.waitFor("the shell prompt") { $0.contains { $0.contains("jobtop: 1 job") } }
    }

    @Test("+ on a queued job moves it up at once", arguments: shapes)
    func raisePriority(shape: Shape) async throws {
        let tmux = try TmuxSession(shape: shape)
        defer { tmux.close() }
        try await tmux.run("\(TmuxSession.binary) -j 1 -c 'sleep 300' -c 'echo first-queued' -c 'echo last-queued'")
        let before = try await tmux.waitForDashboard("three jobs") { $0.contains { $0.contains("last-queued") } }
        #expect(try row(of: "first-queued", in: before) < row(of: "last-queued", in: before))
        // End selects the last row: the job queued last.
        tmux.keys("End")
        tmux.keys("+")
        let after = try await tmux.waitForDashboard("last-queued above first-queued") { screen in
            guard let first = screen.firstIndex(where: { $0.contains("first-queued") }),
                let last = screen.firstIndex(where: { $0.contains("last-queued") })
            else { return false }
            return last < first
        }
        #expect(after[try row(of: "last-queued", in: after)].contains(" 1 "))
        #expect(after.contains { $0.contains("priority 0 → 1") })
        try await tmux.quitCancellingJobs()
        try await tmux.waitFor("the shell prompt") { $0.contains { $0.contains("jobtop: 3 jobs") } }
    }

    @Test("c then y cancels a running sleep and its process is gone", arguments: shapes)
    func cancel(shape: Shape) async throws {
        let tmux = try TmuxSession(shape: shape)
        defer { tmux.close() }
        let pidFile = tmux.file("pid")
        // The shell writes its pid, then becomes the sleep (same pid).
        try "echo $$ > \(pidFile); exec sleep 300\n".write(toFile: tmux.file("job.sh"), atomically: true, encoding: .utf8)
        try await tmux.run("\(TmuxSession.binary) -j 1 -c 'sh job.sh'")
        try await tmux.waitForDashboard("the running job") { $0.contains { $0.contains("sh job.sh") && $0.contains("running") } }
        let pid = try await tmux.waitForValue("the job's pid") {
            (try? String(contentsOfFile: pidFile, encoding: .utf8)).flatMap { pid_t($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        }
        #expect(kill(pid, 0) == 0)
        tmux.keys("c")
        try await tmux.waitFor("the cancel question") { $0.contains { $0.contains("Cancel job") && $0.contains("y = cancel it") } }
        #expect(kill(pid, 0) == 0, "asking must not cancel")
        tmux.keys("y")
        try await tmux.waitFor("the job cancelled") { $0.contains { $0.contains("sh job.sh") && $0.contains("cancelled") } }
        _ = try await tmux.waitForValue("the process gone (ESRCH)") { () -> Bool? in
            kill(pid, 0) == -1 && errno == ESRCH ? true : nil
        }
        tmux.keys("q")
        try await tmux.waitFor("the shell prompt") { $0.contains { $0.contains("jobtop: 1 job") } }
    }

    @Test("p shows PAUSED and nothing new starts until p again", arguments: shapes)
    func pause(shape: Shape) async throws {
        let tmux = try TmuxSession(shape: shape)
        defer { tmux.close() }
        let marker = tmux.file("started")
        try await tmux.run("\(TmuxSession.binary) -j 2")
        try await tmux.waitForDashboard("the empty dashboard") { $0.contains { $0.contains("No jobs yet") } }
        tmux.keys("p")
        try await tmux.waitFor("the PAUSED badge") { $0.count > 1 && $0[1].contains("PAUSED") }
        tmux.keys("n")
        tmux.literal("touch \(marker)")
        tmux.keys("Enter")
        // The scheduler starts a job in the same step that queues it when a slot is free, so
        // a screen that shows it submitted and still queued shows that dispatch is paused.
        let screen = try await tmux.waitFor("the job submitted and queued") { screen in
            screen.contains { $0.contains("touch ") && $0.contains("queued") } && screen.contains { $0.contains("submitted:") }
        }
        #expect(screen[0].contains("0 running · 1 queued"))
        #expect(!FileManager.default.fileExists(atPath: marker))
        tmux.keys("p")
        try await tmux.waitFor("the job done after resuming") { $0.contains { $0.contains("touch ") && $0.contains("succeeded") } }
        #expect(FileManager.default.fileExists(atPath: marker))
        tmux.keys("q")
        try await tmux.waitFor("the shell prompt") { $0.contains { $0.contains("jobtop: 1 job") } }
    }

    @Test("A resize relayouts at once; too small shows a message; back to size shows the table", arguments: shapes)
    func resize(shape: Shape) async throws {
        let tmux = try TmuxSession(shape: shape)
        defer { tmux.close() }
        try await tmux.run("\(TmuxSession.binary) -j 1 -c 'sleep 300' -c 'echo a queued job with a rather long command line to cut'")
        try await tmux.waitForDashboard("the table") { $0.contains { $0.contains("sleep 300") && $0.contains("running") } }

        tmux.resize(columns: 60, rows: 20)
        let small = try await tmux.waitFor("the table at 60×20") { screen in
            screen.count == 20 && screen.last!.contains("Quit") && screen.contains { $0.contains("sleep 300") }
        }
        #expect(small.allSatisfy { TmuxSession.cells($0) <= 60 })
        #expect(small.contains { $0.contains("…") })

        tmux.resize(columns: 40, rows: 10)
        try await tmux.waitFor("the too-small message") { $0.contains { $0.contains("Terminal too small: 40×10") } }

        tmux.resize(columns: shape.columns, rows: shape.rows)
        let back = try await tmux.waitFor("the table again") { screen in
            screen.count == shape.rows && screen.last!.contains("Quit") && screen.contains { $0.contains("sleep 300") }
        }
        #expect(!back.contains { $0.contains("too small") })
        try await tmux.quitCancellingJobs()
        try await tmux.waitFor("the shell prompt") { $0.contains { $0.contains("jobtop: 2 jobs") } }
    }

    @Test("SIGTERM restores the terminal and exits 143; Ctrl-C twice exits 130", arguments: shapes)
    func signals(shape: Shape) async throws {
        let tmux = try TmuxSession(shape: shape)
        defer { tmux.close() }
        try await tmux.run("\(TmuxSession.binary) -j 1 -c 'sleep 300'; echo \"exit=$?\"")
        try await tmux.waitForDashboard("the running sleep") { $0.contains { $0.contains("sleep 300") && $0.contains("running") } }
        let pid = try #require(tmux.process(named: "jobtop"))
        kill(pid, SIGTERM)
        let afterTerm = try await tmux.waitFor("exit=143 and the prompt") { screen in
            screen.contains { $0 == "exit=143" } && screen.last { !$0.isEmpty }?.hasPrefix("READY$") == true
        }
        #expect(!afterTerm.contains { $0.contains("running") || $0.contains("Quit") })

        try await tmux.run("clear; \(TmuxSession.binary) -j 1 -c 'sleep 300'; echo \"exit=$?\"")
        try await tmux.waitForDashboard("the running sleep") { $0.contains { $0.contains("sleep 300") && $0.contains("running") } }
        tmux.keys("C-c")
        try await tmux.waitFor("the quit question") { $0.contains { $0.contains("and quit? y = quit") } }
        tmux.keys("C-c")
        let afterInterrupt = try await tmux.waitFor("exit=130 and the prompt") { screen in
            screen.contains { $0 == "exit=130" } && screen.last { !$0.isEmpty }?.hasPrefix("READY$") == true
        }
        #expect(!afterInterrupt.contains { $0.contains("running") || $0.contains("Quit") })
    }

    @Test("Workflows: n with @group and after:, the GROUP column, the groups panel, P and L", arguments: shapes)
    func workflow(shape: Shape) async throws {
        // Given a job file whose job 'fetch' runs until the test creates a file
        let tmux = try TmuxSession(shape: shape)
        defer { tmux.close() }
        let go = tmux.file("go")
        let deployed = tmux.file("deployed")
        try """
            [[job]]
            name = "fetch"
            command = "while [ ! -e '\(go)' ]; do sleep 0.05; done"
            """.write(toFile: tmux.file("jobs.toml"), atomically: true, encoding: .utf8)
        try await tmux.run("\(TmuxSession.binary) -j 2 jobs.toml; echo \"exit=$?\"")
        // (The title names the job file: `jobtop: jobs.toml`.)
        try await tmux.waitFor("fetch running") { screen in
            screen.first?.hasPrefix(" jobtop: jobs.toml") == true && screen.contains { $0.contains("fetch") && $0.contains("running") }
        }
        // When n, then a job in group deploy after fetch
        tmux.keys("n")
        try await tmux.waitFor("the prompt") { $0.contains { $0.contains("New job:") } }
        tmux.literal("@deploy after:fetch touch deployed")
        tmux.keys("Enter")
        // Then it is blocked in group deploy: a GROUP column, and the groups panel lists deploy
        // with one held job
        let blocked = try await tmux.waitFor("the deploy job blocked") { screen in
            screen.contains { $0.contains("touch deployed") && $0.contains("deploy ") && $0.contains("blocked") }
                && screen.contains { $0.contains("deploy") && $0.contains("0/∞     0    1") }
        }
        #expect(blocked[2].contains("GROUP"))
        #expect(blocked[0].contains("1 blocked"))
        // Selected (End: the last row), the line under the table says what it waits for
        tmux.keys("End")
        try await tmux.waitFor("the detail") { $0.contains { $0.contains("blocked: waits for fetch (running)") } }
        // When P pauses its group and fetch then succeeds, the job is released but stays queued
        tmux.keys("P")
        try await tmux.waitFor("deploy paused") { $0.contains { $0.contains(">deploy PAUSED") } }
        #expect(FileManager.default.createFile(atPath: go, contents: nil))
        try await tmux.waitFor("the job queued, held by its paused group") { screen in
            screen.contains { $0.contains("fetch") && $0.contains("succeeded") }
                && screen.contains { $0.contains("touch deployed") && $0.contains("queued") }
        }
        // Selected (the first row now; P's note on the status line goes with the key), it says why
        tmux.keys("Home")
        try await tmux.waitFor("why it waits") { $0.contains { $0.contains("queued: group deploy is paused") } }
        #expect(!FileManager.default.fileExists(atPath: deployed))
        // When L sets the group's limit to 1
        tmux.keys("L")
        try await tmux.waitFor("the limit prompt") { $0.contains { $0.contains("Limit of group deploy:") } }
        tmux.literal("1")
        tmux.keys("Enter")
        try await tmux.waitFor("the limit in the panel") { $0.contains { $0.contains(">deploy PAUSED") && $0.contains("0/1") } }
        // and P resumes it: the job runs and succeeds
        tmux.keys("P")
        try await tmux.waitFor("the deploy job done") { screen in
            screen.contains { $0.contains("touch deployed") && $0.contains("succeeded") } && !screen.contains { $0.contains("PAUSED") }
        }
        #expect(FileManager.default.fileExists(atPath: deployed))
        tmux.keys("q")
        let after = try await tmux.waitFor("the summary and the prompt") { screen in
            screen.contains { $0.hasPrefix("exit=") } && screen.last { !$0.isEmpty }?.hasPrefix("READY$") == true
        }
        #expect(after.contains { $0 == "exit=0" })
        #expect(after.contains { $0.contains("jobtop: 2 jobs") })
    }

    /// How the crash is caused: a Swift trap inside (the `!` key under JOBTOP_TEST_CRASH=1), a
    /// stack overflow (`@`), or a fatal signal sent from outside.
    enum Crash: String, CustomTestStringConvertible, Sendable, CaseIterable {
        case trap, stackOverflow, segfaultSignal
        var testDescription: String { rawValue }
    }

    @Test("A crash kills the job's processes and gives the terminal back in cooked mode", arguments: Crash.allCases)
    func crash(crash: Crash) async throws {
        // Given a dashboard with a running job whose pid is known
        let tmux = try TmuxSession(shape: Self.shapes[1])
        defer { tmux.close() }
        let pidFile = tmux.file("pid")
        try "echo $$ > \(pidFile); exec sleep 300\n".write(toFile: tmux.file("job.sh"), atomically: true, encoding: .utf8)
        try await tmux.run("ulimit -c 0; JOBTOP_TEST_CRASH=1 \(TmuxSession.binary) -j 1 -c 'sh job.sh' -c 'echo queued'; echo \"exit=$?\"")
        try await tmux.waitForDashboard("the running job") { $0.contains { $0.contains("sh job.sh") && $0.contains("running") } }
        let pid = try await tmux.waitForValue("the job's pid") {
            (try? String(contentsOfFile: pidFile, encoding: .utf8)).flatMap { pid_t($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        }
        #expect(kill(pid, 0) == 0)

        // When jobtop crashes
        switch crash {
        case .trap:
            tmux.keys("!")
        case .stackOverflow:
            tmux.keys("@")
        case .segfaultSignal:
            let jobtop = try #require(tmux.process(named: "jobtop"))
            kill(jobtop, SIGSEGV)
        }

        // Then it dies of the signal, says so in one line, the job's process is gone…
        // A Swift trap is SIGILL on x86_64, SIGTRAP on arm64.
        let statuses = crash == .trap ? ["exit=132", "exit=133"] : ["exit=139"]
        let after = try await tmux.waitFor("the exit status and the prompt") { screen in
            screen.contains { statuses.contains($0) } && screen.last { !$0.isEmpty }?.hasPrefix("READY$") == true
        }
        let signal = crash == .trap ? "(SIGILL)" : "(SIGSEGV)"
        #expect(after.contains {
            $0.contains("jobtop: crashed \(crash == .trap ? "" : signal)") && $0.contains("job processes killed, terminal restored")
        }, "screen: \(after)")
        if crash == .trap {
            // The runtime's message, written while the dashboard drew, is shown on the restored screen.
            #expect(after.contains { $0.contains("Fatal error: JOBTOP_TEST_CRASH") }, "screen: \(after)")
        }
        _ = try await tmux.waitForValue("the job's process gone (ESRCH)") { () -> Bool? in
            kill(pid, 0) == -1 && errno == ESRCH ? true : nil
        }
        // …and the shell has its normal screen (nothing of the dashboard) in cooked mode.
        #expect(!after.contains { $0.contains("Quit") || $0.contains("running ·") }, "screen: \(after)")
        let modes = tmux.file("stty.txt")
        try await tmux.run("stty -a > \(modes)")
        let settings = try await tmux.waitForValue("stty's output") { () -> [String]? in
            guard let text = try? String(contentsOfFile: modes, encoding: .utf8), text.contains("icanon") else { return nil }
            return text.split { $0 == " " || $0 == "\n" || $0 == ";" }.map(String.init)
        }
        for mode in ["icanon", "echo", "isig", "icrnl", "opost"] {
            #expect(settings.contains(mode), "\(mode) is off: \(settings.joined(separator: " "))")
        }
    }

    private func row(of text: String, in screen: [String]) throws -> Int {
        try #require(screen.firstIndex { $0.contains(text) }, "no row with \(text)")
    }
}

/// A tmux server of its own (a unique socket), one window running a plain shell.
final class TmuxSession: Sendable {
    static let prompt = "READY$ "

    /// Whether tmux can be run here.
    static let isAvailable: Bool = (try? TmuxSession.tmux(["-V"], socket: nil).status) == 0

    /// The jobtop binary next to the test bundle.
    static let binary = JobtopProcess.binary

    let socket: String
    let directory: String
    private let socketPath: String

    init(shape: DashboardTmuxTests.Shape) throws {
        socket = "jobtop-tui-\(getpid())-\(UUID().uuidString.prefix(8))"
        directory = NSTemporaryDirectory() + socket
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let shell = "cd \(directory) && exec env PS1='\(Self.prompt)' /bin/sh"
        let result = try Self.tmux(
            ["-f", "/dev/null", "new-session", "-d", "-x", "\(shape.columns)", "-y", "\(shape.rows)", shell], socket: socket)
        guard result.status == 0 else { throw TmuxError(message: "tmux new-session failed: \(result.output)") }
        _ = try? Self.tmux(["set-option", "-g", "window-size", "manual"], socket: socket)
        let path = (try? Self.tmux(["display-message", "-p", "#{socket_path}"], socket: socket).output) ?? ""
        socketPath = path.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Stops the server and removes the directory.
    func close() {
        _ = try? Self.tmux(["kill-server"], socket: socket)
        // The server leaves its socket file behind.
        if !socketPath.isEmpty { unlink(socketPath) }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// A path in this session's directory.
    func file(_ name: String) -> String { directory + "/" + name }

    /// Runs a command line in the shell. It goes through a script so that what the shell
    /// echoes is one short line, whatever the width.
    func run(_ commandLine: String) async throws {
        try await waitFor("the shell prompt") { $0.contains { $0.hasPrefix("READY$") } }
        let script = file("run.sh")
        try? (commandLine + "\n").write(toFile: script, atomically: true, encoding: .utf8)
        literal("sh run.sh")
        keys("Enter")
    }

    /// Sends keys by tmux name (`Enter`, `Escape`, `End`, `q`).
    func keys(_ names: String...) {
        _ = try? Self.tmux(["send-keys", "-t", "0"] + names, socket: socket)
    }

    /// `q` on a dashboard with jobs active, and `y` to its question: the jobs are cancelled and it
    /// quits.
    func quitCancellingJobs() async throws {
        keys("q")
        try await waitFor("the quit question") { $0.contains { $0.contains("and quit? y = quit") } }
        keys("y")
    }

    /// Types text as it is.
    func literal(_ text: String) {
        _ = try? Self.tmux(["send-keys", "-t", "0", "-l", text], socket: socket)
    }

    /// Pastes `text` as a terminal does, in bracketed-paste markers when the program asked for them.
    func paste(_ text: String) {
        _ = try? Self.tmux(["set-buffer", "-b", "jobtop-paste", text], socket: socket)
        _ = try? Self.tmux(["paste-buffer", "-p", "-b", "jobtop-paste", "-t", "0"], socket: socket)
    }

    func resize(columns: Int, rows: Int) {
        _ = try? Self.tmux(["resize-window", "-t", "0", "-x", "\(columns)", "-y", "\(rows)"], socket: socket)
    }

    /// A process named `name` started under the window's shell (a descendant of the pane's process).
    func process(named name: String) -> pid_t? {
        guard let result = try? Self.tmux(["display-message", "-p", "-t", "0", "#{pane_pid}"], socket: socket),
            let pane = pid_t(result.output.trimmingCharacters(in: .whitespacesAndNewlines))
        else { return nil }
        var parents: [pid_t: pid_t] = [:]
        var names: [pid_t: String] = [:]
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = pid_t(entry), let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")")
            else { continue }
            names[pid] = String(stat[stat.index(after: open)..<close])
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if fields.count > 1, let parent = pid_t(fields[1]) { parents[pid] = parent }
        }
        return names.first { candidate in
            guard candidate.value == name else { return false }
            var current = candidate.key
            while let parent = parents[current], parent > 1 {
                if parent == pane { return true }
                current = parent
            }
            return false
        }?.key
    }

    /// The screen's rows, trailing blanks removed; `styled`: with the escape sequences of their
    /// colours and attributes.
    ///
    /// The tmux client runs and is waited for on a thread of its own: the tests poll the screen
    /// every 50 ms, several at once, and on a loaded machine a capture takes long enough that
    /// their blocking waits held the cooperative pool (two threads here), starving the in-process
    /// coordinators of other tests (a heartbeat late by seconds).
    func capture(styled: Bool = false) async -> [String] {
        let arguments = ["capture-pane", "-p", "-t", "0"] + (styled ? ["-e"] : [])
        let captured = await offThePool { try? Self.tmux(arguments, socket: self.socket) }
        guard let result = captured, result.status == 0 else { return [] }
        var lines = result.output.components(separatedBy: "\n")
        if lines.last == "" { lines.removeLast() }
        return lines.map { String($0.reversed().drop { $0 == " " }.reversed()) }
    }

    /// Polls the screen until `condition` holds; the deadline only guards against a hang.
    /// `steady`: and the screen is the same as one poll before, a frame written in full rather
    /// than one caught half-way.
    @discardableResult
    func waitFor(
        _ what: String, timeout: Duration = .seconds(20), styled: Bool = false, steady: Bool = false,
        _ condition: ([String]) -> Bool
    ) async throws -> [String] {
        let deadline = ContinuousClock.now + timeout
        var previous: [String]?
        while true {
            let screen = await capture(styled: styled)
            if condition(screen) && (!steady || screen == previous) { return screen }
            guard ContinuousClock.now < deadline else {
                throw TmuxError(message: "timed out waiting for \(what); the screen:\n" + screen.joined(separator: "\n"))
            }
            previous = screen
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Polls the screen until the dashboard is drawn and `condition` holds.
    @discardableResult
    func waitForDashboard(_ what: String, _ condition: @escaping ([String]) -> Bool) async throws -> [String] {
        try await waitFor("the dashboard with \(what)") { screen in
            screen.first?.hasPrefix(" jobtop ") == true && screen.last?.contains("Quit") == true && condition(screen)
        }
    }

    /// Polls `value` until it is not `nil`; the deadline only guards against a hang.
    func waitForValue<T>(_ what: String, timeout: Duration = .seconds(20), _ value: () -> T?) async throws -> T {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let found = value() { return found }
            guard ContinuousClock.now < deadline else {
                throw TmuxError(message: "timed out waiting for \(what); the screen:\n" + (await capture()).joined(separator: "\n"))
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// The display width of a captured row (wide characters take two cells).
    static func cells(_ line: String) -> Int {
        line.unicodeScalars.reduce(0) { total, scalar in
            let value = scalar.value
            if value < 0x1100 { return total + 1 }
            let wide = (0x1100...0x115F).contains(value) || (0x2E80...0xA4CF).contains(value)
                || (0xAC00...0xD7A3).contains(value) || (0xF900...0xFAFF).contains(value)
                || (0xFE30...0xFE4F).contains(value) || (0xFF00...0xFF60).contains(value)
                || (0x1F300...0x1FAFF).contains(value) || (0x20000...0x3FFFD).contains(value)
            return total + (wide ? 2 : 1)
        }
    }

    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32

    private static let addCloseFrom: AddCloseFrom? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else {
            return nil
        }
        return unsafeBitCast(symbol, to: AddCloseFrom.self)
    }()

    /// Runs `tmux args...` to its end with its output in a file (the server it may start
    /// lives on, so a pipe would never see end-of-file).
    static func tmux(_ arguments: [String], socket: String?) throws -> (status: Int32, output: String) {
        let outputPath = NSTemporaryDirectory() + "jobtop-tmux-\(UUID().uuidString)"
        defer { unlink(outputPath) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // Other tests' pipes must not leak into a tmux server that outlives them: the child
        // closes every descriptor above stderr (glibc 2.34+; Swift does not see its prototype).
        if let closeFrom = Self.addCloseFrom {
            _ = closeFrom(&actions, 3)
        } else {
            for name in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? [] {
                if let fd = Int32(name), fd > 2 { posix_spawn_file_actions_addclose(&actions, fd) }
            }
        }
        let argv = ["tmux", "-u"] + (socket.map { ["-L", $0] } ?? []) + arguments
        var cArguments: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
        defer { for pointer in cArguments { free(pointer) } }
        var environment = ProcessInfo.processInfo.environment
        environment["LANG"] = "C.UTF-8"
        environment["LC_ALL"] = "C.UTF-8"
        environment["TERM"] = "xterm-256color"
        environment.removeValue(forKey: "TMUX")
        environment.removeValue(forKey: "NO_COLOR")
        var cEnvironment: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in cEnvironment { free(pointer) } }
        // The test runs on a dispatch thread that blocks every signal, and a child inherits its
        // mask: a tmux server started with SIGTERM blocked would ignore kill-server. Start it
        // with nothing blocked and every signal at its default action.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var child: pid_t = 0
        let rc = posix_spawnp(&child, "tmux", &actions, &attributes, &cArguments, &cEnvironment)
        guard rc == 0 else { throw TmuxError(message: "cannot run tmux: \(String(cString: strerror(rc)))") }
        var status: Int32 = 0
        while waitpid(child, &status, 0) == -1 && errno == EINTR {}
        let output = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        let exited = status & 0x7F == 0
        return (exited ? (status >> 8) & 0xFF : 128 + (status & 0x7F), output)
    }
}

struct TmuxError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}
