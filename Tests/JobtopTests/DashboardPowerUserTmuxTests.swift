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
        try await tmux.waitFor("the quit question") { $0.contains { $0.contains("Cancel them and quit?") } }
        tmux.keys("C-c")
        // The grace is ten minutes: only a kill ends it within the wait.
        let after = try await tmux.waitFor("the exit status") { $0.contains { $0.hasPrefix("exit=") } }
        #expect(after.contains { $0.contains("exit=130") })
        #expect(after.contains { $0.contains("killing every running job now") })
    }

    @Test("q, y with a job that takes its grace says it is stopping, and Ctrl-C then kills it")
    func stoppingMessage() async throws {
        let tmux = try TmuxSession(shape: Self.shape)
        defer { tmux.close() }
        try await tmux.run("\(TmuxSession.binary) --grace 600s \(Self.stubborn); echo \"exit=$?\"")
        try await tmux.waitForDashboard("the running job") { $0.contains { $0.contains("trap ''") && $0.contains("running") } }
        tmux.keys("q")
        try await tmux.waitFor("the quit question") { $0.contains { $0.contains("Cancel them and quit?") } }
        tmux.keys("y")
        // Not a blank screen for the grace period: it says what it waits for and how to cut it short.
        try await tmux.waitFor("the stopping line") { $0.contains { $0.contains("jobtop: stopping 1 job… (Ctrl-C again to kill now)") } }
        // Ctrl-C typed now would also end the script's shell around jobtop: the signal goes to
        // jobtop alone.
        let pid = try await tmux.waitForValue("jobtop's pid") { tmux.process(named: "jobtop") }
        kill(pid, SIGINT)
        let after = try await tmux.waitFor("the exit status") { $0.contains { $0.hasPrefix("exit=") } }
        #expect(after.contains { $0.contains("killing every running job now") })
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
