// Benchmarks of the Scheduler engine. Release build only:
//
//     swift run -c release jobtop-bench [closures|core|dag|floor|queue|shell|slots|all]
//
// Every figure is a ratio against a baseline measured in the same run, so machines and loads
// compare. Benchmarks are not tests: nothing here asserts a timing.
import Foundation
import Scheduler

#if canImport(Glibc)
import Glibc
#endif

/// Seconds `body` takes.
func measure(_ body: () async throws -> Void) async rethrows -> Double {
    let start = ContinuousClock.now
    try await body()
    return (ContinuousClock.now - start).seconds
}

/// The middle value (of an even count, the mean of the two middle ones).
func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    let middle = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
}

/// CPU seconds (user + system) this process has used: unlike wall time, barely affected by
/// other load on the machine.
func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) * 1e-6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

func format(_ value: Double, _ digits: Int = 2) -> String { String(format: "%.\(digits)f", value) }

/// Every run's figure, in order, each times `scale`: what a median leaves out.
func runs(_ values: [Double], scale: Double = 1) -> String {
    values.map { format($0 * scale) }.joined(separator: ", ")
}

/// The load averages (1, 5, 15 minutes) from /proc/loadavg, as `uptime` prints them: figures
/// measured while other work keeps the machine busy are labelled with it.
func loadAverage() -> String {
    guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return "unknown" }
    return text.split(separator: " ").prefix(3).joined(separator: ", ")
}

/// Runs `count` jobs that do nothing, at most `width` at a time, in a bare task group.
func rawTaskGroup(count: Int, width: Int) async {
    await withTaskGroup(of: Void.self) { group in
        var inFlight = 0
        for _ in 0..<count {
            if inFlight == width {
                await group.next()
                inFlight -= 1
            }
            group.addTask {}
            inFlight += 1
        }
    }
}

/// Reads `events` until `count` jobs have ended; returns how many did.
func countFinals(_ events: EventStream, upTo count: Int) async -> Int {
    var finished = 0
    for await event in events where event.kind.isFinal {
        finished += 1
        if finished == count { break }
    }
    return finished
}

/// Runs `count` no-op closure jobs through a scheduler with `width` slots and one subscriber
/// that reads every event.
func schedulerClosures(count: Int, width: Int) async throws {
    let scheduler = Scheduler(configuration: .init(localSlots: width, subscriberBufferLimit: 1 << 20, finishedRetention: benchRetention, finishedTails: 0))
    async let running: Void = scheduler.run()
    let events = await scheduler.events(includeOutput: false)
    async let consumed = countFinals(events, upTo: count)
    let spec = JobSpec(work: .closure { _ in })
    let batchSize = benchBatchSize
    let batch = [JobSpec](repeating: spec, count: batchSize)
    let window = benchWindow
    let run = window == nil ? nil : await scheduler.openBatch()
    var submitted = 0
    while submitted < count {
        if let window, let run { _ = await scheduler.waitForRoom(in: run, below: window - batch.count + 1) }
        try await scheduler.submit(contentsOf: Array(batch.prefix(count - submitted)), batch: run)
        submitted += min(batch.count, count - submitted)
    }
    let finished = await consumed
    precondition(finished == count, "only \(finished) of \(count) jobs finished")
    await scheduler.shutdown(.graceful)
    await running
}

/// `JOBTOP_BENCH_COUNT` scales the job-count benchmarks down for quick runs.
let countOverride = ProcessInfo.processInfo.environment["JOBTOP_BENCH_COUNT"].flatMap { Int($0) }

/// `JOBTOP_BENCH_WIDTH`: another number of slots (and task group width) for the closure
/// benchmarks, for experiments.
let benchWidth = ProcessInfo.processInfo.environment["JOBTOP_BENCH_WIDTH"].flatMap { Int($0) } ?? ProcessInfo.processInfo.activeProcessorCount

