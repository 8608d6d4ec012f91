import ArgumentParser
import Foundation
import Scheduler
import SchedulerRemote
import SchedulerService
import SchedulerSlurm
import SchedulerStore

extension Jobtop {
    /// `jobtop serve`: a scheduler that outlives the terminal, steered over a socket.
    struct Serve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "serve",
            abstract: "Run the scheduler as a daemon: submit, status, attach and the rest talk to it over a socket.",
            discussion: """
                Listens on a Unix socket only this user can use: $XDG_RUNTIME_DIR/jobtop/serve.sock \
                (directory 0700, socket 0600), or /tmp/jobtop-UID/serve.sock when XDG_RUNTIME_DIR is \
                unset. A socket left by a serve that died is replaced; one a serve still answers on is \
                refused. With --listen HOST:PORT the same service is also offered on TCP, behind the \
                token (--token-file PATH or $JOBTOP_TOKEN), for 'jobtop attach --connect HOST:PORT'.

                With --workers HOST:PORT it also accepts remote workers ('jobtop worker --connect \
                HOST:PORT'), behind the same token and TLS certificate; -j 0 then leaves every job \
                to them. A job a worker was running when serve stopped counts as failed ('jobtop \
                stopped') and runs again as its retries allow; one it held (prefetched) and had \
                not begun goes back to the queue, that attempt not counted. The worker stops its \
                jobs when the connection goes, and rejoins the next serve on the same address by \
                itself.

                SIGINT or SIGTERM: start nothing new, let running jobs finish, then exit (a second \
                one cancels the running jobs). 'jobtop shutdown' does the same from a client. \
                SIGHUP is ignored: closing the terminal it was started from does not stop it.

                With --slurm every job runs as a Slurm batch job and -j is how many jobtop keeps \
                submitted at once (default 10). A restart cancels, in Slurm, the jobs of the attempts \
                the last serve had running (the attempt counts as failed, 'jobtop stopped', and runs \
                again as its retries allow), as it stops their process groups locally.

                Exit status: 0 shut down; 1 cannot listen (a serve already runs on the socket, \
                the socket cannot be made, or a --listen or --workers port is taken: said before \
                the state directory is made) or cannot use the state directory; 2 bad usage (with --slurm: Slurm missing, not answering, \
                or refusing the partition or arguments).
                """
        )

        @Option(
            name: [.customShort("j", allowingJoined: true), .long], parsing: .unconditional,
            help: ArgumentHelp("Local worker slots (default: number of cores; 0 with --workers: remote workers only); with --slurm, how many jobs are kept submitted to Slurm (default 10).", valueName: "n"))
        var jobs: Int?

        @Option(
            parsing: .unconditional,
            help: ArgumentHelp("SIGTERM to SIGKILL grace on cancel or timeout (default 5s), as for jobtop run.", valueName: "duration"),
            transform: { try DurationParser.option($0, "--grace") })
        var grace: Duration?

        @Option(
            name: .customLong("state-dir"),
            help: ArgumentHelp("Where the queue is kept (default: $XDG_STATE_HOME/jobtop, else ~/.local/state/jobtop).", valueName: "dir"))
        var stateDir: String?

        @Option(
            name: .customLong("listen"),
            help: ArgumentHelp("Also serve on TCP at this address (a non-loopback one needs a token).", valueName: "host:port"))
        var listen: String?

        @Option(
            name: .customLong("workers"),
            help: ArgumentHelp(
                "Accept remote workers ('jobtop worker --connect HOST:PORT') on this address; a non-loopback one needs a token.",
                valueName: "host:port"))
        var workers: String?

        @Option(
            name: .customLong("token-file"),
            help: ArgumentHelp("The token TCP clients and remote workers must show (default: $JOBTOP_TOKEN).", valueName: "path"))
        var tokenFile: String?

        /// `--prefetch`, `--heartbeat`: with --workers, as for `jobtop run --listen`.
        @OptionGroup var pool: WorkerPoolOptions

        /// `--tls-cert/--tls-key` (and `--tls-client-ca`): TCP with TLS.
        @OptionGroup var tls: ListenTLSOptions

        @OptionGroup(title: "Slurm")
        var slurm: SlurmRunOptions

        func validate() throws {
            // An empty path would put the state in the current directory, unasked.
            if let stateDir, stateDir.trimmingCharacters(in: .whitespaces).isEmpty {
                throw ValidationError("--state-dir needs a directory, not an empty path")
            }
            if !slurm.slurm, slurm.partition != nil || !slurm.slurmArguments.isEmpty || slurm.poll != nil || slurm.directory != nil {
                throw ValidationError("--partition, --slurm-arg, --slurm-poll and --slurm-dir need --slurm")
            }
            // -j 0 makes sense only when remote workers (or Slurm, which ignores it) do the work.
            if let jobs, jobs < (workers == nil ? 1 : 0) {
                throw ValidationError(workers == nil
                    ? "-j/--jobs must be at least 1, not \(jobs) (0 is allowed with --workers: remote workers only)"
                    : "-j/--jobs must be 0 or more, not \(jobs)")
            }
            if slurm.slurm && workers != nil { throw ValidationError("--workers and --slurm cannot be used together: jobs run on Slurm") }
            if listen == nil && workers == nil && tokenFile != nil { throw ValidationError("--token-file needs --listen or --workers HOST:PORT") }
            if listen == nil && workers == nil && tls.isSet {
                throw ValidationError("--tls-cert, --tls-key and --tls-client-ca need --listen or --workers HOST:PORT")
            }
            if workers == nil { try pool.requireListener("--workers HOST:PORT") }
            for (flag, value) in [("--listen", listen), ("--workers", workers)] {
                guard let value else { continue }
                do {
                    let address = try RemoteAddress(parsing: value)
                    if !address.isLoopback, try RemoteToken.load(file: tokenFile) == nil {
                        throw ValidationError(
                            "\(flag) \(value): a non-loopback address needs a token (--token-file PATH or JOBTOP_TOKEN), or anyone who can reach it could run \(flag == "--listen" ? "commands" : "its own workers' jobs") here")
                    }
                } catch let error as ValidationError {
                    throw error
                } catch {
                    throw ValidationError("\(flag) \(value): \(error)")
                }
            }
            // (Port 0 twice is two ports, each the system's choice.)
            if let listen, let workers, listen == workers, (try? RemoteAddress(parsing: listen))?.port != 0 {
                throw ValidationError("--listen and --workers need two different addresses, not both \(listen)")
            }
        }

        /// The scheduler serve runs, made in this one place: the durable one, restored from the
        /// state directory. Slurm jobs the last serve's cut-off attempts left are cancelled
        /// (whether or not this serve uses Slurm: they must not run twice).
        ///
        /// - Parameter onSlurm: Whether jobs run on Slurm (no local slots then).
        /// - Returns: The scheduler, and what was done about the last serve's Slurm jobs.
        static func makeBackend(
            jobs: Int?, grace: Duration?, stateDir: String?, onSlurm: Bool
        ) throws(StoreError) -> (backend: DurableScheduler, leftovers: SlurmLeftovers.Outcome?) {
            var configuration = Scheduler.Configuration()
            if let jobs { configuration.localSlots = jobs }
            if let grace { configuration.gracePeriod = grace }
            if onSlurm { configuration.localSlots = 0 }
            var leftovers: SlurmLeftovers.Outcome?
            let backend = try DurableScheduler.open(
                directory: StateDirectory(path: stateDir), configuration: configuration,
                stopPlaced: { placements in
                    let outcome = SlurmLeftovers.cancel(placements: Array(placements.values))
                    leftovers = outcome
                    return outcome.cancelled.count
                })
            return (backend, leftovers)
        }

        /// Removes the Slurm directories of earlier serves under serve's own default parent (the
        /// state lock makes this serve its only user; their Slurm jobs are cancelled by now).
        static func removeOldSlurmDirectories(in base: String, keeping current: String) {
            guard let entries = try? FileManager.default.contentsOfDirectory(atPath: base) else { return }
            for entry in entries where entry.hasPrefix("run-") && base + "/" + entry != current {
                try? FileManager.default.removeItem(atPath: base + "/" + entry)
            }
        }

        mutating func run() async throws {
            signal(SIGPIPE, SIG_IGN)
            Scheduler.raiseOpenFileLimit()
            // As `run` does: a -j the limits cannot hold is refused before anything starts (it
            // was taken: -j 100000000 never listened and grew without end, and -j 200 under
            // 256 descriptors said jobs were running that waited for one, then failed). Each
            // running job also keeps its output file open.
            if !slurm.slurm, let jobs,
               let refusal = Scheduler.localSlotCapacity(extraFilesPerJob: 1).refusal(of: jobs, flag: "-j/--jobs", fewer: "a smaller -j") {
                StandardError.write("jobtop serve: \(refusal)\n")
                throw ExitCode(ExitStatus.usage)
            }
            let address = try listen.map { text throws(ValidationError) in
                do { return try RemoteAddress(parsing: text) } catch { throw ValidationError("\(error)") }
            }
            let token: String?
            do { token = address == nil && workers == nil ? nil : try RemoteToken.load(file: tokenFile) } catch { throw ValidationError("\(error)") }
            if let warning = RemoteToken.permissionWarning(file: tokenFile) { StandardError.write("jobtop serve: \(warning)\n") }
            let security: RemoteTLS.Server?
            do { security = try tls.server() } catch { throw ValidationError(error.message) }

            // A serve that cannot listen (one already runs on the socket, a port is taken) says
            // so before it makes or opens its state directory (exit 1).
            do throws(ControlError) {
                try ControlSocket.checkCanListen(socketPath: ControlSocket.path(), tcp: address)
            } catch {
                StandardError.write("jobtop serve: \(error)\n")
                throw ExitCode(ExitStatus.someFailed)
            }
            if let workers, let workerAddress = try? RemoteAddress(parsing: workers) {
                do throws(RemoteError) { try ListeningSocket.check(workerAddress) } catch {
                    StandardError.write("jobtop serve: --workers \(workers): \(error.message)\n")
                    throw ExitCode(ExitStatus.someFailed)
                }
            }

            // On Slurm: everything Slurm can refuse is refused before anything starts (exit 2).
            let slurmBase = StateDirectory(path: stateDir).url.appendingPathComponent("slurm", isDirectory: true).path
            var slurmConfiguration: SlurmConfiguration?
            if slurm.slurm {
                do {
                    slurmConfiguration = try slurm.configuration(
                        file: nil, submitted: jobs, grace: grace ?? Scheduler.Configuration().gracePeriod, defaultBase: slurmBase)
                    if let slurmConfiguration { try await SlurmPreflight.check(slurmConfiguration) }
                } catch {
                    StandardError.write("jobtop serve: --slurm: \(error)\n")
                    throw ExitCode(ExitStatus.usage)
                }
            }

            let backend: DurableScheduler
            let leftovers: SlurmLeftovers.Outcome?
            do {
                (backend, leftovers) = try Self.makeBackend(jobs: jobs, grace: grace, stateDir: stateDir, onSlurm: slurmConfiguration != nil)
            } catch {
                StandardError.write("jobtop serve: \(error)\n")
                throw ExitCode(ExitStatus.someFailed)
            }
            if let problem = leftovers?.problem {
                StandardError.write("jobtop serve: could not cancel every Slurm job the last serve left: \(problem)\n")
            }
            let scheduler = backend.scheduler
            var slurmWorker: SlurmWorker?
            if let slurmConfiguration {
                do {
                    slurmWorker = try SlurmWorker(configuration: slurmConfiguration)
                } catch {
                    StandardError.write("jobtop serve: --slurm: \(error)\n")
                    await scheduler.shutdown(.graceful)
                    await backend.close()
                    throw ExitCode(ExitStatus.usage)
                }
                if slurm.directory == nil { Self.removeOldSlurmDirectories(in: slurmBase, keeping: slurmConfiguration.directory) }
                if let slurmWorker { await scheduler.addWorker(slurmWorker) }
            }
            let server: ControlServer<DurableScheduler>
            let socketPath = ControlSocket.path()
            let tcp: RemoteAddress?
            do {
                server = try ControlServer(
                    backend: backend,
                    outputFile: { id in
                        // The journal may still be writing a job's last lines.
                        await backend.flush()
                        return backend.outputFile(of: id)?.path
                    },
                    history: { reference in
                        // Jobs beyond the scheduler's retention, still in the database.
                        await backend.flush()
                        return (try? await backend.store.finishedJobs(matching: reference, limit: JobReference.shownCandidates)) ?? ([], 0)
                    },
                    listen: address, token: token, tls: security, clock: scheduler.clock,
                    log: { line in StandardError.write((line.hasPrefix("jobtop: ") ? "jobtop serve: \(line.dropFirst(8))" : line) + "\n") })
                tcp = try await server.start(socketPath: socketPath)
            } catch {
                StandardError.write("jobtop serve: \(error)\n")
                await scheduler.shutdown(.graceful)
                await slurmWorker?.finish()
                await backend.close()
                throw ExitCode(ExitStatus.someFailed)
            }
            var workerListener: WorkerListener?
            if let workers {
                do {
                    // Joins, refusals and losses go to stderr, serve's log.
                    workerListener = try await pool.startListener(
                        on: workers, scheduler: scheduler, token: token, tls: security, program: "jobtop serve",
                        log: { line in StandardError.write((line.hasPrefix("jobtop: ") ? "jobtop serve: \(line.dropFirst(8))" : line) + "\n") })
                } catch {
                    StandardError.write("jobtop serve: --workers \(workers): \((error as? RemoteError)?.message ?? "\(error)")\n")
                    await server.stop()
                    await scheduler.shutdown(.graceful)
                    await backend.close()
                    throw ExitCode(ExitStatus.someFailed)
                }
            }
            // The jobs a killed serve was running are stopped at once (the restart counts them,
            // as it would find them killed anyway).
            Jobtop.startLifelineGuard("jobtop serve")
            let running = Task { await scheduler.run() }
            // The queue outlives the terminal: closing the one serve was started from (SIGHUP)
            // does not stop it. Jobs get every signal's default action back when they start.
            signal(SIGHUP, SIG_IGN)
            let signals = SignalWatcher(signals: [SIGINT, SIGTERM]) { number, count in
                if count == 1 {
                    StandardError.write("jobtop serve: \(signalName(number)): starting nothing new; running jobs finish (\(signalName(number)) again stops them now)\n")
                    Task { _ = try? await backend.perform(.shutdown(.graceful)) }
                } else {
                    // Nothing is cancelled on disk: the next serve counts each cut-off attempt as
                    // stopped by jobtop and retries it as its budget allows.
                    StandardError.write("jobtop serve: \(signalName(number)) again: stopping the running jobs now (the next serve runs them again as their retries allow)\n")
                    Task { _ = try? await backend.perform(.shutdown(.stopRunning)) }
                }
            }
            let restoredCount = await backend.restored()
            let recovery = backend.recovery
            if restoredCount > 0 {
                var note = "restored \(restoredCount) job\(restoredCount == 1 ? "" : "s")"
                if recovery.interrupted.count > recovery.timedOut.count {
                    let count = recovery.interrupted.count - recovery.timedOut.count
                    note += "; \(count) that \(count == 1 ? "was" : "were") running when the last serve stopped counted as failed ('jobtop stopped')"
                }
                if !recovery.timedOut.isEmpty {
                    // (It said "counted as failed ('jobtop stopped')" of these too.)
                    let count = recovery.timedOut.count
                    note += "; \(count) that \(count == 1 ? "was" : "were") being stopped for \(count == 1 ? "its" : "their") timeout counted as timed out"
                }
                if !recovery.cancelled.isEmpty {
                    let count = recovery.cancelled.count
                    note += "; \(count) that \(count == 1 ? "was" : "were") being cancelled ended cancelled"
                }
                if !recovery.handedBack.isEmpty {
                    let count = recovery.handedBack.count
                    note += "; \(count) that \(count == 1 ? "was" : "were") waiting at a worker, not begun, went back to the queue (not counted as an attempt)"
                }
                if backend.placedStopped > 0 {
                    let ids = leftovers?.cancelled.joined(separator: " ") ?? ""
                    note += "; cancelled \(backend.placedStopped) Slurm job\(backend.placedStopped == 1 ? "" : "s") they left (\(ids))"
                }
                if backend.orphansStopped > 0 { note += "; stopped \(backend.orphansStopped) leftover process group\(backend.orphansStopped == 1 ? "" : "s")" }
                StandardError.write("jobtop serve: \(note)\n")
            }
            // (Not a whole snapshot: with 100,000 jobs restored, that copy was on the way to
            // "listening".)
            let slots = await scheduler.localSlots
            var where_ = socketPath
            if let tcp {
                where_ += " and \(tcp)"
                if let security {
                    where_ += " with TLS; certificate \(security.fingerprint) (clients: --tls-fingerprint \(security.fingerprint) or --tls-ca)"
                    if security.isMutual { where_ += "; mutual: clients need a certificate" }
                }
                if let warning = security?.validityWarning(program: "jobtop serve") { StandardError.write(warning + "\n") }
                if let warning = RemoteTLS.plaintextWarning(listeningOn: tcp, hasTLS: security != nil, program: "jobtop serve") {
                    StandardError.write(warning + "\n")
                }
            }
            var capacity = "\(slots) local slot\(slots == 1 ? "" : "s")"
            if workerListener != nil { capacity += " and remote workers" }
            if let slurmWorker { capacity = "\(slurmWorker.descriptor.name): \(slurmWorker.descriptor.slots) kept submitted" }
            StandardError.write("jobtop serve: listening on \(where_) (\(capacity)); pid \(getpid())\n")
            await running.value
            // For tests only: a serve that takes its time to close (its clients' shutdown must
            // wait for it, not only for the end of its jobs).
            if let pause = ProcessInfo.processInfo.environment["JOBTOP_TEST_CLOSE_PAUSE_MS"].flatMap({ Int($0) }) {
                try? await Task.sleep(for: .milliseconds(pause))
            }
            // Every job has ended: the workers are told goodbye (and given up to 2 s to close).
            await workerListener?.stop()
            signals.stop()
            // Jobs still in Slurm (a stop that cancelled them) are cancelled there; the scripts
            // and output files go (the journal has their lines).
            await slurmWorker?.finish()
            await backend.close()
            await server.stop()
            StandardError.write("jobtop serve: stopped\n")
        }
    }
}
