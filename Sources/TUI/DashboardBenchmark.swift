import Foundation
import Scheduler

/// The dashboard's own work, without a terminal: events applied to the view model and frames
/// laid out, timed (for `jobtop-dashboard-bench`; release builds only).
///
/// A per-event cost that grows with the number of jobs (a collection copied before each
/// mutation, a search of the whole table on every finish) shows as a ratio between a small and
/// a big table far above 1.
package enum DashboardBenchmark {
    /// What one run measured.
    package struct Result: Sendable {
        /// Queued jobs the table held throughout.
        package var queued: Int
        /// Jobs in the table at the end (queued plus the finished ones it keeps).
        package var tableSize: Int
        /// Events applied in the timed part.
        package var events: Int
        /// Nanoseconds per event: the model's update plus what the controller asks per event.
        package var nanosecondsPerEvent: Double
        /// Milliseconds per frame: the selection kept in view and the layout (the order is kept
        /// per event).
        package var millisecondsPerFrame: Double
        /// Frames laid out in the timed part.
        package var frames: Int
    }

    /// Fills a table with `queued` queued jobs, warms it up past the finished-job retention,
    /// then applies `cycles` × 3 events of a steady run (a queued job starts, it succeeds, a new
    /// one is submitted, so the table keeps `queued` queued jobs), with a frame every
    /// `eventsPerFrame` events.
    ///
    /// - Parameters:
    ///   - queued: Queued jobs in the table.
    ///   - cycles: Start-succeed-submit cycles timed.
    ///   - warmUp: Cycles run first, untimed: past 11,000 finishes the table drops old ones.
    ///   - workers: Single-slot workers (the worker panel lists them).
    ///   - eventsPerFrame: Events between two frames (about 30 frames a second at 30,000 events a second).
    package static func run(queued: Int, cycles: Int, warmUp: Int = 12_000, workers: Int = 8, eventsPerFrame: Int = 1_000) -> Result {
        var model = DashboardModel(title: "bench")
        var seq: UInt64 = 0
        func apply(_ kind: SchedulerEvent.Kind) {
            seq += 1
            let time = Duration.milliseconds(Int64(seq))
            model.apply(SchedulerEvent(seq: seq, time: time, kind: kind))
            // What the controller asks after each event.
            _ = model.needsSnapshot
            _ = model.board.jobsPerSecond(now: time)
        }
        let descriptors = (0..<max(1, workers)).map { index in
            WorkerDescriptor(id: WorkerID(uuid: UUID()), name: "local-\(index + 1)", kind: .local, slots: 1)
        }
        for descriptor in descriptors { apply(.workerJoined(descriptor)) }
        apply(.slotsChanged(local: descriptors.count, total: descriptors.count))

        var waiting: [JobID] = []
        waiting.reserveCapacity(queued)
        var next = 0
        func submit() {
            let id = JobID(uuid: UUID())
            next += 1
            apply(.submitted(JobInfo(id: id, command: "sleep 0.01 # \(next)", priority: next % 7, submittedAt: .milliseconds(Int64(seq)))))
            waiting.append(id)
        }
        for _ in 0..<queued { submit() }
        var head = 0
        func cycle(_ index: Int) {
            // The oldest queued job runs and succeeds; a new one takes its place.
            let id = waiting[head]
            head += 1
            let worker = descriptors[index % descriptors.count].id
            apply(.started(id, attempt: 1, maxAttempts: 1, worker: worker))
            apply(.succeeded(id, attempts: 1))
            submit()
            if head > 4_096, head * 2 > waiting.count {
                waiting.removeFirst(head)
                head = 0
            }
        }
        let size = TerminalSize(rows: 30, columns: 100)
        let tableRows = DashboardView.Layout(size: size).tableRows
        func frame() {
            model.prepare(tableRows: tableRows)
            _ = DashboardView.render(model, size: size, now: .milliseconds(Int64(seq)))
        }

        for index in 0..<warmUp { cycle(index) }
        frame()

        let clock = ContinuousClock()
        var eventTime = Duration.zero
        var frameTime = Duration.zero
        var frames = 0
        let cyclesPerFrame = max(1, eventsPerFrame / 3)
        var index = 0
        while index < cycles {
            let batch = min(cyclesPerFrame, cycles - index)
            let start = clock.now
            for offset in 0..<batch { cycle(warmUp + index + offset) }
            let drawn = clock.now
            frame()
            frameTime += clock.now - drawn
            eventTime += drawn - start
            frames += 1
            index += batch
        }
        let events = cycles * 3
        return Result(
            queued: queued, tableSize: model.board.jobs.count, events: events,
            nanosecondsPerEvent: eventTime.seconds * 1e9 / Double(max(1, events)),
            millisecondsPerFrame: frameTime.seconds * 1e3 / Double(max(1, frames)),
            frames: frames)
    }

    /// What ``keyLatency(queued:keys:)`` measured.
    package struct KeyLatency: Sendable {
        /// Jobs in the table.
        package var jobs: Int
        /// Milliseconds from a key to its frame laid out, sorted.
        package var milliseconds: [Double]
        /// Resident memory the model of `jobs` jobs added (bytes, from /proc/self/statm).
        package var modelBytes: Int
        /// Milliseconds from `s` (sort by the next key: the whole table sorted once) to its
        /// frame, sorted.
        package var resortMilliseconds: [Double] = []

        /// The `fraction` quantile (0.99: p99).
        package func quantile(_ fraction: Double) -> Double {
            guard !milliseconds.isEmpty else { return 0 }
            return milliseconds[min(milliseconds.count - 1, Int(Double(milliseconds.count) * fraction))]
        }
    }

    /// The time from a key to its frame with a big table: `queued` queued jobs (and a few
    /// running and finished), a job starting and one ending between two keys (the order is
    /// always stale), `keys` keys of the kinds a user types (move, page, priority). The table's
    /// order is kept per event (``TableOrder``), so no frame sorts; `s` (a new sort key, which
    /// sorts everything once) is timed apart, as ``KeyLatency/resortMilliseconds``.
    package static func keyLatency(queued: Int, keys: Int = 300) -> KeyLatency {
        let residentBefore = residentBytes()
        var model = DashboardModel(title: "bench")
        var seq: UInt64 = 0
        func apply(_ kind: SchedulerEvent.Kind) {
            seq += 1
            model.apply(SchedulerEvent(seq: seq, time: .milliseconds(Int64(seq)), kind: kind))
        }
        let workers = (0..<8).map { WorkerDescriptor(id: WorkerID(uuid: UUID()), name: "local-\($0 + 1)", kind: .local, slots: 1) }
        for worker in workers { apply(.workerJoined(worker)) }
        apply(.slotsChanged(local: 8, total: 8))
        var ids: [JobID] = []
        ids.reserveCapacity(queued)
        for index in 0..<queued {
            let id = JobID(uuid: UUID())
            ids.append(id)
            apply(.submitted(JobInfo(id: id, command: "sleep 0.01 # \(index)", priority: index % 7, submittedAt: .milliseconds(Int64(seq)))))
        }
        let size = TerminalSize(rows: 30, columns: 100)
        let tableRows = DashboardView.Layout(size: size).tableRows
        model.prepare(tableRows: tableRows)
        _ = DashboardView.render(model, size: size, now: .milliseconds(Int64(seq)))
        let modelBytes = max(0, residentBytes() - residentBefore)

        let script: [Key] = [.down, .down, .pageDown, .char("j"), .char("+"), .up, .pageUp, .char("-"), .end, .home]
        let clock = ContinuousClock()
        var times: [Double] = []
        times.reserveCapacity(keys)
        var next = 0
        for index in 0..<keys {
            // A job starts and one ends between two keys: the order is stale.
            let id = ids[next % ids.count]
            next += 1
            apply(.started(id, attempt: 1, maxAttempts: 1, worker: workers[index % 8].id))
            apply(.succeeded(id, attempts: 1))
            let start = clock.now
            _ = model.handle(script[index % script.count])
            model.prepare(tableRows: tableRows)
            _ = DashboardView.render(model, size: size, now: .milliseconds(Int64(seq)))
            times.append((clock.now - start).seconds * 1e3)
        }
        times.sort()
        // `s` four times: every sort key once, back to the first.
        var resorts: [Double] = []
        for _ in 0..<SortKey.allCases.count {
            let start = clock.now
            _ = model.handle(.char("s"))
            model.prepare(tableRows: tableRows)
            _ = DashboardView.render(model, size: size, now: .milliseconds(Int64(seq)))
            resorts.append((clock.now - start).seconds * 1e3)
        }
        resorts.sort()
        return KeyLatency(jobs: model.board.jobs.count, milliseconds: times, modelBytes: modelBytes, resortMilliseconds: resorts)
    }

    /// Resident memory of this process, from /proc/self/statm (0 where there is none).
    private static func residentBytes() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}
