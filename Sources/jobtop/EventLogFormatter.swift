import Foundation
import Scheduler

/// Turns scheduler events into headless log lines, text or JSON, one line per event.
///
/// It remembers what later lines need (job names, worker names, attempt starts) and limits
/// progress lines to ``progressInterval`` per job (100% is always logged). The JSON fields are a
/// documented, stable schema (README, "Headless log schema").
///
/// A class: it is mutated once per event, and a value type copied before each mutation would
/// copy its dictionaries every time (O(jobs) per event: a 60,000-job run never finished).
final class EventLogFormatter {
    /// The format.
    let format: LogFormat
    /// Whether output lines are logged.
    let logsOutput: Bool
    /// The shortest time between two progress lines of one job.
    var progressInterval: Duration = .milliseconds(250)

    /// Wall-clock time of scheduler time zero, in seconds since 1970.
    private let epoch: Double
    private var jobs: [JobID: JobMemo] = [:]
    private var workers: [WorkerID: String] = [:]
    /// The job that failed last, for the `halted` line that follows its failure.
    private var lastFailed: (id: JobID, name: String)?
    /// Names of ended jobs that other jobs wait for: a `blocked` line after a retry names them.
    /// Only dependencies are kept, so a flat run of any length keeps nothing here.
    private var dependencyNames: [JobID: String] = [:]

    private struct JobMemo {
        var name: String
        var maxAttempts: Int
        var group: String
        /// Whether a job waits for it (its name then outlives its memo).
        var isDependency = false
        var attemptStartedAt: SchedulerTime?
        var lastProgressAt: SchedulerTime?
        /// The last progress tick the interval held back: logged before the attempt's end, so
        /// the log's last progress is the job's (10% then 20% and 30% within the interval logged
        /// only 10%).
        var heldProgress: SchedulerEvent?
    }

    /// Creates a formatter.
    ///
    /// - Parameters:
    ///   - epoch: The wall-clock time (seconds since 1970) at which the scheduler's clock read zero.
    init(format: LogFormat, logsOutput: Bool, epoch: Double) {
        self.format = format
        self.logsOutput = logsOutput
        self.epoch = epoch
    }

    /// The job's display name, if the formatter has seen it.
    func name(of id: JobID) -> String? { jobs[id]?.name ?? dependencyNames[id] }

    /// The log lines for `event`: none when it is not logged (a snapshot, a rate-limited
    /// progress tick, an output line without `--log-output`); before an attempt's end, the
    /// progress tick the interval held back, if any.
    func lines(for event: SchedulerEvent) -> [String] {
        var lines: [String] = []
        if let id = event.kind.jobID, let held = jobs[id]?.heldProgress, Self.endsAttempt(event.kind) {
            jobs[id]?.heldProgress = nil
            if let line = eventLine(for: held, throttled: false) { lines.append(line) }
        }
        if let line = eventLine(for: event) { lines.append(line) }
        return lines
    }

    private static func endsAttempt(_ kind: SchedulerEvent.Kind) -> Bool {
        switch kind {
        case .retryScheduled, .requeued: true
        default: kind.isFinal
        }
    }

