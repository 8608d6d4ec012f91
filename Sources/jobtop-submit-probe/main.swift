// The least a `jobtop submit -c CMD` can do (release): one submission to this user's serve
// through `ControlClient`, without ArgumentParser, job files or an early connection. What its
// latency shows is the floor of the command's (README, "Daemon"):
//
//     swift build -c release --static-swift-stdlib --product jobtop-submit-probe
//     .build/release/jobtop-submit-probe 'true'      # prints the job's short id
import Scheduler
import SchedulerService

let command = CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : "true"
let client = try ControlClient(endpoint: .unixSocket(ControlSocket.path()))
if case .submitted(let ids) = try await client.send(.submit([JobSpec.shell(command)], batch: nil)) {
    for id in ids { print(id.short) }
}
await client.close()
