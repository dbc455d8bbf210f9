// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "aftransfer",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "aftransferd", targets: ["aftransferd"]),
        .executable(name: "aftransfer", targets: ["aftransfer"]),
        .library(name: "TransferCore", targets: ["TransferCore"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.6.0"),
    ],
    targets: [
        .systemLibrary(name: "CCurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CUV", providers: [.apt(["libuv1-dev"])]),
        .systemLibrary(name: "COpenSSL", providers: [.apt(["libssl-dev"])]),
        // The daemon's stop signals while it starts: an async-signal-safe handler, in C.
        .target(name: "CSignals"),
        // What the CLI shares with the daemon and needs no C library for: the job model, the wire
        // (JSON, the RPC messages and client), the checks of a request, the home's paths. The CLI
        // links only this, so that it does not load libcurl, OpenSSL, SQLite and libuv at start.
        .target(name: "TransferBase"),
        .target(
            name: "TransferCore",
            dependencies: [
                "TransferBase", "CCurl", "CUV", "COpenSSL", "CSignals",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "HeapModule", package: "swift-collections"),
            ]
        ),
        .executableTarget(
            name: "aftransferd",
            dependencies: [
                "TransferCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "aftransfer",
            dependencies: [
                "TransferBase",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .testTarget(
            name: "TransferCoreTests",
            dependencies: ["TransferCore", "TransferBase", .product(name: "GRDB", package: "GRDB.swift")],
            resources: [.copy("Fixtures")]
        ),
        .testTarget(
            name: "CLITests",
            dependencies: ["aftransfer", "TransferBase"]
        ),
    ]
)
