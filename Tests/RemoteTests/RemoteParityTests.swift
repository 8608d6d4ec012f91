import Foundation
import JobtopTestSupport
import Scheduler
import Testing

@testable import SchedulerRemote

#if canImport(Glibc)
import Glibc
#endif

/// A remote job is reported exactly as a local one: its output byte for byte (line endings,
/// bytes that are not UTF-8, long lines in pieces), `keep_background`, and the processes it
/// leaves behind. Real `jobtop worker` processes against an in-process coordinator over gRPC on
/// 127.0.0.1.
@Suite("Remote jobs like local ones", .serialized, .timeLimit(.minutes(2)))
struct RemoteParityTests {
    /// Writes CRLF, a lone CR, bytes that are not UTF-8, a line longer than the 16 KiB piece
    /// size and a last line without a newline on stdout, and a CR-ended line on stderr.
    static let command = #"printf 'crlf\r\nredraw 1\rredraw 2\n\377\376 latin-1\n'; head -c 20000 /dev/zero | tr '\0' x; printf '\nno newline'; printf 'err\r' >&2"#

    @Test("A remote job's output keeps its line endings and its bytes that are not UTF-8, as a local job's does")
    func outputKeepsEndingsAndBytes() async throws {
        // Given the same job run locally and on a remote worker.
        let local = try await Self.output(of: Self.command, remote: false)
        let remote = try await Self.output(of: Self.command, remote: true)

        // Then the remote lines are the local ones, ending for ending and byte for byte (per
        // stream: how the two streams interleave depends on when each pipe is read).
        for stream in [OutputLine.Stream.stdout, .stderr] {
            #expect(remote.filter { $0.stream == stream } == local.filter { $0.stream == stream })
        }
        let stdout = remote.filter { $0.stream == .stdout }
        #expect(stdout.map(\.ending) == [.carriageReturnNewline, .carriageReturn, .newline, .newline, .none, .newline, .none])
        // A failure above must not become a crash of the whole test run below.
        try #require(stdout.count == 7)
        #expect(stdout[3].bytes == [0xFF, 0xFE] + Array(" latin-1".utf8))
        #expect(stdout[3].text == "\u{FFFD}\u{FFFD} latin-1")
        #expect(stdout[4].text.utf8.count == 16 * 1024)
        #expect(stdout.flatMap(\.rawBytes) == Array("crlf\r\nredraw 1\rredraw 2\n".utf8) + [0xFF, 0xFE] + Array(" latin-1\n".utf8)
            + [UInt8](repeating: UInt8(ascii: "x"), count: 20_000) + Array("\nno newline".utf8))
        #expect(remote.filter { $0.stream == .stderr } == [OutputLine(stream: .stderr, text: "err", ending: .carriageReturn)])
    }

    @Test("keep_background on a remote worker: what the job leaves running runs on, and the coordinator hears of it before the job ends")
    func keepBackgroundIsHonoured() async throws {
        let coordinator = try await Coordinator.start()
        let worker = try JobtopProcess.worker(for: coordinator, slots: 1, name: "w")
        _ = await coordinator.joined(1)
        let scratch = try Scratch()
        let pidFile = scratch.file("pid")
        var spec = JobSpec.shell("sleep 1000 & echo $! > \(pidFile)")
        spec.keepBackground = true

        let kinds = try await Self.events(of: spec, on: coordinator)

        // Then the leftover is reported, not stopped, before the job succeeds...
        #expect(kinds.count == 2, "\(kinds.map(\.name))")
        if case .leftoverProcesses(_, let count, let stopped)? = kinds.first {
            #expect(count == 1)
            #expect(!stopped)
        } else {
            Issue.record("no leftover before the end: \(kinds.map(\.name))")
        }
        if case .succeeded? = kinds.last {} else { Issue.record("the job ended \(String(describing: kinds.last))") }
        // ...and the background process still runs on the worker's machine.
        let pid = try #require(pids(in: pidFile).first)
        #expect(isRunning(pid))
        kill(pid, SIGKILL)
        worker.send(SIGTERM)
        #expect(await worker.wait().status == 0)
        await coordinator.stop()
    }

    @Test("Without keep_background a remote job's leftover processes are stopped, and reported as stopped before the job ends")
    func leftoversAreStoppedAndReported() async throws {
        let coordinator = try await Coordinator.start()
        let worker = try JobtopProcess.worker(for: coordinator, slots: 1, name: "w")
        _ = await coordinator.joined(1)
        let scratch = try Scratch()
        let pidFile = scratch.file("pid")

        let kinds = try await Self.events(of: .shell("sleep 1000 & echo $! > \(pidFile)"), on: coordinator)

        #expect(kinds.count == 2, "\(kinds.map(\.name))")
        if case .leftoverProcesses(_, let count, let stopped)? = kinds.first {
            #expect(count == 1)
            #expect(stopped)
        } else {
            Issue.record("no leftover before the end: \(kinds.map(\.name))")
        }
        if case .succeeded? = kinds.last {} else { Issue.record("the job ended \(String(describing: kinds.last))") }
        // The job ended only once its group was empty.
        let pid = try #require(pids(in: pidFile).first)
        #expect(!isRunning(pid))
        worker.send(SIGTERM)
        #expect(await worker.wait().status == 0)
        await coordinator.stop()
    }

    @Test("A worker that does not list keep_background (an older jobtop) is never sent such a job: the attempt fails saying why")
    func olderWorkerGetsNoKeepBackgroundJob() async throws {
        // Given a coordinator whose clock stands still (the raw worker sends no heartbeats).
        let coordinator = try await Coordinator.start(clock: ManualClock())
        let received = try await RawClient.asOlderWorker(port: coordinator.address.port, token: coordinator.token) { _ in
            _ = await coordinator.joined(1)
            var spec = JobSpec.shell("sleep 1000 &")
            spec.keepBackground = true
            // When a keep_background job is submitted.
            let kinds = try await Self.events(of: spec, on: coordinator)
            // Then it fails with a reason that names the problem.
            guard case .failed(_, .error(let message), _)? = kinds.last else {
                Issue.record("the job ended \(String(describing: kinds.last))")
                return
            }
            #expect(message.contains("runs an older jobtop that cannot keep background processes"), "\(message)")
        }
        // And nothing was assigned to that worker.
        #expect(!received.contains { if case .assign = $0.kind { true } else { false } })
        #expect(received.first.map { if case .welcome = $0.kind { true } else { false } } == true)
        await coordinator.stop()
    }

    @Test("A lossless subscriber with a tiny buffer gets every line of a remote job, in order: the job is slowed down, not cut short, and its worker is not taken for lost")
    func remoteOutputIsLossless() async throws {
        let coordinator = try await Coordinator.start()
        let worker = try JobtopProcess.worker(for: coordinator, slots: 1, name: "w")
        _ = await coordinator.joined(1)
        // A log's subscription, 16 events behind at most before the jobs are held back.
        let events = await coordinator.scheduler.events(bufferLimit: 16, delivery: .lossless)
        let id = try await coordinator.scheduler.submit(.shell("seq 1 20000"))
        var numbers: [Int] = []
        var lagged = false
        var ended: SchedulerEvent.Kind?
        // A line may come in pieces (ending .none) if `seq` stalls in the middle of one.
        var piece = ""
        for await event in events {
            switch event.kind {
            case .output(id, let line):
                piece += line.text
                if line.ending != .none {
                    numbers.append(Int(piece) ?? -1)
                    piece = ""
                }
            case .lagged: lagged = true
            case .workerLeft(_, let reason): Issue.record("the worker left: \(reason)")
            default: break
            }
            if event.kind.isFinal && event.kind.jobID == id {
                ended = event.kind
                break
            }
        }
        #expect(!lagged)
        #expect(numbers == Array(1...20_000))
        if case .succeeded? = ended {} else { Issue.record("the job ended \(String(describing: ended))") }
        worker.send(SIGTERM)
        #expect(await worker.wait().status == 0)
        await coordinator.stop()
    }

    // MARK: - Helpers

    /// The output lines of `command`, run on a local slot or on a `jobtop worker`.
    static func output(of command: String, remote: Bool) async throws -> [OutputLine] {
        let coordinator = try await Coordinator.start(localSlots: remote ? 0 : 1)
        let worker = remote ? try JobtopProcess.worker(for: coordinator, slots: 1, name: "w") : nil
        if remote { _ = await coordinator.joined(1) }
        // Lossless: on a loaded machine a lossy subscriber may be sent a snapshot instead of
        // output lines it fell behind on.
        let events = await coordinator.scheduler.events(delivery: .lossless)
        let id = try await coordinator.scheduler.submit(.shell(command))
        var lines: [OutputLine] = []
        for await event in events {
            if case .output(id, let line) = event.kind { lines.append(line) }
            if event.kind.isFinal && event.kind.jobID == id { break }
        }
        if let worker {
            worker.send(SIGTERM)
            #expect(await worker.wait().status == 0)
        }
        await coordinator.stop()
        return lines
    }

    /// The events of one job from its start (excluded) to its end (included), output and
    /// progress left out.
    static func events(of spec: JobSpec, on coordinator: Coordinator) async throws -> [SchedulerEvent.Kind] {
        let events = await coordinator.scheduler.events(includeOutput: false)
        let id = try await coordinator.scheduler.submit(spec)
        var kinds: [SchedulerEvent.Kind] = []
        var hasStarted = false
        for await event in events where event.kind.jobID == id {
            switch event.kind {
            case .started: hasStarted = true
            case .progress, .submitted: break
            default: if hasStarted || event.kind.isFinal { kinds.append(event.kind) }
            }
            if event.kind.isFinal { break }
        }
        return kinds
    }
}
