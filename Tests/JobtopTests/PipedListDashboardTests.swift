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
        tmux.keys("q")
        try await tmux.waitFor("the quit question") { $0.contains { $0.contains("Cancel them and quit?") } }
        tmux.keys("y")
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
        try await tmux.waitForDashboard("the refusal on the screen") { screen in
            screen.contains { $0.contains("standard input:2: the command contains a NUL byte") }
        }
        tmux.keys("q")
        let after = try await tmux.waitFor("the exit status") { $0.contains { $0.hasPrefix("exit=") } }
        #expect(after.contains { $0 == "exit=2" }, "\(after.joined(separator: "\n"))")
    }
}
