import ArgumentParser
import Dispatch
import Foundation
import Scheduler
import SchedulerRemote

extension Jobtop {
    /// `jobtop worker`: joins a coordinator's pool and runs the jobs it assigns.
    struct Worker: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "worker",
            abstract: "Join a coordinator's worker pool ('jobtop run --listen') and run the jobs it assigns.",
            discussion: """
                Each job runs here in its own process group, exactly like a local job; its output, \
                progress and exit status go back to the coordinator. A worker started before its \
                coordinator, or cut off from it, reconnects with backoff (100 ms doubling to 5 s, with \
                jitter) and says so on stderr once, not on every attempt (jobs running when the \
                connection is lost are stopped: the coordinator requeues them).

                SIGTERM, SIGINT or SIGHUP drains: running jobs finish, no new ones are accepted, then \
                the worker leaves and exits 0. A second signal kills the running jobs at once.

                TLS: --tls-ca FILE or --tls-fingerprint sha256:HEX (the coordinator prints it) turns it \
                on; nothing, not even the hello with its token, is sent before the coordinator's \
                certificate is verified. --tls-cert/--tls-key add this worker's certificate (mutual TLS).

                Exit status: 0 left cleanly (drained, or told to stop while not connected); 1 refused \
                by the coordinator (wrong or missing token, other protocol version), what answers \
                is not a workers port (a serve's --listen port), or TLS failed (untrusted \
                certificate, no TLS there, client certificate wanted); 2 bad usage; \
                129/130/143 stopped by a second SIGHUP/SIGINT/SIGTERM.
                """)

        @Option(name: .customLong("connect"), help: ArgumentHelp("The coordinator's --listen address.", valueName: "host:port"))
        var connect: String

        // Unconditional: `--slots -1` gets its range error, not "Missing value".
        @Option(parsing: .unconditional, help: "Jobs run at once (default: the number of cores).")
        var slots: Int?

        @Option(help: "The name the coordinator shows (default: the host name); printable, at most 255 bytes.")
        var name: String?

        @Option(name: .customLong("token-file"), help: ArgumentHelp("The coordinator's token (default: $JOBTOP_TOKEN).", valueName: "path"))
        var tokenFile: String?

        @OptionGroup(title: "TLS")
        var tls: ConnectTLSOptions

        func validate() throws {
            do { _ = try RemoteAddress(parsing: connect) } catch { throw ValidationError("--connect: \(error.message)") }
            do { _ = try RemoteToken.load(file: tokenFile) } catch { throw ValidationError("\(error.message)") }
            if let warning = RemoteToken.permissionWarning(file: tokenFile) { StandardError.write("jobtop worker: \(warning)\n") }
            if let slots, !(1...4096).contains(slots) {
                throw ValidationError("--slots must be from 1 to 4096, not \(slots)")
            }
            // The coordinator shows the name on its screen and in its log: one printable line.
            if let name, let problem = WorkerName.problem(with: name) {
                throw ValidationError("--name '\(PeerText.escaped(name, limit: 64))': \(problem)")
            }
        }

        func run() async throws {
            // As for `jobtop run -j`: take what the hard open-file limit allows, and refuse
            // more slots than the limits can hold before connecting.
            Scheduler.raiseOpenFileLimit()
            // None of a killed worker's jobs runs on here unsupervised while the coordinator
            // requeues it elsewhere.
            Jobtop.startLifelineGuard("jobtop worker")
            let wanted = slots ?? ProcessInfo.processInfo.activeProcessorCount
            if let refusal = Scheduler.localSlotCapacity(extraFilesPerJob: 0).refusal(of: wanted, flag: "--slots", fewer: "fewer slots") {
                StandardError.write("jobtop worker: \(refusal)\n")
                throw ExitCode(ExitStatus.usage)
            }
            let agent: WorkerAgent
            do {
                agent = WorkerAgent(configuration: .init(
                    coordinator: try RemoteAddress(parsing: connect),
                    name: name ?? ProcessInfo.processInfo.hostName,
                    slots: slots ?? ProcessInfo.processInfo.activeProcessorCount,
                    token: try RemoteToken.load(file: tokenFile),
                    tls: try tls.client(),
                    log: { StandardError.write($0 + "\n") }))
            } catch {
                StandardError.write("jobtop worker: \(error)\n")
                Foundation.exit(ExitStatus.usage)
            }
            if agent.configuration.tls == nil, agent.configuration.token != nil, !agent.configuration.coordinator.isLoopback {
                StandardError.write(
                    "jobtop worker: WARNING: connecting to \(agent.configuration.coordinator) WITHOUT TLS: the token and every job cross the network in the clear; use --tls-ca or --tls-fingerprint with a coordinator started with --tls-cert/--tls-key\n")
            }
            let signals = watchWorkerSignals(agent)
            defer { signals.stop() }
            do {
                try await agent.run()
            } catch {
                StandardError.write("jobtop worker: \(error.message)\n")
                Foundation.exit(ExitStatus.someFailed)
            }
            if let stoppedBy = signals.secondSignal { Foundation.exit(ExitStatus.interrupted(by: stoppedBy)) }
        }
    }
}

/// The worker's SIGTERM/SIGINT/SIGHUP: the first drains, a second stops the running jobs at once.
/// (SIGHUP, a closed terminal, ended it at once with status 129, its jobs killed by its guard.)
private func watchWorkerSignals(_ agent: WorkerAgent) -> SignalWatcher {
    SignalWatcher(signals: [SIGTERM, SIGINT, SIGHUP]) { number, count in
        let name = signalName(number)
        switch count {
        case 1:
            StandardError.write("jobtop worker: \(name): draining (\(name) again to stop running jobs now)\n")
            agent.drain()
        case 2:
            StandardError.write("jobtop worker: \(name) again: stopping running jobs now\n")
            // Now: not after the grace period the coordinator gives its jobs.
            Scheduler.killAllJobProcessesNow()
            agent.stop()
        default:
            break
        }
    }
}
