import CCurl
import XCTest

@testable import TransferBase
@testable import TransferCore

final class CurlErrorClassifierTests: XCTestCase {
    private func classify(_ code: CURLcode, _ message: String = "boom") -> TransferError {
        CurlErrorClassifier.error(curlCode: Int32(code.rawValue), message: message)
    }

    func testThatConnectionAndTransferFailuresAreRetryableNetworkErrors() {
        for code in [
            CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY, CURLE_COULDNT_CONNECT, CURLE_SEND_ERROR,
            CURLE_RECV_ERROR, CURLE_GOT_NOTHING, CURLE_PARTIAL_FILE, CURLE_HTTP2, CURLE_HTTP2_STREAM, CURLE_HTTP3,
            CURLE_SEND_FAIL_REWIND,
        ] {
            let error = classify(code)
            XCTAssertEqual(error.code, .network, "\(code.rawValue)")
            XCTAssertTrue(error.retryable, "\(code.rawValue)")
        }
    }

    /// An outside audit: an upload on a kept-alive connection the server closed failed with
    /// "curl: (65) seek callback returned error 2", which says nothing of what happened.
    func testThatARefusedRewindSaysTheConnectionClosedBeforeAnAnswer() {
        let error = classify(CURLE_SEND_FAIL_REWIND, "seek callback returned error 2")
        XCTAssertTrue(error.message.hasPrefix("the connection closed before the server answered"), error.message)
        XCTAssertTrue(error.message.hasSuffix("curl: (65) seek callback returned error 2"), error.message)
    }

    func testThatATimeoutIsARetryableTimeout() {
        XCTAssertEqual(classify(CURLE_OPERATION_TIMEDOUT), TransferError(.timeout, "curl: (28) boom", retryable: true))
    }

    func testThatTLSFailuresAreNotRetryable() {
        for code in [
            CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_PINNEDPUBKEYNOTMATCH,
            CURLE_SSL_CACERT_BADFILE, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER, CURLE_SSL_ISSUER_ERROR,
        ] {
            let error = classify(code)
            XCTAssertEqual(error.code, .tls, "\(code.rawValue)")
            XCTAssertFalse(error.retryable, "\(code.rawValue)")
        }
    }

    /// A handshake the connection ended is a reset (retried), not a TLS failure; one TLS refused is.
    func testThatAHandshakeCutByTheConnectionIsARetryableNetworkError() {
        for message in [
            "Recv failure: Connection reset by peer",
            "OpenSSL SSL_connect: SSL_ERROR_SYSCALL in connection to 127.0.0.1:443 ",
            "OpenSSL SSL_connect: Connection reset by peer in connection to example.com:443 ",
            "Send failure: Broken pipe",
            "error:0A000126:SSL routines::unexpected eof while reading",
        ] {
            let error = classify(CURLE_SSL_CONNECT_ERROR, message)
            XCTAssertEqual(error.code, .network, message)
            XCTAssertTrue(error.retryable, message)
        }
        let refused = classify(
            CURLE_SSL_CONNECT_ERROR, "OpenSSL/3.0.19: error:0A000410:SSL routines::sslv3 alert handshake failure")
        XCTAssertEqual(refused.code, .tls)
        XCTAssertFalse(refused.retryable)
    }

    func testThatRedirectFailuresAreNotRetryable() {
        XCTAssertEqual(classify(CURLE_TOO_MANY_REDIRECTS).code, .redirect)
        XCTAssertEqual(
            classify(CURLE_UNSUPPORTED_PROTOCOL, "Protocol \"ftp\" not supported or disabled in libcurl").code,
            .redirect)
        XCTAssertEqual(classify(CURLE_UNSUPPORTED_PROTOCOL, "Protocol \"ftp\" not supported").code, .redirect)
        XCTAssertFalse(classify(CURLE_TOO_MANY_REDIRECTS).retryable)
    }

    func testThatAReplyThatIsNotHTTPIsANetworkErrorNotARedirect() {
        for message in ["Unsupported HTTP version in response", "Received HTTP/0.9 when not allowed"] {
            let error = classify(CURLE_UNSUPPORTED_PROTOCOL, message)
            XCTAssertEqual(error.code, .network, message)
            XCTAssertFalse(error.retryable, message)
        }
    }

    func testThatAReplyThatIsNotHTTPOverAReusedConnectionIsRetried() {
        func error(_ code: CURLcode, _ message: String, reused: Bool) -> TransferError {
            CurlErrorClassifier.error(curlCode: Int32(code.rawValue), message: message, reusedConnection: reused)
        }
        for (code, message) in [
            (CURLE_UNSUPPORTED_PROTOCOL, "Received HTTP/0.9 when not allowed"),
            (CURLE_UNSUPPORTED_PROTOCOL, "Unsupported HTTP version in response"),
            (CURLE_WEIRD_SERVER_REPLY, "Weird server reply"),
        ] {
            XCTAssertEqual(error(code, message, reused: true).code, .network, message)
            XCTAssertTrue(error(code, message, reused: true).retryable, message)
            XCTAssertFalse(error(code, message, reused: false).retryable, message)
        }
        // A redirect to another scheme stays what it is, whatever the connection.
        XCTAssertEqual(
            error(CURLE_UNSUPPORTED_PROTOCOL, "Protocol \"ftp\" not supported", reused: true).code, .redirect)
        XCTAssertFalse(error(CURLE_UNSUPPORTED_PROTOCOL, "Protocol \"ftp\" not supported", reused: true).retryable)
    }

    func testThatLocalWriteAndReadFailuresAreIOErrors() {
        XCTAssertEqual(classify(CURLE_WRITE_ERROR), TransferError(.io, "curl: (23) boom", retryable: false))
        XCTAssertEqual(classify(CURLE_READ_ERROR).code, .io)
    }

    func testThatAnHTTPErrorTakesItsRetryClassFromTheStatus() {
        let unavailable = classify(CURLE_HTTP_RETURNED_ERROR, "The requested URL returned error: 503")
        XCTAssertEqual(unavailable.code, .httpStatus)
        XCTAssertTrue(unavailable.retryable)
        let notFound = classify(CURLE_HTTP_RETURNED_ERROR, "The requested URL returned error: 404 Not Found")
        XCTAssertEqual(notFound.code, .httpStatus)
        XCTAssertFalse(notFound.retryable)
        XCTAssertFalse(classify(CURLE_HTTP_RETURNED_ERROR, "odd").retryable)
    }

    func testThatEverythingElseIsANonRetryableNetworkError() {
        for code in [CURLE_WEIRD_SERVER_REPLY, CURLE_OUT_OF_MEMORY, CURLE_ABORTED_BY_CALLBACK, CURLE_RANGE_ERROR] {
            let error = classify(code)
            XCTAssertEqual(error.code, .network, "\(code.rawValue)")
            XCTAssertFalse(error.retryable, "\(code.rawValue)")
        }
        XCTAssertEqual(CurlErrorClassifier.error(curlCode: -1, message: "x").code, .network)
        XCTAssertEqual(CurlErrorClassifier.error(curlCode: 12345, message: "x").code, .network)
    }

    func testThatTheMessageNamesTheCodeAndFallsBackToCurlsText() {
        XCTAssertEqual(
            classify(CURLE_COULDNT_CONNECT, "Failed to connect to h port 80").message,
            "curl: (7) Failed to connect to h port 80")
        XCTAssertEqual(classify(CURLE_COULDNT_CONNECT, "").message, "curl: (7) Couldn't connect to server")
    }
}
