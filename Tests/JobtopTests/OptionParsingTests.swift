import ArgumentParser
import Testing
@testable import jobtop

@Suite("Parsing the command line")
struct OptionParsingTests {
    @Test("Every run option is read into the command")
    func everyOption() throws {
        let run = try Jobtop.Run.parse([
            "jobs.toml", "-c", "echo a", "--command", "echo b", "-j", "3", "--retries", "2", "--backoff", "500ms",
            "--timeout", "1.5s", "--grace", "2s", "--headless", "--log-format", "json", "--log-output",
            "--output-dir", "out", "--halt-on-failure",
        ])
        #expect(run.file == "jobs.toml")
        #expect(run.command == ["echo a", "echo b"])
        #expect(run.jobs == 3)
        #expect(run.jobDefaults.retries == 2)
        #expect(run.jobDefaults.backoff == .milliseconds(500))
        #expect(run.jobDefaults.timeout == .milliseconds(1500))
        #expect(run.grace == .seconds(2))
        #expect(run.headless)
        #expect(run.logFormat == .json)
        #expect(run.logOutput)
        #expect(run.outputDir == "out")
        #expect(run.haltOnFailure)
        #expect(run.schedulerConfiguration.localSlots == 3)
        #expect(run.schedulerConfiguration.gracePeriod == .seconds(2))
    }

    /// A command without a `commandName` is named by ArgumentParser from its type on every
    /// parse (`String(describing:)`: dynamic casts that each scan every protocol conformance of
    /// the binary, about half a millisecond of every `jobtop` command's start).
    @Test("Every command names itself")
    func everyCommandNamesItself() {
        var commands: [any ParsableCommand.Type] = [Jobtop.self]
        var index = 0
        while index < commands.count {
            commands.append(contentsOf: commands[index].configuration.subcommands)
            index += 1
        }
        #expect(commands.count > 10)
        for command in commands {
            #expect(command.configuration.commandName != nil, "\(command) has no commandName")
        }
    }

    @Test("Every subcommand is found by its name, as the command tree names it, and nothing else is")
    func subcommandsByName() {
        let configured = Jobtop.configuration.subcommands
        for command in configured {
            let name = command.configuration.commandName ?? ""
            let found = Jobtop.subcommand(named: name)
            #expect(found.map { ObjectIdentifier($0.type) } == ObjectIdentifier(command), "\(name)")
        }
        let names = ["run", "worker", "serve", "attach", "submit", "status", "cancel", "signal", "retry", "prio", "edit", "pause",
                     "resume", "limit", "wait", "log", "follow", "clean", "shutdown", "help", "jobs.toml", "-c", ""]
        #expect(names.filter { Jobtop.subcommand(named: $0) != nil }.count == configured.count)
    }

    @Test("A named subcommand that parses runs on its own; help, version and anything that fails to parse go through the whole tree")
    func namedSubcommandFastPath() async throws {
        // Bad usage and help requests run nothing here: they are left to the root's parse, which
        // reports them with jobtop's usage (the binary's tests check those messages).
        #expect(try await Jobtop.runNamedSubcommand(["submit", "--priority", "nine"]) == false)
        #expect(try await Jobtop.runNamedSubcommand(["submit", "--help"]) == false)
        #expect(try await Jobtop.runNamedSubcommand(["status", "-h"]) == false)
        #expect(try await Jobtop.runNamedSubcommand(["prio", "--version"]) == false)
        #expect(try await Jobtop.runNamedSubcommand(["jobs.toml"]) == false)
        #expect(try await Jobtop.runNamedSubcommand([]) == false)
    }

    @Test("A client command's connection is begun early; a command with a scheduler of its own begins none")
    func earlyConnectionCommands() {
        for command in ["attach", "submit", "status", "cancel", "signal", "log", "follow", "shutdown"] {
            #expect(EarlyConnection.isClientCommand(command), "\(command)")
        }
        for command in ["run", "worker", "serve", "help"] {
            #expect(!EarlyConnection.isClientCommand(command), "\(command)")
        }
    }

    @Test("Defaults: no file, text log, cores as slots, 5s grace")
    func defaults() throws {
        let run = try Jobtop.Run.parse([])
        #expect(run.file == nil)
        #expect(run.command.isEmpty)
        #expect(run.logFormat == .text)
        #expect(!run.headless && !run.haltOnFailure && !run.logOutput)
        #expect(run.schedulerConfiguration.gracePeriod == .seconds(5))
        #expect(run.jobOverrides == JobFields())
    }

    @Test("run is the default subcommand")
    func runIsTheDefault() throws {
        let command = try Jobtop.parseAsRoot(["jobs.toml", "-j", "1"])
        let run = try #require(command as? Jobtop.Run)
        #expect(run.file == "jobs.toml")
        #expect(run.jobs == 1)
        #expect(try Jobtop.parseAsRoot(["run", "-"]) is Jobtop.Run)
    }

    @Test(
        "Bad values are usage errors",
        arguments: [
            ["-j", "0"], ["--jobs=-2"], ["--retries=-1"], ["--backoff", "soon"], ["--timeout", "0s"],
            ["--timeout", "10"], ["--grace", "1x"], ["--log-format", "xml"], ["-c", " "], ["--bogus"],
        ])
    func badValues(arguments: [String]) {
        #expect {
            _ = try Jobtop.parseAsRoot(arguments)
        } throws: { error in
            Jobtop.exitCode(for: error) == .validationFailure
        }
    }

    @Test("-j 0 is allowed only for a coordinator that listens for remote workers")
    func zeroLocalSlotsNeedsListen() throws {
        let run = try #require(try Jobtop.parseAsRoot(["-j", "0", "--listen", "127.0.0.1:0", "-c", "true"]) as? Jobtop.Run)
        #expect(run.jobs == 0)
        #expect(throws: (any Error).self) { _ = try Jobtop.parseAsRoot(["-j", "-1", "--listen", "127.0.0.1:0", "-c", "true"]) }
    }

    @Test("The command line's retries, backoff and timeout fill in the jobs")
    func overridesReachTheJobs() throws {
        let run = try Jobtop.Run.parse(["--retries", "2", "--backoff", "3s", "--timeout", "1m"])
        #expect(run.jobOverrides == JobFields(retries: 2, backoff: .seconds(3), timeout: .seconds(60)))
    }
}
