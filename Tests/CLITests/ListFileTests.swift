import XCTest

@testable import aftransfer

final class ListFileTests: XCTestCase {
    func testThatEachURLKeepsItsLineNumberPastBlankLinesAndComments() {
        let list = ListFile(text: "# urls\n\nhttp://a/1\n   \nhttp://a/2\n")
        XCTAssertEqual(
            list.entries,
            [
                ListFile.Entry(line: 3, url: "http://a/1", file: nil),
                ListFile.Entry(line: 5, url: "http://a/2", file: nil),
            ])
    }

    func testThatATabNamesTheFileAndSpacesAroundBothAreTrimmed() {
        let list = ListFile(text: "  http://a/1 \t  one.bin  \nhttp://a/2\t\n")
        XCTAssertEqual(
            list.entries,
            [
                ListFile.Entry(line: 1, url: "http://a/1", file: "one.bin"),
                ListFile.Entry(line: 2, url: "http://a/2", file: nil),
            ])
    }

    func testThatCRLFLineEndsCountLinesLikeLF() {
        let list = ListFile(text: "http://a/1\r\n\r\nhttp://a/2\tb.bin\r\n")
        XCTAssertEqual(list.entries.map(\.line), [1, 3])
        XCTAssertEqual(list.entries.last?.file, "b.bin")
    }

    func testThatEveryKindOfLineEndCountsAsOneLine() {
        let list = ListFile(text: "http://a/1\rhttp://a/2\u{2028}http://a/3\r\n\u{0B}http://a/4\u{85}\u{0C}http://a/5")
        XCTAssertEqual(list.entries.map(\.line), [1, 2, 3, 5, 7])
        XCTAssertEqual(list.entries.map(\.url), (1...5).map { "http://a/\($0)" })
    }

    func testThatUnicodeSpacesAroundTheURLAndTheNameAreTrimmed() {
        let list = ListFile(text: "\u{00A0}http://a/é\u{3000}\t\u{2003}ü.bin\u{00A0}\r\n")
        XCTAssertEqual(list.entries, [ListFile.Entry(line: 1, url: "http://a/é", file: "ü.bin")])
    }

    func testThatAListOfOnlyCommentsHasNoEntries() {
        XCTAssertEqual(ListFile(text: "# nothing\n\n#more").entries, [])
    }

    func testThatANamedFileIsRelativeToTheDirectoryUnlessAbsolute() {
        let relative = ListFile.Entry(line: 1, url: "http://a/1", file: "sub/x.bin")
        let absolute = ListFile.Entry(line: 2, url: "http://a/2", file: "/tmp/y.bin")
        XCTAssertEqual(ListFile.target(of: relative, in: "/data"), "/data/sub/x.bin")
        XCTAssertEqual(ListFile.target(of: absolute, in: "/data"), "/tmp/y.bin")
        XCTAssertNil(ListFile.target(of: ListFile.Entry(line: 3, url: "http://a/3", file: nil), in: "/data"))
    }

    func testThatTwoLinesNamingTheSameFileClashAtTheLaterOne() throws {
        let entries = ListFile(text: "http://a/1\tx.bin\nhttp://a/2\n./x.bin\nhttp://a/3\tx.bin\n").entries
        let clash = try XCTUnwrap(ListFile.firstClash(in: entries, directory: "/data"))
        XCTAssertEqual(clash.entry.line, 4)
        XCTAssertEqual(clash.earlierLine, 1)
    }

    func testThatTheSameURLTwiceWithoutANameClashesButWithNamesDoesNot() throws {
        let same = ListFile(text: "http://a/1\nhttp://a/1\n").entries
        XCTAssertEqual(ListFile.firstClash(in: same, directory: "/data")?.entry.line, 2)
        let named = ListFile(text: "http://a/1\ta.bin\nhttp://a/1\tb.bin\n").entries
        XCTAssertNil(ListFile.firstClash(in: named, directory: "/data"))
    }
}
