import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A free TCP port on 127.0.0.1 for a test that binds it more than once (a coordinator started
/// again on its port, a command given a port it then listens on): below the kernel's ephemeral
/// range (`ip_local_port_range`), so that no socket bound to port 0 and no outgoing connection,
/// of this test process or any other, is handed it between the test's binds. A port probed with
/// port 0 and released was: under a full parallel run another test's listener took it, and the
/// second bind failed with "address already in use".
///
/// Random within the range, and checked free by a bind, so tests that each ask for one do not
/// meet either.
public func reusablePort() throws -> Int {
    let low = ephemeralRangeStart()
    // 10000 up to the ephemeral range: few services listen there, none of this machine's tests'.
    let candidates = 10_000..<max(10_001, low)
    for _ in 0..<200 {
        let port = Int.random(in: candidates)
        if canBind(port) { return port }
    }
    throw SpawnError(message: "no free port between \(candidates.lowerBound) and \(candidates.upperBound)")
}

/// The first port of the kernel's ephemeral range (32768 if it cannot be read).
private func ephemeralRangeStart() -> Int {
    let text = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)) ?? ""
    return text.split(whereSeparator: \.isWhitespace).first.flatMap { Int($0) } ?? 32768
}

/// Whether 127.0.0.1:`port` can be bound now (the probe's socket is closed before returning).
private func canBind(_ port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var reuse: Int32 = 1
    // As the listeners that will bind it do: a port whose last connection waits in TIME_WAIT
    // is usable for them, so it is for the probe.
    _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
    var address = RawTCP.loopback(port: port)
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
    }
}