/// `JOBTOP_BENCH_WINDOW=N`: at most N unfinished closure jobs submitted at a time, as `jobtop
/// run` streams a long list (else all are queued as fast as they can be submitted).
let benchWindow = ProcessInfo.processInfo.environment["JOBTOP_BENCH_WINDOW"].flatMap { Int($0) }

/// `JOBTOP_BENCH_RETENTION=N`: finished jobs' records kept (1,000 unless told: the drop of the
/// oldest is part of each end's cost).
let benchRetention = ProcessInfo.processInfo.environment["JOBTOP_BENCH_RETENTION"].flatMap { Int($0) } ?? 1_000

/// `JOBTOP_BENCH_BATCH=N`: closure specs per submission (`jobtop run` submits a list 1,024 at
/// a time).
let benchBatchSize = ProcessInfo.processInfo.environment["JOBTOP_BENCH_BATCH"].flatMap { Int($0) } ?? 10_000

func benchClosures() async throws {
    let count = countOverride ?? 1_000_000
    let width = benchWidth
    print("## \(count) no-op closure jobs, \(width) slots, one subscriber (load average at start: \(loadAverage()))")
    var raw: [Double] = []
    var jobs: [Double] = []
    var rawCPU: [Double] = []
    var jobsCPU: [Double] = []
    // JOBTOP_BENCH_PROFILE=1: the scheduler's part once, without the baseline, for a profiler.
    // JOBTOP_BENCH_ONLY=raw: the baseline only (to see how it moves without a scheduler run
    // between its runs).
    let profiling = ProcessInfo.processInfo.environment["JOBTOP_BENCH_PROFILE"] == "1"
    let rawOnly = !profiling && ProcessInfo.processInfo.environment["JOBTOP_BENCH_ONLY"] == "raw"
    for _ in 0..<(profiling ? 1 : 3) {
        var cpu = cpuSeconds()
        if !profiling {
            raw.append(await measure { await rawTaskGroup(count: count, width: width) })
            rawCPU.append(cpuSeconds() - cpu)
        }
        if rawOnly { continue }
        cpu = cpuSeconds()
        jobs.append(try await measure { try await schedulerClosures(count: count, width: width) })
        jobsCPU.append(cpuSeconds() - cpu)
    }
    let perTask = { (cpu: [Double]) in format(median(cpu) / Double(count) * 1e6) }
    if !profiling {
        let r = median(raw)
        print("raw TaskGroup (width \(width)): \(format(r)) s  = \(Int(Double(count) / r)) tasks/s  (CPU \(perTask(rawCPU)) µs/task; runs, in order: \(runs(raw)) s)")
    }
    if !rawOnly {
        let s = median(jobs)
        print("scheduler:                 \(format(s)) s  = \(Int(Double(count) / s)) jobs/s  (CPU \(perTask(jobsCPU)) µs/job; runs, in order: \(runs(jobs)) s)")
        if !profiling {
            // The baseline moves by up to 40% between runs of one process, and a slow one
            // flatters the ratio of the medians: the ratio against the fastest baseline run is
            // given beside it.
            print("ratio scheduler/raw: \(format(s / median(raw)))x wall (medians), \(format(s / raw.min()!))x against the fastest raw run, \(format(median(jobsCPU) / median(rawCPU)))x CPU   (target <= 3x, >= 300k jobs/s)")
        }
    }
    print("load average at end: \(loadAverage())")
    print()
}

