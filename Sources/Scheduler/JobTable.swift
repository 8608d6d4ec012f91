/// The core's job records: a dense array of records and a map from id to array index.
///
/// A dictionary of the records themselves would move every (large) record each time it grows
/// and scatter them in memory; here growth moves small index entries only and the records stay
/// packed. Freed indices are reused.
struct JobTable<Record>: Sendable where Record: Sendable {
    private var indices: [JobID: Int] = [:]
    private var records: [Record?] = []
    private var free: [Int] = []

    /// The number of records.
    var count: Int { indices.count }

    /// The record of `id`; assigning `nil` removes it.
    subscript(id: JobID) -> Record? {
        get { indices[id].flatMap { records[$0] } }
        set {
            if let index = indices[id] {
                if let newValue {
                    records[index] = newValue
                } else {
                    indices[id] = nil
                    records[index] = nil
                    free.append(index)
                }
            } else if let newValue {
                if let index = free.popLast() {
                    records[index] = newValue
                    indices[id] = index
                } else {
                    indices[id] = records.count
                    records.append(newValue)
                }
            }
        }
    }

    /// Every record, in no particular order.
    var values: [Record] { records.compactMap { $0 } }
}
