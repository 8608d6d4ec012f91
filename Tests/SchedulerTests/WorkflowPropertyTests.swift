import Testing
@testable import Scheduler

/// Random workflows against the pure core: random DAGs across groups with limits, pauses, start
/// times, cancels, retries and failures. After every step: a mirror fed the events equals the
/// engine; no job started before all its dependencies succeeded; no group runs more than its
/// limit because of a start; every job ends exactly once per time it was (re)opened.
@Suite struct WorkflowPropertyTests {
    typealias World = MirrorPropertyTests.World
    typealias Random = MirrorPropertyTests.Random

    /// What the events said about each job.
    struct Ledger {
        /// Whether the job is open (not ended since it was submitted or brought back).
        var open: [JobID: Bool] = [:]
        var violations: [String] = []

        mutating func record(_ kind: SchedulerEvent.Kind, core: SchedulerCore, step: String) {
            switch kind {
            case .submitted(let info):
                open[info.id] = true
            case .started(let id, _, _, _):
                for dependency in core.info(of: id)?.dependencies ?? [] where core.state(of: dependency)?.kind != .succeeded {
                    violations.append("\(step): \(id.short) started before \(dependency.short) succeeded (\(String(describing: core.state(of: dependency))))")
                }
            case .requeued(let id, .retriedByUser), .blocked(let id, _), .scheduled(let id, _):
                // A user's retry, or a skipped job brought back: it is open again.
                if case .requeued = kind, open[id] == true { violations.append("\(step): \(id.short) retried while open") }
                open[id] = true
            default:
                break
            }
            if kind.isFinal, let id = kind.jobID {
                if open[id] != true { violations.append("\(step): \(id.short) ended twice (\(kind.name))") }
                open[id] = false
            }
        }
    }