    private func eventLine(for event: SchedulerEvent, throttled: Bool = true) -> String? {
        var line = Line(format: format, ts: timestamp(event.time), seq: event.seq, event: event.kind.name)
        switch event.kind {
        case .snapshot(let snapshot):
            for worker in snapshot.workers { workers[worker.descriptor.id] = worker.descriptor.name }
            let dependencies = Set(snapshot.jobs.lazy.filter { !$0.state.isFinished }.flatMap(\.dependencies))
            for info in snapshot.jobs {
                if jobs[info.id] == nil {
                    jobs[info.id] = JobMemo(name: info.displayName, maxAttempts: info.maxAttempts, group: info.group)
                }
                if dependencies.contains(info.id) { jobs[info.id]?.isDependency = true }
            }
            return nil
        case .lagged(let missed):
            line.int("missed", missed)
        case .submitted(let info):
            jobs[info.id] = JobMemo(name: info.displayName, maxAttempts: info.maxAttempts, group: info.group)
            for dependency in info.dependencies { jobs[dependency]?.isDependency = true }
            job(info.id, &line)
            if info.name != nil { line.string("command", info.command) }
            line.int("priority", info.priority)
            line.int("max_attempts", info.maxAttempts)
            if let key = info.key { line.string("key", key) }
            group(info.group, &line)
            if !info.dependencies.isEmpty { line.strings("after", info.dependencies.map(label)) }
            switch info.state {
            case .blocked:
                line.string("state", info.state.name)
            case .scheduled(let until):
                line.string("state", info.state.name)
                line.string("at", timestamp(until))
            default:
                break
            }
        case .coalesced(let existing, let key):
            job(existing, &line)
            line.string("key", key)
        case .started(let id, let attempt, let maxAttempts, let worker):
            jobs[id]?.attemptStartedAt = event.time
            jobs[id]?.maxAttempts = maxAttempts
            job(id, &line)
            line.attempt(attempt, of: maxAttempts)
            line.string("worker", workers[worker] ?? worker.short)
            if let group = jobs[id]?.group { self.group(group, &line) }
        case .began(let id, let attempt):
            // A held attempt began at its worker: its duration counts from here.
            let handedOver = jobs[id]?.attemptStartedAt
            jobs[id]?.attemptStartedAt = event.time
            job(id, &line)
            line.attempt(attempt, of: jobs[id]?.maxAttempts ?? attempt)
            if let handedOver { line.seconds("held", event.time - handedOver) }
        case .progress(let id, let fraction):
            if throttled, fraction < 1, let last = jobs[id]?.lastProgressAt, event.time - last < progressInterval {
                jobs[id]?.heldProgress = event
                return nil
            }
            jobs[id]?.heldProgress = nil
            jobs[id]?.lastProgressAt = event.time
            job(id, &line)
            line.progress(fraction)
        case .placed(let id, let detail):
            job(id, &line)
            line.string("placement", detail)
        case .output(let id, let output):
            guard logsOutput else { return nil }
            job(id, &line)
            line.string("stream", output.stream.rawValue)
            line.string("text", output.text)
            // A piece: the rest of the line is the job's next output on this stream.
            if output.ending == .none { line.bool("partial", true) }
        case .leftoverProcesses(let id, let count, let stopped):
            job(id, &line)
            line.int("processes", count)
            line.bool("stopped", stopped)
        case .stopping(let id, let reason):
            job(id, &line)
            line.string("reason", reason.rawValue)
        case .retryScheduled(let id, let failedAttempt, let reason, let nextAttempt, let at):
            job(id, &line)
            line.attempt(failedAttempt, of: jobs[id]?.maxAttempts ?? nextAttempt)
            failure(reason, &line)
            line.int("next_attempt", nextAttempt)
            line.seconds("retry_in", at - event.time)
            line.string("retry_at", timestamp(at))
            jobs[id]?.lastProgressAt = nil
        case .requeued(let id, let reason):
            job(id, &line)
            line.string("reason", reason.description)
        case .succeeded(let id, let attempts):
            job(id, &line)
            line.int("attempts", attempts)
            if let started = jobs[id]?.attemptStartedAt { line.seconds("duration", event.time - started) }
            forget(id)
        case .failed(let id, let reason, let attempts):
            job(id, &line)
            line.int("attempts", attempts)
            failure(reason, &line)
            lastFailed = (id, jobs[id]?.name ?? id.short)
            forget(id)
        case .cancelled(let id):
            job(id, &line)
            forget(id)
        case .reprioritized(let id, let from, let to):
            job(id, &line)
            line.int("from", from)
            line.int("to", to)
        case .edited(let id, let command):
            job(id, &line)
            line.string("command", command)
        case .paused, .resumed:
            break
        case .slotsChanged(let local, let total):
            line.int("local", local)
            line.int("total", total)
        case .workerJoined(let descriptor):
            workers[descriptor.id] = descriptor.name
            line.string("worker", descriptor.name)
            line.string("worker_id", descriptor.id.description)
            line.string("kind", descriptor.kind.rawValue)
            // Its own slots, and what it may hold behind them apart (one `slots` said both: a
            // 2-slot worker with a prefetch of 1 showed as 3 slots).
            line.int("slots", descriptor.runningSlots)
            if descriptor.prefetchDepth > 0 { line.int("prefetch", descriptor.prefetchDepth) }
        case .workerLeft(let id, let reason):
            line.string("worker", workers[id] ?? id.short)
            line.string("worker_id", id.description)
            line.string("reason", reason.description)
        case .workerResized(let id, let slots):
            line.string("worker", workers[id] ?? id.short)
            line.string("worker_id", id.description)
            line.int("slots", slots)
        case .shuttingDown(let mode):
            line.string("mode", mode.rawValue)
        case .batchHalted(_, let failed):
            line.job(failed, name: jobs[failed]?.name ?? (lastFailed?.id == failed ? lastFailed?.name : nil))
            line.string("reason", "halt-on-failure")
        case .batchSettled:
            return nil
        case .blocked(let id, let waitingFor):
            job(id, &line)
            line.strings("waiting_for", waitingFor.map(label))
        case .released(let id):
            job(id, &line)
        case .scheduled(let id, let at):
            job(id, &line)
            line.string("at", timestamp(at))
            line.seconds("in", at - event.time)
        case .skipped(let id, let reason):
            job(id, &line)
            line.string("reason", reason.description)
            line.string("dependency", reason.dependencyName)
            line.string("dependency_outcome", reason.outcome.rawValue)
            // Kept: retrying the dependency brings a skipped job back (`blocked`, `released`,
            // `started`), and those lines name it. At most one memo per skipped job.
            jobs[id]?.attemptStartedAt = nil
        case .groupChanged(let group):
            line.string("group", group.name)
            if let limit = group.limit { line.int("limit", limit) }
            line.bool("paused", group.isPaused)
        }
        return line.text
    }

