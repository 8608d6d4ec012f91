import Foundation
import JobtopTestSupport
import Testing

/// `cat list | jobtop` on a terminal: the list comes in on stdin, and the dashboard still reads
/// its keys (from the terminal, since stdin is at its end). Uses the dashboard tests' tmux helper.
@Suite(
    "The dashboard with a job list piped in", .timeLimit(.minutes(3)),
    .enabled(if: TmuxSession.isAvailable, "tmux is not installed"))
struct PipedListDashboardTests {
    @Test("A list piped into jobtop on a terminal runs under the dashboard, and q still quits it")
    func pipedList() async throws {
        let tmux = try TmuxSession(shape: DashboardTmuxTests.Shape(columns: 100, rows: 30))
        defer { tmux.close() }
        try await tmux.run("printf 'sleep 300\\necho piped\\n' | \(TmuxSession.binary) -j 1; echo \"exit=$?\"")
        try await tmux.waitForDashboard("the piped jobs") { screen in
            screen.contains { $0.contains("sleep 300") && $0.contains("running") }
                && screen.contains { $0.contains("echo piped") && $0.contains("queued") }
        }
        try await tmux.quitCancellingJobs()
        let after = try await tmux.waitFor("the exit status") { $0.contains { $0.hasPrefix("exit=") } }
        #expect(after.contains { $0 == "exit=1" })
        #expect(after.contains { $0.contains("jobtop: 2 jobs") && $0.contains("2 cancelled") })
    }

    @Test("A bad line arriving on the pipe is said on the dashboard at once (it stayed open, saying only 'shutting down'); q then exits 2")
    func aBadLineIsSaidOnTheScreen() async throws {
        let tmux = try TmuxSession(shape: DashboardTmuxTests.Shape(columns: 140, rows: 30))
        defer { tmux.close() }
        let gate = NSTemporaryDirectory() + "jobtop-gate-\(UUID().uuidString)"
        #expect(mkfifo(gate, 0o600) == 0)
        defer { unlink(gate) }
        // The bad line comes once the first job runs: its own writer opens the gate.
        try await tmux.run("(echo 'echo go > \(gate); sleep 300'; cat \(gate) > /dev/null; printf 'bad\\0line\\n') | \(TmuxSession.binary) -j 1; echo \"exit=$?\"")
        // And the running job cancelled by it: a q while it still stops asks whether to cancel it,
        // and that question goes when it ends ("q quits"), leaving a second q to quit (a CI run
        // pressed q that early and waited for an exit that needed another).
        try await tmux.waitForDashboard("the refusal on the screen, its job cancelled") { screen in
            screen.contains { $0.contains("standard input:2: the command contains a NUL byte") }
                && screen.contains { $0.contains("echo go >") && $0.contains("cancelled") }
        }
        tmux.keys("q")
        let after = try await tmux.waitFor("the exit status") { $0.contains { $0.hasPrefix("exit=") } }
        #expect(after.contains { $0 == "exit=2" }, "\(after.joined(separator: "\n"))")
    }

    @Test("A pasted block goes into the prompt as one line (its newline ran the rest as keys: e, c, r act on jobs); outside a prompt it is not read as keys; tmux's Home works under xterm's terminfo")
    func pasteIsText() async throws {
        let tmux = try TmuxSession(shape: DashboardTmuxTests.Shape(columns: 120, rows: 30))
        defer { tmux.close() }
        try await tmux.run("TERM=xterm-256color \(TmuxSession.binary) -j 1 -c 'sleep 300'; echo \"exit=$?\"")
        try await tmux.waitForDashboard("the job running") { $0.contains { $0.contains("sleep 300") && $0.contains("running") } }
        // In the table a paste holding c and y is not a cancel confirmed.
        tmux.paste("cy\ncy")
        try await tmux.waitFor("the paste refused") { $0.contains { $0.contains("pasted text goes into a prompt") } }
        tmux.keys("n")
        try await tmux.waitFor("the prompt") { $0.contains { $0.contains("New job:") } }
        tmux.paste("echo one\necho two")
        try await tmux.waitFor("one line") { $0.contains { $0.contains("New job: echo one echo two") } }
        // ESC [1~ (tmux's Home) is Home, not an Esc that closes the prompt.
        tmux.keys("Home")
        tmux.literal("X")
        let screen = try await tmux.waitFor("the X at the start") { $0.contains { $0.contains("New job: Xecho one echo two") } }
        #expect(screen.contains { $0.contains("sleep 300") && $0.contains("running") })
        tmux.keys("Escape")
        try await tmux.quitCancellingJobs()
        _ = try await tmux.waitFor("the exit status") { $0.contains { $0.hasPrefix("exit=") } }
    }

