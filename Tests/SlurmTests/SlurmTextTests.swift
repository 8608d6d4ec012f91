import Scheduler
import SchedulerSlurm
import Testing

/// Slurm's text, as captured from Slurm 22.05 (Debian 12), read into states and outcomes.
@Suite("Reading Slurm's command output")
struct SlurmTextTests {
    @Test("sbatch --parsable prints the id, with or without a cluster name")
    func submittedID() {
        #expect(SlurmText.submittedID("1234\n") == "1234")
        #expect(SlurmText.submittedID("1234;cluster\n") == "1234")
        #expect(SlurmText.submittedID("") == nil)
        #expect(SlurmText.submittedID("sbatch: error: something\n") == nil)
    }

    @Test("squeue lines give id, state and reason; a pending job's reason is kept")
    func queueLines() {
        let output = """
            12|PENDING|Priority
            13|PENDING|Resources
            14|RUNNING|None
            15|COMPLETING|None
            16|CANCELLED|None
            garbage line
            """
        let entries = SlurmText.queue(output)
        #expect(entries.map(\.id) == ["12", "13", "14", "15", "16"])
        #expect(entries[0].state == .pending && entries[0].reason == "Priority")
        #expect(entries[1].reason == "Resources")
        #expect(entries[2].state == .active("RUNNING"))
        #expect(entries[3].state == .active("COMPLETING"))
        #expect(entries[4].state == .ended("CANCELLED"))
    }

    @Test("scontrol -o show job: fields are found by key even when the job name has spaces")
    func scontrolRecord() throws {
        let line = "JobId=1 JobName=my job UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901759 Nice=0 Account=(null) QOS=(null) JobState=FAILED Reason=NonZeroExitCode Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=3:0 RunTime=00:00:00 TimeLimit=UNLIMITED"
        let record = try #require(SlurmText.jobRecord(line + "\n", id: "1"))
        #expect(record.state == .ended("FAILED"))
        #expect(record.reason == "NonZeroExitCode")
        #expect(record.exitCode == 3 && record.signal == 0)
        #expect(SlurmText.jobRecord(line, id: "2") == nil)
        let fakeName = "JobId=7 JobName=x JobState=COMPLETED ExitCode=0:0 JobState=RUNNING"
        #expect(SlurmText.jobRecord(fakeName, id: "7")?.state == .ended("COMPLETED"))
    }

    @Test("State words: short forms and suffixes name the same state")
    func stateWords() {
        #expect(SlurmJobState("CANCELLED+") == .ended("CANCELLED"))
        #expect(SlurmJobState("CANCELLED by 0") == .ended("CANCELLED"))
        #expect(SlurmJobState("PD") == .pending)
        #expect(SlurmJobState("OOM") == .ended("OUT_OF_MEMORY"))
        #expect(SlurmJobState("REQUEUED") == .active("REQUEUED"))
        #expect(!SlurmJobState("SUSPENDED").isEnded)
    }

    static let outcomes: [(state: String, exit: String, stopped: Bool, expected: Termination)] = [
        ("COMPLETED", "0:0", false, .exit(0)),
        ("FAILED", "3:0", false, .exit(3)),
        ("FAILED", "0:9", false, .signal(9)),
        ("CANCELLED", "0:15", true, .signal(15)),
        ("CANCELLED", "0:0", true, .signal(15)),
        ("TIMEOUT", "0:0", false, .error("Slurm time limit reached (Slurm job 9, TIMEOUT)")),
        ("OUT_OF_MEMORY", "0:125", false, .error("out of memory (Slurm job 9, OUT_OF_MEMORY)")),
        ("NODE_FAIL", "0:0", false, .workerLost(.removed("Slurm node failure (Slurm job 9, NODE_FAIL)"))),
        ("PREEMPTED", "0:0", false, .workerLost(.removed("preempted by Slurm (Slurm job 9, PREEMPTED)"))),
        ("CANCELLED", "0:15", false, .error("Slurm job 9 was cancelled outside jobtop (scancel)")),
    ]

    @Test("Slurm's outcomes map to exits, signals, failures and lost workers", arguments: outcomes)
    func outcome(_ row: (state: String, exit: String, stopped: Bool, expected: Termination)) throws {
        let record = try #require(SlurmText.jobRecord("JobId=9 JobName=j JobState=\(row.state) Reason=None ExitCode=\(row.exit)", id: "9"))
        #expect(SlurmText.termination(record, wasStopped: row.stopped) == row.expected)
    }

    @Test("A launch failure (ExitCode=0:53, Reason=JobLaunchFailure) says the job failed to start, not that a signal 53 killed it")
    func launchFailure() throws {
        let record = try #require(SlurmText.jobRecord("JobId=7 JobName=j JobState=FAILED Reason=JobLaunchFailure ExitCode=0:53", id: "7"))
        #expect(SlurmText.termination(record, wasStopped: false)
            == .error("Slurm job 7 failed to start (JobLaunchFailure; slurmd's log on the node says why)"))
        // A job that ran and was killed by a signal gets the same reason from Slurm, with its signal
        for signal: Int32 in [9, 11, 15] {
            let killed = try #require(SlurmText.jobRecord("JobId=7 JobName=j JobState=FAILED Reason=JobLaunchFailure ExitCode=0:\(signal)", id: "7"))
            #expect(SlurmText.termination(killed, wasStopped: false) == .signal(signal))
        }
    }

    @Test("NODE_FAIL and PREEMPTED are worker losses (the engine requeues them); TIMEOUT and OOM are failures")
    func requeuedOutcomes() throws {
        for state in ["NODE_FAIL", "PREEMPTED"] {
            let record = try #require(SlurmText.jobRecord("JobId=1 JobState=\(state) ExitCode=0:0", id: "1"))
            #expect(SlurmText.termination(record, wasStopped: false).isWorkerLoss)
        }
        for state in ["TIMEOUT", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"] {
            let record = try #require(SlurmText.jobRecord("JobId=1 JobState=\(state) ExitCode=0:0", id: "1"))
            let termination = SlurmText.termination(record, wasStopped: false)
            #expect(!termination.isWorkerLoss && !termination.isSuccess)
        }
    }

    @Test("--time leaves jobtop's own timeout and grace period room to act first")
    func timeLimit() {
        #expect(SlurmText.timeLimit(for: .seconds(2), grace: .seconds(1)) == "2")
        #expect(SlurmText.timeLimit(for: .seconds(60), grace: .zero) == "2")
        #expect(SlurmText.timeLimit(for: .seconds(61), grace: .seconds(5)) == "3")
    }

    @Test("sinfo -h -o %R lists the partitions")
    func partitions() {
        #expect(SlurmText.partitions("debug\ngpu\n\n") == ["debug", "gpu"])
    }

    @Test("Per-job options replace the partition and add arguments after the defaults")
    func merging() {
        let base = SlurmOptions(partition: "debug", extraArguments: ["--mem=1G"])
        let merged = base.merged(with: SlurmOptions(partition: nil, extraArguments: ["--mem=2G"]))
        #expect(merged == SlurmOptions(partition: "debug", extraArguments: ["--mem=1G", "--mem=2G"]))
        #expect(base.merged(with: SlurmOptions(partition: "gpu")).partition == "gpu")
    }
}