    /// The closing summary line.
    func summaryLine(_ summary: RunSummary, at wallTime: Double) -> String {
        var line = Line(format: format, ts: Self.iso8601(wallTime), seq: nil, event: "summary")
        line.int("total", summary.total)
        line.int("succeeded", summary.succeeded)
        line.int("failed", summary.failed)
        line.int("cancelled", summary.cancelled)
        line.int("skipped", summary.skipped)
        if summary.unfinished > 0 { line.int("unfinished", summary.unfinished) }
        if summary.notRun > 0 { line.int("not_run", summary.notRun) }
        line.seconds("wall", summary.wall)
        line.rate("jobs_per_s", summary.jobsPerSecond)
        line.int("exit_status", Int(summary.exitStatus))
        if let signal = summary.signal { line.string("signal", signalName(signal)) }
        return line.text
    }

    private func job(_ id: JobID, _ line: inout Line) {
        line.job(id, name: jobs[id]?.name)
    }

    /// The job's name if known, else its short id.
    private func label(_ id: JobID) -> String {
        name(of: id) ?? id.short
    }

    /// The `group` field: always in JSON, in text only when it is not the default group.
    private func group(_ group: String, _ line: inout Line) {
        if format == .json || group != JobSpec.defaultGroup { line.string("group", group) }
    }

    /// Drops what was remembered of an ended job, but the name of one that others wait for.
    private func forget(_ id: JobID) {
        if let memo = jobs.removeValue(forKey: id), memo.isDependency { dependencyNames[id] = memo.name }
    }

    private func failure(_ reason: FailureReason, _ line: inout Line) {
        line.string("reason", reason.description)
        switch reason {
        case .exitStatus(let code): line.int("exit_status", Int(code))
        case .signal(let signal): line.string("signal", signalName(signal))
        case .timeout(let limit): line.seconds("timeout", limit)
        case .error, .workerLost: break
        }
    }

    private func timestamp(_ time: SchedulerTime) -> String {
        Self.iso8601(epoch + time.seconds)
    }

    /// `2026-11-22T21:30:01.123Z`, without Foundation's slow formatters.
    static func iso8601(_ seconds: Double) -> String {
        var whole = time_t(seconds.rounded(.down))
        var millis = Int(((seconds - Double(whole)) * 1000).rounded())
        if millis >= 1000 {
            whole += 1
            millis -= 1000
        }
        var parts = tm()
        gmtime_r(&whole, &parts)
        return "\(parts.tm_year + 1900)-\(pad(parts.tm_mon + 1))-\(pad(parts.tm_mday))T"
            + "\(pad(parts.tm_hour)):\(pad(parts.tm_min)):\(pad(parts.tm_sec)).\(pad(millis, 3))Z"
    }

    private static func pad(_ value: some BinaryInteger, _ width: Int = 2) -> String {
        let text = String(value)
        return text.count >= width ? text : String(repeating: "0", count: width - text.count) + text
    }

    /// One line being built, in either format.
    private struct Line {
        let format: LogFormat
        var text: String

        init(format: LogFormat, ts: String, seq: UInt64?, event: String) {
            self.format = format
            switch format {
            case .json:
                text = "{\"ts\":\"\(ts)\""
                if let seq { text += ",\"seq\":\(seq)" }
                text += ",\"event\":\"\(event)\"}"
            case .text:
                text = ts + " " + event
                if event.count < 9 { text += String(repeating: " ", count: 9 - event.count) }
            }
        }

        mutating func job(_ id: JobID, name: String?) {
            switch format {
            case .json:
                raw("job", "\"\(id)\"")
                raw("name", name.map(Line.jsonString) ?? "null")
            case .text:
                text += " " + id.short
                if let name { text += " " + Line.textValue(name) }
            }
        }

        mutating func string(_ key: String, _ value: String) {
            switch format {
            case .json: raw(key, Line.jsonString(value))
            case .text: text += " \(key)=\(Line.textValue(value))"
            }
        }

