import Foundation
import JobtopTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Issue 13 in a real terminal: what a power user tried and found broken, each fixed and
/// checked on the built binary under tmux.
@Suite(
    "Dashboard power-user fixes in a real terminal (tmux)", .serialized, .timeLimit(.minutes(3)),
    .enabled(if: TmuxSession.isAvailable, "tmux is not installed"))
struct DashboardPowerUserTmuxTests {
    static let shape = DashboardTmuxTests.Shape(columns: 100, rows: 30)
    /// A job that ignores SIGTERM: only SIGKILL ends it, after a grace far longer than any wait here.
    static let stubborn = "-c \"trap '' TERM; while :; do sleep 1; done # stubborn\""

    @Test("A second Ctrl-C kills the running jobs at once, not after the grace period")
    func doubleControlC() async throws {
        let tmux = try TmuxSession(shape: Self.shape)
        defer { tmux.close() }
        try await tmux.run("\(TmuxSession.binary) --grace 600s \(Self.stubborn); echo \"exit=$?\"")
        try await tmux.waitForDashboard("the running job") { $0.contains { $0.contains("trap ''") && $0.contains("running") } }
        tmux.keys("C-c")
        try await tmux.waitFor("the quit question") { $0.contains { $0.contains("and quit? y = quit") } }
        tmux.keys("C-c")
        // The grace is ten minutes: only a kill ends it within the wait.
        let after = try await tmux.waitFor("the exit status") { $0.contains { $0.hasPrefix("exit=") } }
        #expect(after.contains { $0.contains("exit=130") })
        #expect(after.contains { $0.contains("jobtop: Ctrl-C again: killing the jobs' process groups now") })
    }

    @Test("q, y with a job that takes its grace says it is stopping, and Ctrl-C then kills it: the run ends by that signal, 130 (it said 1)")
    func stoppingMessage() async throws {
        let tmux = try TmuxSession(shape: Self.shape)
        defer { tmux.close() }
        try await tmux.run("\(TmuxSession.binary) --grace 600s \(Self.stubborn); echo \"exit=$?\"")
        try await tmux.waitForDashboard("the running job") { $0.contains { $0.contains("trap ''") && $0.contains("running") } }
        try await tmux.quitCancellingJobs()
        // Not a blank screen for the grace period: it says what it waits for and how to cut it short.
        try await tmux.waitFor("the stopping line") { $0.contains { $0.contains("jobtop: stopping 1 job… (Ctrl-C again to kill now)") } }
        // Ctrl-C typed now would also end the script's shell around jobtop: the signal goes to
        // jobtop alone.
        let pid = try await tmux.waitForValue("jobtop's pid") { tmux.process(named: "jobtop") }
        kill(pid, SIGINT)
        let after = try await tmux.waitFor("the exit status") { $0.contains { $0.hasPrefix("exit=") } }
        #expect(after.contains { $0.contains("killing every running job now") })
        #expect(after.contains { $0 == "exit=130" }, "\(after)")
    }

    @Test("A terminal the dashboard cannot drive runs headless and says so in one line", arguments: ["TERM=dumb", "-u TERM"])
    func dumbTerminal(setting: String) async throws {
        let tmux = try TmuxSession(shape: Self.shape)
        defer { tmux.close() }
        try await tmux.run("env \(setting) \(TmuxSession.binary) -c 'echo one' -c 'echo two' 2>err.txt; echo \"exit=$?\"")
        let after = try await tmux.waitFor("the exit status") { $0.contains { $0.hasPrefix("exit=") } }
        #expect(after.contains { $0 == "exit=0" })
        // The headless log, on the terminal.
        #expect(after.contains { $0.contains("summary") && $0.contains("succeeded=2") }, "screen: \(after)")
        let errors = try String(contentsOfFile: tmux.file("err.txt"), encoding: .utf8)
        #expect(errors.hasPrefix("jobtop: no dashboard ("), "stderr: \(errors)")
        #expect(errors.contains("running headless"))
        #expect(errors.split(separator: "\n").count == 1, "stderr: \(errors)")
    }
}

