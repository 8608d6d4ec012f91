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
