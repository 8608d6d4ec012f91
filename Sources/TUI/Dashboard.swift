import Scheduler

// TEMPORARY interface stub, replaced by the dashboard helper (issue 4). The signature is the
// contract the command line codes against.

/// How the dashboard is set up.
public struct DashboardOptions: Sendable {
    /// Shown in the header.
    public var title: String

    /// Creates options.
    public init(title: String = "jobtop") {
        self.title = title
    }
}

/// Why the dashboard ended.
public enum DashboardExit: Sendable, Equatable {
    /// The user quit (after confirming that active jobs be cancelled, if there were any).
    case quit
    /// A signal ended it (SIGTERM, SIGHUP, a second Ctrl-C): the caller cancels what is left
    /// and exits with 128 + the signal number.
    case signal(Int32)
}

/// The full-screen dashboard.
@MainActor
public enum Dashboard {
    /// Runs the dashboard on the terminal until the user quits; restores the terminal on every
    /// path. The scheduler's `run()` must already be running; the caller shuts it down after.
    public static func run(scheduler: Scheduler, options: DashboardOptions) async -> DashboardExit {
        .quit
    }
}
