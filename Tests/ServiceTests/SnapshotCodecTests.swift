import Foundation
import Scheduler
@testable import SchedulerService
import Testing

/// The binary snapshot frame carries every job exactly: each state, every optional field set and
/// unset, odd strings; and a damaged frame is an error, never a crash.
@Suite("Snapshot codec")
struct SnapshotCodecTests {
    static let worker = WorkerID(uuid: UUID())

    /// One job in every state, with and without each optional field.
    static var jobs: [JobInfo] {
        let states: [JobState] = [
            .queued, .blocked, .cancelled, .succeeded(attempts: 3), .scheduled(until: .seconds(90) + .nanoseconds(7)),
            .running(worker: worker, attempt: 2, since: .milliseconds(1500), stopping: nil),
            .running(worker: worker, attempt: 1, since: .zero, stopping: .timeout),
            .waitingForRetry(until: .seconds(3), failedAttempt: 1, reason: .exitStatus(2)),
            .failed(reason: .signal(9), attempts: 4), .failed(reason: .timeout(.seconds(5)), attempts: 1),
            .failed(reason: .workerLost(.connectionLost("gone")), attempts: 2),
            .skipped(SkipReason(dependency: JobID(uuid: UUID()), dependencyName: "a", outcome: .failed)),
        ]
        var jobs: [JobInfo] = []
        for (index, state) in states.enumerated() {
            jobs.append(JobInfo(id: JobID(uuid: UUID()), command: "true", state: state))
            jobs.append(JobInfo(
                id: JobID(uuid: UUID()), name: "näme \(index) 🚀", command: "echo 'a $b' \"c\"\nline two\u{0}", priority: -7 * index,
                state: state, attempts: index, maxAttempts: Int.max, progress: 0.25, submittedAt: .seconds(-3) + .nanoseconds(1),
                startedAt: .seconds(index), finishedAt: .seconds(index * 2), lastFailure: .error("boom"), key: "k\(index)",
                group: "g\(index)", dependencies: [JobID(uuid: UUID()), JobID(uuid: UUID())],
                workingDirectory: "/srv/ä \(index)", environment: ["B": "2 ü", "A": "", "PATH": "/bin:/usr/bin"]))
            jobs.append(JobInfo(id: JobID(uuid: UUID()), command: "", priority: Int.min, state: state, attempts: 1, startedAt: .seconds(1)))
            // Its place in submission order, small and at the end of the range.
            jobs[jobs.count - 2].order = UInt64(index + 1)
            jobs[jobs.count - 1].order = .max
            jobs.append(JobInfo(id: JobID(uuid: UUID()), command: "env only", state: state, environment: ["X": "1"]))
            jobs.append(JobInfo(id: JobID(uuid: UUID()), command: "cwd only", state: state, workingDirectory: "/tmp"))
        }
        return jobs
    }

    static var snapshot: SchedulerSnapshot {
        SchedulerSnapshot(
            seq: 42, time: .milliseconds(1500), isPaused: true, shutdown: .drain, counts: [.queued: 3, .failed: 1], localSlots: 2,
            totalSlots: 6, finishedPerSecond: 2.5, groups: [GroupStatus(group: JobGroup(name: "g", limit: 2, isPaused: true), running: 1)],
            jobs: jobs)
    }

    @Test("every job comes back equal, with the snapshot's header")
    func roundTrip() throws {
        let snapshot = Self.snapshot
        var writer = ByteWriter()
        try SnapshotCodec.encode(snapshot, into: &writer)
        let back = try writer.bytes.withUnsafeBytes { buffer in
            var reader = ByteReader(buffer)
            let back = try SnapshotCodec.decode(from: &reader)
            #expect(reader.isAtEnd)
            return back
        }
        #expect(back.jobs == snapshot.jobs)
        #expect(back.seq == 42 && back.time == .milliseconds(1500) && back.isPaused && back.shutdown == .drain)
        #expect(back.counts == snapshot.counts && back.totalSlots == 6 && back.finishedPerSecond == 2.5 && back.groups == snapshot.groups)
    }

    @Test("the codec writes every field JobInfo has (a new one must be added to it)")
    func everyField() {
        let fields = Mirror(reflecting: JobInfo(id: JobID(uuid: UUID()), command: "x")).children.compactMap(\.label)
        #expect(fields == [
            "id", "name", "command", "priority", "state", "maxAttempts", "progress", "submittedAt", "order", "key", "group", "dependencies",
            "history",
            "workingDirectory", "environment",
        ])
        let history = Mirror(reflecting: JobInfo.History()).children.compactMap(\.label)
        #expect(history == ["attempts", "startedAt", "finishedAt", "lastFailure"])
    }

    @Test("a subscription's events: the snapshot binary, the rest JSON, both back as they were")
    func events() throws {
        let id = JobID(uuid: UUID())
        for kind: SchedulerEvent.Kind in [.snapshot(Self.snapshot), .lagged(missed: 4), .cancelled(id), .workerResized(WorkerID(), slots: 18)] {
            let event = SchedulerEvent(seq: 9, time: .seconds(2), kind: kind)
            let bytes: [UInt8] = try EventMessageSerializer().serialize(event)
            let back = try EventMessageDeserializer().deserialize(bytes)
            #expect(back.seq == 9 && back.time == .seconds(2) && back.kind.name == kind.name)
            if case .snapshot(let sent) = kind, case .snapshot(let got) = back.kind { #expect(got.jobs == sent.jobs) }
            if case .workerResized(let sent, let slots) = kind {
                guard case .workerResized(let got, let gotSlots) = back.kind else { Issue.record("not a resize: \(back.kind)"); continue }
                #expect(got == sent && gotSlots == slots)
            }
        }
    }

    @Test("every truncation of a frame is an error, not a crash or a wrong snapshot")
    func truncated() throws {
        var writer = ByteWriter()
        try SnapshotCodec.encode(SchedulerSnapshot(jobs: Array(Self.jobs.prefix(12))), into: &writer)
        let bytes = writer.bytes
        for length in 0..<bytes.count {
            let prefix = Array(bytes.prefix(length))
            #expect(throws: (any Error).self) {
                try prefix.withUnsafeBytes { buffer in
                    var reader = ByteReader(buffer)
                    _ = try SnapshotCodec.decode(from: &reader)
                }
            }
        }
    }
}
