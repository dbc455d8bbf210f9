import XCTest

@testable import TransferBase
@testable import TransferCore

final class PlainHTTPURLTests: XCTestCase {
    func testThatCommonURLsTakeTheFastPath() {
        for url in [
            "http://127.0.0.1:8080/small/f000001.bin", "https://example.com", "https://example.com/",
            "http://a.b-c.example:1/x?y=1&z=%2F#frag",
            "https://mirror.example.org/pub/iso/debian-13.0.0-amd64-netinst.iso",
            "http://host/a/b;c=d/e.f?g=h/i?j#k/l?m",
        ] {
            XCTAssertEqual(PlainHTTPURL.normalized(url), url, url)
        }
        XCTAssertEqual(PlainHTTPURL.normalized("HTTP://Example.com/X"), "http://Example.com/X")
        XCTAssertEqual(PlainHTTPURL.normalized("hTtPs://example.com"), "https://example.com")
    }

    func testThatWhatItCannotBeSureOfIsLeftToTheFullCheck() {
        for url in [
            "ftp://example.com/", "http:/example.com", "http://", "http://:80/", "http://u:p@host/",
            "http://[::1]/", "http://host:0/", "http://host:65536/", "http://host:/", "http://host:123456/",
            "http://-host/", "http://host-/", "http://xn--abc.example/", "http://a..b/", "http://.a/", "http://a./",
            "http://host/%zz", "http://host/a b", "http://host/{x}", "http://host/#a#b", "http://host/a|b",
            "http://ho_st/", "http://h%41st/", "http://host\\x", "http://" + String(repeating: "a", count: 64) + "/",
            "http://host/é",
        ] {
            XCTAssertNil(PlainHTTPURL.normalized(url), url)
        }
    }

    /// Every URL the fast path accepts, the full check accepts too, with the same result: URLs
    /// built at random from pieces near the edges of what it accepts (a fixed seed). The full
    /// check takes some URLs the fast path must leave to it (`{`, `|`, `%zz`, a second `#`): a fast
    /// path that took those would agree here and is caught by the list above instead.
    func testThatTheFastPathAgreesWithTheFullCheck() {
        var rng = SplitMix(seed: 20)
        let schemes = [
            "http", "https", "HTTP", "Https", "hTTPs", "http", "https", "httpx", "htt", "ftp", "HTTPS", "http+s",
        ]
        let separators = ["://", "://", "://", "://", "://", "://", ":/", ":///", "//"]
        let labelBytes = Array("abcxyzABCXYZ0189".utf8)
        let oddLabelBytes = Array("-_%.~!".utf8)
        let restBytes = (0x21...0x7E).map { UInt8($0) }
        let plainRest = Array("abzAZ09-._~!$&'()*+,;=:@/?#%".utf8)
        let ports = [
            "", "", "", ":8080", ":", ":0", ":1", ":80", ":080", ":65535", ":65536", ":99999", ":123456", ":8a",
            ":00000",
        ]
        func label() -> String {
            let n: Int
            switch Int.random(in: 0..<10, using: &rng) {
            case 0 where Int.random(in: 0..<4, using: &rng) == 0: n = 0
            case 1: n = 63
            case 2 where Int.random(in: 0..<2, using: &rng) == 0: n = 64
            default: n = Int.random(in: 1...8, using: &rng)
            }
            let odd = Int.random(in: 0..<4, using: &rng) == 0
            var s = String(
                decoding: (0..<n).map { _ in
                    (odd && Int.random(in: 0..<3, using: &rng) == 0 ? oddLabelBytes : labelBytes).randomElement(
                        using: &rng)!
                }, as: UTF8.self)
            if Int.random(in: 0..<20, using: &rng) == 0 { s = "xn--" + s }
            return s
        }
        var accepted = 0
        var refused = 0
        for _ in 0..<40_000 {
            let host = (0..<Int.random(in: 1...3, using: &rng)).map { _ in label() }.joined(separator: ".")
            var rest = ""
            for _ in 0..<Int.random(in: 0...12, using: &rng) {
                let pool = Int.random(in: 0..<12, using: &rng) == 0 ? restBytes : plainRest
                rest.append(Character(Unicode.Scalar(pool.randomElement(using: &rng)!)))
                if Int.random(in: 0..<16, using: &rng) == 0 {
                    rest += ["%2F", "%a", "%4g", "/", "?", "#"].randomElement(using: &rng)!
                }
            }
            if !rest.isEmpty, Int.random(in: 0..<3, using: &rng) > 0 { rest = "/" + rest }
            let url =
                schemes.randomElement(using: &rng)! + separators.randomElement(using: &rng)! + host
                + ports.randomElement(using: &rng)! + rest
            guard url.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { continue }
            guard let fast = PlainHTTPURL.normalized(url) else {
                refused += 1
                continue
            }
            accepted += 1
            XCTAssertEqual(try? RequestValidator.fullyCheckedURL(url, plain: true), fast, url)
        }
        // Both ways were taken often enough for the comparison to mean something.
        XCTAssertGreaterThan(accepted, 2_000)
        XCTAssertGreaterThan(refused, 2_000)
    }
}
