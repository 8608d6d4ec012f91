import Testing
@testable import Scheduler

/// 10,000 jobs in a random DAG across 10 groups on the real scheduler, with random cancels,
/// retries, limit changes and group pauses while they run. Only invariants, read from the event
/// stream: no job starts before all its dependencies succeeded, no start takes a group past its
/// limit, every job ends exactly once per time it was opened, and a mirror of the events equals
/// the engine at the end.
@Suite(.timeLimit(.minutes(5)))
struct WorkflowStressTests {
    struct Flaky: Error {}

    /// What the events said, replayed.
    struct Replay {
        var dependencies: [JobID: [JobID]] = [:]
        var group: [JobID: String] = [:]
        var open: [JobID: Bool] = [:]
        var openCount = 0
        var succeeded: Set<JobID> = []
        var running: Set<JobID> = []
        var runningPerGroup: [String: Int] = [:]
        var limits: [String: Int] = [:]
        var starts = 0
        var skips = 0
        var reopened = 0
        var violations: [String] = []

        mutating func apply(_ kind: SchedulerEvent.Kind) {
            if let id = kind.jobID, running.contains(id) {
                switch kind {
                case .progress, .output, .stopping, .leftoverProcesses, .reprioritized: break
                default:
                    running.remove(id)
                    runningPerGroup[group[id]!, default: 0] -= 1
                }
            }
            switch kind {
            case .submitted(let info):
                dependencies[info.id] = info.dependencies
                group[info.id] = info.group
                open[info.id] = true
                openCount += 1
            case .groupChanged(let changed):
                limits[changed.name] = changed.limit
            case .started(let id, _, _, _):
                starts += 1
                for dependency in dependencies[id] ?? [] where !succeeded.contains(dependency) {
                    violations.append("\(id.short) started before its dependency \(dependency.short) succeeded")
                }
                let name = group[id]!
                if let limit = limits[name], runningPerGroup[name, default: 0] >= limit {
                    violations.append("\(id.short) started in group \(name) with \(runningPerGroup[name, default: 0]) running, limit \(limit)")
                }
                running.insert(id)
                runningPerGroup[name, default: 0] += 1
            case .requeued(let id, .retriedByUser), .blocked(let id, _), .scheduled(let id, _):
                if open[id] != true {
                    open[id] = true
                    openCount += 1
                    reopened += 1
                    succeeded.remove(id)
                }
            case .succeeded(let id, _):
                succeeded.insert(id)
            case .skipped:
                skips += 1
            default:
                break
            }
            if kind.isFinal, let id = kind.jobID {
                if open[id] != true { violations.append("\(id.short) ended twice (\(kind.name))") }
                open[id] = false
                openCount -= 1
            }
        }
    }

    @Test func tenThousandJobsInARandomDAGAcrossTenGroupsKeepEveryRule() async throws {
        let jobCount = 10_000
        let groups = (0..<10).map { "g\($0)" }
        let scheduler = Scheduler(configuration: .init(localSlots: 6, subscriberBufferLimit: 1 << 22, seed: 11))
        async let running: Void = scheduler.run()
        let events = await scheduler.events(includeOutput: false)
        var random = IdentifierGenerator(seed: 4242)
        func below(_ bound: Int) -> Int { Int(random.nextUInt64() % UInt64(bound)) }

        for name in groups where below(3) > 0 { try await scheduler.setGroupLimit(name, to: 1 + below(3)) }
        var ids: [JobID] = []
        let chunk = 500
        for start in stride(from: 0, to: jobCount, by: chunk) {
            var specs: [JobSpec] = []
            for index in 0..<chunk {
                let fails = below(100) < 8
                var spec = JobSpec(work: .closure { _ in
                    await Task.yield()
                    if fails { throw Flaky() }
                })
                spec.name = "job-\(start + index)"
                spec.group = groups[below(groups.count)]
                spec.priority = below(5)
                for _ in 0..<below(3) {
                    if index > 0 && below(4) > 0 {
                        spec.dependencies.append(.earlier(max(0, index - 1 - below(20))))
                    } else if !ids.isEmpty {
                        spec.dependencies.append(.job(ids[ids.count - 1 - below(min(ids.count, 200))]))
                    }
                }
                specs.append(spec)
            }
            ids += try await scheduler.submit(contentsOf: specs)
            // Steer while they run.
            for _ in 0..<30 {
                let id = ids[below(ids.count)]
                switch below(10) {
                case 0...2: try? await scheduler.cancel(id)
                case 3...5: try? await scheduler.retry(id)
                case 6...7: try? await scheduler.setGroupLimit(groups[below(groups.count)], to: below(4) == 0 ? nil : 1 + below(3))
                default:
                    let name = groups[below(groups.count)]
                    try await scheduler.pauseGroup(name)
                    try await scheduler.resumeGroup(name)
                }
            }
        }
        let steeringDone = await scheduler.snapshot().seq

        var replay = Replay()
        var mirror = SchedulerMirror(finishedRetention: 20_000)
        for await event in events {
            mirror.apply(event)
            if case .snapshot = event.kind { continue }
            replay.apply(event.kind)
            if event.seq >= steeringDone && replay.openCount == 0 && replay.open.count == jobCount { break }
        }
        #expect(replay.violations.isEmpty, "\(replay.violations.prefix(5))")
        #expect(replay.open.count == jobCount && replay.openCount == 0)
        #expect(replay.starts > jobCount / 2 && replay.skips > 0 && replay.reopened > 0, "starts \(replay.starts), skips \(replay.skips), reopened \(replay.reopened)")

        let snapshot = await scheduler.snapshot()
        #expect(snapshot.isSettled)
        #expect(snapshot.total == jobCount)
        for kind in JobStateKind.allCases { #expect(mirror.count(kind) == snapshot.count(kind), "\(kind)") }
        #expect(mirror.groupStatuses == snapshot.groups)
        await scheduler.shutdown(.graceful)
        await running
    }
}