/// The closure benchmark against its floor (Floor.swift): a raw task group, the floor and the
/// scheduler, in turn, three times, on the same jobs and window.
func benchFloor() async throws {
    let count = countOverride ?? 1_000_000
    let (width, window, batchSize) = (benchWidth, benchWindow, benchBatchSize)
    print("## \(count) no-op closure jobs, \(width) slots, one subscriber, window \(window.map(String.init) ?? "none"): raw, floor, scheduler (load average at start: \(loadAverage()))")
    var raw: [Double] = []
    var floor: [Double] = []
    var jobs: [Double] = []
    for _ in 0..<3 {
        raw.append(await measure { await rawTaskGroup(count: count, width: width) })
        floor.append(await measure { await floorClosures(count: count, width: width, window: window, batchSize: batchSize) })
        jobs.append(try await measure { try await schedulerClosures(count: count, width: width) })
    }
    let (r, f, s) = (median(raw), median(floor), median(jobs))
    print("raw TaskGroup: \(format(r)) s (runs \(runs(raw)))")
    print("floor:         \(format(f)) s = \(Int(Double(count) / f)) jobs/s (runs \(runs(floor)))")
    print("scheduler:     \(format(s)) s = \(Int(Double(count) / s)) jobs/s (runs \(runs(jobs)))")
    print("floor/raw \(format(f / r))x   scheduler/raw \(format(s / r))x   scheduler/floor \(format(s / f))x   (medians; target scheduler/raw <= 3x)")
    print("load average at end: \(loadAverage())")
    print()
}

/// Per-operation cost as the median over batches: a batch that the OS preempted (10–20 ms on
/// a loaded machine) is an outlier instead of skewing a mean.
func perOperation(batches: Int, size: Int, _ body: (Int) async throws -> Void) async rethrows -> Double {
    var samples: [Double] = []
    for batch in 0..<batches {
        let start = ContinuousClock.now
        for index in 0..<size { try await body(batch * size + index) }
        samples.append((ContinuousClock.now - start).seconds / Double(size))
    }
    return median(samples)
}

func benchQueue() async throws {
    let count = 100_000
    print("## \(count) queued jobs: reprioritize and cancel (median of 100 batches of 200)")
    // Nothing runs: no slots, so every job stays queued.
    let scheduler = Scheduler(configuration: .init(localSlots: 0))
    var ids: [JobID] = []
    for start in stride(from: 0, to: count, by: 10_000) {
        ids += try await scheduler.submit(contentsOf: (start..<start + 10_000).map { JobSpec.shell("true #\($0)") })
    }
    var random = SystemRandomNumberGenerator()
    let shuffled = ids.shuffled(using: &random)
    let priorities = (0..<count).map { _ in Int.random(in: -50...50, using: &random) }
    // Baseline in the same run: an actor call that only looks the job up.
    let lookup = await perOperation(batches: 100, size: 200) { _ = await scheduler.info(of: shuffled[$0]) }
    let reprioritize = try await perOperation(batches: 100, size: 200) {
        try await scheduler.reprioritize(shuffled[$0], to: priorities[$0])
    }
    let cancel = try await perOperation(batches: 100, size: 200) { try await scheduler.cancel(shuffled[$0]) }
    var core = SchedulerCore(configuration: .init(seed: 1))
    let coreIDs = (0..<count).map { _ in JobID(uuid: UUID()) }
    for id in coreIDs { _ = try! core.submit(.shell("true"), id: id, now: .zero) }
    let order = coreIDs.shuffled(using: &random)
    let coreReprioritize = await perOperation(batches: 100, size: 200) {
        _ = try? core.reprioritize(order[$0], to: priorities[$0], now: .zero)
    }
    let coreCancel = await perOperation(batches: 100, size: 200) { _ = try? core.cancel(order[$0], now: .zero) }
    print("through the Scheduler actor (a call + the event published):")
    print("  reprioritize: \(format(reprioritize * 1e6)) µs   cancel: \(format(cancel * 1e6)) µs   (baseline: a lookup call \(format(lookup * 1e6)) µs)")
    print("inside SchedulerCore alone:")
    print("  reprioritize: \(format(coreReprioritize * 1e6)) µs   cancel: \(format(coreCancel * 1e6)) µs   (target < 5 µs)")
    print()
}

