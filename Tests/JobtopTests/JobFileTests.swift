import Foundation
import Scheduler
import Testing
@testable import jobtop

@Suite("Reading job files and command lists")
struct JobFileTests {
    @Test("Every job field is read, defaults fill what a job leaves out, and cwd is relative to the file")
    func everyField() throws {
        let scratch = try Scratch()
        try FileManager.default.createDirectory(atPath: scratch.file("sub/dir"), withIntermediateDirectories: true)
        let file = try scratch.write("jobs.toml", #"""
            [defaults]
            retries = 2
            timeout = "10m"
            env = { SHARED = "1", FOO = "default" }

            [[job]]
            name = "build"
            command = "make -j2"
            priority = 10
            retries = 3
            backoff = "2s"
            timeout = "5m"
            key = "build"
            progress = '(\d+)/(\d+)'
            cwd = "sub/dir"
            env = { FOO = "bar" }

            [[job]]
            command = "echo plain"
            """#)

        let specs = try JobFile.load(path: file)

        #expect(specs.count == 2)
        let build = specs[0]
        #expect(build.name == "build")
        #expect(build.work.description == "make -j2")
        #expect(build.priority == 10)
        #expect(build.retry.maxAttempts == 4)
        #expect(build.retry.initialBackoff == .seconds(2))
        #expect(build.timeout == .seconds(300))
        #expect(build.coalescingKey == "build")
        #expect(build.progressPattern?.groupCount == 2)
        #expect(build.workingDirectory == URL(fileURLWithPath: scratch.file("sub/dir")).standardizedFileURL.path)
        #expect(build.environment == ["FOO": "bar", "SHARED": "1"])
        let plain = specs[1]
        #expect(plain.name == nil)
        #expect(plain.displayName == "echo plain")
        #expect(plain.priority == 0)
        #expect(plain.retry.maxAttempts == 3)
        #expect(plain.timeout == .seconds(600))
        #expect(plain.environment == ["FOO": "default", "SHARED": "1"])
    }

    @Test("Command-line values win over [defaults] but not over a job's own keys")
    func precedence() throws {
        let text = """
            [defaults]
            retries = 1
            [[job]]
            command = "a"
            [[job]]
            command = "b"
            retries = 5
            """
        let specs = try JobFile.parse(text, file: "j.toml", directory: "/", overrides: JobFields(retries: 3))
        #expect(specs.map(\.retry.maxAttempts) == [4, 6])
    }

    @Test(
        "Each bad job file is refused with a message naming the file and the job",
        arguments: [
            ("[[job]]\nname = \"a\"\ncommand = \"true\"\n[[job]]\nname = \"b\ncommand = \"x\"\n", "j.toml:5:", JobInputError.Code.syntax),
            ("[[job]]\ncomand = \"true\"\n", "job 1: unknown key 'comand' (did you mean 'command'?)", .unknownKey),
            ("jobs = 1\n", "unknown top-level key 'jobs'", .unknownKey),
            ("[defaults]\nname = \"x\"\n[[job]]\ncommand = \"a\"\n", "'name' cannot be a default", .unknownKey),
            ("[[job]]\ncommand = \"true\"\nretries = \"3\"\n", "job 1: 'retries' must be an integer, not a string", .wrongType),
            ("[[job]]\ncommand = 5\n", "'command' must be a string, not an integer", .wrongType),
            ("[[job]]\ncommand = \"a\"\nenv = \"FOO=1\"\n", "'env' must be a table", .wrongType),
            ("[[job]]\ncommand = \"a\"\nenv = { N = 1 }\n", "variable 'N' must be a string", .wrongType),
            ("[job]\ncommand = \"a\"\n", "write [[job]], not [job]", .wrongType),
            ("[[job]]\nname = \"a\"\ncommand = \"  \"\n", "job 1 ('a'): 'command' is empty", .missingCommand),
            ("[[job]]\nname = \"a\"\n", "job 1 ('a'): missing 'command'", .missingCommand),
            ("[[job]]\nname = \"a\"\ncommand = \"x\"\n[[job]]\nname = \"a\"\ncommand = \"y\"\n", "job 2 ('a'): duplicate name 'a' (job 1 has it too)", .duplicateName),
            ("[[job]]\ncommand = \"a\"\nretries = -1\n", "'retries' must be 0 or more, not -1", .invalidValue),
            ("[[job]]\ncommand = \"a\"\ntimeout = \"10 parsecs\"\n", "'timeout': '10 parsecs' is not a duration", .invalidValue),
            ("[[job]]\ncommand = \"a\"\nbackoff = 3\n", "'backoff' must be a duration string", .wrongType),
            ("[[job]]\ncommand = \"a\"\nprogress = \"(unclosed\"\n", "'progress': progress pattern '(unclosed': not a valid regular expression", .invalidValue),
            ("[[job]]\ncommand = \"a\"\nprogress = \"no groups\"\n", "needs one capture group", .invalidValue),
            ("[[job]]\ncommand = \"a\"\ncwd = \"nope\"\n", "'cwd': directory 'nope' does not exist", .missingDirectory),
            ("[defaults]\nretries = 1\n", "no jobs", .noJobs),
            ("", "no jobs", .noJobs),
        ])
    func refused(text: String, message: String, code: JobInputError.Code) {
        #expect {
            try JobFile.parse(text, file: "j.toml", directory: NSTemporaryDirectory())
        } throws: { error in
            guard let error = error as? JobInputError else { return false }
            return error.code == code && error.message.hasPrefix("j.toml") && error.message.contains(message)
        }
    }

    @Test("A plain list skips blank lines and comments and keeps the order")
    func plainList() {
        let text = "echo one\n\n   # a comment\n  echo two  \r\n#echo three\necho four"
        #expect(CommandList.commands(in: text) == ["echo one", "echo two", "echo four"])
    }

    @Test("A list file, -c commands and stdin come together in order")
    func sources() throws {
        let scratch = try Scratch()
        let list = try scratch.write("list.txt", "echo a\necho b\n")
        let fromFile = try JobSources.load(
            file: list, commands: ["echo c"], overrides: JobFields(retries: 1), readsPipedStandardInput: false)
        #expect(fromFile.map(\.displayName) == ["echo a", "echo b", "echo c"])
        #expect(fromFile.allSatisfy { $0.retry.maxAttempts == 2 })
        let fromStdin = try JobSources.load(
            file: "-", commands: [], overrides: JobFields(), readsPipedStandardInput: false,
            standardInput: { () throws(JobInputError) in "x\ny\n" })
        #expect(fromStdin.map(\.displayName) == ["x", "y"])
        #expect(throws: JobInputError(.noJobs, "standard input has no commands (only blank lines and # comments)")) {
            try JobSources.load(
                file: "-", commands: [], overrides: JobFields(), readsPipedStandardInput: false,
                standardInput: { () throws(JobInputError) in "# only a comment\n" })
        }
    }

    @Test("Jobs go to the scheduler highest priority first, file order among equals")
    func submissionOrder() {
        let specs = [("a", 0), ("b", 5), ("c", 0), ("d", 5), ("e", 9)].map { JobSpec.shell($0.0, name: $0.0, priority: $0.1) }
        #expect(RunOrder.submissionOrder(specs).map(\.displayName) == ["e", "b", "d", "a", "c"])
    }

    @Test("Output file names are safe and unique")
    func safeFileNames() {
        #expect(OutputDirectory.safeFileName("build/all") == "build_all")
        #expect(OutputDirectory.safeFileName("..hidden") == "hidden")
        #expect(OutputDirectory.safeFileName("tab\there") == "tab_here")
    }
}
