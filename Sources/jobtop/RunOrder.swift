import Scheduler

/// The order jobs are handed to the scheduler.
enum RunOrder {
    /// Highest priority first, file order among equals.
    ///
    /// The scheduler starts a job the moment it is submitted when a slot is free, so submitting
    /// in file order would let the first jobs run before a later, higher-priority one is even
    /// queued. Submitting in priority order makes `-j 1` run a file strictly by priority.
    static func submissionOrder(_ specs: [JobSpec]) -> [JobSpec] {
        specs.enumerated()
            .sorted { $0.element.priority != $1.element.priority ? $0.element.priority > $1.element.priority : $0.offset < $1.offset }
            .map(\.element)
    }
}