/// Runs `command` with /bin/sh and waits; returns its exit status.
@discardableResult
func shell(_ command: String) -> Int32 {
    var pid: pid_t = 0
    let argv: [UnsafeMutablePointer<CChar>?] = [strdup("sh"), strdup("-c"), strdup(command), nil]
    defer { for pointer in argv { free(pointer) } }
    guard posix_spawn(&pid, "/bin/sh", nil, nil, argv, environ) == 0 else { return -1 }
    var status: Int32 = 0
    waitpid(pid, &status, 0)
    return status
}

func schedulerShell(count: Int, slots: Int, command: String = "true") async throws {
    let scheduler = Scheduler(configuration: Scheduler.Configuration(localSlots: slots))
    async let running: Void = scheduler.run()
    let events = await scheduler.events(includeOutput: false)
    async let consumed = countFinals(events, upTo: count)
    try await scheduler.submit(contentsOf: (0..<count).map { _ in .shell(command) })
    _ = await consumed
    let snapshot = await scheduler.snapshot()
    precondition(snapshot.count(.succeeded) == count, "not every job succeeded")
    await scheduler.shutdown(.graceful)
    await running
}

func benchShell() async throws {
    let count = 2_000
    print("## \(count) `true` shell jobs, 2 slots")
    let file = FileManager.default.temporaryDirectory.appendingPathComponent("jobtop-bench-true.txt").path
    try String(repeating: "true\n", count: count).write(toFile: file, atomically: true, encoding: .utf8)
    var xargs: [Double] = []
    var jobs: [Double] = []
    for _ in 0..<3 {
        xargs.append(await measure { shell("xargs -P2 -I{} sh -c '{}' < \(file)") })
        jobs.append(try await measure { try await schedulerShell(count: count, slots: 2) })
    }
    let x = median(xargs), s = median(jobs)
    print("xargs -P2 -I{} sh -c '{}': \(format(x)) s  (\(format(x / Double(count) * 1e3, 3)) ms/job)")
    print("scheduler (sh -c each):    \(format(s)) s  (\(format(s / Double(count) * 1e3, 3)) ms/job)")
    print("ratio scheduler/xargs: \(format(s / x))x   (target <= 1.2x)")
    print()
}

/// The threads of this process now (`Threads:` in /proc/self/status).
func threadCount() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
          let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Threads:") }) else { return 0 }
    return Int(line.dropFirst("Threads:".count).trimmingCharacters(in: .whitespaces)) ?? 0
}

/// A slot is not a thread: thousands of jobs at once, watched by the few I/O threads.
func benchSlots() async throws {
    let count = countOverride ?? 2_000
    print("## \(count) `sleep 1` shell jobs on \(count) local slots: all at once")
    Scheduler.raiseOpenFileLimit()
    let capacity = Scheduler.localSlotCapacity()
    guard count <= capacity.slots else {
        print("skipped: \(capacity.explanation)")
        print()
        return
    }
    var walls: [Double] = []
    var peaks: [Int] = []
    for _ in 0..<3 {
        let sampler = Task.detached {
            var peak = 0
            while !Task.isCancelled {
                peak = max(peak, threadCount())
                try? await Task.sleep(for: .milliseconds(5))
            }
            return peak
        }
        walls.append(try await measure { try await schedulerShell(count: count, slots: count, command: "sleep 1") })
        sampler.cancel()
        peaks.append(await sampler.value)
    }
    print("wall: \(walls.map { format($0) }.joined(separator: " / ")) s (a job takes 1 s; one round of spawning, waiting and reaping)")
    print("peak threads of the whole process: \(peaks.map(String.init).joined(separator: " / "))  (target < 16)")
    // The cooperative pool is never blocked by a waiting process: an empty task's latency while
    // 2 slots run `sleep 0.05` jobs.
    async let jobs: Void = schedulerShell(count: 40, slots: 2, command: "sleep 0.05")
    var latencies: [Double] = []
    for _ in 0..<200 {
        latencies.append(await measure { await Task.detached { }.value })
        try await Task.sleep(for: .milliseconds(2))
    }
    try await jobs
    latencies.sort()
    print("an empty task while process jobs run: p50 \(format(latencies[100] * 1e6, 0)) µs, p99 \(format(latencies[198] * 1e6, 0)) µs")
    print()
}

