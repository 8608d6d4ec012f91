import GRPCCore
import GRPCNIOTransportHTTP2Posix

@testable import SchedulerRemote

/// A bare protocol client, for what a `jobtop worker` never sends.
enum RawClient {
    /// Says hello with `version`; returns the refusal, or `nil` when welcomed.
    static func hello(port: Int, version: UInt32) async throws -> Jobtop_Remote_V1_Refusal? {
        try await withGRPCClient(
            transport: .http2NIOPosix(target: .ipv4(address: "127.0.0.1", port: port), transportSecurity: .plaintext)
        ) { client in
            try await WirePool.Client(wrapping: client).connect(requestProducer: { writer in
                try await writer.write(.with {
                    $0.hello = .with {
                        $0.name = "time-traveller"
                        $0.slots = 1
                        $0.protocolVersion = version
                        $0.softwareVersion = "9.9.9"
                    }
                })
            }, onResponse: { response in
                for try await message in response.messages {
                    if case .refusal(let refusal) = message.kind { return refusal }
                    return nil
                }
                return nil
            })
        }
    }
}
