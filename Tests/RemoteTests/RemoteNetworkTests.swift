import Foundation
import JobtopTestSupport
import Scheduler
import Testing

@testable import SchedulerRemote

#if canImport(Glibc)
import Glibc
#endif

/// Workers on the far side of a real link: `jobtop worker` processes in a network namespace,
/// joined to the coordinator's (the test's) by a veth pair, with latency, loss and a cut link.
///
/// Needs root, iproute2 and nftables: skipped (saying why) without them, except under `CI=true`,
/// where it fails instead (.ci/run installs iproute2 and nftables; CI runs as root).
///
/// This kernel has no netem (CONFIG_NET_SCH_NETEM is not set, and there are no modules to load),
/// so the latency comes from a relay in the root namespace that holds every piece of the byte
/// stream for 10 ms ± 2.5 ms each way (a 20 ms round trip, ``DelayRelay``), and the loss from
/// nftables in the worker's namespace dropping 1% of the packets each way at random: real TCP
/// retransmissions on a real veth.
@Suite("Workers across a real link (network namespaces)", .serialized, .timeLimit(.minutes(10)))
struct RemoteNetworkTests {
    static let isCI = ProcessInfo.processInfo.environment["CI"] == "true"

    /// `false` when the test must be skipped here (it says why); fails under CI instead.
    static func namespacesUsable(_ test: String) throws -> Bool {
        guard let why = NetworkNamespace.unavailability else { return true }
        try #require(!isCI, "network namespaces are needed under CI=true: \(why)")
        print("skipped: \(test): \(why)")
        return false
    }

    // MARK: - Latency and loss

    @Test("500 jobs to workers behind a 20 ms round trip with 1% loss: every job succeeds, each ends once; throughput against loopback is printed")
    func latentLossyLink() async throws {
        guard try Self.namespacesUsable("latentLossyLink") else { return }
        let scratch = try Scratch()
        let list = try scratch.write("jobs.txt", String(repeating: "true\n", count: 500))
        let token = try scratch.write("token", "net-\(UUID().uuidString)\n")

        // Given the same pool twice: on loopback, then across the link.
        let environment = ProcessInfo.processInfo.environment
        // The default (automatic) unless JOBTOP_NET_PREFETCH names a depth.
        let prefetch = environment["JOBTOP_NET_PREFETCH"]
        let loss = environment["JOBTOP_NET_LOSS"].flatMap { Double($0) } ?? 1
        let loopback = try await PoolRun.run(list: list, token: token, prefetch: prefetch, through: nil)
        let namespace = try NetworkNamespace()
        defer { namespace.remove() }
        if loss > 0 { try namespace.dropPackets(percent: loss) }
        let far = try await PoolRun.run(list: list, token: token, prefetch: prefetch, through: namespace)

        // Then every job of both runs succeeded, and ended once.
        for run in [loopback, far] {
            #expect(run.exitStatus == 0, "\(run.where): exit \(run.exitStatus)\n\(run.stderr.suffix(2000))")
            #expect(run.ends.count == 500, "\(run.where): \(run.ends.count) jobs ended")
            let twice = run.ends.filter { $0.value.count != 1 }
            #expect(twice.isEmpty, "\(run.where): jobs that did not end exactly once: \(twice.prefix(5))")
            #expect(run.ends.values.allSatisfy { $0 == ["succeeded"] }, "\(run.where): not all succeeded")
        }
        // The automatic prefetch sized itself to the link: 5 ms jobs behind 20 ms round trips
        // need far more than the 1 held job a worker joins with (2 slots + 1).
        if prefetch == nil {
            #expect(far.deepest > 3, "across the link no worker was given more than \(far.deepest) slots (slots + prefetch)")
        }
        // A figure, not an assertion: the machine's load decides it.
        let ratio = far.seconds / max(loopback.seconds, 0.001)
        print(
            "figure: 500 true jobs, 2 workers x 2 slots, prefetch \(prefetch ?? "auto") (most slots + prefetch a worker had: loopback \(loopback.deepest), across \(far.deepest)): loopback \(format(loopback.seconds)) s (\(Int(500 / loopback.seconds)) jobs/s), 20 ms RTT + \(loss)% loss \(format(far.seconds)) s (\(Int(500 / far.seconds)) jobs/s): \(format(ratio))x the loopback time; workers that ran jobs: \(loopback.workersUsed) and \(far.workersUsed); \(loadLabel())"
        )
    }

    // MARK: - Partition

    /// The heartbeat interval of the partition test. 2 s, not the default 1 s: the coordinator
    /// runs inside the test process, where the rest of the suite runs in parallel, and a full
    /// suite on 2 busy cores starved its heartbeats for more than the worker's 3 intervals
    /// (3 s) in about one run of five, so the worker gave it up before the link was cut. At 2 s
    /// that takes a 6 s stall.
    static let partitionHeartbeat = Duration.seconds(2)

