// Benchmark of remote workers. Release build only:
//
//     swift build -c release --product jobtop
//     swift build -c release --product jobtop-remote-bench
//     .build/release/jobtop-remote-bench [--jobs 2000] [--runs 3]
//
// Runs N `true` jobs on 4 local slots, then on 2 `jobtop worker` processes with 2 slots each
// (loopback gRPC), and prints the throughput ratio and the assign → ack round trip (the time
// from queueing an Assign on the coordinator to reading the worker's Ack, sent before the
// spawn), under the throughput run's load and again one job at a time after the last run
// (`--sequential N`, default 300; 0 skips it). The workers are the `jobtop` binary next to this
// one (`jobtop worker`); without it, this binary's own `worker` mode, which runs the same
// WorkerAgent. Nothing here asserts a timing.
//
// `floor [--count 2000]`: the transport's own round trip for comparison (`TransportFloor`): the
// same gRPC stream, configuration and messages between this process and a child of it, one
// assignment at a time, nothing of jobtop between them; with each side's CPU per round trip.
import CProcess
import Foundation
import Scheduler
import SchedulerRemote

#if canImport(Glibc)
import Glibc
#endif

func format(_ value: Double, _ digits: Int = 2) -> String { String(format: "%.\(digits)f", value) }

func option(_ name: String, default value: Int) -> Int {
    let arguments = CommandLine.arguments
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count, let parsed = Int(arguments[index + 1]) else {
        return value
    }
    return parsed
}

func stringOption(_ name: String) -> String? {
    let arguments = CommandLine.arguments
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}

/// A child process started with posix_spawn in its own session.
struct Child {
    let pid: pid_t

    static func spawn(_ arguments: [String]) -> Child {
        var pid: pid_t = 0
        let argv = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        let status = jt_spawn(arguments[0], argv, nil, nil, 1, 2, &pid, nil)
        precondition(status == 0, "cannot start \(arguments[0]): \(String(cString: strerror(status)))")
        return Child(pid: pid)
    }

    func signal(_ number: Int32) { kill(pid, number) }

    func wait() -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return status
    }

    /// The CPU seconds it used so far, user and system, its children not included
    /// (`/proc/PID/stat`'s utime and stime).
    var cpuSeconds: Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let end = stat.lastIndex(of: ")") else { return 0 }
        let fields = stat[stat.index(after: end)...].split(separator: " ")
        // After the name: state is field 3, utime 14 and stime 15 (1-based, in clock ticks).
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
}

/// Runs `count` `true` jobs and returns the seconds until the last one ended.
func runJobs(_ scheduler: Scheduler, count: Int) async throws -> Double {
    let events = await scheduler.events(includeOutput: false)
    let start = ContinuousClock.now
    let specs = [JobSpec](repeating: .shell("true"), count: count)
    async let finished: (Int, Int) = {
        var done = 0
        var failed = 0
        for await event in events where event.kind.isFinal {
            done += 1
            if case .succeeded = event.kind {} else { failed += 1 }
            if done == count { break }
        }
        return (done, failed)
    }()
    _ = try await scheduler.submit(contentsOf: specs)
    let (done, failed) = await finished
    precondition(done == count && failed == 0, "\(failed) of \(count) jobs failed")
    return (ContinuousClock.now - start).seconds
}

func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

func percentile(_ sorted: [Duration], _ p: Double) -> Duration {
    sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * p).rounded()))]
}

func microseconds(_ duration: Duration) -> String { format(duration.seconds * 1e6, 0) + " µs" }

