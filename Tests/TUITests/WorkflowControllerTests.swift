import Foundation
import Scheduler
import Synchronization
import Testing
@testable import TUI

/// Groups and dependencies through the dashboard's loop: keys on a fake terminal steer a real
/// in-process scheduler, and every step awaits the frame that shows its effect.
@Suite("Dashboard controller: workflows", .timeLimit(.minutes(1)))
@MainActor
struct WorkflowControllerTests {
    typealias Harness = DashboardControllerTests.Harness

    /// A closure job that succeeds once `gate` finishes (and not before).
    static func gated(_ name: String, group: String? = nil, gate: AsyncStream<Void>) -> JobSpec {
        var spec = JobSpec(name: name, work: .closure { _ in
            for await _ in gate {}
        })
        spec.group = group
        return spec
    }

    /// One gate per attempt of a job: attempt n waits until gate n is opened.
    final class Gates: Sendable {
        private let streams: Mutex<[AsyncStream<Void>]>
        private let continuations: [AsyncStream<Void>.Continuation]

        init(count: Int) {
            let pairs = (0..<count).map { _ in AsyncStream<Void>.makeStream() }
            streams = Mutex(pairs.map(\.stream))
            continuations = pairs.map(\.continuation)
        }

        /// The next attempt's gate.
        func next() -> AsyncStream<Void> { streams.withLock { $0.removeFirst() } }

        /// Lets attempt `index` (from 0) succeed.
        func open(_ index: Int) { continuations[index].finish() }
    }

    /// A closure job whose attempts each wait for their own gate.
    static func gated(_ name: String, gates: Gates) -> JobSpec {
        JobSpec(name: name, work: .closure { _ in
            for await _ in gates.next() {}
            try Task.checkCancellation()
        })
    }

    /// The table row of `text` (rows start with a job id; panels and the event pane do not).
    static func row(_ text: String, in lines: [String]) -> String? {
        lines.first { line in
            let id = line.dropFirst().prefix(8)
            return line.hasPrefix(" ") && id.count == 8 && id.allSatisfy(\.isHexDigit) && line.contains(text)
        }
    }

    /// Waits for a frame whose table row of `text` contains every one of `parts`.
    @discardableResult
    static func frame(_ terminal: FakeTerminal, row text: String, showing parts: String..., sourceLocation: SourceLocation = #_sourceLocation) async -> [String] {
        await terminal.frame(where: { lines in
            guard let row = row(text, in: lines) else { return false }
            return parts.allSatisfy(row.contains)
        }, sourceLocation: sourceLocation)
    }

    @Test("n with @group and after:name submits a blocked job: GROUP column, groups panel, detail; it runs once the dependency succeeds")
    func newJobAfterDependency() async throws {
        // Given a running job named fetch that succeeds when the test says so
        let harness = Harness(slots: 2)
        let (gate, open) = AsyncStream<Void>.makeStream()
        let fetch = try await harness.submit(Self.gated("fetch", gate: gate))
        await Self.frame(harness.terminal, row: "fetch", showing: "running")
        // When n, then "@deploy after:fetch <command>" and Enter
        harness.terminal.type("n")
        harness.terminal.type("@deploy after:fetch true # deploy-step")
        harness.terminal.type(.enter)
        // Then the job is blocked in group deploy, and the table has a GROUP column
        let lines = await Self.frame(harness.terminal, row: "# deploy-step", showing: "deploy", "blocked")
        #expect(lines[2].contains("GROUP"))
        // the groups panel lists deploy with one held job
        await harness.terminal.frame(showing: "deploy", "0/∞     0    1")
        let snapshot = await harness.scheduler.currentSnapshot()
        let job = try #require(snapshot.jobs.first { $0.command == "true # deploy-step" })
        #expect(job.group == "deploy")
        #expect(job.dependencies == [fetch])
        // When it is selected (End: the last row), the status line names what it waits for
        harness.terminal.type(.end)
        await harness.terminal.frame(showing: "\(job.id.short) blocked: waits for fetch (running)")
        // When fetch succeeds, the job runs and succeeds too
        open.finish()
        await Self.frame(harness.terminal, row: "# deploy-step", showing: "succeeded")
        await harness.finish()
    }