    /// How long the link stays down. Longer than the coordinator's deadline for a silent worker
    /// (5 heartbeat intervals of 2 s plus the 2 s grace period: 12 s), so the coordinator
    /// requeues the cut-off worker's jobs while it is down. With a shorter heartbeat interval
    /// and grace period (Coordinator.start's parameters) it can be shorter.
    static let linkDown = Duration.seconds(15)

    @Test("The link is cut for 15 s mid-run: the cut-off worker stops its jobs before the coordinator requeues them, rejoins, and every job ends once")
    func partition() async throws {
        guard try Self.namespacesUsable("partition") else { return }
        let scratch = try Scratch()
        let runs = scratch.file("runs")
        try FileManager.default.createDirectory(atPath: runs, withIntermediateDirectories: true)
        let namespace = try NetworkNamespace()
        defer { namespace.remove() }
        let farNet = try await Self.netNamespaceID(of: namespace)

        // Given a coordinator on the root side of the link, one worker across it and one beside it.
        let coordinator = try await Coordinator.start(host: namespace.hostAddress, gracePeriod: .seconds(2), heartbeat: Self.partitionHeartbeat)
        let events = await coordinator.scheduler.events(includeOutput: false)
        let address = "\(namespace.hostAddress):\(coordinator.address.port)"
        let (ip, arguments) = namespace.exec([JobtopProcess.binary, "worker", "--connect", address, "--slots", "4", "--name", "cut"])
        let cut = try JobtopProcess(arguments, environment: ["JOBTOP_TOKEN": coordinator.token], newSession: true, executable: ip)
        let steady = try JobtopProcess(
            ["worker", "--connect", address, "--slots", "4", "--name", "steady"], environment: ["JOBTOP_TOKEN": coordinator.token],
            newSession: true)
        defer {
            for worker in [cut, steady] { worker.send(SIGKILL) }
        }
        let joined = await coordinator.joined(2)
        let cutID = try #require(joined.first { $0.name == "cut" }?.id)

        // Jobs that say where they run (their network namespace) and when they start and end,
        // each in a file of its own: the runs are counted from those.
        let ends = EndCounter()
        let counting = Task { await ends.consume(events) }
        func submit(_ count: Int, from first: Int, seconds: Int) async throws -> [JobID] {
            var ids: [JobID] = []
            for index in first..<(first + count) {
                let file = "\(runs)/\(index)"
                ids.append(
                    try await coordinator.scheduler.submit(
                        .shell(
                            // A job that takes 1 s to stop (its SIGTERM trap), as one that cleans up does.
                            "echo \"start $$ $(readlink /proc/$$/ns/net)\" >> '\(file)'; trap 'sleep 1; exit 143' TERM; sleep \(seconds) & wait $!; echo done >> '\(file)'")))
            }
            return ids
        }
        // Longer than the worker's own deadline (3 intervals: 6 s): those running at the cut are
        // still running when it gives the coordinator up.
        var ids = try await submit(16, from: 0, seconds: 9)

        // When the link goes down while the cut-off worker runs jobs.
        let running = await eventually(within: .seconds(60)) { Self.runningAcross(runs, farNet).count >= 3 }
        try #require(running, "the worker across the link never ran 3 jobs at once")
        try namespace.setLink(up: false)
        let cutAt = ContinuousClock.now
        let runningAtCut = Self.runningAcross(runs, farNet)

        // Then the coordinator gives the worker up (its jobs are requeued), and by then the worker
        // had stopped every one of those jobs itself: no process of theirs is left.
        let left = await coordinator.next { if case .left(cutID, _) = $0 { true } else { false } }
        let lostAfter = cutAt.duration(to: .now)
        // (Those seen at the cut, and any whose start line was not written yet then.)
        let stillRunning = (runningAtCut + Self.runningAcross(runs, farNet)).filter { Self.groupAlive($0.pid) }
        #expect(stillRunning.isEmpty, "jobs still running across the link when the coordinator requeued them: \(stillRunning)")
        #expect(left == .left(cutID, reason: .heartbeatMissed(.seconds(12))), "the cut-off worker said:\n\(cut.output)")

        // When the link comes back up (after `linkDown` in all).
        try await Task.sleep(until: cutAt + Self.linkDown, clock: .continuous)  // the outage itself, not a wait for something
        try namespace.setLink(up: true)

        // Then the worker rejoins (a new id), and runs jobs again.
        let rejoined = await coordinator.next { if case .joined(let worker) = $0 { worker.name == "cut" } else { false } }
        #expect(rejoined != nil)
        // Once the first batch has ended, both workers are idle: 10 free slots (4 + 1 prefetched
        // each), so 8 new jobs cannot all go to the steady worker. (Submitted while the rejoined
        // worker still ran 9 s jobs, the 1 s jobs could all run beside it, on the steady one.)
        let firstBatchEnded = await eventually(within: .seconds(120)) { ends.count(of: ids) == ids.count }
        #expect(firstBatchEnded, "\(ends.count(of: ids)) of the first \(ids.count) jobs ended")
        ids += try await submit(8, from: 16, seconds: 1)
        let allEnded = await eventually(within: .seconds(180)) { ends.count(of: ids) == ids.count }
        #expect(allEnded, "\(ends.count(of: ids)) of \(ids.count) jobs ended")

        // Every job ended once, and succeeded.
        #expect(ids.allSatisfy { ends.ends(of: $0) == ["succeeded"] }, "not every job succeeded once: \(ids.map { ends.ends(of: $0) }.filter { $0 != ["succeeded"] })")
        let starts = (0..<ids.count).map { Self.lines(in: "\(runs)/\($0)").filter { $0.hasPrefix("start") }.count }
        let dones = (0..<ids.count).map { Self.lines(in: "\(runs)/\($0)").filter { $0 == "done" }.count }
        // The jobs running across the link when it went down were stopped there: each ran to
        // its end once (started twice: once across the link, stopped, once elsewhere).
        let cutIndexes = Set(runningAtCut.map(\.index))
        #expect(cutIndexes.allSatisfy { dones[$0] == 1 }, "jobs running at the cut that ran to their end twice: \(cutIndexes.filter { dones[$0] != 1 })")
        #expect(dones.allSatisfy { $0 >= 1 })
        let ranAfterRejoin = (16..<ids.count).contains { index in
            Self.lines(in: "\(runs)/\(index)").contains { $0.hasPrefix("start") && $0.hasSuffix(farNet) }
        }
        #expect(ranAfterRejoin, "the rejoined worker ran none of the jobs submitted after it rejoined")
        print(
            "figure: partition of \(formatDuration(Self.linkDown)): \(runningAtCut.count) jobs running across the link at the cut, \(runningAtCut.count - stillRunning.count) of them stopped there before the coordinator gave the worker up \(format(lostAfter.inSeconds)) s after the cut; jobs started twice: \(starts.filter { $0 > 1 }.count), ran to their end twice: \(dones.filter { $0 > 1 }.count) (of those running at the cut: \(cutIndexes.filter { dones[$0] > 1 }.count)); \(loadLabel())"
        )

        counting.cancel()
        for worker in [cut, steady] { worker.send(SIGTERM) }
        for worker in [cut, steady] { _ = await worker.wait(atMost: .seconds(60)) }
        await coordinator.stop()
    }

