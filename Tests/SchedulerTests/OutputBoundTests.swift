import Testing
@testable import Scheduler

/// A job that prints 200 MB. Its own suite, with a hang guard long enough for ThreadSanitizer
/// builds on a busy 2-core machine (every one of the 2 million lines is an event).
@Suite(.timeLimit(.minutes(10)))
struct OutputBoundTests {
    @Test func aJobPrinting200MegabytesKeepsOnlyABoundedTail() async throws {
        let scheduler = Scheduler(configuration: .init(localSlots: 1, tailLines: 1_000, tailBytes: 1 << 20, seed: 2))
        async let running: Void = scheduler.run()
        var reader = EventReader(await scheduler.events(includeOutput: false))
        // 200 MB: 2 million lines of 99 characters and a newline.
        let id = try await scheduler.submit(.shell("yes 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' | head -n 2000000"))
        #expect(await reader.final(of: id)?.name == "succeeded")
        let tail = await scheduler.output(of: id)
        #expect(tail.lines.count == 1_000)
        #expect(tail.dropped == 2_000_000 - 1_000)
        #expect(tail.lines.reduce(0) { $0 + $1.text.utf8.count + 1 } <= 1 << 20)
        // Memory stayed bounded: resident size well below what 200 MB of lines would need.
        #expect(Self.residentMegabytes() < 150)
        await scheduler.shutdown(.graceful)
        await running
    }

    static func residentMegabytes() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kb = Int(line.split(separator: " ").dropFirst().first ?? "") else { return 0 }
        return kb / 1024
    }

}
