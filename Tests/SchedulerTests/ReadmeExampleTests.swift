import Testing
import Scheduler

/// The README's library example, kept compiling and running (with a command that exists here).
@Suite(.timeLimit(.minutes(1)))
struct ReadmeExampleTests {
    @Test func theReadmeLibraryExampleRunsToTheEndOfItsJob() async throws {
        let printed = try await readmeExample(command: "echo building 50%; echo built 100%")
        #expect(printed.contains { $0.hasSuffix("100 %") })
    }

    /// The README's code, with `print` collected and the command injected.
    func readmeExample(command: String) async throws -> [String] {
        var lines: [String] = []
        func print(_ items: Any...) { lines.append(items.map { "\($0)" }.joined(separator: " ")) }

        try await Scheduler.withScheduler(configuration: .init(localSlots: 4)) { scheduler in
            // Subscribe first: every subscriber gets a snapshot, then numbered events (seq 1, 2, 3, …).
            let events = await scheduler.events(includeOutput: false)

            // A shell job: /bin/sh -c in its own process group, retried twice, 10 minutes per attempt.
            var build = JobSpec.shell(command, name: "build", priority: 10)
            build.retry = .retries(2, backoff: .seconds(1))
            build.timeout = .seconds(600)
            let id = try await scheduler.submit(build)

            // A Swift closure job with progress.
            try await scheduler.submit(JobSpec(name: "index", work: .closure { context in
                for step in 1...10 {
                    try await Task.sleep(for: .milliseconds(100))
                    context.reportProgress(Double(step) / 10)
                }
            }))

            for await event in events {
                switch event.kind {
                case .progress(let job, let fraction): print(job.short, Int(fraction * 100), "%")
                case .retryScheduled(let job, _, let reason, let next, let at): print(job.short, reason, "retry", next, "at", at)
                case .succeeded(id, _), .failed(id, _, _), .cancelled(id): return
                default: break
                }
            }
        }
        return lines
    }
}
