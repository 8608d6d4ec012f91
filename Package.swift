// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "jobtop",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "Scheduler", targets: ["Scheduler"]),
        .executable(name: "jobtop", targets: ["jobtop"]),
    ],
    dependencies: [
        // Deque for FIFO free-slot lists, event buffers and bounded output tails.
        .package(url: "https://github.com/apple/swift-collections", from: "1.6.0"),
        // The command line (subcommands, --help, validation).
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        // Job files are TOML; TOMLKit wraps toml++ and reports line:column for syntax errors.
        .package(url: "https://github.com/LebJe/TOMLKit", from: "0.6.0"),
        // Remote workers: gRPC over HTTP/2 (NIO Posix transport) with protobuf messages. The
        // generated code is committed (Scripts/generate-protos.sh), so no build plugin is used.
        .package(url: "https://github.com/grpc/grpc-swift-2", from: "2.4.3"),
        .package(url: "https://github.com/grpc/grpc-swift-nio-transport", from: "2.9.2"),
        .package(url: "https://github.com/grpc/grpc-swift-protobuf", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-protobuf", from: "1.39.0"),
        // The listener watches each accepted TCP connection (hello deadline, pending cap).
        .package(url: "https://github.com/apple/swift-nio", from: "2.81.0"),
        // TLS for remote workers (RemoteTLS): already in the graph through the gRPC transport.
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.0.0"),
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.0"),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.7.0"),
        // `jobtop serve`'s durable state: SQLite in WAL mode, written on GRDB's own queue.
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
    ],
    targets: [
        // posix_spawn with a new session, pidfd_open and environ: the few C calls Swift cannot make directly.
        .target(name: "CProcess"),
        .systemLibrary(
            name: "CNcurses",
            // No pkgConfig: its -D_XOPEN_SOURCE=600 is a flag SwiftPM refuses (a warning on every
            // build); the shim defines the wide-character macros and the headers are on the
            // default include path.
            providers: [.apt(["libncursesw5-dev"])]
        ),
        .target(
            name: "Scheduler",
            dependencies: [
                "CProcess",
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "HeapModule", package: "swift-collections"),
            ]
        ),
        .target(
            name: "TUI",
            dependencies: [
                "Scheduler",
                "CNcurses",
                // The crash guard's terminal restore (CrashGuard.h), stops as a shell job (JobStop.h).
                "CProcess",
                .product(name: "DequeModule", package: "swift-collections"),
            ]
        ),
        .executableTarget(
            name: "jobtop",
            dependencies: [
                "Scheduler",
                "TUI",
                "SchedulerRemote",
                "SchedulerSlurm",
                "SchedulerService",
                "SchedulerStore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "TOMLKit", package: "TOMLKit"),
            ],
            linkerSettings: [
                // The static release binary exports none of its own symbols (the static stdlib's
                // link arguments ask for --export-dynamic): the Swift runtime's start-up `dladdr`
                // scanned its ~51,000 exported symbols (and the loader looked some of them up),
                // ~0.4 ms of every command. Nothing looks its symbols up at run time.
                .unsafeFlags(["-Xlinker", "--no-export-dynamic"], .when(platforms: [.linux], configuration: .release))
            ]
        ),
        // Remote workers: wire protocol, coordinator listener, RemoteWorker stub, worker client.
        // Depends on Scheduler only (never TUI); keeps networking out of the engine.
        .target(
            name: "SchedulerRemote",
            dependencies: [
                "Scheduler",
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "GRPCNIOTransportHTTP2Posix", package: "grpc-swift-nio-transport"),
                .product(name: "GRPCProtobuf", package: "grpc-swift-protobuf"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            exclude: ["Generated/README.md"]
        ),
        // The Slurm backend: a worker that submits each attempt with sbatch and watches it with
        // one squeue call per poll for all jobs. Depends on Scheduler only.
        .target(
            name: "SchedulerSlurm",
            dependencies: ["Scheduler"]
        ),
        // `jobtop serve`'s control service: the scheduler's Codable commands, events and
        // snapshots as JSON over gRPC, on a Unix socket (and TCP behind a token), and the
        // client that the dashboard and the command line use in place of the in-process actor.
        // Depends on Scheduler and SchedulerRemote (addresses, tokens), never on TUI.
        .target(
            name: "SchedulerService",
            dependencies: [
                "Scheduler",
                "SchedulerRemote",
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "GRPCNIOTransportHTTP2Posix", package: "grpc-swift-nio-transport"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // Durable state for `jobtop serve`: a journal of jobs and their outcomes in SQLite (GRDB),
        // each job's output in a file, and the recovery after a restart. Depends on Scheduler only.
        .target(
            name: "SchedulerStore",
            dependencies: [
                "Scheduler",
                "CProcess",
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        // Remote worker benchmark (release): local slots vs `jobtop worker` processes on loopback.
        .executableTarget(
            name: "jobtop-remote-bench",
            dependencies: ["Scheduler", "SchedulerRemote", "CProcess"]
        ),
        // The least a `jobtop submit -c CMD` can be (release): one submission through
        // `ControlClient`, no ArgumentParser, no job files; linked like jobtop. Its latency is
        // the floor of the command's (README, "Daemon").
        .executableTarget(
            name: "jobtop-submit-probe",
            dependencies: ["Scheduler", "SchedulerService"],
            linkerSettings: [.unsafeFlags(["-Xlinker", "--no-export-dynamic"], .when(platforms: [.linux], configuration: .release))]
        ),
        .executableTarget(
            name: "jobtop-bench",
            dependencies: ["Scheduler", .product(name: "DequeModule", package: "swift-collections")]
        ),
        // Durable state benchmark (release): durable vs in-memory submit, restart, submit -> started.
        .executableTarget(
            name: "jobtop-store-bench",
            dependencies: ["Scheduler", "SchedulerStore", "SchedulerService"]
        ),
        // Dashboard benchmark (release): the view model's cost per event, small vs big table.
        .executableTarget(
            name: "jobtop-dashboard-bench",
            dependencies: ["TUI"]
        ),
        // What the test targets share: the manual clock, running the built binary, scratch
        // directories, process checks. Only test targets depend on it (never a product).
        .target(
            name: "JobtopTestSupport",
            dependencies: ["Scheduler", "CProcess"],
            path: "Tests/TestSupport"
        ),
        .testTarget(
            name: "SchedulerTests",
            dependencies: ["Scheduler", "JobtopTestSupport"]
        ),
        // The control service in process, over a real Unix socket.
        .testTarget(
            name: "ServiceTests",
            dependencies: ["Scheduler", "SchedulerService", "SchedulerRemote", "JobtopTestSupport"]
        ),
        .testTarget(
            name: "StoreTests",
            // GRDB: a second program's connection to the state database (its lock).
            dependencies: ["Scheduler", "SchedulerStore", "JobtopTestSupport", .product(name: "GRDB", package: "GRDB.swift")]
        ),
        .testTarget(
            name: "TUITests",
            dependencies: ["TUI", "JobtopTestSupport"]
        ),
        // Remote workers end to end: real worker processes on loopback.
        .testTarget(
            name: "RemoteTests",
            dependencies: ["Scheduler", "SchedulerRemote", "CProcess", "JobtopTestSupport", "jobtop"]
        ),
        // The Slurm backend: parsing on captured text, and end to end on a real one-node Slurm
        // (Scripts/start-slurm.sh; skipped with a message where none runs, except in CI).
        .testTarget(
            name: "SlurmTests",
            // GRDB: reading the serve's state database beside it (the store's lock is the serve's).
            dependencies: [
                "Scheduler", "SchedulerSlurm", "SchedulerStore", "CProcess", "JobtopTestSupport", "jobtop",
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        // End-to-end tests of the built binary (jobtop is a dependency so `swift test` builds it).
        .testTarget(
            name: "JobtopTests",
            dependencies: ["jobtop", "JobtopTestSupport", "Scheduler", "SchedulerService", "SchedulerStore"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
