import Foundation
import JobtopTestSupport
import Scheduler
import SchedulerRemote
import SchedulerService
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `jobtop serve --listen`: TCP connections that show no token cannot pile up.
@Suite("Control service on TCP", .timeLimit(.minutes(2)))
struct ControlTCPTests {
    @Test("Connections that make no call with the token are capped and closed at their deadline; the Unix socket is never held up, and a client with the token stays")
    func silentConnectionsAreCappedAndClosed() async throws {
        let scratch = try Scratch()
        let clock = ManualClock()
        let log = LogLines()
        let scheduler = Scheduler(configuration: .init(localSlots: 1), clock: clock)
        let running = Task { await scheduler.run() }
        let token = "sesame-\(UUID())"
        let server = try ControlServer(
            backend: scheduler, listen: RemoteAddress(host: "127.0.0.1", port: 0), token: token,
            clock: scheduler.clock, connections: (.seconds(5), 2), log: log.sink)
        let path = scratch.file("run/jobtop/serve.sock")
        let address = try #require(try await server.start(socketPath: path))

        // Given two connections that say nothing: the cap.
        let first = try RawTCP.connect(port: address.port)
        let second = try RawTCP.connect(port: address.port)
        defer {
            close(first)
            close(second)
        }
        await clock.waitForSleepers(2)
        // When more come, each is closed as soon as it is accepted (no time passes)...
        var refused: [Int32] = []
        defer { for fd in refused { close(fd) } }
        for _ in 0..<20 { refused.append(try RawTCP.connect(port: address.port)) }
        for fd in refused { #expect(await RawTCP.waitForClose(fd)) }
        // ...and the Unix socket still answers at once.
        let local = try ControlClient(endpoint: .unixSocket(path))
        _ = try await local.send(.submit([.shell("true")], batch: nil))
        await local.close()

        // When their time runs out, the silent two are closed (one line for both).
        clock.advance(by: .seconds(5))
        #expect(await RawTCP.waitForClose(first))
        #expect(await RawTCP.waitForClose(second))
        #expect(log.all.count { $0.contains("no call with the token came on it within 5s") } == 1, "\(log.all)")
        #expect(log.all.count { $0.contains("connections are waiting to make a call with the token") } == 1, "\(log.all)")

        // A client with the wrong token is refused and not let in: its connection is closed at
        // its deadline too.
        let wrong = try ControlClient(endpoint: .tcp(address, token: "nope"))
        await #expect(throws: (any Error).self) { try await wrong.ping() }
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(5))
        await log.waitUntil { lines in lines.count { $0.contains("no call with the token came on it within 5s") } == 2 }
        await wrong.close()

        // ...and a client with the token gets in and stays past the deadline.
        let client = try ControlClient(endpoint: .tcp(address, token: token))
        try await client.ping()
        clock.advance(by: .seconds(30))
        try await client.ping()
        #expect(log.all.count { $0.contains("no call with the token came on it") } == 2, "\(log.all)")
        await client.close()

        await server.stop()
        await scheduler.shutdown(.graceful)
        await running.value
    }
}