/// The pure core alone: submit, start and finish, no actor, no tasks, no events delivered.
func benchCore() async {
    let count = countOverride ?? 1_000_000
    print("## SchedulerCore alone: \(count) jobs submitted, started and finished on 2 slots")
    var core = SchedulerCore(configuration: .init(finishedRetention: 1_000, seed: 1))
    let first = WorkerDescriptor(id: WorkerID(), name: "a", kind: .local, slots: 1)
    let second = WorkerDescriptor(id: WorkerID(), name: "b", kind: .local, slots: 1)
    let ids = (0..<count).map { _ in JobID(uuid: UUID()) }
    let spec = JobSpec(work: .closure { _ in })
    var running: [(JobID, WorkerID)] = []
    func collect(_ actions: [SchedulerCore.Action]) {
        for action in actions { if case .start(let id, _, let worker) = action { running.append((id, worker)) } }
    }
    let seconds = await measure {
        collect(core.workerJoined(first, now: .zero) + core.workerJoined(second, now: .zero))
        for id in ids { collect(try! core.submit(spec, id: id, now: .zero).actions) }
        var done = 0
        while let (id, worker) = running.popLast() {
            done += 1
            collect(core.jobFinished(id, attempt: 1, worker: worker, termination: .exit(0), now: .zero))
        }
        precondition(done == count)
    }
    print("core alone: \(format(seconds / Double(count) * 1e6, 3)) µs per job")
    print()
}

/// SplitMix64 from a seed, else the system's generator.
struct BenchRandom: RandomNumberGenerator {
    var state: UInt64?
    var system = SystemRandomNumberGenerator()

    init(seed: UInt64?) { state = seed }

