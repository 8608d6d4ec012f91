import Foundation
import JobtopTestSupport
import SchedulerStore
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `kill -9` of serve in the middle of a run, ten times: the durable state's promises, on the
/// binary.
@Suite("Serve crash", .serialized)
struct ServeCrashTests {
    /// A serve of this test on its own runtime and state directories.
    final class Daemon: Sendable {
        let scratch: Scratch
        let environment: [String: String]

        init() throws {
            scratch = try Scratch()
            environment = ["XDG_RUNTIME_DIR": scratch.file("run"), "XDG_STATE_HOME": scratch.file("state")]
        }

        var stateDirectory: StateDirectory { StateDirectory(path: scratch.file("state") + "/jobtop") }

        /// Starts serve with `slots` slots and waits until it answers.
        func start(slots: Int) async throws -> JobtopProcess {
            let serve = try JobtopProcess(["serve", "-j", "\(slots)"], environment: environment, newSession: true)
            var answered = false
            let deadline = ContinuousClock.now + .seconds(60)
            while !answered, ContinuousClock.now < deadline {
                answered = try await client(["status"]).status == 0
                if !answered { try await Task.sleep(for: .milliseconds(50)) }
            }
            if !answered {
                serve.send(SIGKILL)
                throw SpawnError(message: "serve did not answer within 60 s: \(serve.output)")
            }
            return serve
        }

        func client(_ arguments: [String]) async throws -> JobtopProcess.Outcome {
            try await JobtopProcess(arguments, environment: environment).wait()
        }
    }

    /// Lines of the runs file: `start N` / `end N`.
    static func runs(_ text: Substring) -> (starts: [Int: Int], ends: [Int: Int]) {
        var starts: [Int: Int] = [:]
        var ends: [Int: Int] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: " ")
            guard parts.count == 2, let number = Int(parts[1]) else { continue }
            if parts[0] == "start" { starts[number, default: 0] += 1 } else if parts[0] == "end" { ends[number, default: 0] += 1 }
        }
        return (starts, ends)
    }

    @Test("kill -9 of serve ten times during 2,000 jobs: every job succeeds exactly once in the end, none that had finished runs again", .timeLimit(.minutes(10)))
    func crashTenTimes() async throws {
        let daemon = try Daemon()
        let count = 2_000
        let runsFile = daemon.scratch.file("runs")
        // Retries enough for every crash: an attempt a crash cuts off counts as failed.
        let jobs = (0..<count).map {
            "[[job]]\ncommand = 'echo start \($0) >> \(runsFile); sleep 0.0\($0 % 5); echo end \($0) >> \(runsFile)'\nretries = 20\n"
        }
        let listFile = try daemon.scratch.write("jobs.toml", jobs.joined(separator: "\n"))
        var seed = UInt64.random(in: 1...UInt64.max)
        print("crash test seed \(seed)")
        func next(_ range: ClosedRange<Int>) -> Int {
            seed = seed &* 6364136223846793005 &+ 1442695040888963407
            return range.lowerBound + Int((seed >> 33) % UInt64(range.count))
        }

        var serve = try await daemon.start(slots: 8)
        let submitted = try await daemon.client(["submit", listFile])
        #expect(submitted.status == 0, "\(submitted.stderr)")

        // Per crash: the jobs the store held as succeeded when serve died, and where the runs
        // file ended then; none of them may start again after that point.
        var crashes: [(finished: Set<Int>, offset: Int)] = []
        var interruptedTotal = 0
        for crash in 0..<10 {
            let before = (try? String(contentsOfFile: runsFile, encoding: .utf8))?.utf8.count ?? 0
            let lines = next(60...300)
            // A random moment: once this many more lines were written (or the run is over).
            _ = await eventually(within: .seconds(120)) {
                let text = (try? String(contentsOfFile: runsFile, encoding: .utf8)) ?? ""
                return text.utf8.count - before >= lines * 8 || Self.runs(text[...]).ends.count == count
            }
            serve.send(SIGKILL)
            _ = await serve.wait()
            // Serve is dead: what its store says is what it had promised.
            let store = try SchedulerStore(directory: daemon.stateDirectory)
            let stored = try await store.storedJobs()
            store.close()
            let finished = Set(stored.filter { $0.state == "succeeded" }.compactMap { job in
                job.command.split(separator: " ").dropFirst(2).first.flatMap { Int($0) }
            })
            let running = stored.filter { $0.state == "running" }.count
            interruptedTotal += running
            let offset = (try? String(contentsOfFile: runsFile, encoding: .utf8))?.utf8.count ?? 0
            crashes.append((finished, offset))
            print("crash \(crash + 1): \(finished.count) succeeded, \(running) running")
            serve = try await daemon.start(slots: 8)
        }

        // Let the run finish, then stop serve.
        let done = await eventually(within: .seconds(300)) {
            let text = (try? String(contentsOfFile: runsFile, encoding: .utf8)) ?? ""
            return Self.runs(text[...]).ends.count == count
        }
        #expect(done)
        let status = try await daemon.client(["status", "--all", "--json"])
        let shutdown = try await daemon.client(["shutdown"])
        #expect(shutdown.status == 0)
        _ = await serve.wait()

        struct Report: Decodable {
            struct Job: Decodable {
                var id: String
                var command: String
                var state: String
            }
            var jobs: [Job]
        }
        let report = try JSONDecoder().decode(Report.self, from: Data(status.stdout.utf8))
        let store = try SchedulerStore(directory: daemon.stateDirectory)
        let stored = try await store.storedJobs()
        store.close()
        // Every submitted job is there once, and succeeded.
        #expect(stored.count == count)
        #expect(Set(stored.map(\.id)).count == count)
        #expect(stored.allSatisfy { $0.state == "succeeded" })
        #expect(report.jobs.filter { $0.state == "succeeded" }.count == count)
        let numbers = stored.compactMap { $0.command.split(separator: " ").dropFirst(2).first.flatMap { Int($0) } }
        #expect(Set(numbers) == Set(0..<count))

        // Every job ran to its end at least once; none the store held as succeeded started again.
        let text = try String(contentsOfFile: runsFile, encoding: .utf8)
        let (starts, ends) = Self.runs(text[...])
        #expect((0..<count).allSatisfy { ends[$0, default: 0] >= 1 })
        for (index, crash) in crashes.enumerated() {
            let after = Self.runs(String(decoding: text.utf8.dropFirst(crash.offset), as: UTF8.self)[...]).starts
            let again = crash.finished.filter { after[$0, default: 0] > 0 }
            #expect(again.isEmpty, "crash \(index + 1): jobs the store held as succeeded ran again: \(again.sorted().prefix(10))")
        }
        let ranTwice = (0..<count).filter { starts[$0, default: 0] > 1 }.count
        print("jobs started more than once: \(ranTwice) (running at a crash, counted: \(interruptedTotal))")
        #expect(ranTwice <= interruptedTotal + 10 * 8)
    }
}
