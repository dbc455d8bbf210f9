import Foundation

@testable import TransferBase
@testable import TransferCore

/// What the code under test writes to stderr (the daemon's log) while `body` runs: fd 2 points
/// at a file meanwhile, and is put back after.
func capturingStderr(_ body: () throws -> Void) rethrows -> String {
    let path = NSTemporaryDirectory() + "aft-stderr-\(getpid())-\(UUID().uuidString)"
    let file = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    precondition(file >= 0, "cannot open \(path)")
    defer {
        close(file)
        unlink(path)
    }
    fflush(nil)
    let saved = dup(2)
    dup2(file, 2)
    defer {
        fflush(nil)
        dup2(saved, 2)
        close(saved)
    }
    try body()
    fflush(nil)
    return (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
}
