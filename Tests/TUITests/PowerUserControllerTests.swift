import Foundation
import Scheduler
import Testing
@testable import TUI

/// Issue 13 through the dashboard's loop: an in-process scheduler, a fake terminal.
@Suite("Power-user fixes through the controller", .timeLimit(.minutes(1)))
@MainActor
struct PowerUserControllerTests {
    typealias Harness = DashboardControllerTests.Harness

    @Test("++++ typed in one burst raises the priority by four")
    func burst() async throws {
        // Given no slots and one queued job
        let harness = Harness(slots: 0)
        let id = try await harness.submit(.shell("true # burst"))
        await harness.terminal.frame(showing: "# burst", "queued")
        // When four + arrive in one read
        harness.terminal.type("++++")
        // Then the scheduler ends at 4
        await harness.terminal.frame(showing: "# burst", " 4 ")
        #expect(await harness.scheduler.currentSnapshot().jobs.first { $0.id == id }?.priority == 4)
        await harness.finish()
    }

    @Test(">>> and <<<<< typed in bursts change the local slots by three and five (a burst changed them by one)")
    func slotsBurst() async throws {
        // Given eight local slots
        let harness = Harness(slots: 8)
        await harness.terminal.frame(showing: "workers 8 local")
        // When three > arrive in one read, then five <
        harness.terminal.type(">>>")
        await harness.terminal.frame(showing: "slots: 11 local")
        let eleven = await harness.scheduler.currentSnapshot().localSlots
        #expect(eleven == 11, "\(harness.terminal.lines.joined(separator: "\n"))")
        harness.terminal.type("<<<<<")
        await harness.terminal.frame(showing: "slots: 6 local")
        #expect(await harness.scheduler.currentSnapshot().localSlots == 6)
        await harness.finish()
    }

    @Test("w counts lines as the file has them: the pieces of a long line are one, a last line without its newline is one")
    func saveCountsWholeLines() throws {
        let path = NSTemporaryDirectory() + "jobtop-save-\(UUID().uuidString).log"
        defer { unlink(path) }
        let piece = String(repeating: "x", count: 1_000)
        let lines = [
            OutputLine(stream: .stdout, text: piece, ending: .none), OutputLine(stream: .stdout, text: piece, ending: .none),
            OutputLine(stream: .stdout, text: piece, ending: .newline), OutputLine(stream: .stdout, text: "tail", ending: .none),
        ]
        #expect(DashboardController.write(lines, dropped: 0, to: path).text == "wrote 2 lines to \(path)")
        #expect(try String(contentsOfFile: path, encoding: .utf8) == piece + piece + piece + "\ntail")
    }

    @Test("w's ~ is $HOME, as in a shell (it was the password database's home); the message names the file written")
    func saveExpandsHome() throws {
        #expect(DashboardController.expandingHome("~/out.log", environment: ["HOME": "/tmp/h"]) == "/tmp/h/out.log")
        #expect(DashboardController.expandingHome("~", environment: ["HOME": "/tmp/h"]) == "/tmp/h")
        #expect(DashboardController.expandingHome("~other/x", environment: ["HOME": "/tmp/h"]) == "~other/x")
        #expect(DashboardController.expandingHome("a/~/b", environment: ["HOME": "/tmp/h"]) == "a/~/b")
        let home = ProcessInfo.processInfo.environment["HOME"] ?? ""
        try #require(!home.isEmpty)
        let name = "jobtop-save-\(UUID().uuidString).log"
        defer { unlink(home + "/" + name) }
        let lines = [OutputLine(stream: .stdout, text: "one")]
        #expect(DashboardController.write(lines, dropped: 0, to: "~/" + name).text == "wrote 1 line to \(home)/\(name)")
        #expect(FileManager.default.fileExists(atPath: home + "/" + name))
        // A directory is said to be one (it said "a file is there").
        #expect(DashboardController.write(lines, dropped: 0, to: NSTemporaryDirectory()).text.contains("that is a directory"))
    }

    @Test("w writes the selected job's output to the file named, byte for byte")
    func saveOutput() async throws {
        let harness = Harness(slots: 1)
        let (lines, printer) = AsyncStream<String>.makeStream()
        try await harness.submit(DashboardControllerTests.waiting("printer", printing: lines))
        printer.yield("first line")
        printer.yield("second line")
        await harness.terminal.frame(showing: "printer", "running")
        // The lines are in the tail once the output view shows them.
        harness.terminal.type(.enter)
        await harness.terminal.frame(showing: "second line")
        harness.terminal.type(.escape)
        let path = NSTemporaryDirectory() + "jobtop-save-\(UUID().uuidString).log"
        defer { unlink(path) }
        harness.terminal.type("w")
        await harness.terminal.frame(showing: "Write the output of")
        harness.terminal.type(.control("u"))
        harness.terminal.type(path)
        harness.terminal.type(.enter)
        await harness.terminal.frame(showing: "wrote 2 lines to")
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "first line\nsecond line\n")
        // Never over a file that is there
        harness.terminal.type("w")
        harness.terminal.type(.control("u"))
        harness.terminal.type(path)
        harness.terminal.type(.enter)
        await harness.terminal.frame(showing: "nothing written: a file is there")
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "first line\nsecond line\n")
        // The prompt is back with the name, to be mended (it closed)
        await harness.terminal.frame(showing: "Write the output of")
        // A path that cannot be written says why
        harness.terminal.type(.control("u"))
        harness.terminal.type("/nonexistent-dir/x.log")
        harness.terminal.type(.enter)
        await harness.terminal.frame(showing: "nothing written: cannot write /nonexistent-dir/x.log")
        harness.terminal.type(.escape)
        printer.finish()
        await harness.finish()
    }
}