    @Test("P pauses the selected job's group (PAUSED in the panel, its queued job waits), P again resumes it")
    func groupPause() async throws {
        // Given a job in group gpu, running
        let harness = Harness(slots: 2)
        let (gate, open) = AsyncStream<Void>.makeStream()
        try await harness.submit(Self.gated("first", group: "gpu", gate: gate))
        await Self.frame(harness.terminal, row: "first", showing: "gpu", "running")
        // When P is pressed on it
        harness.terminal.type("P")
        // Then the panel marks gpu paused, and the scheduler agrees
        await harness.terminal.frame(showing: ">gpu PAUSED")
        await harness.terminal.frame(showing: "group gpu paused")
        #expect(await harness.scheduler.currentSnapshot().groups.first { $0.group.name == "gpu" }?.group.isPaused == true)
        // A second job of gpu stays queued though a slot is free, and says why when selected
        let (second, openSecond) = AsyncStream<Void>.makeStream()
        let id = try await harness.submit(Self.gated("second", group: "gpu", gate: second))
        await Self.frame(harness.terminal, row: "second", showing: "queued")
        harness.terminal.type(.end)
        await harness.terminal.frame(showing: "\(id.short) queued: group gpu is paused")
        #expect(await harness.scheduler.currentSnapshot().count(.running) == 1)
        // When P is pressed again, it starts
        harness.terminal.type("P")
        await Self.frame(harness.terminal, row: "second", showing: "running")
        await harness.terminal.frame { lines in !lines.contains { $0.contains("PAUSED") } }
        open.finish()
        openSecond.finish()
        await harness.finish()
    }

    @Test("L sets the selected job's group limit: 1 holds the second job back, - lifts it; 0 is refused")
    func groupLimit() async throws {
        // Given two slots and a job of group io running
        let harness = Harness(slots: 2)
        let (gate, open) = AsyncStream<Void>.makeStream()
        try await harness.submit(Self.gated("one", group: "io", gate: gate))
        await Self.frame(harness.terminal, row: "one", showing: "io", "running")
        // When L, then 0: refused as it is typed and on Enter, the prompt stays
        harness.terminal.type("L")
        await harness.terminal.frame(showing: "Limit of group io:")
        harness.terminal.type("0")
        await harness.terminal.frame(showing: "limit out of range: at least 1")
        harness.terminal.type(.enter)
        await harness.terminal.frame(showing: "limit not changed: limit out of range")
        #expect(await harness.scheduler.currentSnapshot().groups.first { $0.group.name == "io" }?.group.limit == nil)
        // When it is mended to 1 and Enter pressed
        harness.terminal.type(.backspace)
        harness.terminal.type("1")
        harness.terminal.type(.enter)
        // Then the panel shows 1/1, and a second job of io waits
        await harness.terminal.frame(showing: ">io", "1/1")
        #expect(await harness.scheduler.currentSnapshot().groups.first { $0.group.name == "io" }?.group.limit == 1)
        let (second, openSecond) = AsyncStream<Void>.makeStream()
        try await harness.submit(Self.gated("two", group: "io", gate: second))
        await Self.frame(harness.terminal, row: "two", showing: "queued")
        // When L, Ctrl-U, - and Enter: no limit, and the second job starts
        harness.terminal.type("L")
        await harness.terminal.frame(showing: "Limit of group io: 1")
        harness.terminal.type(.control("u"))
        harness.terminal.type("-")
        harness.terminal.type(.enter)
        await harness.terminal.frame(showing: "2/∞")
        await Self.frame(harness.terminal, row: "two", showing: "running")
        open.finish()
        openSecond.finish()
        await harness.finish()
    }