    // MARK: - Helpers

    /// A job running across the link: its index and its shell's pid (its process group).
    struct Running: Sendable, CustomStringConvertible {
        let index: Int
        let pid: pid_t
        var description: String { "job \(index) (pid \(pid))" }
    }

    /// The jobs whose last line says they started in network namespace `net` (and have not ended).
    static func runningAcross(_ runs: String, _ net: String) -> [Running] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: runs)) ?? []
        return names.compactMap { name -> Running? in
            guard let index = Int(name), let last = lines(in: "\(runs)/\(name)").last else { return nil }
            let fields = last.split(separator: " ")
            guard fields.count == 3, fields[0] == "start", fields[2] == net, let pid = pid_t(fields[1]) else { return nil }
            return Running(index: index, pid: pid)
        }
    }

    static func lines(in file: String) -> [String] {
        ((try? String(contentsOfFile: file, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// Whether any process of group `pid` is alive.
    static func groupAlive(_ pid: pid_t) -> Bool {
        kill(-pid, 0) == 0 || errno == EPERM
    }

    /// `net:[inode]` of the namespace, as `readlink /proc/$$/ns/net` prints it inside.
    static func netNamespaceID(of namespace: NetworkNamespace) async throws -> String {
        let (ip, arguments) = namespace.exec(["readlink", "/proc/self/ns/net"])
        let process = try JobtopProcess(arguments, executable: ip)
        let outcome = await process.wait()
        let text = outcome.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        guard text.hasPrefix("net:") else { throw SpawnError(message: "readlink in the namespace printed '\(text)'") }
        return text
    }
}

/// Counts each job's final events from the scheduler's event stream.
final class EndCounter: Sendable {
    private let finals = Locked<[JobID: [String]]>([:])

    func consume(_ events: EventStream) async {
        for await event in events where event.kind.isFinal {
            guard let id = event.kind.jobID else { continue }
            let name: String
            switch event.kind {
            case .succeeded: name = "succeeded"
            case .failed(_, let reason, _): name = "failed: \(reason)"
            case .cancelled: name = "cancelled"
            default: name = "\(event.kind)"
            }
            record(id, name)
        }
    }

    /// Counts a final event of `id`, named as `consume` names them.
    func record(_ id: JobID, _ name: String) {
        finals.withLock { $0[id, default: []].append(name) }
    }

    func ends(of id: JobID) -> [String] { finals.withLock { $0[id] ?? [] } }
    func count(of ids: [JobID]) -> Int { finals.withLock { finals in ids.filter { finals[$0] != nil }.count } }
}

/// One `jobtop run --listen` of a plain list with `-j 0` and two `jobtop worker`s (2 slots
/// each), on loopback or across a namespace's link (through a ``DelayRelay``); what its JSON log
/// says.
struct PoolRun {
    var `where`: String
    var exitStatus: Int32
    var stderr: String
    /// Each job's final events (`succeeded`, `failed`, ...).
    var ends: [String: [String]]
    /// From the first `started` to the last final event.
    var seconds: Double
    /// How many workers ran jobs.
    var workersUsed: Int
    /// The most slots (its own + prefetch) any worker had (0: never resized).
    var deepest: Int

    static func run(list: String, token: String, prefetch: String?, through namespace: NetworkNamespace?) async throws -> PoolRun {
        let coordinator = try JobtopProcess(
            ["run", list, "--listen", "127.0.0.1:0", "--token-file", token, "-j", "0", "--headless", "--log-format", "json"]
                + (prefetch.map { ["--prefetch", $0] } ?? []),
            newSession: true)
        defer { coordinator.send(SIGKILL) }
        let marker = "accepting workers on 127.0.0.1:"
        guard await eventually(within: .seconds(60), { coordinator.output.contains(marker) }),
            let line = coordinator.outputLines.first(where: { $0.contains(marker) }),
            let port = Int(line[line.range(of: marker)!.upperBound...].prefix { $0.isNumber })
        else {
            throw SpawnError(message: "the coordinator did not say where it listens:\n\(coordinator.output)")
        }
        var relay: DelayRelay?
        defer { relay?.stop() }
        var target = "127.0.0.1:\(port)"
        if let namespace {
            let delay = try DelayRelay(host: namespace.hostAddress, upstream: port, delay: .milliseconds(10), jitter: .microseconds(2500))
            relay = delay
            target = "\(namespace.hostAddress):\(delay.port)"
        }
        var workers: [JobtopProcess] = []
        defer { for worker in workers { worker.send(SIGKILL) } }
        for index in 0..<2 {
            let command = ["worker", "--connect", target, "--slots", "2", "--name", "w\(index)", "--token-file", token]
            if let namespace {
                let (ip, arguments) = namespace.exec([JobtopProcess.binary] + command)
                workers.append(try JobtopProcess(arguments, newSession: true, executable: ip))
            } else {
                workers.append(try JobtopProcess(command, newSession: true))
            }
        }
        let outcome = await coordinator.wait(atMost: .seconds(300))
        // The run said goodbye; the workers would reconnect: drain them (they leave at once).
        for worker in workers { worker.send(SIGTERM) }
        for worker in workers { _ = await worker.wait(atMost: .seconds(60)) }
        guard let outcome else { throw SpawnError(message: "the run did not end within 300 s:\n\(coordinator.output.suffix(3000))") }

        var ends: [String: [String]] = [:]
        var workersUsed = Set<String>()
        var deepest = 0
        var first: Date?
        var last: Date?
        let dates = ISO8601DateFormatter()
        dates.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        for line in outcome.stdout.split(separator: "\n") {
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                let event = object["event"] as? String
            else { continue }
            let date = (object["ts"] as? String).flatMap { dates.date(from: $0) }
            if event == "worker-slots", let slots = object["slots"] as? Int { deepest = max(deepest, slots) }
            if event == "started" {
                if first == nil { first = date }
                if let worker = object["worker"] as? String { workersUsed.insert(worker) }
            }
            if ["succeeded", "failed", "cancelled", "skipped"].contains(event), let job = object["job"] as? String {
                ends[job, default: []].append(event)
                last = date
            }
        }
        let seconds = first.flatMap { first in last.map { $0.timeIntervalSince(first) } } ?? 0
        return PoolRun(
            where: namespace == nil ? "loopback" : "across the link", exitStatus: outcome.status, stderr: outcome.stderr,
            ends: ends, seconds: seconds, workersUsed: workersUsed.count, deepest: deepest)
    }
}

func format(_ value: Double) -> String { String(format: "%.2f", value) }

/// The 1-minute load average.
func loadAverage() -> String {
    ((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "?").split(separator: " ").first.map(String.init) ?? "?"
}

/// "quiet (load L)" below a 1-minute load of 1 (on 2 cores), "busy (load L)" otherwise: figures
/// taken busy do not hold.
func loadLabel() -> String {
    let load = loadAverage()
    return "\((Double(load) ?? .infinity) < 1 ? "quiet" : "busy") (load \(load))"
}

extension Duration {
    var inSeconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
