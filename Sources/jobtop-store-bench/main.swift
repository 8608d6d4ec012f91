// Benchmarks of serve's durable state. Release build only:
//
//     swift build -c release --product jobtop-store-bench --scratch-path .build-release
//     .build-release/release/jobtop-store-bench [JOBS]
//
// Durable submit of JOBS (100,000) jobs in one submission against the same submission to an
// in-memory scheduler (same run), the restart of a serve holding them until a snapshot shows
// them, and submit -> started latency of single jobs (in process: what the store adds; the
// socket's share is measured with the binary). Nothing here asserts a timing.
import Foundation
import Scheduler
import SchedulerStore
import SchedulerService

func loadAverage() -> String {
    guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return "unknown" }
    return text.split(separator: " ").prefix(3).joined(separator: ", ")
}

func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) * 1e-18 }
func ms(_ d: Double) -> String { String(format: "%.2f ms", d * 1e3) }
func percentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}

let count = CommandLine.arguments.dropFirst().first.flatMap(Int.init) ?? 100_000
let root = NSTemporaryDirectory() + "jobtop-store-bench-\(UUID().uuidString.prefix(8))"
defer { try? FileManager.default.removeItem(atPath: root) }
print("load average before: \(loadAverage())")

let specs = (0..<count).map { JobSpec(name: "job-\($0)", work: .shell("true")) }

// In memory, the baseline.
let memory = Scheduler(configuration: .init(localSlots: 2))
await memory.pause()
var start = ContinuousClock.now
_ = try await memory.perform(.submit(specs, batch: nil))
let inMemory = seconds(ContinuousClock.now - start)

// Durable.
let directory = StateDirectory(path: root + "/state")
var durable = try DurableScheduler.open(directory: directory, configuration: .init(localSlots: 2))
await durable.restored()
_ = try await durable.perform(.pause)
start = ContinuousClock.now
_ = try await durable.perform(.submit(specs, batch: nil))
let durableSubmit = seconds(ContinuousClock.now - start)
print("submit \(count) jobs in one submission: durable \(ms(durableSubmit)), in memory \(ms(inMemory)) (\(String(format: "%.1f", durableSubmit / inMemory))x)")
await durable.scheduler.shutdown(.graceful)
await durable.close()

// Restart with them all queued, until a snapshot lists them.
start = ContinuousClock.now
durable = try DurableScheduler.open(directory: directory, configuration: .init(localSlots: 2))
await durable.restored()
let snapshot = await durable.currentSnapshot()
let restart = seconds(ContinuousClock.now - start)
print("restart with \(snapshot.jobs.count) queued jobs until a snapshot shows them: \(ms(restart))")
await durable.scheduler.shutdown(.graceful)
await durable.close()

// submit -> started, one job at a time, durable and in memory.
func latencies(_ client: some SchedulerClient, _ rounds: Int) async throws -> [Double] {
    var result: [Double] = []
    let events = await client.subscribe(bufferLimit: nil, includeOutput: false)
    var iterator = events.makeAsyncIterator()
    _ = try await iterator.next()  // the snapshot: the subscription is in place (over a socket it starts later)
    for round in 0..<rounds {
        let begin = ContinuousClock.now
        guard case .submitted(let ids) = try await client.perform(.submit([JobSpec(name: "l\(round)", work: .shell("true"))], batch: nil)) else { fatalError() }
        while let event = try await iterator.next() {
            if case .started(let id, _, _, _) = event.kind, id == ids[0] { break }
        }
        result.append(seconds(ContinuousClock.now - begin))
    }
    return result
}
try? FileManager.default.removeItem(atPath: root + "/state2")
let fresh = try DurableScheduler.open(directory: StateDirectory(path: root + "/state2"), configuration: .init(localSlots: 2))
async let freshRun: Void = fresh.scheduler.run()
await fresh.restored()
let durableLatency = try await latencies(fresh, 300)
await fresh.scheduler.shutdown(.graceful)
await freshRun
await fresh.close()
let plain = Scheduler(configuration: .init(localSlots: 2))
async let plainRun: Void = plain.run()
let plainLatency = try await latencies(plain, 300)
await plain.shutdown(.graceful)
await plainRun
print("submit -> started (300 single jobs): durable p50 \(ms(percentile(durableLatency, 0.5))) p99 \(ms(percentile(durableLatency, 0.99))); in memory p50 \(ms(percentile(plainLatency, 0.5))) p99 \(ms(percentile(plainLatency, 0.99)))")

// The same through serve's socket (gRPC on a Unix socket, the durable scheduler behind it): one
// client kept connected, then a new connection for each submission (what a `jobtop submit`
// process does after its own start-up), its `started` seen by a subscriber kept connected.
try? FileManager.default.removeItem(atPath: root + "/state3")
let served = try DurableScheduler.open(directory: StateDirectory(path: root + "/state3"), configuration: .init(localSlots: 2))
async let servedRun: Void = served.scheduler.run()
await served.restored()
let server = try ControlServer(backend: served)
let socketPath = root + "/control.sock"
try await server.start(socketPath: socketPath)
let connected = try ControlClient(endpoint: .unixSocket(socketPath))
let socketLatency = try await latencies(connected, 300)
var freshLatency: [Double] = []
do {
    let events = await connected.subscribe(bufferLimit: nil, includeOutput: false)
    var iterator = events.makeAsyncIterator()
    _ = await iterator.next()  // the snapshot
    for round in 0..<300 {
        let begin = ContinuousClock.now
        let client = try ControlClient(endpoint: .unixSocket(socketPath))
        guard case .submitted(let ids) = try await client.perform(.submit([JobSpec(name: "f\(round)", work: .shell("true"))], batch: nil)) else { fatalError() }
        await client.close()
        while let event = await iterator.next() {
            if case .started(let id, _, _, _) = event.kind, id == ids[0] { break }
        }
        freshLatency.append(seconds(ContinuousClock.now - begin))
    }
}
// As serve does: the scheduler first (the subscriptions end), then the socket.
await served.scheduler.shutdown(.graceful)
await servedRun
await connected.close()
await server.stop()
await served.close()
print("submit -> started through the socket (300 single jobs): one connection p50 \(ms(percentile(socketLatency, 0.5))) p99 \(ms(percentile(socketLatency, 0.99))); a new connection each p50 \(ms(percentile(freshLatency, 0.5))) p99 \(ms(percentile(freshLatency, 0.99)))")
print("load average after: \(loadAverage())")

// Where the time goes: encoding and decoding the specs alone.
do {
    var specs2 = specs
    for index in specs2.indices { specs2[index].environment["JOBTOP_SERVE_ID"] = "x"; specs2[index].environment["JOBTOP_JOB_ID"] = "y" }
    let encoder = JSONEncoder()
    var begin = ContinuousClock.now
    let encoded = try specs2.map { try encoder.encode($0) }
    print("encode \(count) specs: \(ms(seconds(ContinuousClock.now - begin)))")
    let decoder = JSONDecoder()
    begin = ContinuousClock.now
    _ = try encoded.map { try decoder.decode(JobSpec.self, from: $0) }
    print("decode \(count) specs: \(ms(seconds(ContinuousClock.now - begin)))")
}
