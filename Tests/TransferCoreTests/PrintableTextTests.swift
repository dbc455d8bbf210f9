import XCTest

@testable import TransferBase
@testable import TransferCore

/// README "Text for people never carries control characters": one rule for the daemon's
/// messages and log and the CLI's output.
final class PrintableTextTests: XCTestCase {
    func testThatControlCharactersAreShownAsCaretsAndC1AsTheReplacementCharacter() {
        XCTAssertEqual(PrintableText.of("A\u{1B}]0;t\u{07}B\rC\u{7F}D\u{9B}E"), "A^[]0;t^GB^MC^?D\u{FFFD}E")
        XCTAssertEqual(PrintableText.of("a\nb"), "a^Jb")
        XCTAssertEqual(PrintableText.of("a\nb\u{1B}", keepingNewlines: true), "a\nb^[")
        XCTAssertEqual(PrintableText.of("plain ünïcødé ✓ ¢"), "plain ünïcødé ✓ ¢", "C2 A2 is not C1")
    }

    func testThatBidirectionalControlsAreShownAsTheReplacementCharacter() {
        // U+202E would make "report\u{202E}fdp.exe" read as "reportexe.pdf" on a terminal.
        XCTAssertEqual(PrintableText.of("report\u{202E}fdp.exe"), "report\u{FFFD}fdp.exe")
        for scalar in ["\u{061C}", "\u{200E}", "\u{200F}", "\u{202A}", "\u{202D}", "\u{2066}", "\u{2069}"] {
            XCTAssertEqual(PrintableText.of("a" + scalar + "b"), "a\u{FFFD}b", scalar.debugDescription)
            XCTAssertTrue(PrintableText.needsEscaping("a" + scalar + "b"), scalar.debugDescription)
        }
        for kept in ["\u{2010}", "\u{2029}", "\u{2065}", "\u{206A}", "\u{0620}", "שלום", "—", "€"] {
            XCTAssertFalse(PrintableText.needsEscaping(kept), kept.debugDescription)
            XCTAssertEqual(PrintableText.of(kept), kept)
        }
    }

    func testThatTheDaemonsLogShowsThemAndJoinsLinesWithASpace() {
        let out = capturingStderr {
            Log.info("output: A\u{1B}]0;pwn\u{07}B\rC\nD\u{9B}E", job: 7)
            Log.info("nothing to escape", job: 8)
        }
        let lines = out.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.count, 2, out)
        XCTAssertTrue(lines[0].hasSuffix(" job=7 output: A^[]0;pwn^GB^MC D\u{FFFD}E"), lines[0])
        XCTAssertTrue(lines[1].hasSuffix(" job=8 nothing to escape"), lines[1])
    }
}
