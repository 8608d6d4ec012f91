import CProcess
import Foundation
import JobtopTestSupport
import Scheduler

#if canImport(Glibc)
import Glibc
#endif

/// A network namespace joined to the test's own (the root namespace) by a veth pair: a machine
/// on the other end of a real link, for workers that must cross it. Needs root and iproute2;
/// loss needs nftables (`nft`).
///
/// Names are unique per test process and namespace (`jobtop-test-<pid>-<n>`), and so is the
/// /30 subnet (10.64.0.0/12, from the pid and n). ``remove()`` deletes the namespace (and with it
/// the veth pair); a namespace a crashed test process left behind, and every process still in
/// it, is deleted by the next ``sweepStale()`` (every new namespace runs it first).
final class NetworkNamespace: Sendable {
    /// The namespace's name (`ip netns exec NAME ...`).
    let name: String
    /// The root namespace's end of the link (where the coordinator listens).
    let hostAddress: String
    /// The namespace's end of the link.
    let innerAddress: String
    /// The root namespace's veth device (taken down to cut the link).
    let hostDevice: String

    private static let prefix = "jobtop-test-"
    private static let counter = Locked(0)

    /// Why namespaces cannot be made here (`nil`: they can): not root, or no `ip`.
    static var unavailability: String? {
        if geteuid() != 0 { return "needs root (ip netns add), and this test runs as uid \(geteuid())" }
        if ipPath == nil { return "needs iproute2's `ip` (apt-get install -y iproute2), and none is on the PATH" }
        if nftPath == nil { return "needs nftables' `nft` (apt-get install -y nftables) for packet loss, and none is on the PATH" }
        return nil
    }

    static let ipPath = executable("ip")
    static let nftPath = executable("nft")

    /// Makes a namespace with its loopback up, and the link between it and the root namespace.
    init() throws {
        Self.sweepStale()
        let pid = Int(getpid())
        let n = Self.counter.withLock { value -> Int in
            defer { value += 1 }
            return value
        }
        name = "\(Self.prefix)\(pid)-\(n)"
        // 18 bits of subnet index: 16 from the pid, 2 from n; each a /30 in 10.64.0.0/12.
        let index = ((pid & 0xFFFF) << 2) | (n & 3)
        let base = "10.\(64 + (index >> 14)).\((index >> 6) & 0xFF)."
        let last = (index & 63) << 2
        hostAddress = base + "\(last + 1)"
        innerAddress = base + "\(last + 2)"
        // Device names are at most 15 bytes.
        let tag = String(pid % 1_000_000) + "x\(n % 100)"
        hostDevice = "jth\(tag)"
        let innerDevice = "jtn\(tag)"
        do {
            try Self.ip(["netns", "add", name])
            try Self.ip(["link", "add", hostDevice, "type", "veth", "peer", "name", innerDevice])
            try Self.ip(["link", "set", innerDevice, "netns", name])
            try Self.ip(["addr", "add", "\(hostAddress)/30", "dev", hostDevice])
            try Self.ip(["link", "set", hostDevice, "up"])
            try Self.ip(["-n", name, "addr", "add", "\(innerAddress)/30", "dev", innerDevice])
            try Self.ip(["-n", name, "link", "set", innerDevice, "up"])
            try Self.ip(["-n", name, "link", "set", "lo", "up"])
        } catch {
            remove()
            throw error
        }
    }

    /// Drops `percent` % of the packets the namespace sends and of those it receives, at
    /// random (nftables' numgen), as a lossy link would.
    func dropPackets(percent: Double) throws {
        let perMille = Int((percent * 10).rounded())
        let table = "jobtop_loss"
        try Self.run(Self.nftPath!, ["add", "table", "inet", table], in: name)
        for (chain, hook) in [("in", "input"), ("out", "output")] {
            try Self.run(Self.nftPath!, ["add", "chain", "inet", table, chain, "{ type filter hook \(hook) priority 0; }"], in: name)
            try Self.run(Self.nftPath!, ["add", "rule", "inet", table, chain, "numgen", "random", "mod", "1000", "<", "\(perMille)", "drop"], in: name)
        }
    }

    /// Takes the link down (nothing crosses it, and nobody is told) or brings it back up.
    func setLink(up: Bool) throws {
        try Self.ip(["link", "set", hostDevice, up ? "up" : "down"])
    }

    /// The arguments that run `command` inside the namespace with `ip netns exec` (which execs
    /// it: the process is the command itself, signals reach it).
    func exec(_ command: [String]) -> (executable: String, arguments: [String]) {
        (Self.ipPath!, ["netns", "exec", name] + command)
    }

