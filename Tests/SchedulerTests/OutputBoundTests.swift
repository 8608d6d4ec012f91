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
        await scheduler.shutdown(.graceful)
        await running
    }
    // The memory bound is checked on the jobtop binary's own peak (`HeadlessRunTests`): this
    // process runs other suites in parallel, so its resident size says nothing about this job.

}