        /// A list: a JSON array of strings; in text, the values joined by commas (quoted as a
        /// whole when one of them needs it).
        mutating func strings(_ key: String, _ values: [String]) {
            switch format {
            case .json: raw(key, "[" + values.map(Line.jsonString).joined(separator: ",") + "]")
            case .text:
                // Comma-separated while every value is plain and has no comma; else a JSON array
                // (`after=a,b` was written both for one job named `a,b` and for `a` and `b`).
                let plain = values.allSatisfy { !$0.contains(",") && Line.textValue($0) == $0 }
                text += " \(key)=" + (plain ? values.joined(separator: ",") : "[" + values.map(Line.jsonString).joined(separator: ",") + "]")
            }
        }

        mutating func int(_ key: String, _ value: Int) {
            switch format {
            case .json: raw(key, String(value))
            case .text: text += " \(key)=\(value)"
            }
        }

        mutating func bool(_ key: String, _ value: Bool) {
            switch format {
            case .json: raw(key, value ? "true" : "false")
            case .text: text += " \(key)=\(value)"
            }
        }

        mutating func attempt(_ attempt: Int, of maxAttempts: Int) {
            switch format {
            case .json:
                raw("attempt", String(attempt))
                raw("max_attempts", String(maxAttempts))
            case .text: text += " attempt=\(attempt)/\(maxAttempts)"
            }
        }

        mutating func progress(_ fraction: Double) {
            switch format {
            case .json: raw("progress", Line.decimal(fraction, places: 3))
            case .text: text += " progress=\(Line.decimal(fraction * 100, places: 1))%"
            }
        }

        mutating func seconds(_ key: String, _ duration: Duration) {
            switch format {
            case .json: raw(key, Line.decimal(max(0, duration.seconds), places: 3))
            case .text: text += " \(key)=\(Line.decimal(max(0, duration.seconds), places: 3))s"
            }
        }

        mutating func rate(_ key: String, _ value: Double) {
            switch format {
            case .json: raw(key, Line.decimal(value, places: 1))
            case .text: text += " \(key)=\(Line.decimal(value, places: 1))"
            }
        }

        private mutating func raw(_ key: String, _ json: String) {
            text.removeLast()  // the closing brace
            text += ",\"\(key)\":\(json)}"
        }

        /// A number with at most `places` decimals, no exponent, no trailing zeros.
        static func decimal(_ value: Double, places: Int) -> String {
            guard value.isFinite else { return "0" }
            var scale = 1.0
            for _ in 0..<places { scale *= 10 }
            let scaled = (value * scale).rounded()
            let whole = Int64(scaled) / Int64(scale)
            var fraction = abs(Int64(scaled) % Int64(scale))
            var text = (scaled < 0 && whole == 0 ? "-" : "") + String(whole)
            guard fraction != 0 else { return text }
            var digits = places
            while fraction % 10 == 0 {
                fraction /= 10
                digits -= 1
            }
            let fractionText = String(fraction)
            text += "." + String(repeating: "0", count: digits - fractionText.count) + fractionText
            return text
        }

        /// A value as text: bare when it is a plain word, else quoted with JSON escapes.
        static func textValue(_ value: String) -> String {
            let plain = !value.isEmpty && value.unicodeScalars.allSatisfy { scalar in
                scalar.value > 0x20 && !isUnsafe(scalar) && scalar != "\"" && scalar != "=" && scalar != "\\"
            }
            return plain ? value : jsonString(value)
        }

        /// Whether a terminal could act on `scalar` instead of showing it: C0 and C1 controls, DEL,
        /// line and paragraph separators, and format characters (bidi overrides, zero-width
        /// joiners) that can make a log line read as something else. They are escaped.
        static func isUnsafe(_ scalar: Unicode.Scalar) -> Bool {
            if scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) { return true }
            switch scalar.properties.generalCategory {
            case .format, .lineSeparator, .paragraphSeparator, .control: return true
            default: return false
            }
        }

        /// `value` as a JSON string literal.
        static func jsonString(_ value: String) -> String {
            var result = "\""
            result.reserveCapacity(value.utf8.count + 2)
            for scalar in value.unicodeScalars {
                switch scalar {
                case "\"": result += "\\\""
                case "\\": result += "\\\\"
                case "\n": result += "\\n"
                case "\r": result += "\\r"
                case "\t": result += "\\t"
                default:
                    if isUnsafe(scalar) {
                        // JSON escapes are UTF-16 units: a scalar above U+FFFF is a surrogate pair.
                        for unit in String(scalar).utf16 {
                            let hex = String(unit, radix: 16)
                            result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                        }
                    } else {
                        result.unicodeScalars.append(scalar)
                    }
                }
            }
            return result + "\""
        }
    }
}