    @Test("Ctrl-Z stops jobtop as a shell job (it did nothing) and fg brings the screen back; after quitting, its lines and the prompt start at the left edge")
    func suspendAndResume() async throws {
        let tmux = try TmuxSession(shape: DashboardTmuxTests.Shape(columns: 120, rows: 30))
        defer { tmux.close() }
        // An interactive bash: job control, and the tty modes it keeps for a stopped job.
        try await tmux.run("PS1='BASH$ ' exec bash --norc")
        try await tmux.waitFor("bash's prompt") { $0.contains { $0.hasPrefix("BASH$") } }
        tmux.literal("\(TmuxSession.binary) -j 1 -c 'sleep 300'")
        tmux.keys("Enter")
        try await tmux.waitForDashboard("the job running") { $0.contains { $0.contains("sleep 300") && $0.contains("running") } }
        tmux.keys("C-z")
        try await tmux.waitFor("the shell back") { $0.contains { $0.contains("Stopped") } }
        tmux.literal("fg")
        tmux.keys("Enter")
        try await tmux.waitForDashboard("the screen back") { $0.contains { $0.contains("sleep 300") && $0.contains("running") } }
        try await tmux.quitCancellingJobs()
        let after = try await tmux.waitFor("the summary") { $0.contains { $0.contains("jobtop: 1 job: ") } }
        // Each line from the left edge, the prompt after them too.
        #expect(after.contains { $0.hasPrefix("jobtop: 1 job: ") }, "\(after.joined(separator: "\n"))")
        let prompt = try await tmux.waitFor("the prompt after it") { screen in
            guard let summary = screen.lastIndex(where: { $0.contains("jobtop: 1 job: ") }) else { return false }
            return screen[(summary + 1)...].contains { $0.contains("BASH$") }
        }
        let summary = prompt.lastIndex { $0.contains("jobtop: 1 job: ") }!
        #expect(prompt[(summary + 1)...].contains { $0.hasPrefix("BASH$") }, "\(prompt.joined(separator: "\n"))")
    }

    @Test("Started in the background (`&`), or put there with bg, the dashboard stops as a shell job until fg; it drew over the shell, and a key typed then made it spin a core")
    func backgroundJobStops() async throws {
        let tmux = try TmuxSession(shape: DashboardTmuxTests.Shape(columns: 120, rows: 30))
        defer { tmux.close() }
        try await tmux.run("PS1='BASH$ ' exec bash --norc")
        try await tmux.waitFor("bash's prompt") { $0.contains { $0.hasPrefix("BASH$") } }
        // (The job leaves a mark when it starts.)
        let mark = tmux.directory + "/started"
        tmux.literal("\(TmuxSession.binary) -j 1 -c 'touch \(mark); sleep 300' &")
        tmux.keys("Enter")
        // The shell says it stopped (with a key typed meanwhile, which is the shell's), and
        // nothing of the dashboard is on its screen.
        tmux.literal("echo typed; until jobs | grep -q Stopped; do sleep 0.1; done; echo the job stopped")
        tmux.keys("Enter")
        let stopped = try await tmux.waitFor("the job stopped") { $0.contains { $0 == "typed" } && $0.contains { $0 == "the job stopped" } }
        #expect(!stopped.contains { $0.contains("NAME / COMMAND") }, "\(stopped.joined(separator: "\n"))")
        // No job started while it was stopped (a timeout counted from a start it had not made).
        #expect(!FileManager.default.fileExists(atPath: mark))
        // In front, it draws and takes keys; put back in the background, it stops again.
        tmux.literal("fg")
        tmux.keys("Enter")
        try await tmux.waitForDashboard("the dashboard in front") { $0.contains { $0.contains("/started;") && $0.contains("running") } }
        // (Its row says running once the job's shell is spawned; its `touch` comes a moment later.)
        #expect(await eventually { FileManager.default.fileExists(atPath: mark) }, "the job starts once jobtop is in front")
        tmux.keys("C-z")
        try await tmux.waitFor("the shell back") { $0.contains { $0.contains("Stopped") } }
        tmux.literal("bg; until jobs | grep -q Stopped; do sleep 0.1; done; echo stopped again")
        tmux.keys("Enter")
        try await tmux.waitFor("stopped again in the background") { $0.contains { $0 == "stopped again" } }
        tmux.literal("fg")
        tmux.keys("Enter")
        try await tmux.waitForDashboard("the dashboard in front again") { $0.contains { $0.contains("/started;") && $0.contains("running") } }
        try await tmux.quitCancellingJobs()
        try await tmux.waitFor("the summary") { $0.contains { $0.contains("jobtop: 1 job: ") } }
    }
}