    mutating func next() -> UInt64 {
        guard var z = state else { return system.next() }
        z &+= 0x9E37_79B9_7F4A_7C15
        state = z
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The core's cost per job for a workflow: 100,000 jobs in a random DAG across 10 groups with
/// limits, against the same jobs flat (no groups, no dependencies), in the same run.
func benchDAG() async {
    let count = countOverride ?? 100_000
    print("## SchedulerCore alone: \(count) jobs, flat vs a random DAG across 10 groups (8 slots; load \(loadAverage()))")
    // JOBTOP_BENCH_SEED=N: the same DAG and group limits in every run (else a new one each).
    var random = BenchRandom(seed: ProcessInfo.processInfo.environment["JOBTOP_BENCH_SEED"].flatMap { UInt64($0) })
    let work = JobWork.closure { _ in }
    let flat = (0..<count).map { _ in JobSpec(work: work) }
    let groups = (0..<10).map { "g\($0)" }
    let limits: [Int?] = (0..<10).map { $0 < 3 ? nil : Int.random(in: 1...4, using: &random) }
    let part = ProcessInfo.processInfo.environment["JOBTOP_BENCH_DAG_PART"]
    let dag = (0..<count).map { index -> JobSpec in
        var spec = JobSpec(work: work)
        if part != "deps" { spec.group = groups[Int.random(in: 0..<10, using: &random)] }
        for _ in 0..<Int.random(in: 0...2, using: &random) where index > 0 && part != "groups" {
            spec.dependencies.append(.earlier(max(0, index - Int.random(in: 1...1_000, using: &random))))
        }
        return spec
    }
    let printsSplit = ProcessInfo.processInfo.environment["JOBTOP_BENCH_SPLIT"] != nil
    let side = { (specs: [JobSpec], groups: Bool) in
        DAGBenchRun(specs: specs, limits: groups ? limits : nil, printsSplit: printsSplit)
    }
    // JOBTOP_BENCH_ONLY=dag (or flat) runs one side only, for a profiler.
    let only = ProcessInfo.processInfo.environment["JOBTOP_BENCH_ONLY"]
    // JOBTOP_BENCH_DAG_MODE=sequential: each side's run whole, one after the other (the
    // estimator before 2026-12-07), else the two sides' runs interleaved slice by slice.
    let sequential = only != nil || ProcessInfo.processInfo.environment["JOBTOP_BENCH_DAG_MODE"] == "sequential"
    let slice = ProcessInfo.processInfo.environment["JOBTOP_BENCH_DAG_SLICE"].flatMap { Int($0) } ?? 1_000
    var flatTimes: [Double] = []
    var dagTimes: [Double] = []
    // A warm-up pair first, not counted: the first run of each side pays for the process's
    // first touch of its memory (about 1.2× flat's later runs and 1.3× the DAG's). Interleaved,
    // an even number: as many pairs with each side submitting first. 16 (since 2026-12-07; 8
    // before): with 8, the ratio of the medians of 12 quiet runs spread 1.27–1.50× around
    // ~1.33×; JOBTOP_BENCH_DAG_PAIRS=N sets another (rounded up to even).
    let asked = ProcessInfo.processInfo.environment["JOBTOP_BENCH_DAG_PAIRS"].flatMap { Int($0) }.map { max(2, $0) }
    let pairs = sequential ? (asked ?? 7) : ((asked ?? 16) + 1) / 2 * 2
    for pair in 0...pairs {
        var f: Double?
        var d: Double?
        if sequential {
            // The two sides take turns, so a change in the machine's speed between runs falls on
            // both; one that comes within a run (a run is a quarter of a second or more) does not.
            if only != "dag" { var run = side(flat, false); run.finish(upTo: count); f = run.costPerJob }
            if only != "flat" { var run = side(dag, true); run.finish(upTo: count); d = run.costPerJob }
        } else {
            // The VM runs fast or slow by turns, and a turn can change within a run: the two
            // sides' runs go on together, a slice of `slice` job ends of one, then of the other,
            // so both meet the same moments' speed. Which side submits first alternates: the
            // second's submission pays more (its memory is fresh from the kernel, where the
            // first's is what the last pair freed), about 1.2× against 1.4× for the DAG.
            var first = side(pair % 2 == 0 ? flat : dag, pair % 2 != 0)
            var second = side(pair % 2 == 0 ? dag : flat, pair % 2 == 0)
            while !first.isDone || !second.isDone {
                first.finish(upTo: slice)
                second.finish(upTo: slice)
            }
            (f, d) = pair % 2 == 0 ? (first.costPerJob, second.costPerJob) : (second.costPerJob, first.costPerJob)
        }
        guard pair > 0 else { continue }
        if let f { flatTimes.append(f) }
        if let d { dagTimes.append(d) }
    }
    if only == "dag" || only == "flat" { flatTimes.append(contentsOf: dagTimes); dagTimes = flatTimes }
    let (f, d) = (median(flatTimes), median(dagTimes))
    print("group limits: \(limits.map { $0.map(String.init) ?? "-" }.joined(separator: " "))")
    print("\(sequential ? "sequential runs (each whole, in turn)" : "interleaved runs (slices of \(slice) job ends, in turn)"); runs, in order (µs per job): flat \(runs(flatTimes, scale: 1e6)); DAG \(runs(dagTimes, scale: 1e6))")
    if only == nil {
        // A DAG run set against the flat run of its pair (the same moments' speed) says less of
        // the machine than two medians, which can fall in different turns.
        let ratios = zip(dagTimes, flatTimes).map { $0 / $1 }
        print("each pair's ratio (DAG run / the flat run of its pair): \(runs(ratios))×, median \(format(median(ratios)))×; least of each: \(format(dagTimes.min()! / flatTimes.min()!))×")
        if !sequential {
            // Two pairs in turn, one with each side first: what the order costs cancels out.
            let rounds = stride(from: 0, to: pairs - 1, by: 2).map { (first: Int) -> Double in
                let dagCost: Double = dagTimes[first] + dagTimes[first + 1]
                let flatCost: Double = flatTimes[first] + flatTimes[first + 1]
                return dagCost / flatCost
            }
            print("each round's ratio (two pairs, each side first once): \(runs(rounds))×")
        }
    }
    print("CPU per job, median of \(pairs) after a warm-up pair: flat: \(format(f * 1e6, 3)) µs   DAG across 10 groups: \(format(d * 1e6, 3)) µs   ratio \(format(d / f))× (target ≤ 1.5×)")
    print()
}

/// CPU seconds this thread has used: a run's steps have no suspension point, so they stay on
/// one thread, and the other threads' work (none here) does not count.
func threadCPUSeconds() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) * 1e-9
}

