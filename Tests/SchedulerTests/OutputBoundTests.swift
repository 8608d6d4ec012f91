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
    @Test("Finished jobs' tails keep at most finishedTailBytes in all, the oldest going first (a thousand jobs of a megabyte each kept a gigabyte); forgetFinished drops the tails of the jobs it forgets (a cleaned serve kept them)")
    func finishedTailsAreBoundedInBytesAndForgotten() async throws {
        let scheduler = Scheduler(configuration: .init(localSlots: 1, finishedTailBytes: 300_000, seed: 3))
        async let running: Void = scheduler.run()
        var reader = EventReader(await scheduler.events(includeOutput: false))
        // Three jobs of 200 lines of 1,000 bytes each (about 200 kB), one after the other.
        let big = "head -c 200000 /dev/zero | tr '\\0' x | fold -w 1000"
        var ids: [JobID] = []
        for _ in 0..<3 {
            let id = try await scheduler.submit(.shell(big))
            #expect(await reader.final(of: id)?.name == "succeeded")
            ids.append(id)
        }
        #expect(await scheduler.output(of: ids[0]).lines.isEmpty, "the oldest tail went for the byte budget")
        #expect(await scheduler.output(of: ids[1]).lines.isEmpty)
        #expect(await scheduler.output(of: ids[2]).lines.count == 200)
        #expect(scheduler.finishedTailBytesKept <= 300_000)
        #expect(await scheduler.forgetFinished() == 3)
        #expect(await scheduler.output(of: ids[2]).lines.isEmpty)
        #expect(scheduler.finishedTailBytesKept == 0)
        await scheduler.shutdown(.graceful)
        await running
    }

    // The memory bound is checked on the jobtop binary's own peak (`HeadlessRunTests`): this
    // process runs other suites in parallel, so its resident size says nothing about this job.

}
