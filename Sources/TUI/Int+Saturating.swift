extension Int {
    /// `self + other`, held at `Int.min`/`Int.max` instead of trapping: for counts and sizes
    /// that come from outside (events, snapshots) and are only shown.
    func saturatingAdd(_ other: Int) -> Int {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? (other > 0 ? .max : .min) : sum
    }
}
