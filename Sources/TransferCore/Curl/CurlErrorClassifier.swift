import CCurl

/// Turns a libcurl result (`CURLcode`) into the job's ``TransferError`` with a SPEC error code and
/// the retry class (SPEC "Retries and the network": connection, DNS, timeout, reset and
/// partial-transfer errors are retried; TLS failures are not).
///
/// | CURLcode | code | retryable |
/// | --- | --- | --- |
/// | `COULDNT_RESOLVE_HOST`/`_PROXY`, `COULDNT_CONNECT`, `SEND_ERROR`, `RECV_ERROR`, `GOT_NOTHING`, `PARTIAL_FILE`, `HTTP2`, `HTTP2_STREAM`, `HTTP3`, `QUIC_CONNECT_ERROR`, `SEND_FAIL_REWIND` | `network` | yes |
/// | `OPERATION_TIMEDOUT` | `timeout` | yes |
/// | `SSL_CONNECT_ERROR` whose message tells of the connection, not of TLS (reset, EOF, `SSL_ERROR_SYSCALL`) | `network` | yes |
/// | `SSL_*`, `PEER_FAILED_VERIFICATION`, `USE_SSL_FAILED` | `tls` | no |
/// | `TOO_MANY_REDIRECTS`, `UNSUPPORTED_PROTOCOL` naming a scheme (`Protocol "ftp" not supported…`) | `redirect` | no |
/// | `UNSUPPORTED_PROTOCOL` of a reply that is not HTTP/1.x or later, `WEIRD_SERVER_REPLY`, over a connection an earlier transfer opened | `network` | yes |
/// | `WRITE_ERROR`, `READ_ERROR` (the local file) | `io` | no |
/// | `HTTP_RETURNED_ERROR` (22) | `http_status` | per ``RetryPolicy/retryableStatuses`` when the message names the status, else no |
/// | anything else | `network` | no |
///
/// `UNSUPPORTED_PROTOCOL` naming a scheme is `redirect` because the daemon itself only ever starts
/// http(s) requests: libcurl reports it so when a redirect leads to another scheme. libcurl also
/// reports it for a reply that is not HTTP/1.x or later (`Unsupported HTTP version in response`,
/// `Received HTTP/0.9 when not allowed`): that is a server speaking something else, a non-retryable
/// `network` error like the rest of the table's last row — unless the connection was a reused
/// one: then what libcurl read first may be bytes an earlier answer left past its declared length,
/// which fail one job for another's server; that connection is closed, and a retry opens a new
/// one, as after a reset. Everything else is a
/// non-retryable `network` error: those codes mean a bug, a misconfiguration or a server that
/// speaks something other than HTTP, which trying again will not cure. `ABORTED_BY_CALLBACK` (42)
/// and `RANGE_ERROR` (33) are among them: the daemon causes or handles those itself (pause,
/// cancel, stall; restart from zero) and should not rely on this mapping for them.
public enum CurlErrorClassifier {
    /// The error for a failed transfer.
    ///
    /// - Parameters:
    ///   - curlCode: The `CURLcode` raw value (`CURLE_…`); not `CURLE_OK`.
    ///   - message: libcurl's message (the `CURLOPT_ERRORBUFFER` text); when empty,
    ///     `curl_easy_strerror` of the code is used.
    ///   - reusedConnection: whether the request went over a connection an earlier transfer opened.
    /// - Returns: An error whose message reads `curl: (code) message`.
    public static func error(curlCode: Int32, message: String, reusedConnection: Bool = false) -> TransferError {
        let code = CURLcode(rawValue: UInt32(bitPattern: curlCode))
        let text = message.isEmpty ? String(cString: curl_easy_strerror(code)) : message
        var fullMessage = "curl: (\(curlCode)) \(text)"
        if code == CURLE_SEND_FAIL_REWIND {
            // libcurl's words ("seek callback returned error 2") say nothing of what happened.
            fullMessage =
                "the connection closed before the server answered; a request body is not sent again "
                + "within an attempt (the server may have read it): \(fullMessage)"
        }
        var (errorCode, retryable) = classify(code, message: text)
        if reusedConnection && errorCode == .network && !retryable
            && (code == CURLE_UNSUPPORTED_PROTOCOL || code == CURLE_WEIRD_SERVER_REPLY)
        {
            retryable = true
        }
        return TransferError(errorCode, fullMessage, retryable: retryable)
    }

    /// The SPEC code and retry class of a CURLcode (see the table above).
    private static func classify(_ code: CURLcode, message: String) -> (TransferErrorCode, Bool) {
        switch code {
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY, CURLE_COULDNT_CONNECT,
            CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_GOT_NOTHING, CURLE_PARTIAL_FILE,
            CURLE_HTTP2, CURLE_HTTP2_STREAM, CURLE_HTTP3, CURLE_QUIC_CONNECT_ERROR,
            // A reused connection closed before the answer, and the body may not be sent again
            // unseen (the daemon refuses libcurl's rewind): a reset, retried as an attempt.
            CURLE_SEND_FAIL_REWIND:
            return (.network, true)
        case CURLE_OPERATION_TIMEDOUT:
            return (.timeout, true)
        case CURLE_SSL_CONNECT_ERROR where isConnectionFailure(message):
            // A reset or a close during the handshake (a server restarting, a balancer): no
            // certificate was judged, so it is a reset, retried as SPEC says.
            return (.network, true)
        case CURLE_SSL_CONNECT_ERROR, CURLE_SSL_ENGINE_NOTFOUND, CURLE_SSL_ENGINE_SETFAILED,
            CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER, CURLE_PEER_FAILED_VERIFICATION, CURLE_USE_SSL_FAILED,
            CURLE_SSL_ENGINE_INITFAILED, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_SHUTDOWN_FAILED,
            CURLE_SSL_CRL_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH,
            CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_CLIENTCERT:
            return (.tls, false)
        case CURLE_TOO_MANY_REDIRECTS:
            return (.redirect, false)
        case CURLE_UNSUPPORTED_PROTOCOL:
            return (message.hasPrefix("Protocol \"") ? .redirect : .network, false)
        case CURLE_WRITE_ERROR, CURLE_READ_ERROR:
            return (.io, false)
        case CURLE_HTTP_RETURNED_ERROR:
            // "The requested URL returned error: 503" (libcurl 7.88 adds the reason after it on
            // some versions): the status decides the retry class.
            let status = trailingStatus(in: message)
            return (.httpStatus, status.map { RetryPolicy.retryableStatuses.contains($0) } ?? false)
        default:
            return (.network, false)
        }
    }

    /// Words of libcurl's and OpenSSL's messages for a handshake that the connection ended (a
    /// reset, an EOF, a failed system call), as opposed to one TLS itself refused.
    private static let connectionFailureWords = [
        "SSL_ERROR_SYSCALL", "connection reset", "recv failure", "send failure", "broken pipe", "unexpected eof",
    ]

    private static func isConnectionFailure(_ message: String) -> Bool {
        let lower = message.lowercased()
        return connectionFailureWords.contains { lower.contains($0.lowercased()) }
    }

    /// The first three-digit number after `error:` in libcurl's HTTP error message, if any.
    private static func trailingStatus(in message: String) -> Int? {
        guard let marker = message.range(of: "error:") else { return nil }
        let digits = message[marker.upperBound...].drop(while: { $0 == " " }).prefix(while: \.isNumber)
        guard digits.count == 3, let status = Int(digits) else { return nil }
        return status
    }
}
