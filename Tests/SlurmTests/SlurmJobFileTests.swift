import Foundation
import SchedulerSlurm
import Testing
@testable import jobtop

/// The job file's `[slurm]` table and the jobs' own `slurm` tables.
@Suite("Slurm settings in job files")
struct SlurmJobFileTests {
    @Test("[slurm] sets partition and arguments; a named job's slurm table is kept by its name")
    func tables() throws {
        let contents = try JobFile.parse("""
            [slurm]
            partition = "debug"
            args = ["--account=foo", "--mem=1G"]

            [[job]]
            name = "train"
            command = "true"
            slurm = { partition = "gpu", args = ["--gres=gpu:1"] }

            [[job]]
            command = "true"
            """, file: "j.toml", directory: "/")
        let slurm = try #require(contents.slurm)
        #expect(slurm.options == SlurmOptions(partition: "debug", extraArguments: ["--account=foo", "--mem=1G"]))
        #expect(slurm.overrides == ["train": SlurmOptions(partition: "gpu", extraArguments: ["--gres=gpu:1"])])
        #expect(contents.jobs.count == 2)
    }

    @Test("A file without slurm tables has no Slurm settings")
    func none() throws {
        #expect(try JobFile.parse("[[job]]\ncommand = \"true\"\n", file: "j.toml", directory: "/").slurm == nil)
    }

    static let bad: [(text: String, message: String)] = [
        ("[slurm]\nparttion = \"x\"\n[[job]]\ncommand = \"true\"\n", "j.toml: [slurm]: unknown key 'parttion' (did you mean 'partition'?)"),
        ("[slurm]\nargs = \"--mem=1G\"\n[[job]]\ncommand = \"true\"\n", "j.toml: [slurm]: 'args' must be an array of strings"),
        ("[slurm]\npartition = 3\n[[job]]\ncommand = \"true\"\n", "j.toml: [slurm]: 'partition' must be a non-empty string"),
        ("slurm = 1\n[[job]]\ncommand = \"true\"\n", "j.toml: 'slurm' must be a table"),
        ("[[job]]\ncommand = \"true\"\nslurm = { partition = \"gpu\" }\n", "j.toml: job 1: 'slurm': a job with its own Slurm settings needs a 'name'"),
    ]

    @Test("Bad Slurm settings are refused with the file and the place", arguments: bad)
    func refused(_ row: (text: String, message: String)) {
        do {
            _ = try JobFile.parse(row.text, file: "j.toml", directory: "/")
            Issue.record("accepted: \(row.text)")
        } catch {
            #expect(error.message.hasPrefix(row.message), "\(error.message)")
        }
    }
}
