import Testing
@testable import Scheduler

/// The one projection of events: after any sequence of commands and results, a mirror fed the
/// events equals the engine's own snapshot.
@Suite struct MirrorPropertyTests {
    /// A small deterministic generator, so a failing sequence can be replayed from its seed.
    struct Random {
        var generator: IdentifierGenerator
        init(seed: UInt64) { generator = IdentifierGenerator(seed: seed) }
        mutating func below(_ bound: Int) -> Int { Int(generator.nextUInt64() % UInt64(max(1, bound))) }
        mutating func chance(_ percent: Int) -> Bool { below(100) < percent }
    }

    struct World {
        var core: SchedulerCore
        var mirror: SchedulerMirror
        var ids = IdentifierGenerator(seed: 99)
        var now: SchedulerTime = .zero
        var seq: UInt64 = 0
        var workers: [WorkerDescriptor] = []
        /// What each worker runs: (job, attempt, worker).
        var running: [(JobID, Int, WorkerID)] = []
        /// Held attempts the core asked back: (job, attempt, worker).
        var withdrawals: [(JobID, Int, WorkerID)] = []
        var known: [JobID] = []
        /// The progress each job reported in its current attempt, as the engine's output store
        /// keeps it (reset when an attempt starts).
        var progress: [JobID: Double] = [:]

        init(retention: Int) {
            core = SchedulerCore(configuration: .init(finishedRetention: retention, maxWorkerLossRequeues: 1, seed: 3))
            mirror = SchedulerMirror(finishedRetention: retention)
            mirror.apply(SchedulerEvent(seq: 0, time: .zero, kind: .snapshot(core.snapshot(seq: 0, now: .zero) { _ in nil })))
        }

        mutating func take(_ actions: [SchedulerCore.Action]) {
            for action in actions {
                switch action {
                case .emit(let kind):
                    seq += 1
                    // Every job that leaves the table is named as it goes, and no other.
                    let before = Set(mirror.jobs.keys)
                    var evicted: [JobID] = []
                    mirror.apply(SchedulerEvent(seq: seq, time: now, kind: kind)) { evicted.append($0) }
                    let vanished = before.subtracting(mirror.jobs.keys)
                    #expect(evicted.count == vanished.count && Set(evicted) == vanished, "evicted \(evicted), vanished \(vanished)")
                    if case .submitted(let info) = kind { known.append(info.id) }
                    if case .started(let id, _, _, _) = kind { progress[id] = nil }
                case .start(let id, let attempt, let worker):
                    running.append((id, attempt, worker))
                case .withdraw(let id, let attempt, let worker):
                    withdrawals.append((id, attempt, worker))
                case .stop, .removeWorker, .reprioritizeHeld:
                    break
                }
            }
        }

        func check(_ step: String) {
            let snapshot = core.snapshot(seq: seq, now: now) { progress[$0] }
            let expected = Dictionary(uniqueKeysWithValues: snapshot.jobs.map { ($0.id, $0) })
            #expect(mirror.jobs.count == expected.count, "\(step): \(mirror.jobs.count) jobs mirrored, \(expected.count) in the engine")
            for (id, info) in expected where mirror.jobs[id] != info {
                Issue.record("\(step): job \(id.short) mirrored as \(String(describing: mirror.jobs[id])), engine has \(info)")
                return
            }
            for kind in JobStateKind.allCases {
                #expect(mirror.count(kind) == snapshot.count(kind), "\(step): count of \(kind)")
            }
            #expect(mirror.isPaused == snapshot.isPaused && mirror.shutdown == snapshot.shutdown, "\(step)")
            #expect(mirror.localSlots == snapshot.localSlots && mirror.totalSlots == snapshot.totalSlots, "\(step)")
            #expect(mirror.workers.map(\.id) == snapshot.workers.map(\.descriptor.id), "\(step): workers")
            for worker in snapshot.workers {
                #expect(mirror.worker(worker.descriptor.id) == worker.descriptor, "\(step): worker \(worker.descriptor.name) by id")
            }
            #expect(mirror.runningJobs == Set(snapshot.workers.flatMap(\.running)), "\(step): running jobs")
            #expect(mirror.heldAttempts == snapshot.heldAttempts, "\(step): held attempts")
            // No event says a busy worker began to retire: the mirror knows only what a snapshot
            // said, and never more than the engine.
            #expect(mirror.retiringWorkers.isSubset(of: Set(snapshot.workers.filter(\.isRetiring).map(\.descriptor.id))), "\(step): retiring")
        }
    }