/// One side of `dag`: a core of its own, its jobs submitted when it is made, then run to their
/// ends a slice at a time; only the core's steps are timed (CPU time: one thread does all the
/// work, and other load on the machine barely changes what it uses).
struct DAGBenchRun {
    private var core = SchedulerCore(configuration: .init(finishedRetention: 1_000, seed: 1))
    private var running: [(JobID, WorkerID)] = []
    private var done = 0
    private var cpu: Double = 0
    private let count: Int

    var isDone: Bool { running.isEmpty }
    var costPerJob: Double {
        precondition(done == count, "\(done) of \(count) ran")
        return cpu / Double(count)
    }

    /// Makes the core and submits `specs` (timed), with `limits` for groups g0… if given.
    init(specs: [JobSpec], limits: [Int?]?, printsSplit: Bool) {
        count = specs.count
        let worker = WorkerDescriptor(id: WorkerID(), name: "w", kind: .local, slots: 8)
        var bytes = SystemRandomNumberGenerator()
        let ids = (0..<specs.count).map { _ in JobID(uuid: randomUUID(&bytes)) }
        let start = threadCPUSeconds()
        if let limits {
            for (index, limit) in limits.enumerated() {
                collect(try! core.setGroupLimit("g\(index)", to: limit, now: .zero))
            }
        }
        collect(core.workerJoined(worker, now: .zero))
        collect(try! core.submit(contentsOf: specs, ids: ids, now: .zero).actions)
        cpu = threadCPUSeconds() - start
        if printsSplit { print("  submit: \(format(cpu / Double(count) * 1e6, 3)) µs per job") }
    }

    private mutating func collect(_ actions: [SchedulerCore.Action]) {
        for action in actions { if case .start(let id, _, let worker) = action { running.append((id, worker)) } }
    }

    /// Ends up to `limit` more jobs, in the order they started (timed).
    mutating func finish(upTo limit: Int) {
        guard !running.isEmpty else { return }
        let start = threadCPUSeconds()
        var ended = 0
        while ended < limit, !running.isEmpty {
            let (id, worker) = running.removeFirst()
            done += 1
            ended += 1
            collect(core.jobFinished(id, attempt: 1, worker: worker, termination: .exit(0), now: .zero))
        }
        cpu += threadCPUSeconds() - start
    }
}

let which = CommandLine.arguments.dropFirst().first ?? "all"
switch which {
case "closures": try await benchClosures()
case "core": await benchCore()
case "floor": try await benchFloor()
case "dag": await benchDAG()
case "queue": try await benchQueue()
case "shell": try await benchShell()
case "slots": try await benchSlots()
case "all":
    try await benchClosures()
    await benchCore()
    await benchDAG()
    try await benchQueue()
    try await benchShell()
    try await benchSlots()
default:
    FileHandle.standardError.write(Data("usage: jobtop-bench [closures|core|dag|floor|queue|shell|slots|all]\n".utf8))
    exit(2)
}
