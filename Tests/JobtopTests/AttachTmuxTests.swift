import Foundation
import JobtopTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `jobtop attach` in a real terminal, on a real `jobtop serve`.
@Suite(
    "jobtop attach in a real terminal (tmux)", .serialized, .timeLimit(.minutes(3)),
    .enabled(if: TmuxSession.isAvailable, "tmux is not installed"))
struct AttachTmuxTests {
    static let shape = DashboardTmuxTests.Shape(columns: 100, rows: 30)

    func attach(_ tmux: TmuxSession, _ fixture: ServeFixture) async throws {
        try await tmux.run("XDG_RUNTIME_DIR=\(fixture.runtimeDirectory) \(TmuxSession.binary) attach; echo \"exit=$?\"")
    }

    @Test("attach shows the serve's jobs; q detaches at once and the jobs go on; attach again")
    func detachAndReattach() async throws {
        let fixture = try await ServeFixture()
        let id = try await fixture.run(["submit", "-c", "sleep 300"]).lines[0]
        let tmux = try TmuxSession(shape: Self.shape)
        defer { tmux.close() }
        try await attach(tmux, fixture)
        try await tmux.waitForDashboard("the serve's running job") { $0.contains { $0.contains("sleep 300") && $0.contains("running") } }
        tmux.keys("q")
        let after = try await tmux.waitFor("the shell after detaching") { $0.contains { $0.hasPrefix("exit=") } }
        #expect(after.contains("exit=0"))
        #expect(try await fixture.state(of: id) == "running", "the job goes on after a detach")

        try await attach(tmux, fixture)
        try await tmux.waitForDashboard("the job again") { $0.contains { $0.contains("sleep 300") && $0.contains("running") } }
        tmux.keys("q")
        try await tmux.waitFor("the shell") { $0.filter { $0.hasPrefix("exit=0") }.count == 2 }
        _ = try await fixture.run(["cancel", id])
        try await fixture.stop()
    }

    @Test("attach where it cannot draw (stdout a file, TERM=dumb, no TERM) says so in one line and exits 2 (it drew into the file and never ended, drew one garbled line, or exited 0)")
    func attachWithoutAScreen() async throws {
        let fixture = try await ServeFixture()
        let tmux = try TmuxSession(shape: Self.shape)
        defer { tmux.close() }
        let output = fixture.scratch.file("attach.out")
        let environment = "XDG_RUNTIME_DIR=\(fixture.runtimeDirectory)"
        try await tmux.run("\(environment) \(TmuxSession.binary) attach > \(output); echo \"file-exit=$?\"")
        let file = try await tmux.waitFor("attach into a file") { $0.contains { $0.hasPrefix("file-exit=") } }
        try await tmux.run("\(environment) TERM=dumb \(TmuxSession.binary) attach; echo \"dumb-exit=$?\"")
        let dumb = try await tmux.waitFor("attach on TERM=dumb") { $0.contains { $0.hasPrefix("dumb-exit=") } }
        try await tmux.run("\(environment) env -u TERM \(TmuxSession.binary) attach; echo \"unset-exit=$?\"")
        let unset = try await tmux.waitFor("attach without TERM") { $0.contains { $0.hasPrefix("unset-exit=") } }
        let screen = unset.joined()
        #expect(screen.contains("attach draws the dashboard on a terminal, and stdout is not one"), "\(unset)")
        #expect(file.contains("file-exit=2"), "\(file)")
        #expect(screen.contains("attach cannot draw the dashboard here (TERM=dumb cannot move the cursor)"), "\(unset)")
        #expect(dumb.contains("dumb-exit=2"), "\(dumb)")
        #expect(screen.contains("attach cannot draw the dashboard here (TERM is not set)"), "\(unset)")
        #expect(unset.contains("unset-exit=2"), "\(unset)")
        #expect(fixture.scratch.read("attach.out") == "", "nothing drawn into the file")
        try await fixture.stop()
    }

    @Test("two attaches at once both follow the jobs; X (confirmed) shuts the serve down and the other says it went away")
    func twoAttachesAndShutdown() async throws {
        let fixture = try await ServeFixture()
        let first = try TmuxSession(shape: Self.shape)
        defer { first.close() }
        let second = try TmuxSession(shape: Self.shape)
        defer { second.close() }
        try await attach(first, fixture)
        try await attach(second, fixture)
        for tmux in [first, second] {
            try await tmux.waitForDashboard("the empty dashboard") { _ in true }
        }
        _ = try await fixture.run(["submit", "-c", "echo from-submit"])
        for tmux in [first, second] {
            try await tmux.waitForDashboard("the submitted job, done") { $0.contains { $0.contains("echo from-submit") && $0.contains("succeeded") } }
        }
        first.keys("X")
        try await first.waitFor("the shutdown question") { $0.contains { $0.contains("Shut down jobtop serve?") } }
        first.keys("y")
        let mine = try await first.waitFor("the shell after the shutdown") { $0.contains { $0.hasPrefix("exit=") } }
        #expect(mine.contains("exit=0"))
        let theirs = try await second.waitFor("the other attach ending") { $0.contains { $0.hasPrefix("exit=") } }
        #expect(theirs.contains("exit=3"))
        #expect(theirs.contains { $0.contains("went away") })
        #expect(!theirs.joined().contains("\u{1B}"))
        #expect(await fixture.serve.wait(atMost: .seconds(60))?.status == 0)
    }
}
