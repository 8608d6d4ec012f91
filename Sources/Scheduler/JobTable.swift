import CProcess

/// A job's place in the core's tables: a dense index, so everything inside the core reaches a job
/// without hashing its ``JobID``.
///
/// Indices are reused once a record is removed, so a handle kept past its job's removal may name
/// another job: whoever keeps one outside a single core step keeps the ``JobID`` with it and
/// checks it (``JobTable/handle(_:matches:)``).
struct JobHandle: Hashable, Sendable {
    /// The index in the table.
    let index: Int32
}

/// The core's job records: a dense array of records indexed by ``JobHandle``, and one map from
/// id to handle that only commands naming a job by its id use.
///
/// A dictionary of the records themselves would move every (large) record each time it grows,
/// scatter them in memory and cost a hash per access; here growth moves small entries, the
/// records stay packed, and a handle reaches its record (to read or change in place) with an
/// array index. Freed indices are reused.
///
/// Records are stored as they are, not as optionals: reading a field through a force-unwrapped
/// optional copies the whole record first. A removed record is overwritten with `placeholder`
/// (so what it held is released), and `ids` says which indices hold a job.
///
/// A record may also be retired: removed, with its id kept in the map under a small mark (a
/// negative index) that the owner reads back with ``mark(of:)`` — the core keeps how a dropped
/// dependency ended that way, updating the map's entry in place instead of removing it and
/// inserting the id into another set.
struct JobTable<Record>: Sendable where Record: Sendable {
    /// Each id's handle; a retired id's index is `-1 - mark`.
    private var handles: [JobID: JobHandle] = [:]
    private var liveCount = 0
    private var records: [Record] = []
    private var ids: [JobID?] = []
    private var free: [Int32] = []
    private let placeholder: Record

    /// An empty table; `placeholder` fills the indices of removed records.
    init(placeholder: Record) {
        self.placeholder = placeholder
    }

    /// The number of records.
    var count: Int { liveCount }

    /// How many records the table holds without growing (free places included).
    var capacity: Int { records.capacity }

    /// The handle of `id`, if it has a record. The one hashed lookup.
    func handle(of id: JobID) -> JobHandle? {
        guard let handle = handles[id], handle.index >= 0 else { return nil }
        return handle
    }

    /// The mark `id` was retired with, if it was (see ``retire(_:mark:)``).
    func mark(of id: JobID) -> Int32? {
        guard let handle = handles[id], handle.index < 0 else { return nil }
        return -1 - handle.index
    }

    /// Whether `handle` still names the job `id` (its index may have been reused).
    func handle(_ handle: JobHandle, matches id: JobID) -> Bool {
        let index = Int(handle.index)
        return index < ids.count && ids[index] == id
    }

    /// The id of the job at `handle`, which must have a record.
    func id(at handle: JobHandle) -> JobID { ids[Int(handle.index)]! }

    /// The record at `handle`, which must have one; read or changed in place.
    subscript(handle: JobHandle) -> Record {
        _read { yield records[Int(handle.index)] }
        _modify { yield &records[Int(handle.index)] }
    }

    /// The record of `id`, if any (a hashed lookup: for the edges).
    subscript(id: JobID) -> Record? {
        handle(of: id).map { records[Int($0.index)] }
    }

    /// Makes room for `extra` more records at once, so a big submission grows the id map once
    /// instead of rehashing it step by step.
    mutating func reserve(_ extra: Int) {
        let needed = handles.count + extra
        if needed > handles.capacity { handles.reserveCapacity(max(needed, handles.capacity * 2)) }
        // The records too (a restart puts 100,000 back: growing by doubling copied every record
        // several times over).
        let records = self.records.count + max(0, extra - free.count)
        if records > self.records.capacity {
            self.records.reserveCapacity(max(records, self.records.capacity * 2))
            ids.reserveCapacity(max(records, ids.capacity * 2))
        }
    }

    /// Adds a record for `id`, which must not have one.
    mutating func insert(_ record: Record, for id: JobID) -> JobHandle {
        insert(for: id) { _ in record }
    }

    /// Adds the record `make` builds from its handle for `id`, which must not have one.
    mutating func insert(for id: JobID, _ make: (JobHandle) -> Record) -> JobHandle {
        let handle: JobHandle
        if let index = free.popLast() {
            handle = JobHandle(index: index)
            records[Int(index)] = make(handle)
            ids[Int(index)] = id
        } else {
            handle = JobHandle(index: Int32(records.count))
            records.append(make(handle))
            ids.append(id)
        }
        let previous = handles.updateValue(handle, forKey: id)
        // A retired id may come back (its mark is then forgotten); a live one never.
        precondition(previous.map { $0.index < 0 } ?? true, "job \(id) already has a record")
        liveCount += 1
        return handle
    }

    /// Removes the record at `handle`, which must have one; its index may be reused.
    mutating func remove(_ handle: JobHandle) {
        let index = Int(handle.index)
        guard let id = ids[index] else { return }
        handles[id] = nil
        release(index)
    }

    /// Removes the record at `handle`, which must have one, keeping its id known under `mark`
    /// (0 or more): ``handle(of:)`` no longer finds it, ``mark(of:)`` does. Its index may be
    /// reused.
    mutating func retire(_ handle: JobHandle, mark: Int32) {
        precondition(mark >= 0, "a mark is not negative")
        let index = Int(handle.index)
        guard let id = ids[index] else { return }
        handles[id] = JobHandle(index: -1 - mark)
        release(index)
    }

    /// Frees the record at `index` for reuse.
    private mutating func release(_ index: Int) {
        liveCount -= 1
        records[index] = placeholder
        ids[index] = nil
        free.append(Int32(index))
    }

    /// Starts loading the record at `handle` into the CPU's cache and returns at once: a hint
    /// for a record the caller will touch soon, which changes nothing.
    func prefetch(_ handle: JobHandle) {
        prefetch(handle, bytes: MemoryLayout<Record>.stride)
    }

    /// ``prefetch(_:)`` of the first `bytes` of the record only.
    func prefetch(_ handle: JobHandle, bytes: Int) {
        let index = Int(handle.index)
        guard index >= 0, index < records.count else { return }
        records.withUnsafeBufferPointer { jt_prefetch(UnsafeRawPointer($0.baseAddress! + index), min(bytes, MemoryLayout<Record>.stride)) }
    }

    /// Every record's handle, in no particular order: a walk that copies no record (``values``
    /// copies them all, which for 100,000 jobs is most of a snapshot's cost).
    func forEachHandle(_ body: (JobHandle) -> Void) {
        for index in ids.indices where ids[index] != nil { body(JobHandle(index: Int32(index))) }
    }

    /// Every record, in no particular order.
    var values: [Record] { ids.indices.compactMap { ids[$0] == nil ? nil : records[$0] } }
}
