import CProcess
import Foundation
import JobtopTestSupport
import Testing
@testable import Scheduler

#if canImport(Glibc)
import Glibc
#endif

/// The local process layer at scale and at its edges: a slot costs no thread, what a job leaves
/// in its process group is stopped (or kept, when asked), a spawn that lacks file descriptors
/// waits instead of failing the job, and output keeps every byte.
@Suite(.timeLimit(.minutes(3)))
struct ProcessReactorTests {
    // MARK: - A slot is not a thread

    @Test func hundredsOfRunningJobsAreWatchedByAFewThreads() async {
        // In a child process of its own, so that no other suite's threads are counted.
        let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
            // A hang dies of SIGALRM (which fails the test) instead of hanging the test run.
            alarm(120)
            Scheduler.raiseOpenFileLimit()
            let count = 300
            // Given 300 slots and 300 jobs that each print "ready" and then sleep
            let scheduler = Scheduler(configuration: .init(localSlots: count, gracePeriod: .seconds(1), seed: 3))
            async let running: Void = scheduler.run()
            var reader = EventReader(await scheduler.events())
            _ = try await scheduler.submit(contentsOf: (0..<count).map { _ in .shell("echo ready; exec sleep 60") })
            // When every one of them runs (its "ready" is the gate)
            var ready = 0
            while ready < count, let event = await reader.next(where: { kind in
                if case .output(_, let line) = kind { return line.text == "ready" }
                return kind.isFinal
            }) {
                guard case .output = event.kind else { break }
                ready += 1
            }
            let threads = ProcessReactorTests.threadCount()
            let statistics = ProcessReactor.shared.statistics
            await scheduler.shutdown(.cancelRunning)
            await running
            // Then the process has far fewer threads than running jobs
            guard ready == count, statistics.running == count else {
                FileHandle.standardError.write(Data("only \(ready) of \(count) jobs ran (reactor: \(statistics))\n".utf8))
                exit(1)
            }
            guard threads < 16 else {
                FileHandle.standardError.write(Data("\(threads) threads while \(count) jobs ran\n".utf8))
                exit(1)
            }
        }
        Self.recordStandardError(of: result)
    }

    /// Records what a child process that failed wrote on stderr.
    static func recordStandardError(of result: ExitTest.Result?) {
        guard let result, result.exitStatus != .exitCode(0) else { return }
        Issue.record("the child process said: \(String(decoding: result.standardErrorContent, as: UTF8.self))")
    }

    /// The threads of this process (`Threads:` in /proc/self/status).
    static func threadCount() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Threads:") }) else { return -1 }
        return Int(line.dropFirst("Threads:".count).trimmingCharacters(in: .whitespaces)) ?? -1
    }

    @Test func oneLocalWorkerCanHaveManySlots() async throws {
        // Given a scheduler whose only worker is one local worker with 3 slots
        let scheduler = Scheduler(configuration: .init(localSlots: 0, seed: 8))
        async let running: Void = scheduler.run()
        var reader = EventReader(await scheduler.events())
        await scheduler.addWorker(LocalWorker(name: "wide", slots: 3, gracePeriod: .seconds(1)))
        // When 3 jobs that wait until cancelled are submitted
        let ids = try await scheduler.submit(contentsOf: (0..<3).map { _ in .shell("echo ready; exec sleep 60") })
        // Then all 3 run at once
        var ready = Set<JobID>()
        while ready.count < 3, let event = await reader.next(where: { kind in
            if case .output(_, let line) = kind { return line.text == "ready" }
            return kind.isFinal
        }) {
            guard case .output(let id, _) = event.kind else { break }
            ready.insert(id)
        }
        #expect(ready == Set(ids))
        await scheduler.shutdown(.cancelRunning)
        await running
    }

    // MARK: - Leftovers

    @Test func aProcessLeftInTheGroupIsStoppedAndReportedBeforeTheJobEnds() async throws {
        let pidFile = ShellJobTests.temporaryFile("pid")
        try await ShellJobTests.withScheduler(grace: .seconds(2)) { scheduler, reader in
            // Given a job whose main process ends while a background child runs on
            let id = try await scheduler.submit(.shell("sleep 1000 & echo $! > \(pidFile); echo done"))
            // When it ends
            #expect(await reader.final(of: id)?.name == "succeeded")
            // Then the child was stopped and an event said so, before the job's end
            let pid = try #require(pids(in: pidFile).first)
            #expect(!ShellJobTests.isAlive(pid), "the background sleep \(pid) outlived its job")
            let leftover = reader.seen.firstIndex { if case .leftoverProcesses(id, 1, true) = $0.kind { true } else { false } }
            let final = reader.seen.firstIndex { $0.kind.isFinal && $0.kind.jobID == id }
            #expect(leftover != nil && final != nil && leftover! < final!, "\(reader.seen.map(\.kind.name))")
        }
    }

    @Test func aLeftoverThatIgnoresSIGTERMGetsSIGKILLAfterTheGracePeriod() async throws {
        let pidFile = ShellJobTests.temporaryFile("pid")
        try await ShellJobTests.withScheduler(grace: .milliseconds(200)) { scheduler, reader in
            // The main shell ends as soon as the TERM-ignoring child has written its pid.
            let id = try await scheduler.submit(.shell(
                "sh -c 'trap \"\" TERM; echo $$ > \(pidFile); while :; do sleep 1; done' & until [ -s \(pidFile) ]; do :; done"))
            #expect(await reader.final(of: id)?.name == "succeeded")
            let pid = try #require(pids(in: pidFile).first)
            #expect(!ShellJobTests.isAlive(pid), "the TERM-ignoring leftover \(pid) survived")
            let reported = reader.seen.contains { if case .leftoverProcesses(id, let count, true) = $0.kind { count >= 1 } else { false } }
            #expect(reported)
        }
    }

    @Test func keepBackgroundLeavesTheProcessRunningAndSaysSo() async throws {
        let pidFile = ShellJobTests.temporaryFile("pid")
        try await ShellJobTests.withScheduler { scheduler, reader in
            var spec = JobSpec.shell("sleep 1000 > /dev/null 2>&1 & echo $! > \(pidFile)")
            spec.keepBackground = true
            let id = try await scheduler.submit(spec)
            #expect(await reader.final(of: id)?.name == "succeeded")
            let pid = try #require(pids(in: pidFile).first)
            defer { kill(pid, SIGKILL) }
            #expect(ShellJobTests.isAlive(pid), "a kept background process was stopped")
            #expect(reader.seen.contains { if case .leftoverProcesses(id, 1, false) = $0.kind { true } else { false } })
        }
    }

    @Test("A kept background process that writes to its job's stdout or stderr after the job ended lives on: its pipes are read (and dropped) until it closes them (closed at the end, it died of SIGPIPE at its first write)")
    func keptBackgroundProcessWritesAfterItsJobEnded() async throws {
        let directory = ShellJobTests.temporaryFile("kept")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try await ShellJobTests.withScheduler { scheduler, reader in
            // It waits for the job's end (the test's go file), then writes to both streams, and
            // notes each round it lived through.
            let daemon = """
                (echo $$ > pid; while [ ! -e go ]; do sleep 0.01; done; \
                 for i in 1 2 3 4 5; do echo "out $i"; echo "err $i" >&2; echo $i >> rounds; sleep 0.01; done; \
                 echo done > finished) &
                echo started
                """
            var spec = JobSpec.shell("cd \(directory) && sh -c '\(daemon.replacingOccurrences(of: "'", with: "'\\''"))'")
            spec.keepBackground = true
            let id = try await scheduler.submit(spec)
            #expect(await reader.final(of: id)?.name == "succeeded")
            _ = FileManager.default.createFile(atPath: "\(directory)/go", contents: nil)
            #expect(await eventually { FileManager.default.fileExists(atPath: "\(directory)/finished") }, "the kept process died before its last round")
            #expect(((try? String(contentsOfFile: "\(directory)/rounds", encoding: .utf8)) ?? "").split(separator: "\n").count == 5)
        }
    }

    @Test func aJobThatLeavesNothingBehindHasNoLeftoverEvent() async throws {
        try await ShellJobTests.withScheduler { scheduler, reader in
            let ids = try await scheduler.submit(contentsOf: [.shell("echo one"), .shell("sleep 0.01 & wait"), .shell("exit 3")])
            await reader.finals(of: ids)
            #expect(!reader.seen.contains { $0.kind.name == "leftover" })
        }
    }

    // MARK: - Lacking resources

    @Test func aSpawnWithoutFreeFileDescriptorsWaitsInsteadOfFailingTheJob() async {
        // In a child process of its own: it uses up the file descriptors it may open.
        let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
            func fail(_ message: String) -> Never {
                FileHandle.standardError.write(Data((message + "\n").utf8))
                exit(1)
            }
            // A child that hangs would hang the whole test run (an exit test has no time limit
            // of its own): it dies of SIGALRM instead, which fails the test.
            alarm(120)
            /// Takes up to `count` descriptors (all it can when `nil`).
            func fill(_ count: Int? = nil) -> [Int32] {
                var taken: [Int32] = []
                while count.map({ taken.count < $0 }) ?? true {
                    let fd = dup(2)
                    if fd < 0 { break }
                    taken.append(fd)
                }
                return taken
            }
            // Given a scheduler (its I/O threads and their reserves are set up) and libdispatch's
            // timer thread up (a zero-delay timer), which needs descriptors of its own to start
            let scheduler = Scheduler(configuration: .init(localSlots: 1, seed: 5))
            async let running: Void = scheduler.run()
            var reader = EventReader(await scheduler.events())
            await withCheckedContinuation { continuation in
                DispatchQueue.global().asyncAfter(deadline: .now()) { continuation.resume() }
            }
            // in a process with 1 free descriptor: fewer than a pipe needs (a spawn makes two, and
            // the first spawn of an I/O thread has none made ahead), while libdispatch can still
            // open the one it opens now and then
            var soft: UInt64 = 0
            var hard: UInt64 = 0
            _ = jt_get_limit(0, &soft, &hard)
            _ = jt_set_soft_limit(0, UInt64(jt_count_open_fds() + 64))
            var fillers = fill()
            close(fillers.removeLast())
            // When a job is started
            let id = try await scheduler.submit(.shell("echo hi"))
            await ProcessReactor.shared.waitUntil { $0.waitingForResources == 1 }
            // Then its I/O thread has given its reserve back to the process
            let reserve = fill(DescriptorReserve.size)
            guard reserve.count == DescriptorReserve.size else {
                fail("\(reserve.count) descriptors free while the job waits; expected the reserve given back")
            }
            for fd in reserve { close(fd) }
            // and when descriptors free up again
            for fd in fillers { close(fd) }
            _ = jt_set_soft_limit(0, soft)
            // it runs and succeeds, with nothing of jobtop's in its output
            guard case .succeeded? = await reader.final(of: id) else { fail("the job did not succeed: \(reader.seen.map(\.kind))") }
            let lines = await scheduler.output(of: id).lines.map(\.text)
            guard lines == ["hi"] else { fail("output \(lines)") }
            await scheduler.shutdown(.graceful)
            await running
        }
        Self.recordStandardError(of: result)
    }

    // MARK: - Exact output

    /// Splits `chunks` (each one read) and joins the lines' bytes back.
    static func split(_ chunks: [[UInt8]]) -> (lines: [OutputLine], joined: [UInt8]) {
        var splitter = LineSplitter(stream: .stdout)
        var lines: [OutputLine] = []
        for chunk in chunks { chunk.withUnsafeBufferPointer { splitter.feed($0, { lines.append($0) }) } }
        splitter.flush { lines.append($0) }
        return (lines, lines.flatMap(\.rawBytes))
    }

    @Test(arguments: [
        "a\nb\n", "a\r\nb\r\n", "10%\r20%\r\n", "\r 10%\r 20%\n", "a\n\n\nb", "", "\n", "no newline",
        "mixed\rcr\nlf\r\ncrlf",
    ])
    func splittingKeepsEveryByte(_ text: String) {
        let bytes = Array(text.utf8)
        #expect(Self.split([bytes]).joined == bytes)
        // Also when every byte is a read of its own (a \r\n across two reads included).
        #expect(Self.split(bytes.map { [$0] }).joined == bytes)
    }

    @Test func linesEndAsTheJobEndedThem() {
        let lines = Self.split([Array("one\ntwo\r\nthree\rfour".utf8)]).lines
        #expect(lines == [
            OutputLine(stream: .stdout, text: "one", ending: .newline),
            OutputLine(stream: .stdout, text: "two", ending: .carriageReturnNewline),
            OutputLine(stream: .stdout, text: "three", ending: .carriageReturn),
            OutputLine(stream: .stdout, text: "four", ending: .none),
        ])
    }

    @Test func aLongLineComesInPiecesCutBetweenCharacters() {
        // 3-byte characters, so that a cut at exactly the limit would split one.
        let text = String(repeating: "€", count: 20_000) + "\n"
        let (lines, joined) = Self.split([Array(text.utf8)])
        #expect(joined == Array(text.utf8))
        #expect(lines.count > 1)
        #expect(lines.dropLast().allSatisfy { $0.ending == .none && $0.bytes == nil && $0.text.utf8.count <= LineSplitter.maxLineBytes })
        #expect(lines.allSatisfy { $0.text.allSatisfy { $0 == "€" } })
        #expect(lines.last?.ending == .newline)
    }

    @Test func bytesThatAreNotUTF8AreKeptExactly() {
        let bytes: [UInt8] = [0x61, 0xFF, 0xFE, 0x62, 0x0A, 0xC3]
        let (lines, joined) = Self.split([bytes])
        #expect(joined == bytes)
        #expect(lines[0].bytes == [0x61, 0xFF, 0xFE, 0x62])
        #expect(lines[0].text == "a\u{FFFD}\u{FFFD}b")
        #expect(lines[1].bytes == [0xC3] && lines[1].ending == .none)
    }

    @Test func eachJobGetsStdinFromDevNullItsOwnPipesAndNoOtherDescriptor() async throws {
        try await ShellJobTests.withScheduler(slots: 1) { scheduler, reader in
            // Given jobs one after another on one slot (all but the first take the pipes their
            // I/O thread made ahead of them) that read stdin and list their own descriptors
            // (`*` lists the descriptors while the shell reads the directory: its own is 3.)
            let script = #"cat; cd /proc/$$/fd && echo fds *; echo "err $1" >&2"#
            var ids: [JobID] = []
            for index in 0..<6 {
                ids.append(try await scheduler.submit(JobSpec(work: .argv(["/bin/sh", "-c", script, "sh", "\(index)"]))))
            }
            await reader.finals(of: ids)
            for (index, id) in ids.enumerated() {
                // Then each ended at once (stdin at its end), held only 0, 1 and 2, and its
                // stdout and stderr came apart, its own and no other job's
                #expect(reader.seen.contains { $0.kind.jobID == id && $0.kind.name == "succeeded" })
                let lines = reader.seen.compactMap { if case .output(id, let line) = $0.kind { line } else { nil } }
                #expect(lines.filter { $0.stream == .stdout }.map(\.text) == ["fds 0 1 2 3"])
                #expect(lines.filter { $0.stream == .stderr }.map(\.text) == ["err \(index)"])
            }
        }
    }

    @Test func aShellJobsOutputIsDeliveredByteForByte() async throws {
        try await ShellJobTests.withScheduler { scheduler, reader in
            // A 1 MB line without a newline, CRLF, a bare CR, an empty line, bytes that are not UTF-8.
            let id = try await scheduler.submit(.shell(
                #"printf 'a\r\nb\rc\n\n'; printf '\377\376\n'; head -c 1000000 /dev/zero | tr '\0' x"#))
            #expect(await reader.final(of: id)?.name == "succeeded")
            let lines = reader.seen.compactMap { if case .output(id, let line) = $0.kind { line } else { nil } }
            var expected = Array("a\r\nb\rc\n\n".utf8) + [0xFF, 0xFE, 0x0A]
            expected += [UInt8](repeating: UInt8(ascii: "x"), count: 1_000_000)
            #expect(lines.flatMap(\.rawBytes) == expected)
        }
    }
}
