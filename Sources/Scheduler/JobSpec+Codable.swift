import Foundation

// Specs are plain values that cross a socket or go to disk (`jobtop submit`, a durable queue).
// A closure job is the one exception: it lives only in the process that made it, and encoding
// one fails with an error that says so.



extension JobWork: Codable {
    private enum CodingKeys: String, CodingKey { case shell, argv }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        if let command = try container.decodeIfPresent(String.self, forKey: .shell) {
            self = .shell(command)
        } else if let arguments = try container.decodeIfPresent([String].self, forKey: .argv) {
            self = .argv(arguments)
        } else {
            throw DecodingError.dataCorrupted(.init(
                codingPath: decoder.codingPath, debugDescription: "a job's work is 'shell' (a command) or 'argv' (a list)"))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .shell(let command): try container.encode(command, forKey: .shell)
        case .argv(let arguments): try container.encode(arguments, forKey: .argv)
        case .closure:
            throw EncodingError.invalidValue(self, .init(
                codingPath: encoder.codingPath,
                debugDescription: "a closure job cannot be serialized: it exists only in the process that made it"))
        }
    }
}

extension RetryPolicy: Codable {
    private enum CodingKeys: String, CodingKey { case maxAttempts, initialBackoff, multiplier, maxBackoff, jitter }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        // Through the initializer, so decoded values are clamped like given ones.
        self.init(
            maxAttempts: try container.decode(Int.self, forKey: .maxAttempts),
            initialBackoff: try container.decode(Duration.self, forKey: .initialBackoff),
            multiplier: try container.decode(Double.self, forKey: .multiplier),
            maxBackoff: try container.decode(Duration.self, forKey: .maxBackoff),
            jitter: try container.decode(Double.self, forKey: .jitter))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(maxAttempts, forKey: .maxAttempts)
        try container.encode(initialBackoff, forKey: .initialBackoff)
        try container.encode(multiplier, forKey: .multiplier)
        try container.encode(maxBackoff, forKey: .maxBackoff)
        try container.encode(jitter, forKey: .jitter)
    }
}

extension ProgressPattern: Codable {
    public init(from decoder: any Decoder) throws {
        let pattern = try decoder.singleValueContainer().decode(String.self)
        do {
            try self.init(pattern)
        } catch {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: error.description))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(pattern)
    }
}

extension JobID: Codable {
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let id = JobID(parsing: text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "'\(text)' is not a job id"))
        }
        self = id
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

extension WorkerID: Codable {
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let id = WorkerID(parsing: text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "'\(text)' is not a worker id"))
        }
        self = id
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}
