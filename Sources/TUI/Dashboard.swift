import Scheduler

/// How the dashboard is set up.
public struct DashboardOptions: Sendable {
    /// Shown in the header.
    public var title: String
    /// A file the dashboard writes its frame count to when it ends (for benchmarks); `nil`
    /// reads `JOBTOP_FRAME_STATS` from the environment.
    public var frameStatsPath: String?
    /// Attached to `jobtop serve` (`jobtop attach`): `q` detaches at once (the jobs go on),
    /// `X` shuts the serve down (asks y/n), and the dashboard ends when the serve goes away.
    public var isAttached: Bool
    /// Where the jobs typed with `n` run; `nil`: where the scheduler runs jobs by default (its
    /// own directory). `jobtop attach` on this machine gives its own directory, as `submit` does.
    public var workingDirectory: String?
    /// What the caller has to tell the user while the dashboard runs (a line of the job list it
    /// refused, and so stopped the run): each shown in the status line and the events pane.
    public var notices: AsyncStream<String>?
    /// How many jobs the run has in all, when known before they are all submitted (a list file
    /// streamed a window at a time): the header's progress and ETA count the ones to come.
    public var expectedJobs: Int?

    /// Creates options.
    public init(
        title: String = "jobtop", frameStatsPath: String? = nil, isAttached: Bool = false, workingDirectory: String? = nil,
        notices: AsyncStream<String>? = nil, expectedJobs: Int? = nil
    ) {
        self.title = title
        self.frameStatsPath = frameStatsPath
        self.isAttached = isAttached
        self.workingDirectory = workingDirectory
        self.notices = notices
        self.expectedJobs = expectedJobs
    }
}

/// Why the dashboard ended.
public enum DashboardExit: Sendable, Equatable {
    /// The user quit (after confirming that active jobs be cancelled, if there were any).
    case quit
    /// A signal ended it (SIGTERM, SIGHUP, a second Ctrl-C): the caller cancels what is left
    /// and exits with 128 + the signal number.
    case signal(Int32)
    /// Attached: the serve went away (the event stream ended without being asked to).
    case disconnected
    /// The terminal could not be taken over (said on stderr): nothing was shown.
    case cannotOpen
}

/// The full-screen dashboard: htop for jobs.
@MainActor
public enum Dashboard {
    /// Runs the dashboard on the terminal until the user quits; restores the terminal on every
    /// path.
    ///
    /// The scheduler must already be running; the caller shuts it down after. The dashboard
    /// does not touch signal handlers: the caller watches SIGINT, SIGTERM, SIGHUP and SIGWINCH
    /// (the way it does for a headless run) and hands them over as they arrive. When the
    /// terminal cannot be used at all, a message goes to standard error and it returns `.quit`
    /// at once.
    ///
    /// - Parameters:
    ///   - client: The scheduler to show and steer: the in-process one, or one across a socket.
    ///   - signals: SIGWINCH (relayout), SIGINT (like Ctrl-C: quit, asking first while jobs are
    ///     active; a second forces), SIGTERM and SIGHUP (end at once), as they arrive.
    ///   - options: How to set it up.
    /// - Returns: Why it ended.
    public static func run(client: any SchedulerClient, signals: AsyncStream<Int32>, options: DashboardOptions) async -> DashboardExit {
        let terminal: NcursesTerminal
        switch NcursesTerminal.open() {
        case .success(let opened): terminal = opened
        case .failure(let error):
            FileOutput.standardError("jobtop: cannot open the dashboard: \(error)\n")
            return .cannotOpen
        }
        let controller = DashboardController(client: client, terminal: terminal, signals: signals, options: options)
        return await controller.run()
    }

    /// Stops jobtop as a background shell job (SIGTTOU, the shell says "Stopped") until it is
    /// in the foreground (`fg`); returns at once in front, or where the kernel will not stop it.
    /// What a program that uses the terminal does when started with `&`, called before a run's
    /// jobs start.
    public nonisolated static func waitUntilInForeground() {
        NcursesTerminal.waitUntilInForeground()
    }

    /// Why the terminal on stdout cannot show the dashboard (`TERM is not set`, `TERM=dumb
    /// cannot move the cursor`), or `nil` when it can: asked before anything starts, so that
    /// the caller can run headless instead.
    public static func terminalProblem() -> String? {
        NcursesTerminal.usabilityProblem()
    }

    /// The signals the caller should watch and hand to ``run(client:signals:options:)``.
    public nonisolated static let signals: [Int32] = DashboardController.handledSignals
}