    /// Kills whatever still runs in the namespace, then deletes it and with it its end of the
    /// veth pair (and so the pair). A process left inside would keep the namespace alive.
    func remove() {
        Self.killProcesses(in: name)
        _ = try? Self.ip(["netns", "delete", name])
        // Normally gone with the namespace; a half-made one may have left it in the root namespace.
        if Self.deviceExists(hostDevice) { _ = try? Self.ip(["link", "delete", hostDevice]) }
    }

    /// Deletes the `jobtop-test-PID-N` namespaces whose test process is gone.
    static func sweepStale() {
        guard let listing = try? run(ipPath ?? "ip", ["netns", "list"]) else { return }
        for line in listing.split(separator: "\n") {
            let name = String(line.split(separator: " ").first ?? "")
            guard name.hasPrefix(prefix) else { continue }
            let owner = name.dropFirst(prefix.count).split(separator: "-").first.flatMap { Int32($0) }
            if let owner, owner == getpid() || kill(owner, 0) == 0 || errno == EPERM { continue }
            // A test process that crashed left its workers running in there (reconnecting for
            // ever, keeping the namespace alive after its name is gone): kill them first.
            killProcesses(in: name)
            _ = try? ip(["netns", "delete", name])
        }
    }

    private static func killProcesses(in name: String) {
        let inside = (try? ip(["netns", "pids", name])) ?? ""
        for pid in inside.split(separator: "\n").compactMap({ pid_t($0.trimmingCharacters(in: .whitespaces)) }) {
            kill(pid, SIGKILL)
        }
    }

    private static func deviceExists(_ device: String) -> Bool {
        (try? run(ipPath ?? "ip", ["link", "show", device])) != nil
    }

    @discardableResult
    private static func ip(_ arguments: [String]) throws -> String {
        try run(ipPath ?? "ip", arguments)
    }

    /// Runs a short command (in namespace `namespace`, when given) to its end; its stdout.
    /// Spawned like the tests' jobtop processes (the child closes every descriptor above 2), so
    /// it never holds another test's socket.
    @discardableResult
    private static func run(_ executable: String, _ arguments: [String], in namespace: String? = nil) throws -> String {
        let argv = namespace.map { [ipPath ?? "ip", "netns", "exec", $0, executable] } ?? [executable]
        let path = argv[0]
        let all = argv + arguments
        let cArguments: [UnsafeMutablePointer<CChar>?] = all.map { strdup($0) } + [nil]
        let environment: [UnsafeMutablePointer<CChar>?] =
            ProcessInfo.processInfo.environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in cArguments + environment { free(pointer) } }
        var out: [Int32] = [-1, -1]
        var err: [Int32] = [-1, -1]
        guard jt_pipe(&out, 0) == 0 else { throw SpawnError(message: "cannot make a pipe") }
        guard jt_pipe(&err, 0) == 0 else {
            close(out[0])
            close(out[1])
            throw SpawnError(message: "cannot make a pipe")
        }
        let devNull = open("/dev/null", O_RDONLY | O_CLOEXEC)
        var child: pid_t = 0
        let rc = jt_spawn_io(path, cArguments, environment, nil, devNull, out[1], err[1], 0, &child, nil)
        close(devNull)
        close(out[1])
        close(err[1])
        defer {
            close(out[0])
            close(err[0])
        }
        guard rc == 0 else { throw SpawnError(message: "cannot run \(path): \(String(cString: strerror(rc)))") }
        // Both pipes are read at once (a thread for stderr), so neither can fill and block the child.
        let errors = Locked([UInt8]())
        let errorsRead = DispatchSemaphore(value: 0)
        let errFD = err[0]
        Thread.detachNewThread {
            errors.withLock { $0 = readAll(errFD) }
            errorsRead.signal()
        }
        let output = readAll(out[0])
        errorsRead.wait()
        var status: Int32 = 0
        while waitpid(child, &status, 0) < 0 && errno == EINTR {}
        guard jt_wifexited(status) != 0, jt_wexitstatus(status) == 0 else {
            let command = all.joined(separator: " ")
            let message = String(decoding: errors.withLock { $0 }, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            throw SpawnError(message: "`\(command)` failed: \(message)")
        }
        return String(decoding: output, as: UTF8.self)
    }

    private static func readAll(_ fd: Int32) -> [UInt8] {
        var data = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(fd, &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            data.append(contentsOf: buffer[0..<count])
        }
        return data
    }

    private static func executable(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        for directory in path.split(separator: ":").map(String.init) + ["/usr/sbin", "/sbin", "/usr/bin", "/bin"] {
            let candidate = directory + "/" + name
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }
}
