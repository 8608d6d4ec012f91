import Foundation
import Scheduler
import Testing
@testable import jobtop

@Suite("Headless log lines")
struct EventLogFormatterTests {
    let job = JobID(uuid: UUID(uuidString: "3F2A1B4C-0000-4000-8000-000000000001")!)
    let worker = WorkerDescriptor(id: WorkerID(), name: "local-1", kind: .local, slots: 1)

    private func event(_ seq: UInt64, at milliseconds: Int, _ kind: SchedulerEvent.Kind) -> SchedulerEvent {
        SchedulerEvent(seq: seq, time: .milliseconds(milliseconds), kind: kind)
    }

    @Test("A text line has the timestamp, event, short id, name and key=value fields")
    func textLine() throws {
        let formatter = EventLogFormatter(format: .text, logsOutput: false, epoch: 1_795_000_000)
        _ = formatter.line(for: event(1, at: 0, .workerJoined(worker)))
        _ = formatter.line(for: event(2, at: 0, .submitted(JobInfo(id: job, name: "build all", command: "make", maxAttempts: 3))))
        let startedLine = formatter.line(for: event(3, at: 1_500, .started(job, attempt: 1, maxAttempts: 3, worker: worker.id)))
        let started = try #require(startedLine)
        #expect(started == "2026-11-18T11:06:41.500Z started   3f2a1b4c \"build all\" attempt=1/3 worker=local-1")
        let retryLine = formatter.line(for: event(
            4, at: 2_000, .retryScheduled(job, failedAttempt: 1, reason: .exitStatus(2), nextAttempt: 2, at: .milliseconds(3_250))))
        let retry = try #require(retryLine)
        #expect(retry.hasSuffix(
            "retry     3f2a1b4c \"build all\" attempt=1/3 reason=\"exit 2\" exit_status=2 next_attempt=2 retry_in=1.25s retry_at=2026-11-18T11:06:43.250Z"))
    }

    @Test("A worker with prefetch joins with its own slots and its prefetch apart (a 2-slot worker holding 1 more said slots=3)")
    func workerJoinedWithPrefetch() throws {
        let formatter = EventLogFormatter(format: .text, logsOutput: false, epoch: 1_795_000_000)
        let far = WorkerDescriptor(id: WorkerID(), name: "far", kind: .remote, slots: 3, ownSlots: 2)
        let line = try #require(formatter.line(for: event(1, at: 0, .workerJoined(far))))
        #expect(line.hasSuffix("kind=remote slots=2 prefetch=1"), "\(line)")
        let plain = try #require(formatter.line(for: event(2, at: 0, .workerJoined(worker))))
        #expect(plain.hasSuffix("kind=local slots=1"), "\(plain)")
    }

    @Test("A text line's after list is comma-separated, or a JSON array when a name has a comma or needs quoting (after=a,b was written for one job named 'a,b')")
    func afterListInText() throws {
        let formatter = EventLogFormatter(format: .text, logsOutput: false, epoch: 1_795_000_000)
        let (one, two, three) = (JobID(uuid: UUID()), JobID(uuid: UUID()), JobID(uuid: UUID()))
        for (id, name) in [(one, "a,b"), (two, "c d"), (three, "e")] {
            _ = formatter.line(for: event(1, at: 0, .submitted(JobInfo(id: id, name: name, command: "true"))))
        }
        var info = JobInfo(id: job, name: "x", command: "true")
        info.dependencies = [one, two]
        let mixed = try #require(formatter.line(for: event(2, at: 0, .submitted(info))))
        #expect(mixed.contains(#" after=["a,b","c d"]"#), "\(mixed)")
        info.dependencies = [three, three]
        let plain = try #require(formatter.line(for: event(3, at: 0, .submitted(info))))
        #expect(plain.hasSuffix(" after=e,e"), "\(plain)")
    }

    @Test("A held attempt's 'began' line says how long it was held, and the job's duration counts from it")
    func beganLine() throws {
        let formatter = EventLogFormatter(format: .text, logsOutput: false, epoch: 1_795_000_000)
        let far = WorkerDescriptor(id: WorkerID(), name: "far", kind: .remote, slots: 2, holdsAttempts: true)
        _ = formatter.line(for: event(1, at: 0, .workerJoined(far)))
        _ = formatter.line(for: event(2, at: 0, .submitted(JobInfo(id: job, name: "build", command: "make"))))
        _ = formatter.line(for: event(3, at: 1_000, .started(job, attempt: 1, maxAttempts: 1, worker: far.id)))
        let began = try #require(formatter.line(for: event(4, at: 4_000, .began(job, attempt: 1))))
        #expect(began.hasSuffix("began     3f2a1b4c build attempt=1/1 held=3s"), "\(began)")
        let succeeded = try #require(formatter.line(for: event(5, at: 6_500, .succeeded(job, attempts: 1))))
        #expect(succeeded.hasSuffix("attempts=1 duration=2.5s"), "\(succeeded)")
    }

    @Test("Every JSON line parses, with ts, seq, event, job and name, and escapes what it must")
    func jsonLines() throws {
        let formatter = EventLogFormatter(format: .json, logsOutput: true, epoch: 0)
        let odd = "quote \" backslash \\ newline \n tab \t bell \u{7} unicode é ✓"
        let kinds: [SchedulerEvent.Kind] = [
            .workerJoined(worker),
            .submitted(JobInfo(id: job, name: odd, command: "echo", priority: 3, maxAttempts: 2, key: "k")),
            .started(job, attempt: 1, maxAttempts: 2, worker: worker.id),
            .output(job, OutputLine(stream: .stderr, text: odd)),
            .progress(job, 0.5),
            .stopping(job, .timeout),
            .retryScheduled(job, failedAttempt: 1, reason: .timeout(.seconds(2)), nextAttempt: 2, at: .seconds(7)),
            .requeued(job, reason: .retryDue),
            .failed(job, reason: .signal(9), attempts: 2),
            .cancelled(job), .paused, .resumed, .slotsChanged(local: 2, total: 2), .shuttingDown(.cancelRunning),
            .workerLeft(worker.id, reason: .removed("gone")), .lagged(missed: 7), .reprioritized(job, from: 1, to: 2),
            .coalesced(existing: job, key: "k"), .began(job, attempt: 1), .succeeded(job, attempts: 1),
            .output(job, OutputLine(stream: .stdout, text: "Downloading... ", ending: .none)),
        ]
        var lines: [String] = []
        for (offset, kind) in kinds.enumerated() {
            let line = formatter.line(for: event(UInt64(offset + 1), at: offset * 1000, kind))
            lines.append(try #require(line))
        }
        let objects = try Log.json(lines)
        #expect(objects.map { $0["event"] as? String } == kinds.map(\.name))
        #expect(objects.map { $0["seq"] as? Int } == Array(1...kinds.count))
        #expect(objects.allSatisfy { ($0["ts"] as? String)?.hasSuffix("Z") == true })
        #expect(objects[1]["name"] as? String == odd)
        #expect(objects[1]["job"] as? String == job.description)
        #expect(objects[3]["text"] as? String == odd)
        #expect(objects[3]["stream"] as? String == "stderr")
        #expect(objects[3]["partial"] == nil)
        #expect(objects[4]["progress"] as? Double == 0.5)
        #expect(objects[6]["timeout"] as? Double == 2)
        #expect(objects[6]["retry_in"] as? Double == 1)
        #expect(objects[8]["signal"] as? String == "SIGKILL")
        // A piece of a line: its rest comes in the job's next output.
        #expect(objects.last?["partial"] as? Bool == true)
    }

    @Test("Progress is logged at most every 250ms per job, and 100% always")
    func progressIsRateLimited() {
        let formatter = EventLogFormatter(format: .text, logsOutput: false, epoch: 0)
        _ = formatter.line(for: event(1, at: 0, .submitted(JobInfo(id: job, command: "x"))))
        let ticks: [(Int, Double)] = [(0, 0.1), (100, 0.2), (200, 0.3), (260, 0.4), (300, 0.5), (320, 1.0)]
        let logged = ticks.enumerated().compactMap { offset, tick in
            formatter.line(for: event(UInt64(offset + 2), at: tick.0, .progress(job, tick.1)))
        }
        #expect(logged.count == 3)
        #expect(logged.map { $0.split(separator: " ").last! } == ["progress=10%", "progress=40%", "progress=100%"])
    }

    @Test("A progress tick the interval held back is logged before the attempt ends (10% 20% 30% logged only 10%)")
    func heldProgressComesBeforeTheEnd() {
        let formatter = EventLogFormatter(format: .text, logsOutput: false, epoch: 0)
        _ = formatter.line(for: event(1, at: 0, .submitted(JobInfo(id: job, command: "x"))))
        var logged: [String] = []
        for (offset, tick) in [(0, 0.1), (100, 0.2), (200, 0.3)].enumerated() {
            logged += formatter.lines(for: event(UInt64(offset + 2), at: tick.0, .progress(job, tick.1)))
        }
        logged += formatter.lines(for: event(9, at: 250, .succeeded(job, attempts: 1)))
        #expect(logged.count == 3, "\(logged)")
        #expect(logged.map { $0.split(separator: " ").last! }.prefix(2) == ["progress=10%", "progress=30%"])
        #expect(logged.last?.contains("succeeded") == true)
        // Nothing held: the end comes alone.
        #expect(formatter.lines(for: event(10, at: 300, .cancelled(job))).count <= 1)
    }

    @Test("Output lines are not logged unless asked")
    func quietByDefault() {
        let formatter = EventLogFormatter(format: .text, logsOutput: false, epoch: 0)
        #expect(formatter.line(for: event(1, at: 0, .output(job, OutputLine(stream: .stdout, text: "hi")))) == nil)
    }

    @Test("Timestamps are ISO 8601 UTC with milliseconds")
    func timestamps() {
        #expect(EventLogFormatter.iso8601(0) == "1970-01-01T00:00:00.000Z")
        #expect(EventLogFormatter.iso8601(1_795_000_000.9996) == "2026-11-18T11:06:41.000Z")
        #expect(EventLogFormatter.iso8601(86_399.25) == "1970-01-01T23:59:59.250Z")
    }
}

