import XCTest

@testable import aftransfer

final class TerminalColumnsTests: XCTestCase {
    func testThatWideCharactersTakeTwoColumnsAndCombiningMarksNone() {
        XCTAssertEqual(TerminalColumns.width("big.iso"), 7)
        XCTAssertEqual(TerminalColumns.width("日本語"), 6)
        XCTAssertEqual(TerminalColumns.width("한국어"), 6)
        XCTAssertEqual(TerminalColumns.width("ｆｕｌｌ"), 8)
        XCTAssertEqual(TerminalColumns.width("e\u{301}te\u{301}"), 3, "é as e and a combining accent")
        XCTAssertEqual(TerminalColumns.width("📦.bin"), 6)
        XCTAssertEqual(TerminalColumns.width("👩‍💻"), 2, "one emoji of several scalars")
    }

    func testThatClipCountsColumnsAndNeverSplitsAWideCharacter() {
        XCTAssertEqual(TerminalColumns.clip("日本語のファイル", to: 7), "日本語…")
        XCTAssertEqual(TerminalColumns.clip("日本語のファイル", to: 8), "日本語…", "the fourth would leave no room for …")
        XCTAssertEqual(TerminalColumns.clip("short", to: 5), "short")
        XCTAssertEqual(TerminalColumns.clip("longer", to: 5), "long…")
        XCTAssertEqual(TerminalColumns.pad("日本", to: 6), "日本  ")
        XCTAssertEqual(TerminalColumns.leftPad("日本", to: 6), "  日本")
    }
}