    @Test("A cancelled dependency skips its dependent (the detail says why); r on it is refused with the engine's reason; r on the dependency brings it back")
    func skippedAndRetry() async throws {
        // Given a running job fetch and a job blocked on it
        let harness = Harness(slots: 1)
        let gates = Gates(count: 2)
        let fetch = try await harness.submit(Self.gated("fetch", gates: gates))
        var spec = JobSpec.shell("true # after-fetch")
        spec.dependencies = [.job(fetch)]
        let dependent = try await harness.submit(spec)
        await Self.frame(harness.terminal, row: "# after-fetch", showing: "blocked")
        // When fetch (the first row) is cancelled
        harness.terminal.type(.home)
        harness.terminal.type("c")
        await harness.terminal.frame(showing: "Cancel job \(fetch.short)")
        harness.terminal.type("y")
        // Then the dependent is skipped, and selected (the first row: finished jobs come newest
        // first, and it ended in the same step as fetch, after it) it says why
        await Self.frame(harness.terminal, row: "# after-fetch", showing: "skipped")
        harness.terminal.type(.home)
        await harness.terminal.frame(showing: "\(dependent.short) skipped: dependency 'fetch' was cancelled")
        // When r is pressed on it: the engine refuses, and the status line says why
        harness.terminal.type("r")
        await harness.terminal.frame(showing: "retry that one first")
        #expect(await harness.scheduler.currentSnapshot().jobs.first { $0.id == dependent }?.state.kind == .skipped)
        // When fetch (the row below) is retried instead, the dependent waits for it again
        harness.terminal.type(.down)
        harness.terminal.type("r")
        await Self.frame(harness.terminal, row: "# after-fetch", showing: "blocked")
        await Self.frame(harness.terminal, row: "fetch", showing: "running")
        // and runs once fetch's second attempt succeeds
        gates.open(1)
        await Self.frame(harness.terminal, row: "# after-fetch", showing: "succeeded")
        await harness.finish()
    }

    @Test("r on a tagged skipped job and its tagged failed dependency retries both, whatever their order: the dependency first (it said the dependent was refused while it came back)")
    func taggedRetryOfAChain() async throws {
        let harness = Harness(slots: 1)
        // fetch fails its first run and succeeds its second.
        let runs = Mutex(0)
        let fetch = try await harness.submit(JobSpec(name: "fetch", work: .closure { _ in
            let run = runs.withLock { count -> Int in
                count += 1
                return count
            }
            if run == 1 { throw CancellationError() }
        }))
        var spec = JobSpec.shell("true # after-fetch")
        spec.dependencies = [.job(fetch)]
        let dependent = try await harness.submit(spec)
        await Self.frame(harness.terminal, row: "# after-fetch", showing: "skipped")
        // Both tagged, the skipped dependent first (the newest finished job is the first row).
        harness.terminal.type(.home)
        harness.terminal.type(" ")
        harness.terminal.type(" ")
        harness.terminal.type("r")
        await harness.terminal.frame(showing: "2 jobs retried")
        // (Tagged rows start with `*`: the row helper does not find them.)
        await harness.terminal.frame(showing: "# after-fetch", "succeeded")
        #expect(await harness.scheduler.currentSnapshot().jobs.first { $0.id == dependent }?.state.kind == .succeeded)
        await harness.finish()
    }

    @Test("A delayed job shows scheduled with a countdown in TIME, and when it starts when selected")
    func scheduledCountdown() async throws {
        let harness = Harness(slots: 1)
        var spec = JobSpec.shell("true # later")
        spec.notBefore = .delay(.seconds(600))
        let id = try await harness.submit(spec)
        let lines = await Self.frame(harness.terminal, row: "# later", showing: "scheduled", "in ")
        let row = try #require(Self.row("# later", in: lines))
        #expect(row.contains("in 10m00s") || row.contains("in 9m5"), "\(row)")
        await harness.terminal.frame(showing: "\(id.short) scheduled: starts in ")
        await harness.finish()
    }
}
