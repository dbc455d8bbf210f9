import XCTest

@testable import TransferBase
@testable import TransferCore

/// The key that `--max-per-host` counts connections by: scheme, host and port.
final class HostKeyTests: XCTestCase {
    func testThatTheDefaultPortOfTheSchemeIsFilledIn() {
        XCTAssertEqual(TransferTask.hostKey(of: "http://Example.com/a"), "http://example.com:80")
        XCTAssertEqual(TransferTask.hostKey(of: "https://example.com/a?b=1"), "https://example.com:443")
        XCTAssertEqual(TransferTask.hostKey(of: "http://127.0.0.1:8080/x"), "http://127.0.0.1:8080")
    }

    func testThatCredentialsAndPathsDoNotMakeAnotherHost() {
        XCTAssertEqual(
            TransferTask.hostKey(of: "http://u:p@h:81/one"), TransferTask.hostKey(of: "http://h:81/two"))
    }
}