func benchmark() async throws {
    let jobs = option("--jobs", default: 2_000)
    let runs = option("--runs", default: 3)
    let workerCount = option("--workers", default: 2)
    let slotsPerWorker = option("--slots", default: 2)
    let prefetch = stringOption("--prefetch").flatMap { Int($0) }.map { Prefetch.fixed($0) } ?? WorkerListener.defaultPrefetch
    let here = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    let jobtop = here.appendingPathComponent("jobtop").path
    let workerCommand: [String] =
        FileManager.default.isExecutableFile(atPath: jobtop) && stringOption("--self-workers") == nil
        ? [jobtop, "worker"] : [CommandLine.arguments[0], "worker"]
    print("jobtop remote benchmark: \(jobs) `true` jobs, \(runs) runs each (median), \(ProcessInfo.processInfo.activeProcessorCount) cores")
    print("workers: \(workerCommand.joined(separator: " ")); prefetch \(prefetch)")

    // Local: 4 slots.
    var local: [Double] = []
    // This process's own CPU per job (its jobs are children: not included), local and remote.
    var localCPU: [Double] = []
    var coordinatorCPU: [Double] = []
    for _ in 0..<runs {
        let scheduler = Scheduler(configuration: .init(localSlots: workerCount * slotsPerWorker, finishedRetention: 1_000, finishedTails: 0))
        async let running: Void = scheduler.run()
        let before = ownCPUSeconds()
        local.append(try await runJobs(scheduler, count: jobs))
        localCPU.append((ownCPUSeconds() - before) / Double(jobs))
        await scheduler.shutdown(.graceful)
        await running
    }

    // Remote: 2 workers × 2 slots on loopback.
    var remote: [Double] = []
    // The workers' own CPU (not their jobs': those are their children, reaped by them), per job.
    var workerCPU: [Double] = []
    let recorder = RoundTripRecorder()
    let sequential = option("--sequential", default: 300)
    var alone: [Duration] = []
    for _ in 0..<runs {
        let scheduler = Scheduler(configuration: .init(localSlots: 0, finishedRetention: 1_000, finishedTails: 0))
        async let running: Void = scheduler.run()
        let listener = try WorkerListener(
            scheduler: scheduler,
            configuration: .init(
                address: RemoteAddress(host: "127.0.0.1", port: 0), prefetch: prefetch, roundTrips: recorder, log: { _ in }))
        let listenerEvents = listener.events
        let bound = try await listener.start()
        let workers = (1...workerCount).map { number in
            Child.spawn(workerCommand + ["--connect", "127.0.0.1:\(bound.port)", "--slots", "\(slotsPerWorker)", "--name", "bench-\(number)"])
        }
        var joined = 0
        for await event in listenerEvents {
            if case .joined = event { joined += 1 }
            if joined == workerCount { break }
        }
        let before = ownCPUSeconds()
        remote.append(try await runJobs(scheduler, count: jobs))
        coordinatorCPU.append((ownCPUSeconds() - before) / Double(jobs))
        // Read before they drain and leave (which costs them a little more).
        workerCPU.append(workers.map(\.cpuSeconds).reduce(0, +) / Double(jobs))
        if remote.count == runs && sequential > 0 {
            // The round trip on its own: one job at a time, so that neither side waits for a CPU
            // the jobs of the throughput run hold.
            let before = recorder.all.count
            let events = await scheduler.events(includeOutput: false)
            var iterator = events.makeAsyncIterator()
            for _ in 0..<sequential {
                let id = try await scheduler.submit(.shell("true"))
                while let event = await iterator.next(), !(event.kind.isFinal && event.kind.jobID == id) {}
            }
            alone = Array(recorder.all.dropFirst(before)).sorted()
        }
        for worker in workers { worker.signal(SIGTERM) }
        for worker in workers { _ = worker.wait() }
        await listener.stop()
        await scheduler.shutdown(.graceful)
        await running
    }

    let localTime = median(local)
    let remoteTime = median(remote)
    let trips = recorder.all.dropLast(alone.count).sorted()
    print("local  \(workerCount * slotsPerWorker) slots:             \(format(localTime, 3)) s  (\(format(Double(jobs) / localTime, 0)) jobs/s)")
    print("remote \(workerCount) workers × \(slotsPerWorker) slots: \(format(remoteTime, 3)) s  (\(format(Double(jobs) / remoteTime, 0)) jobs/s)")
    print("throughput ratio remote/local: \(format(localTime / remoteTime))×  (goal ≥ 0.80×)")
    print("worker processes' own CPU per job (user + system, their jobs not included): \(format(median(workerCPU) * 1e6, 0)) µs")
    print("this process's own CPU per job: local \(format(median(localCPU) * 1e6, 0)) µs, remote (the coordinator) \(format(median(coordinatorCPU) * 1e6, 0)) µs")
    if !trips.isEmpty {
        print("assign → ack round trip over \(trips.count) assignments: p50 \(microseconds(percentile(trips, 0.5))), p99 \(microseconds(percentile(trips, 0.99))), max \(microseconds(trips.last!))  (goal p50 < 200 µs)")
    }
    if !alone.isEmpty {
        print("the same, one job at a time (\(alone.count) jobs, after the last run): p50 \(microseconds(percentile(alone, 0.5))), p99 \(microseconds(percentile(alone, 0.99))), max \(microseconds(alone.last!))")
    }
}

func workerMode() async {
    guard let connect = stringOption("--connect") else {
        FileHandle.standardError.write(Data("usage: jobtop-remote-bench worker --connect HOST:PORT [--slots N] [--name NAME]\n".utf8))
        exit(2)
    }
    do {
        let agent = WorkerAgent(configuration: .init(
            coordinator: try RemoteAddress(parsing: connect), name: stringOption("--name") ?? "bench",
            slots: option("--slots", default: 2), token: try RemoteToken.load(file: stringOption("--token-file"))))
        signal(SIGTERM, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGTERM, queue: .global())
        source.setEventHandler { agent.drain() }
        source.resume()
        try await agent.run()
        source.cancel()
    } catch {
        FileHandle.standardError.write(Data("jobtop-remote-bench worker: \(error)\n".utf8))
        exit(1)
    }
}

/// The transport's floor: this process as the coordinator, a child of it as the worker.
func floor() async throws {
    let count = option("--count", default: 2_000)
    print("gRPC floor: \(count) assign → ack round trips, one at a time, over loopback (load \(loadAverage()))")
    let coordinator = try await TransportFloor.Coordinator(count: count)
    let cpuBefore = ownCPUSeconds()
    let worker = Child.spawn([CommandLine.arguments[0], "floor-worker", "--port", "\(coordinator.port)"])
    let trips = await coordinator.roundTrips().sorted()
    let coordinatorCPU = ownCPUSeconds() - cpuBefore
    let workerCPU = worker.cpuSeconds
    _ = worker.wait()
    await coordinator.stop()
    print("round trip: p50 \(microseconds(percentile(trips, 0.5))), p99 \(microseconds(percentile(trips, 0.99))), min \(microseconds(trips.first!))")
    print("CPU per round trip: coordinator side \(format(coordinatorCPU / Double(count) * 1e6, 0)) µs, worker side \(format(workerCPU / Double(count) * 1e6, 0)) µs (its start-up included)")
}

/// CPU seconds (user + system) this process has used.
func ownCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) * 1e-6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// The 1-minute load average.
func loadAverage() -> String {
    (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").first.map(String.init) ?? "?"
}

switch CommandLine.arguments.dropFirst().first {
case "worker":
    await workerMode()
case "floor":
    try await floor()
case "floor-worker":
    try await TransportFloor.runWorker(port: option("--port", default: 0))
default:
    do {
        try await benchmark()
    } catch {
        FileHandle.standardError.write(Data("jobtop-remote-bench: \(error)\n".utf8))
        exit(1)
    }
}