@Suite("Log escaping")
struct LogEscapingTests {
    @Test("C1 controls, bidi overrides and separators are escaped in both formats; astral ones as surrogate pairs")
    func unsafeCharactersAreEscaped() throws {
        let name = "a\u{9B}31mred\u{202E}evil\u{2028}x\u{E0001}"
        let job = JobID(uuid: UUID())
        let info = JobInfo(id: job, name: name, command: "true")
        let event = SchedulerEvent(seq: 1, time: .zero, kind: .submitted(info))
        let json = try #require(EventLogFormatter(format: .json, logsOutput: false, epoch: 0).line(for: event))
        #expect(json.contains(#"a\u009b31mred\u202eevil\u2028x\udb40\udc01"#), "\(json)")
        let text = try #require(EventLogFormatter(format: .text, logsOutput: false, epoch: 0).line(for: event))
        #expect(text.unicodeScalars.allSatisfy { $0.value >= 0x20 && !(0x7F...0x9F).contains($0.value) && $0.value != 0x202E })
        let decoded = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
        #expect(decoded?["name"] as? String == name)
    }
}

extension EventLogFormatter {
    /// The lines for `event` as one string (joined by newlines), or `nil` for none: what most
    /// tests compare.
    func line(for event: SchedulerEvent) -> String? {
        let lines = lines(for: event)
        return lines.isEmpty ? nil : lines.joined(separator: "\n")
    }
}