    @Test(arguments: Array(UInt64(1)...40))
    func aMirrorFedTheEventsEqualsTheEnginesSnapshot(seed: UInt64) async {
        var random = Random(seed: seed)
        var world = World(retention: 4 + random.below(8))
        for step in 0..<300 {
            // Give the test process's pool threads to other tests now and then.
            if step % 10 == 0 { await Task.yield() }
            world.now += .milliseconds(1 + random.below(400))
            let choice = random.below(100)
            var label = ""
            switch choice {
            case 0..<8:
                label = "worker joins"
                // One in three holds attempts (a remote worker's prefetch): its starts are held
                // until they begin.
                // Some of those run fewer than their slots and give back what they hold.
                let holds = random.chance(33)
                let slots = 1 + random.below(2)
                let worker = WorkerDescriptor(
                    id: WorkerID(), name: "w\(step)", kind: holds ? .remote : .local, slots: slots, holdsAttempts: holds,
                    ownSlots: holds && slots > 1 && random.chance(50) ? 1 : nil, withdrawsHeld: holds && random.chance(70))
                world.workers.append(worker)
                world.take(world.core.workerJoined(worker, now: world.now))
            case 8..<30:
                label = "submit"
                let count = 1 + random.below(4)
                let specs = (0..<count).map { index -> JobSpec in
                    var spec = JobSpec.shell("job \(step).\(index)", priority: random.below(5) - 2)
                    spec.retry = .retries(random.below(3), backoff: .milliseconds(100))
                    if random.chance(20) { spec.timeout = .milliseconds(300) }
                    if random.chance(10) { spec.coalescingKey = "k\(random.below(3))" }
                    return spec
                }
                let fresh = specs.map { _ in world.ids.nextJobID() }
                if let (_, actions) = try? world.core.submit(contentsOf: specs, ids: fresh, now: world.now) { world.take(actions) }
            case 30..<34 where !world.running.isEmpty:
                // (What a job reports comes between its start and its end: its attempt's reporter
                // publishes nothing after that.)
                label = "a running job reports progress"
                let (id, _, _) = world.running[random.below(world.running.count)]
                let fraction = Double(random.below(101)) / 100
                world.progress[id] = fraction
                world.seq += 1
                world.mirror.apply(SchedulerEvent(seq: world.seq, time: world.now, kind: .progress(id, fraction))) { _ in }
            case 34..<58 where !world.running.isEmpty:
                label = "a job ends"
                let (id, attempt, worker) = world.running.remove(at: random.below(world.running.count))
                let termination: Termination = [.exit(0), .exit(0), .exit(1), .signal(9), .error("boom")][random.below(5)]
                world.take(world.core.jobFinished(
                    id, attempt: attempt, worker: worker, termination: termination, stopTookEffect: random.chance(80), now: world.now))
            case 58..<66 where !world.known.isEmpty:
                label = "cancel"
                if let actions = try? world.core.cancel(world.known[random.below(world.known.count)], now: world.now) { world.take(actions) }
            case 66..<72 where !world.known.isEmpty:
                label = "set priority"
                let id = world.known[random.below(world.known.count)]
                if let actions = try? world.core.reprioritize(id, to: random.below(9) - 4, now: world.now) { world.take(actions) }
            case 72..<78 where !world.known.isEmpty:
                label = "retry"
                if let actions = try? world.core.retry(world.known[random.below(world.known.count)], now: world.now) { world.take(actions) }
            case 78..<84:
                label = "timers"
                world.take(world.core.timersDue(now: world.now))
            case 84..<88:
                label = random.chance(50) ? "pause" : "resume"
                world.take(label == "pause" ? world.core.pause(now: world.now) : world.core.resume(now: world.now))
            case 88..<92 where !world.workers.isEmpty:
                label = "worker lost"
                let worker = world.workers.remove(at: random.below(world.workers.count))
                world.running.removeAll { $0.2 == worker.id }
                world.take(world.core.workerLost(worker.id, reason: .removed("gone"), now: world.now))
            case 92..<95:
                label = "slots reduced"
                world.take(world.core.reduceLocalSlots(to: random.below(3), now: world.now))
            case 95..<98 where !world.running.isEmpty:
                label = "an attempt begins"
                let (id, attempt, _) = world.running[random.below(world.running.count)]
                world.take(world.core.attemptBegan(id, attempt: attempt, now: world.now))
            case 98..<100 where !world.withdrawals.isEmpty:
                label = "a held attempt is given back"
                let (id, attempt, worker) = world.withdrawals.remove(at: random.below(world.withdrawals.count))
                // Unless it ended, or its worker went, meanwhile.
                if let index = world.running.firstIndex(where: { $0.0 == id && $0.1 == attempt && $0.2 == worker }) {
                    world.running.remove(at: index)
                    world.take(world.core.jobFinished(
                        id, attempt: attempt, worker: worker, termination: .withdrawn, stopTookEffect: random.chance(50), now: world.now))
                }
            default:
                label = "timers"
                world.take(world.core.timersDue(now: world.now))
            }
            world.check("seed \(seed) step \(step) (\(label))")
        }
        if seed % 2 == 0 {
            // Half the runs first stop what runs and keep the queue: every attempt ends (asked
            // back or stopped; some began meanwhile, some ended on their own), and its job is
            // back in the queue as the mirror says.
            world.take(world.core.shutdown(.stopRunning, now: world.now))
            world.check("seed \(seed) after stopRunning")
            var turn = 0
            while !world.running.isEmpty {
                turn += 1
                world.now += .milliseconds(1 + random.below(50))
                let (id, attempt, worker) = world.running.remove(at: random.below(world.running.count))
                let isAskedBack = world.withdrawals.contains { $0.0 == id && $0.1 == attempt && $0.2 == worker }
                if isAskedBack && random.chance(70) {
                    world.take(world.core.jobFinished(id, attempt: attempt, worker: worker, termination: .withdrawn, stopTookEffect: true, now: world.now))
                } else {
                    if isAskedBack { world.take(world.core.attemptBegan(id, attempt: attempt, now: world.now)) }
                    let termination: Termination = random.chance(20) ? .exit(0) : .signal(15)
                    world.take(world.core.jobFinished(
                        id, attempt: attempt, worker: worker, termination: termination, stopTookEffect: termination != .exit(0), now: world.now))
                }
                world.check("seed \(seed) stopRunning, end \(turn)")
            }
            #expect(world.core.isShutdownComplete, "seed \(seed)")
        }
        world.take(world.core.shutdown(.cancelRunning, now: world.now))
        world.check("seed \(seed) after shutdown")
    }
}
