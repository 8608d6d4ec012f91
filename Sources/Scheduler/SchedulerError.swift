/// A command the scheduler refused.
public struct SchedulerError: Error, Sendable, Equatable, Codable, CustomStringConvertible {
    /// What kind of refusal.
    public enum Code: String, Sendable, Codable {
        /// No job with that id (or it ended long ago and is no longer kept).
        case unknownJob
        /// The job's state does not allow the command (cancel a finished job, ...).
        case notAllowed
        /// The scheduler is shutting down.
        case shuttingDown
        /// A value was out of range.
        case invalidArgument
    }

    /// What kind of refusal.
    public let code: Code
    /// A sentence for a human.
    public let message: String

    /// Creates an error.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
