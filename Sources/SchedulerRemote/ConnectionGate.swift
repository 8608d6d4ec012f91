import NIOCore
import Scheduler

/// Every TCP connection a listener accepted, from accept to close: who may stay, and for how
/// long, before showing a token. The worker listener admits a connection when a worker joins on
/// it; `jobtop serve --listen` when a call on it carries the token.
///
/// Anyone who can reach the port can open a connection, so a connection that has not yet
/// been admitted (no hello, or a refused one) is *pending* and costs little: it has
/// ``Limits/helloDeadline`` to get admitted, or it is closed; at most ``Limits/maxPending`` may
/// be pending at once, and a connection beyond that is closed as soon as it is accepted (each
/// holds a file descriptor: unbounded, a peer that only connects would use them all up, and
/// the listener would then spin on `accept` failing with EMFILE while the process's own work,
/// its Unix socket included, waits for descriptors). When the listener stops, pending
/// connections are closed at once and admitted ones after the shutdown grace, so no peer,
/// silent or stopped, can keep the coordinator alive.
///
/// Connections are keyed by the peer address the transport also gives each stream
/// (`ipv4:HOST:PORT`), which is how a stream's hello finds its connection.
package final class ConnectionGate: Sendable {
    /// How long and how many.
    package struct Limits: Sendable {
        /// The time a new connection has to get admitted.
        package var helloDeadline: Duration
        /// Connections that may wait for admission at once.
        package var maxPending: Int

        package init(helloDeadline: Duration, maxPending: Int) {
            self.helloDeadline = helloDeadline
            self.maxPending = maxPending
        }
    }

    /// What the log lines say a pending connection waits for.
    package struct Wording: Sendable {
        /// "N connections are waiting to …".
        let waitingTo: String
        /// "closed the connection from PEER: … within 5s".
        let missing: String

        /// The worker listener's: a worker's hello.
        package static let worker = Wording(waitingTo: "say hello", missing: "no worker joined on it")
        /// `jobtop serve --listen`'s: a call with the token.
        package static let control = Wording(waitingTo: "make a call with the token", missing: "no call with the token came on it")
    }

    private struct Entry {
        let channel: any Channel
        var isAdmitted = false
        var deadline: Task<Void, Never>?
    }

    private struct State {
        var entries: [String: Entry] = [:]
        var pending = 0
        /// Whether the cap was hit since pending last fell below it (logged once per time).
        var isFull = false
        var isClosed = false
        /// When a connection's time running out was last logged, and how many ran out since
        /// without a line of their own: at most one such line per deadline.
        var lastExpiryLogged: SchedulerTime?
        var unloggedExpiries = 0
    }

    private let state = Locked(State())
    private let clock: SchedulerClock
    private let limits: Limits
    private let wording: Wording
    private let log: @Sendable (String) -> Void

    package init(clock: SchedulerClock, limits: Limits, wording: Wording = .worker, log: @escaping @Sendable (String) -> Void) {
        self.clock = clock
        self.limits = Limits(helloDeadline: limits.helloDeadline, maxPending: max(1, limits.maxPending))
        self.wording = wording
        self.log = log
    }

    /// The number of connections waiting for admission.
    package var pendingCount: Int { state.withLock { $0.pending } }

    /// Takes a connection the transport just accepted (on its event loop): watches it, or
    /// closes it when too many are pending or the listener is stopping.
    package func accepted(_ channel: any Channel) -> EventLoopFuture<Void> {
        let peer = Self.peer(of: channel)
        let id = ObjectIdentifier(channel)
        enum Decision { case watch, refuse(logFull: Bool), refuseClosed }
        let decision = state.withLock { state -> Decision in
            if state.isClosed { return .refuseClosed }
            if state.pending >= limits.maxPending {
                defer { state.isFull = true }
                return .refuse(logFull: !state.isFull)
            }
            state.pending += 1
            state.entries[peer] = Entry(channel: channel)
            return .watch
        }
        switch decision {
        case .refuse(let logFull):
            if logFull {
                log("jobtop: \(limits.maxPending) connections are waiting to \(wording.waitingTo), the most allowed; closing new connections until one of them does or times out")
            }
            channel.close(promise: nil)
        case .refuseClosed:
            channel.close(promise: nil)
        case .watch:
            let deadline = Task { [clock, limits] in
                do {
                    try await clock.sleep(clock.now() + limits.helloDeadline)
                } catch {
                    return
                }
                self.expire(peer, id)
            }
            let isOpen = state.withLock { state -> Bool in
                guard state.entries[peer]?.channel === channel else { return false }
                state.entries[peer]?.deadline = deadline
                return true
            }
            if !isOpen { deadline.cancel() }
            channel.closeFuture.whenComplete { _ in self.closed(peer, id) }
        }
        return channel.eventLoop.makeSucceededVoidFuture()
    }

    /// The connection from `peer` got in (a worker joined on it, a call showed the token): it
    /// stays.
    ///
    /// - Returns: `false` when no open connection is known for `peer` (it was closed: out of
    ///   time, or the listener is stopping).
    package func admit(peer: String) -> Bool {
        let deadline = state.withLock { state -> Task<Void, Never>?? in
            guard !state.isClosed, var entry = state.entries[peer] else { return .none }
            guard !entry.isAdmitted else { return .some(nil) }
            entry.isAdmitted = true
            defer {
                entry.deadline = nil
                state.entries[peer] = entry
            }
            state.pending -= 1
            if state.pending < limits.maxPending { state.isFull = false }
            return .some(entry.deadline)
        }
        guard let deadline else { return false }
        deadline?.cancel()
        return true
    }

    /// Refuses every new connection from now on and closes the pending ones.
    package func close() {
        let pending = state.withLock { state -> [any Channel] in
            state.isClosed = true
            return state.entries.values.filter { !$0.isAdmitted }.map(\.channel)
        }
        for channel in pending { channel.close(promise: nil) }
    }

    /// Closes every connection still open (admitted ones included).
    ///
    /// - Returns: How many there were.
    @discardableResult
    package func closeAll() -> Int {
        let channels = state.withLock { state -> [any Channel] in
            state.isClosed = true
            return state.entries.values.map(\.channel)
        }
        for channel in channels { channel.close(promise: nil) }
        return channels.count
    }

    // MARK: - Internals

    private func expire(_ peer: String, _ id: ObjectIdentifier) {
        let now = clock.now()
        let (channel, line) = state.withLock { state -> ((any Channel)?, String?) in
            guard let entry = state.entries[peer], ObjectIdentifier(entry.channel) == id, !entry.isAdmitted else {
                return (nil, nil)
            }
            if let last = state.lastExpiryLogged, now - last < limits.helloDeadline {
                state.unloggedExpiries += 1
                return (entry.channel, nil)
            }
            defer {
                state.lastExpiryLogged = now
                state.unloggedExpiries = 0
            }
            let more = state.unloggedExpiries
            return (
                entry.channel,
                "jobtop: closed the connection from \(peer): \(wording.missing) within \(formatDuration(limits.helloDeadline))"
                    + (more > 0 ? " (and \(more) more since the last such line)" : "")
            )
        }
        guard let channel else { return }
        if let line { log(line) }
        channel.close(promise: nil)
    }

    private func closed(_ peer: String, _ id: ObjectIdentifier) {
        let deadline = state.withLock { state -> Task<Void, Never>? in
            guard let entry = state.entries[peer], ObjectIdentifier(entry.channel) == id else { return nil }
            state.entries[peer] = nil
            if !entry.isAdmitted {
                state.pending -= 1
                if state.pending < limits.maxPending { state.isFull = false }
            }
            return entry.deadline
        }
        deadline?.cancel()
    }

    /// The peer as the transport names it in each stream's context (`ipv4:127.0.0.1:40000`).
    package static func peer(of channel: any Channel) -> String {
        switch channel.remoteAddress {
        case .v4(let address)?: "ipv4:\(address.host):\(channel.remoteAddress?.port ?? 0)"
        case .v6(let address)?: "ipv6:[\(address.host)]:\(channel.remoteAddress?.port ?? 0)"
        default: "<unknown>"
        }
    }
}
