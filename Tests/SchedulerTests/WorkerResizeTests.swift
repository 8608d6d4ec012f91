import Testing
@testable import Scheduler

/// A worker's slot count changed while it is in the pool (a remote worker's prefetch depth sized
/// to its link): more slots start queued jobs at once, fewer take effect as its jobs end, and the
/// mirror follows.
@Suite struct WorkerResizeTests {
    static let far = WorkerDescriptor(id: WorkerID(), name: "far", kind: .remote, slots: 2)

    var core = SchedulerCore(configuration: .init(seed: 11))
    var ids = IdentifierGenerator(seed: 3)
    var mirror = SchedulerMirror()

    mutating func apply(_ actions: [SchedulerCore.Action]) -> [JobID] {
        var started: [JobID] = []
        for action in actions {
            if case .emit(let kind) = action { _ = mirror.apply(SchedulerEvent(seq: 0, time: .zero, kind: kind)) }
            if case .start(let id, _, _) = action { started.append(id) }
        }
        return started
    }

    mutating func submit(_ count: Int) throws -> [JobID] {
        let specs = (0..<count).map { JobSpec.shell("job \($0)") }
        let result = try core.submit(contentsOf: specs, ids: specs.map { _ in ids.nextJobID() }, now: .zero)
        _ = apply(result.actions)
        return result.ids
    }

    @Test mutating func moreSlotsStartQueuedJobsAtOnceAndFewerTakeEffectAsJobsEnd() throws {
        // Given a 2-slot worker running 2 of 6 queued jobs
        _ = apply(core.workerJoined(Self.far, holdsAttempts: true, now: .zero))
        let jobs = try submit(6)
        #expect((core.counts[.running] ?? 0) == 2)

        // When it gets 5 slots: 3 more start in the same step, and the mirror says 5
        let grown = core.setWorkerSlots(Self.far.id, to: 5, now: .seconds(1))
        #expect(apply(grown).count == 3)
        #expect(BatchTests.events(grown).prefix(2) == ["worker-slots", "slots"])
        #expect(core.capacity == 5)
        #expect(mirror.worker(Self.far.id)?.slots == 5)
        #expect(mirror.totalSlots == 5)

        // When it goes back to 2 slots while 5 run: nothing is stopped, nothing new starts
        let shrunk = core.setWorkerSlots(Self.far.id, to: 2, now: .seconds(2))
        #expect(apply(shrunk).isEmpty)
        #expect((core.counts[.running] ?? 0) == 5)
        #expect(mirror.worker(Self.far.id)?.slots == 2)

        // Then ending jobs gives no slot back until fewer than 2 run: the 6th job starts only
        // after the 4th end
        let running = jobs.filter { core.info(of: $0)?.state.kind == .running }
        var startedAfter: [Int] = []
        for (index, id) in running.prefix(4).enumerated() {
            let ended = core.jobFinished(id, attempt: 1, worker: Self.far.id, termination: .exit(0), now: .seconds(3 + index))
            if !apply(ended).isEmpty { startedAfter.append(index + 1) }
        }
        #expect(startedAfter == [4])
        #expect((core.counts[.running] ?? 0) == 2)
    }

    @Test mutating func theSameCountAnUnknownOrARetiringWorkerChangeNothing() throws {
        _ = apply(core.workerJoined(Self.far, now: .zero))
        #expect(core.setWorkerSlots(Self.far.id, to: 2, now: .zero).isEmpty)
        #expect(core.setWorkerSlots(WorkerID(), to: 4, now: .zero).isEmpty)
        #expect(core.setWorkerSlots(Self.far.id, to: 0, now: .zero).isEmpty)
        _ = try submit(1)
        _ = apply(core.retireWorker(Self.far.id, reason: .drained, now: .zero))
        #expect(core.setWorkerSlots(Self.far.id, to: 4, now: .zero).isEmpty)
        #expect(core.capacity == 0)
    }

    @Test mutating func theMirrorEqualsTheEngineSnapshotAfterResizes() throws {
        _ = apply(core.workerJoined(Self.far, holdsAttempts: true, now: .zero))
        _ = try submit(4)
        for slots in [7, 3, 1, 4] { _ = apply(core.setWorkerSlots(Self.far.id, to: slots, now: .seconds(1))) }
        let snapshot = core.snapshot(seq: 0, now: .seconds(1), progress: { _ in nil })
        #expect(snapshot.workers.map(\.descriptor.slots) == mirror.workers.map(\.slots))
        #expect(snapshot.workers.first?.descriptor.slots == 4)
        #expect((core.counts[.running] ?? 0) == 4)
    }
}
