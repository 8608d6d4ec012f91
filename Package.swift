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
            dependencies: ["Scheduler", "CNcurses"]
        ),
        .executableTarget(
            name: "jobtop",
            dependencies: [
                "Scheduler",
                "TUI",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "TOMLKit", package: "TOMLKit"),
            ]
        ),
        .executableTarget(
            name: "jobtop-bench",
            dependencies: ["Scheduler"]
        ),
        .testTarget(
            name: "SchedulerTests",
            dependencies: ["Scheduler"]
        ),
        .testTarget(
            name: "TUITests",
            dependencies: ["TUI"]
        ),
        // End-to-end tests of the built binary (jobtop is a dependency so `swift test` builds it).
        .testTarget(
            name: "JobtopTests",
            dependencies: ["jobtop"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
