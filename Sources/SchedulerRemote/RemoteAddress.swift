/// A `HOST:PORT` pair: where a coordinator listens or a worker connects.
public struct RemoteAddress: Sendable, Equatable, CustomStringConvertible {
    /// A host name or an IP address (IPv6 without brackets).
    public var host: String
    /// The TCP port; 0 asks the system for a free one when listening.
    public var port: Int

    /// Creates an address.
    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Reads `HOST:PORT`, `[IPV6]:PORT` or `:PORT` (all interfaces).
    ///
    /// - Throws: ``RemoteError`` (`.badAddress`) naming what is wrong.
    public init(parsing text: String) throws(RemoteError) {
        let hostPart: Substring
        let portPart: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else {
                throw RemoteError(.badAddress, "'\(text)': missing ']' after the IPv6 address")
            }
            hostPart = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else {
                throw RemoteError(.badAddress, "'\(text)': expected ':PORT' after ']'")
            }
            portPart = rest.dropFirst()
        } else {
            guard let colon = text.lastIndex(of: ":") else {
                throw RemoteError(.badAddress, "'\(text)': expected HOST:PORT, for example 127.0.0.1:7070")
            }
            hostPart = text[..<colon]
            portPart = text[text.index(after: colon)...]
            if hostPart.contains(":") {
                throw RemoteError(.badAddress, "'\(text)': write an IPv6 address in brackets, like [::1]:7070")
            }
        }
        guard let port = Int(portPart), (0...65535).contains(port) else {
            throw RemoteError(.badAddress, "'\(text)': the port must be a number from 0 to 65535")
        }
        self.host = hostPart.isEmpty ? "0.0.0.0" : String(hostPart)
        self.port = port
    }

    /// Whether the host is this machine only (`127.0.0.0/8`, `::1`, `localhost`).
    public var isLoopback: Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }

    /// Whether the host is written as an IPv6 address.
    var isIPv6: Bool { host.contains(":") }

    /// Whether the host is a dotted IPv4 address (not a name to resolve). A TLS client must
    /// connect to such a host as an address: an IP address is no valid server name (SNI).
    public var isIPv4: Bool {
        host.split(separator: ".").count == 4 && host.allSatisfy { $0.isNumber || $0 == "." }
    }

    public var description: String { isIPv6 ? "[\(host)]:\(port)" : "\(host):\(port)" }
}
