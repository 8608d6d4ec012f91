import Foundation
import JobtopTestSupport
import Scheduler
import SchedulerRemote

extension JobtopProcess {
    /// Starts `jobtop worker` for `coordinator`, with its token, in a session of its own.
    ///
    /// Every test coordinator has a token of its own, so a worker left over from another test
    /// (reconnecting to a port this coordinator got after it was freed) is refused, never joins.
    ///
    /// - Parameters:
    ///   - port: Another port to connect to (a relay's) instead of the coordinator's.
    ///   - arguments: More flags (TLS).
    static func worker(
        for coordinator: Coordinator, slots: Int = 2, name: String, environment: [String: String] = [:],
        port: Int? = nil, arguments: [String] = []
    ) throws -> JobtopProcess {
        var environment = environment
        if environment["JOBTOP_TOKEN"] == nil { environment["JOBTOP_TOKEN"] = coordinator.token }
        return try JobtopProcess(
            ["worker", "--connect", "127.0.0.1:\(port ?? coordinator.address.port)", "--slots", "\(slots)", "--name", name]
                + arguments,
            environment: environment, newSession: true)
    }
}


/// An in-process coordinator: a scheduler with no local slots and a listener on loopback.
struct Coordinator {
    let scheduler: Scheduler
    /// The token workers must show: one of its own unless a test chose one.
    let token: String
    let listener: WorkerListener
    let address: RemoteAddress
    let listenerEvents: AsyncStream<WorkerListener.Event>
    let running: Task<Void, Never>

    /// Starts one on `clock` (the scheduler's, which the listener shares), with `token` or a
    /// fresh one, listening on `host` (loopback unless a test needs another address).
    static func start(
        host: String = "127.0.0.1", port: Int = 0, token: String? = nil, gracePeriod: Duration = .seconds(2), heartbeat: Duration = .seconds(1), localSlots: Int = 0,
        clock: ManualClock? = nil, helloDeadline: Duration = .seconds(5), maxPendingConnections: Int = 32,
        shutdownGrace: Duration = .seconds(2), log: LogLines? = nil, tls: RemoteTLS.Server? = nil,
        prefetch: Prefetch = WorkerListener.defaultPrefetch
    ) async throws -> Coordinator {
        let token = token ?? "test-\(UUID().uuidString)"
        let configuration = Scheduler.Configuration(localSlots: localSlots, gracePeriod: gracePeriod)
        let scheduler: Scheduler
        if let clock {
            scheduler = Scheduler(configuration: configuration, clock: clock)
        } else {
            scheduler = Scheduler(configuration: configuration)
        }
        let running = Task { await scheduler.run() }
        var sink: @Sendable (String) -> Void = { _ in }
        if let lines = log { sink = lines.sink }
        let listener = try WorkerListener(
            scheduler: scheduler,
            configuration: .init(
                address: RemoteAddress(host: host, port: port), token: token, tls: tls, prefetch: prefetch, heartbeatInterval: heartbeat,
                helloDeadline: helloDeadline, maxPendingConnections: maxPendingConnections, shutdownGrace: shutdownGrace,
                log: sink))
        let events = listener.events
        let address = try await listener.start()
        return Coordinator(scheduler: scheduler, token: token, listener: listener, address: address, listenerEvents: events, running: running)
    }

    /// Waits until `count` workers have joined; returns them.
    func joined(_ count: Int) async -> [WorkerDescriptor] {
        var descriptors: [WorkerDescriptor] = []
        for await event in listenerEvents {
            if case .joined(let descriptor) = event { descriptors.append(descriptor) }
            if descriptors.count == count { break }
        }
        return descriptors
    }

    /// Waits for the next listener event that `predicate` accepts.
    func next(where predicate: (WorkerListener.Event) -> Bool) async -> WorkerListener.Event? {
        for await event in listenerEvents where predicate(event) { return event }
        return nil
    }

    /// Submits `spec` and waits for how the job ends (subscribed before the submission, so the
    /// end cannot be missed).
    func run(_ spec: JobSpec) async throws -> SchedulerEvent.Kind? {
        let events = await scheduler.events(includeOutput: false)
        let id = try await scheduler.submit(spec)
        for await event in events where event.kind.isFinal && event.kind.jobID == id { return event.kind }
        return nil
    }

    func stop() async {
        await listener.stop()
        await scheduler.shutdown(.cancelRunning)
        await running.value
    }
}