extension DashboardPowerUserTmuxTests {
    @Test("Without colors the selected row is in reverse video, whatever its state", arguments: ["NO_COLOR=1", "TERM=vt100"])
    func monochromeSelection(setting: String) async throws {
        let tmux = try TmuxSession(shape: Self.shape)
        defer { tmux.close() }
        try await tmux.run("env \(setting) \(TmuxSession.binary) -j 1 -c 'sleep 300' -c 'echo q1 > /dev/null' -c 'echo q2 > /dev/null'")
        try await tmux.waitForDashboard("one running, two queued") { $0.contains { $0.contains("q2") && $0.contains("queued") } }
        // The first row follows the reversed table header, whose attributes a capture does not
        // repeat: the rows below it are checked.
        tmux.keys("j")
        tmux.keys("j")
        let queued = try await tmux.waitForValue("the second queued row selected, in reverse") { () -> String? in
            let row = Self.styledRows(tmux).first { $0.contains("echo q2") }
            return row.flatMap { Self.isReverse($0) ? $0 : nil }
        }
        #expect(Self.isReverse(queued))
        // Then back to the first queued row, and its neighbour below (not selected) is plain.
        tmux.keys("k")
        let rows = try await tmux.waitForValue("the first queued row selected, in reverse") { () -> [String]? in
            let rows = Self.styledRows(tmux)
            guard let row = rows.first(where: { $0.contains("echo q1") }), Self.isReverse(row) else { return nil }
            return rows
        }
        #expect(!Self.isReverse(rows.first { $0.contains("echo q2") } ?? ""))
        tmux.keys("C-c")
        tmux.keys("C-c")
        try await tmux.waitFor("the shell prompt") { $0.contains { $0.contains("jobtop: 3 jobs") } }
    }

    /// The screen's rows with their escape sequences (`capture-pane -e`).
    static func styledRows(_ tmux: TmuxSession) -> [String] {
        let output = (try? TmuxSession.tmux(["capture-pane", "-e", "-p", "-t", "0"], socket: tmux.socket).output) ?? ""
        return output.components(separatedBy: "\n")
    }

    /// Whether the row starts in reverse video (SGR 7 before its first character).
    static func isReverse(_ row: String) -> Bool {
        guard let start = row.range(of: "\u{1B}["), start.lowerBound == row.startIndex,
              let end = row[start.upperBound...].firstIndex(of: "m") else { return false }
        return row[start.upperBound..<end].split(separator: ";").contains("7")
    }
}

extension DashboardPowerUserTmuxTests {
    @Test("The exit summary's time ends with the last job, not when the finished dashboard was closed")
    func summaryTime() async throws {
        let tmux = try TmuxSession(shape: Self.shape)
        defer { tmux.close() }
        try await tmux.run("\(TmuxSession.binary) -j1 -c 'true'; echo \"exit=$?\"")
        try await tmux.waitForDashboard("the job done") { $0.first?.contains("1 done") == true }
        // The dashboard stays open, idle, for three seconds: the scenario, not a wait for something.
        try await Task.sleep(for: .seconds(3))
        tmux.keys("q")
        let after = try await tmux.waitFor("the summary") { $0.contains { $0.hasPrefix("exit=") } }
        let summary = try #require(after.first { $0.contains("jobtop: 1 job: 1 succeeded") })
        // "… in 14ms (70.5 jobs/s)" or "… in 1.2s (…)": under two and a half seconds either way.
        let time = summary.components(separatedBy: " in ").last?.components(separatedBy: " (").first ?? ""
        let seconds = time.hasSuffix("ms") ? Double(time.dropLast(2)).map { $0 / 1000 } : Double(time.dropLast())
        #expect((seconds ?? 99) < 2.5, "\(summary)")
        #expect(after.contains { $0 == "exit=0" })
    }
}
