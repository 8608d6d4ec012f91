import Scheduler

/// How the dashboard is set up.
public struct DashboardOptions: Sendable {
    /// Shown in the header.
    public var title: String
    /// A file the dashboard writes its frame count to when it ends (for benchmarks); `nil`
    /// reads `JOBTOP_FRAME_STATS` from the environment.
    public var frameStatsPath: String?

    /// Creates options.
    public init(title: String = "jobtop", frameStatsPath: String? = nil) {
        self.title = title
        self.frameStatsPath = frameStatsPath
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

/// The full-screen dashboard: htop for jobs.
@MainActor
public enum Dashboard {
    /// Runs the dashboard on the terminal until the user quits; restores the terminal on every
    /// path.
    ///
    /// The scheduler's `run()` must already be running; the caller shuts it down after. While
    /// the dashboard runs it owns SIGINT, SIGTERM, SIGHUP and SIGWINCH; their previous handlers
    /// are put back when it returns. When the terminal cannot be used at all, a message goes to
    /// standard error and it returns `.quit` at once.
    ///
    /// - Parameters:
    ///   - scheduler: The scheduler to show and steer.
    ///   - options: How to set it up.
    /// - Returns: Why it ended.
    public static func run(scheduler: Scheduler, options: DashboardOptions) async -> DashboardExit {
        let terminal: NcursesTerminal
        switch NcursesTerminal.open() {
        case .success(let opened): terminal = opened
        case .failure(let error):
            FileOutput.standardError("jobtop: cannot open the dashboard: \(error)\n")
            return .quit
        }
        let controller = DashboardController(scheduler: scheduler, terminal: terminal, options: options)
        return await controller.run()
    }
}
