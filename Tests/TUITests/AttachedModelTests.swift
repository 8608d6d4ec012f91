import Scheduler
import Testing
@testable import TUI

@Suite("The dashboard attached to jobtop serve")
struct AttachedModelTests {
    func attachedModel() -> DashboardModel {
        var builder = ModelBuilder()
        builder.submit(1, "sleep 300")
        builder.start(1)
        var model = builder.prepared()
        model.isAttached = true
        return model
    }

    @Test("q detaches at once, even with active jobs")
    func quitDetaches() {
        var model = attachedModel()
        #expect(model.handle(.char("q")) == [.quit])
        #expect(model.mode == .table)
    }

    @Test("Help says q detaches when attached (it said 'quit (asks while jobs are active)'), and quits otherwise")
    @MainActor
    func helpSaysDetach() {
        var model = attachedModel()
        _ = model.handle(.char("?"))
        #expect(screen(model, rows: 40, columns: 120).lines.contains { $0.contains("detach at once (the jobs go on in the serve)") })
        model.isAttached = false
        #expect(screen(model, rows: 40, columns: 120).lines.contains { $0.contains("quit (asks while jobs are active)") })
    }

    @Test("A serve stopping now (a second SIGTERM) says nothing is cancelled on disk; the events say the shutdown in words, not its raw mode",
          arguments: [ShutdownMode.stopRunning, .cancelRunning])
    @MainActor
    func serveStoppingNow(mode: ShutdownMode) {
        var builder = ModelBuilder()
        builder.submit(1, "sleep 300")
        builder.model.isAttached = true
        builder.apply(.shuttingDown(mode), at: 1)
        #expect(builder.model.message?.text.contains("nothing is cancelled on disk") == true)
        var model = builder.prepared()
        _ = model.handle(.char("E"))
        let lines = screen(model, rows: 30, columns: 120).lines
        #expect(lines.contains { $0.contains("shutting down: running jobs are stopped") }, "\(lines)")
        #expect(!lines.contains { $0.contains(mode.rawValue) })
    }

    @Test("X asks first; y shuts the serve down, n stays")
    func shutdownAsks() {
        var model = attachedModel()
        #expect(model.handle(.char("X")).isEmpty)
        #expect(model.mode == .confirm(.shutdownServe))
        #expect(model.handle(.char("n")).isEmpty)
        #expect(model.mode == .table)
        _ = model.handle(.char("X"))
        #expect(model.handle(.char("y")) == [.shutdownServe])
    }

    @Test("X in a dashboard of its own does nothing but say so; q still asks")
    func notAttached() {
        var model = attachedModel()
        model.isAttached = false
        #expect(model.handle(.char("X")).isEmpty)
        #expect(model.mode == .table)
        #expect(model.message?.text.contains("jobtop serve") == true)
        #expect(model.handle(.char("q")).isEmpty)
        #expect(model.mode == .confirm(.quit(active: 1)))
    }
}
