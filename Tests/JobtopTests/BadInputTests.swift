import Foundation
import JobtopTestSupport
import Testing

/// Bad input gets a clear message on stderr, exit status 2, and nothing starts.
@Suite("Bad input to the jobtop binary", .timeLimit(.minutes(1)))
struct BadInputTests {
    /// A first job that would leave a mark if anything started.
    static let marker = "[[job]]\nname = \"marker\"\ncommand = \"touch started\"\n"

    @Test(
        "Each bad job file exits 2 with a message naming the problem and where, and starts nothing",
        arguments: [
            ("[[job]]\nname = \"b\ncommand = \"x\"\n", "jobs.toml:5:"),
            ("[[job]]\ncomand = \"true\"\n", "jobs.toml: job 2: unknown key 'comand'"),
            ("[[job]]\ncommand = \"true\"\nretries = \"3\"\n", "jobs.toml: job 2: 'retries' must be an integer, not a string"),
            ("[[job]]\ncommand = \"\"\n", "jobs.toml: job 2: 'command' is empty"),
            ("[[job]]\nname = \"x\"\n", "jobs.toml: job 2 ('x'): missing 'command'"),
            ("[[job]]\nname = \"marker\"\ncommand = \"true\"\n", "jobs.toml: job 2 ('marker'): duplicate name 'marker' (job 1 has it too)"),
            ("[[job]]\ncommand = \"true\"\nretries = -2\n", "jobs.toml: job 2: 'retries' must be 0 or more, not -2"),
            ("[[job]]\ncommand = \"true\"\ntimeout = \"soon\"\n", "jobs.toml: job 2: 'timeout': 'soon' is not a duration"),
            ("[[job]]\ncommand = \"true\"\nprogress = \"([0-9]+\"\n", "jobs.toml: job 2: 'progress': progress pattern '([0-9]+': not a valid regular expression"),
            ("[[job]]\ncommand = \"true\"\ncwd = \"no/such/dir\"\n", "jobs.toml: job 2: 'cwd': directory 'no/such/dir' does not exist"),
            ("[[job]]\ncommand = \"true\"\npriority = 9223372036854775807\n",
             "jobs.toml: job 2: 'priority' must be from -1000000 to 1000000, not 9223372036854775807"),
            ("[[job]]\ncommand = \"true\"\npriority = -9223372036854775808\n",
             "jobs.toml: job 2: 'priority' must be from -1000000 to 1000000, not -9223372036854775808"),
            ("[[job]]\ncommand = \"echo a\\u0000b\"\n", "jobs.toml:5: a NUL character (\\u0000): jobtop refuses NUL"),
            ("[[job]]\ncommand = \"true\"\nat = 25:00\n", "expected hour between 0 and 23 (inclusive), saw 25"),
            // A raw NUL byte: the parser stopped there, and the jobs after it vanished (exit 0).
            ("\u{0}\n[[job]]\ncommand = \"true\"\n", "jobs.toml:4:1: a NUL byte"),
            ("# a comment \u{0}\n[[job]]\ncommand = \"true\"\n", "jobs.toml:4:13: a NUL byte"),
            ("[[job]]\ncommand = \"echo é\u{0} tail\"\n", "jobs.toml:5:18: a NUL byte"),
        ])
    func badJobFile(tail: String, message: String) async throws {
        let scratch = try Scratch()
        try scratch.write("jobs.toml", Self.marker + tail)
        let run = try await JobtopProcess.run(["jobs.toml"], directory: scratch.path)
        #expect(run.status == 2)
        #expect(run.stderr.contains(message), "\(run.stderr)")
        #expect(run.stdout.isEmpty)
        #expect(!run.stderr.contains("Fatal error") && !run.stderr.contains("Stack dump"))
        #expect(scratch.read("started") == nil)
    }

    @Test(
        "Each bad command line or missing input exits 2 with a message",
        arguments: [
            (["missing.toml"], nil, "cannot read 'missing.toml': no such file"),
            (["missing.txt"], nil, "cannot read 'missing.txt': no such file"),
            (["stauts"], nil, "cannot read 'stauts': no such file (and no jobtop command is called that: see 'jobtop --help')"),
            ([], "# only a comment\n\n", "standard input has no commands"),
            (["empty.txt"], nil, "'empty.txt' has no commands"),
            (["-"], "# nothing\n\n", "standard input has no commands"),
            ([], nil, "no jobs"),
            (["-j", "0", "-c", "touch started"], nil, "-j/--jobs must be at least 1"),
            (["--jobs=-1", "-c", "touch started"], nil, "-j/--jobs must be at least 1"),
            (["--retries=-1", "-c", "touch started"], nil, "--retries must be 0 or more"),
            (["--timeout", "5x", "-c", "touch started"], nil, "unknown unit 'x'"),
            (["--backoff", "10", "-c", "touch started"], nil, "needs a unit"),
            (["--log-format", "xml", "-c", "touch started"], nil, "'xml' is invalid for '--log-format"),
            (["--output-dir", "empty.txt", "-c", "touch started"], nil, "--output-dir 'empty.txt': 'empty.txt' is a file, not a directory"),
            (["--output-dir", "empty.txt/sub", "-c", "touch started"], nil, "--output-dir 'empty.txt/sub': 'empty.txt' is a file, not a directory"),
            (["-j", "-1", "-c", "touch started"], nil, "-j/--jobs must be at least 1, not -1"),
            (["--retries", "-1", "-c", "touch started"], nil, "--retries must be 0 or more, not -1"),
            (["--backoff", "-1s", "-c", "touch started"], nil, "--backoff must not be negative, not -1s"),
            (["--grace", "-1s", "-c", "touch started"], nil, "--grace must not be negative, not -1s"),
            (["--timeout", "-5s", "-c", "touch started"], nil, "--timeout must not be negative, not -5s"),
            (["--listen", "127.0.0.1:0", "--heartbeat", "-1s", "-c", "touch started"], nil, "--heartbeat must be from 100ms to 60s, not -1s"),
            (["--listen", "127.0.0.1:0", "--goodbye-grace", "-1s", "-c", "touch started"], nil, "--goodbye-grace must not be negative, not -1s"),
            (["nul.txt"], nil, "'nul.txt':2: the command contains a NUL byte"),
            (["big.txt"], nil, "'big.txt':2: the command is 200,005 bytes; the kernel passes at most 131,071 bytes"),
            (["-"], "touch started\necho \u{0}\n", "standard input:2: the command contains a NUL byte"),
            (["--no-such-option"], nil, "Unknown option '--no-such-option'"),
        ] as [([String], String?, String)])
    func badCommandLine(arguments: [String], stdin: String?, message: String) async throws {
        let scratch = try Scratch()
        try scratch.write("empty.txt", "# just a comment\n\n")
        try scratch.write("nul.txt", "touch started\necho a\u{0}b\n")
        try scratch.write("big.txt", "touch started\necho " + String(repeating: "x", count: 200_000) + "\n")
        let run = try await JobtopProcess.run(arguments, stdin: stdin, directory: scratch.path)
        #expect(run.status == 2)
        #expect(run.stderr.contains(message), "\(run.stderr)")
        #expect(run.stdout.isEmpty)
        #expect(scratch.read("started") == nil)
    }
}