    @Test(arguments: Array(UInt64(1)...30))
    func randomWorkflowsKeepEveryRule(seed: UInt64) async {
        var random = Random(seed: seed)
        // A retention big enough to keep every job: the checks read the dependencies' states.
        var world = World(retention: 100_000)
        var ledger = Ledger()
        let groups: [String?] = [nil, "a", "b", "c"]
        var stepLabel = ""

        func take(_ actions: [SchedulerCore.Action]) {
            for case .emit(let kind) in actions { ledger.record(kind, core: world.core, step: stepLabel) }
            world.take(actions)
            // A start never takes a group beyond its limit (a lowered limit stops nothing, so it
            // is checked only for groups that started a job in this step).
            let started = Set(actions.compactMap { if case .start(let id, _, _) = $0 { world.core.info(of: id)?.group } else { nil } })
            for name in started {
                guard let group = world.core.group(name), let limit = group.group.limit else { continue }
                if group.running > limit { ledger.violations.append("\(stepLabel): group \(name) runs \(group.running) > \(limit)") }
            }
        }

        for step in 0..<300 {
            // Long and synchronous otherwise: give the test process's few pool threads to the
            // other tests (ones that send a signal at a moment, say) now and then.
            if step % 10 == 0 { await Task.yield() }
            world.now += .milliseconds(1 + random.below(400))
            let choice = random.below(100)
            stepLabel = "seed \(seed) step \(step)"
            switch choice {
            case 0..<6:
                stepLabel += " (worker joins)"
                let worker = WorkerDescriptor(id: WorkerID(), name: "w\(step)", kind: .local, slots: 1 + random.below(3))
                world.workers.append(worker)
                take(world.core.workerJoined(worker, now: world.now))
            case 6..<30:
                stepLabel += " (submit)"
                let count = 1 + random.below(5)
                let specs = (0..<count).map { index -> JobSpec in
                    var spec = JobSpec.shell("job \(step).\(index)", name: "j\(step).\(index)", priority: random.below(5) - 2)
                    spec.group = groups[random.below(groups.count)]
                    spec.retry = .retries(random.below(2), backoff: .milliseconds(100))
                    for _ in 0..<random.below(3) {
                        if index > 0 && random.chance(60) {
                            spec.dependencies.append(.earlier(random.below(index)))
                        } else if !world.known.isEmpty {
                            spec.dependencies.append(.job(world.known[random.below(world.known.count)]))
                        }
                    }
                    if random.chance(15) { spec.notBefore = .delay(.milliseconds(random.below(2000))) }
                    return spec
                }
                let fresh = specs.map { _ in world.ids.nextJobID() }
                if let (_, actions) = try? world.core.submit(contentsOf: specs, ids: fresh, now: world.now) { take(actions) }
            case 30..<58 where !world.running.isEmpty:
                stepLabel += " (a job ends)"
                let (id, attempt, worker) = world.running.remove(at: random.below(world.running.count))
                let termination: Termination = [.exit(0), .exit(0), .exit(0), .exit(1), .signal(9)][random.below(5)]
                take(world.core.jobFinished(id, attempt: attempt, worker: worker, termination: termination, now: world.now))
            case 58..<64 where !world.known.isEmpty:
                stepLabel += " (cancel)"
                if let actions = try? world.core.cancel(world.known[random.below(world.known.count)], now: world.now) { take(actions) }
            case 64..<72 where !world.known.isEmpty:
                stepLabel += " (retry)"
                if let actions = try? world.core.retry(world.known[random.below(world.known.count)], now: world.now) { take(actions) }
            case 72..<78:
                stepLabel += " (limit)"
                let name = groups[1 + random.below(groups.count - 1)]!
                let limit = random.chance(25) ? nil : 1 + random.below(3)
                if let actions = try? world.core.setGroupLimit(name, to: limit, now: world.now) { take(actions) }
            case 78..<83:
                let name = groups[1 + random.below(groups.count - 1)]!
                if random.chance(50) {
                    stepLabel += " (pause group)"
                    if let actions = try? world.core.pauseGroup(name, now: world.now) { take(actions) }
                } else {
                    stepLabel += " (resume group)"
                    if let actions = try? world.core.resumeGroup(name, now: world.now) { take(actions) }
                }
            case 83..<86:
                stepLabel += " (pause or resume)"
                take(random.chance(50) ? world.core.pause(now: world.now) : world.core.resume(now: world.now))
            case 86..<89 where !world.workers.isEmpty:
                stepLabel += " (worker lost)"
                let worker = world.workers.remove(at: random.below(world.workers.count))
                world.running.removeAll { $0.2 == worker.id }
                take(world.core.workerLost(worker.id, reason: .removed("gone"), now: world.now))
            default:
                stepLabel += " (timers)"
                take(world.core.timersDue(now: world.now))
            }
            world.check(stepLabel)
            let snapshot = world.core.snapshot(seq: 0, now: world.now) { _ in nil }
            #expect(world.mirror.groupStatuses == snapshot.groups, "\(stepLabel): groups")
            // The core's per-group counts agree with its jobs.
            for status in snapshot.groups {
                let mine = snapshot.jobs.filter { $0.group == status.group.name }
                #expect(status.running == mine.count { $0.state.kind == .running }, "\(stepLabel): \(status.group.name) running")
                #expect(status.queued == mine.count { $0.state.kind == .queued }, "\(stepLabel): \(status.group.name) queued")
                #expect(status.held == mine.count { $0.state.kind.isHeldInGroup }, "\(stepLabel): \(status.group.name) held")
            }
            if !ledger.violations.isEmpty { break }
        }
        // Everything ends: a cancel of all, and every running attempt reported.
        stepLabel = "seed \(seed) shutdown"
        take(world.core.shutdown(.cancelRunning, now: world.now))
        for (id, attempt, worker) in world.running {
            take(world.core.jobFinished(id, attempt: attempt, worker: worker, termination: .signal(15), now: world.now))
        }
        world.check(stepLabel)
        #expect(ledger.violations.isEmpty, "\(ledger.violations.prefix(5))")
        #expect(ledger.open.values.allSatisfy { !$0 }, "every job ended")
        #expect(world.core.isShutdownComplete)
        #expect(world.core.rejectedTransitions == 0)
    }
}
