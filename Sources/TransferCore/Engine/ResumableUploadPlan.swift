import Foundation

/// The protocol side of a resumable upload (SPEC "Resumable uploads"), with no I/O: given what
/// the job has stored (upload URL, agreed protocol, acknowledged offset, append limit) and each
/// response, it decides the next request: the first request (IETF optimistic creation, tus
/// creation, or a plain upload), an offset query (`HEAD`), an append (`PATCH`), or the end of the
/// attempt. ``UploadTask`` sends what it says and feeds back what came; `ResumableUploadPlanTests`
/// walks every branch without a network.
struct ResumableUploadPlan: Equatable {
    /// `Upload-Draft-Interop-Version` of the IETF draft we speak.
    static let interopVersion = "8"
    /// `Tus-Resumable` of the tus version we speak.
    static let tusVersion = "1.0.0"
    /// `409`s in a row, without an append accepted between them, answered by asking again at
    /// once; after that each new ask waits (``conflictDelay(after:)``). A `409` never ends the
    /// attempt and never spends a retry (SPEC), however many come.
    static let maxConflictsInARow = 3
    /// The first wait before asking again, once ``maxConflictsInARow`` is passed (seconds); it
    /// doubles with each further `409` in a row.
    static let firstConflictDelay = 0.5
    /// The longest wait before asking again after a `409` (seconds): well under the stall window,
    /// which restarts around each wait.
    static let maxConflictDelay = 15.0

    /// How long to wait before asking again after `conflicts` `409`s in a row: nothing up to
    /// ``maxConflictsInARow``, then ``firstConflictDelay`` doubling up to ``maxConflictDelay``.
    static func conflictDelay(after conflicts: Int) -> Double {
        guard conflicts > maxConflictsInARow else { return 0 }
        let doublings = min(conflicts - maxConflictsInARow - 1, 16)
        return min(maxConflictDelay, firstConflictDelay * Double(1 << doublings))
    }

    /// What a request is for.
    enum Purpose: Equatable {
        /// A plain upload of the whole payload (no resumable headers).
        case plain
        /// IETF: the whole payload with `Upload-Complete: ?1`; tus: `POST` creation.
        case create
        /// `HEAD` on the upload URL: the server's offset.
        case offset
        /// `PATCH` of bytes from the server's offset.
        case append
    }

    /// One request to send.
    struct Request: Equatable {
        /// What the request is for.
        var purpose: Purpose
        /// `PUT`, `POST`, `HEAD` or `PATCH`.
        var method: String
        /// The job's URL (creation, plain) or the upload URL.
        var url: String
        /// Header lines this request needs (`Name: value`); they replace the user's of that name.
        var headers: [String]
        /// The first payload byte sent.
        var bodyOffset: Int64 = 0
        /// How many payload bytes are sent from `bodyOffset`; nil for no body (`HEAD`).
        var bodyLength: Int64?
        /// Whether this request carries the payload's last byte (its response is the job's).
        var completes = false
    }

    /// What to do after a response.
    enum Verdict: Equatable {
        /// Send this request next, in the same attempt.
        case send(Request)
        /// Send this request next, in the same attempt, after waiting this many seconds (a server
        /// that keeps answering `409`).
        case sendAfter(Request, seconds: Double)
        /// The upload is complete; the last response is the job's response.
        case completed
        /// The attempt ends with this error (retryable or not, as it says).
        case failed(TransferError)
    }

    /// A response's status and headers (names lowercase).
    struct Response: Equatable {
        /// The status (1xx for an interim response).
        var status: Int
        /// Header values by lowercase name (the last of a repeated one).
        var headers: [String: String]
        /// The URL that answered (after redirects): a `Location` is resolved against it. Nil: the
        /// request's own URL.
        var url: String? = nil
        /// Whether the request's body was all handed over before this answer came (a final 2xx
        /// before it is the server stopping part way: ``answeredBeforeTheBodyEnded()``).
        var bodySentWhole = true
    }

    // MARK: - The job's facts

    /// The requested mode.
    let mode: ResumableMode
    /// The job's URL, for the first request.
    let url: String
    /// The job's method (`PUT`/`POST`), for an IETF creation or a plain upload.
    let method: String
    /// The payload's length.
    let length: Int64
    /// The `Content-Type` of the payload (tus: `filetype` metadata).
    let contentType: String
    /// The source's file name (tus: `filename` metadata).
    let filename: String
    /// `--sha256` as base64 (IETF `Repr-Digest`), if given.
    let digestBase64: String?

    /// The upload URL, once the server gave one.
    private(set) var uploadURL: String?
    /// The protocol the server agreed to.
    private(set) var agreed: ResumableProtocol?
    /// The server's acknowledged offset.
    private(set) var offset: Int64
    /// The largest append the server takes, once learnt.
    private(set) var appendLimit: Int64?
    /// The request in flight.
    private(set) var current: Request?
    private var conflicts = 0
    /// Where the last append answered without `Upload-Offset` (tus) started: a later one from no
    /// further on means the server keeps nothing of them.
    private var unconfirmedFrom: Int64?
    /// Ends the message of a refusal of the request that completed the upload, read whole: the
    /// next attempt finds it in the history (``UploadTask/completionWasRefused(_:)``).
    static let completionRefusedNote = " (to the request that completed the upload)"
    /// Ends the message of a refused offset query (`HEAD`), which says nothing of the upload.
    static let offsetQueryRefusedNote = " (to the offset query)"

    /// Whether the server refused the request that completed the upload after reading all of it
    /// (a 5xx from its processing, say): a `HEAD` that then says "complete" is not taken as the
    /// upload's end, and the upload is sent again from a new first request. A `HEAD` that gives an
    /// offset short of the end (the server kept none of it) resumes from there, as after any 5xx.
    private(set) var completionRefused: Bool

    /// Creates the plan of one attempt from the job's stored facts.
    init(
        mode: ResumableMode, url: String, method: String, length: Int64, contentType: String, filename: String,
        sha256Hex: String?, uploadURL: String?, agreed: ResumableProtocol?, offset: Int64, appendLimit: Int64?,
        completionRefused: Bool = false
    ) {
        self.mode = mode
        self.url = url
        self.method = method
        self.length = length
        self.contentType = contentType
        self.filename = filename
        self.digestBase64 = sha256Hex.flatMap(Self.base64(ofHex:))
        self.uploadURL = agreed == nil ? nil : uploadURL
        self.agreed = self.uploadURL == nil ? nil : agreed
        self.offset = self.uploadURL == nil ? 0 : max(0, min(offset, length))
        self.appendLimit = appendLimit
        self.completionRefused = self.uploadURL != nil && completionRefused
    }

    /// Whether a request of this plan is a resumable one (an attempt that may leave state behind).
    var isResumable: Bool { mode != .off }

    // MARK: - Deciding

    /// The first request of an attempt: resume (`HEAD`) when the server gave an upload URL,
    /// else create (or a plain upload with `off`).
    mutating func first() -> Request {
        conflicts = 0
        let r: Request
        if mode == .off {
            r = Request(
                purpose: .plain, method: method, url: url, headers: ["Content-Type: \(contentType)"], bodyOffset: 0,
                bodyLength: length, completes: true)
        } else if uploadURL != nil, agreed != nil {
            r = offsetRequest()
        } else if mode == .tus {
            r = Request(
                purpose: .create, method: "POST", url: url,
                headers: [
                    "Tus-Resumable: \(Self.tusVersion)", "Upload-Length: \(length)",
                    "Upload-Metadata: filename \(Self.base64(filename)),filetype \(Self.base64(contentType))",
                    "Content-Type:",
                ],
                bodyOffset: 0, bodyLength: 0)
        } else {
            var h = [
                "Content-Type: \(contentType)", "Upload-Draft-Interop-Version: \(Self.interopVersion)",
                "Upload-Complete: ?1", "Upload-Length: \(length)",
            ]
            if let d = digestBase64 { h.append("Repr-Digest: sha-256=:\(d):") }
            r = Request(
                purpose: .create, method: method, url: url, headers: h, bodyOffset: 0, bodyLength: length,
                completes: true)
        }
        current = r
        return r
    }

    /// An interim (1xx) response to the request in flight. Returns true when it gave an upload
    /// URL (IETF `104` with `Location`): store it with the job at once.
    mutating func interim(_ response: Response) -> Bool {
        guard mode == .auto, current?.purpose == .create, response.status == 104,
            response.headers["upload-draft-interop-version"].map({ $0.trimmingCharacters(in: .whitespaces) })
                == Self.interopVersion,
            let location = response.headers["location"],
            let resolved = Self.resolve(location, against: response.url ?? url),
            !RedirectPolicy.downgrades(from: response.url ?? url, to: resolved)
        else { return false }  // no 104, another interop version, or an http URL for https: a plain upload
        uploadURL = resolved
        agreed = .ietf
        offset = 0
        learnLimit(response.headers)
        return true
    }

    /// The final response to the request in flight.
    mutating func received(_ response: Response) -> Verdict {
        guard let request = current else { return .failed(Self.protocolError("no request in flight")) }
        let s = response.status
        switch request.purpose {
        case .plain:
            return (200..<300).contains(s) ? .completed : .failed(RetryPolicy.error(forHTTPStatus: s))

        case .create where mode == .tus:
            guard (200..<300).contains(s) else { return .failed(RetryPolicy.error(forHTTPStatus: s)) }
            guard let location = response.headers["location"],
                let resolved = Self.resolve(location, against: response.url ?? url)
            else {
                return .failed(Self.protocolError("the tus server created no upload (no Location in its \(s))"))
            }
            if RedirectPolicy.downgrades(from: response.url ?? url, to: resolved) {
                // SPEC "Security": never https→http, for redirects too; the file would go in clear.
                return .failed(
                    TransferError(
                        .redirect,
                        "the tus server's upload URL \(resolved) is http: an https upload never goes on over http",
                        retryable: false))
            }
            uploadURL = resolved
            agreed = .tus
            offset = 0
            return next()

        case .create:
            if (200..<300).contains(s) {
                guard agreed != nil else { return .completed }
                // An early answer to the creation says nothing the rest can be sent on.
                if !response.bodySentWhole { return answeredBeforeTheBodyEnded() }
                let stated = Self.offset(in: response.headers)
                if (stated.map { $0 < length } ?? false) || response.headers["upload-complete"] == "?0" {
                    // A final answer that says the upload is not complete (the server stopped
                    // reading): the rest goes from the offset it states, or from the one it
                    // gives when asked.
                    if let stated, stated < length {
                        offset = stated
                        return next()
                    }
                    return askOffsetAgain()
                }
                offset = length
                return .completed
            }
            guard agreed != nil else { return .failed(RetryPolicy.error(forHTTPStatus: s)) }
            return afterRefusal(response, of: request)

        case .offset:
            if s == 404 || s == 410 { return startOver(s) }
            guard (200..<300).contains(s) else {
                var error = RetryPolicy.error(forHTTPStatus: s)
                error.message += Self.offsetQueryRefusedNote
                return .failed(error)
            }
            guard let text = response.headers["upload-offset"],
                let n = Int64(text.trimmingCharacters(in: .whitespaces)),
                n >= 0, n <= length
            else {
                return .failed(Self.protocolError("the server's offset is missing or out of range"))
            }
            offset = n
            learnLimit(response.headers)
            if n == length, agreed == .tus || response.headers["upload-complete"] == "?1" {
                guard completionRefused else { return .completed }
                // Every byte is there, but the request that completed the upload was refused:
                // not an end to take as a success, with a `HEAD`'s answer as the job's response.
                // The upload is sent again, from a new first request (README).
                forgetUpload()
                return .send(first())
            }
            completionRefused = false
            return next()

        case .append:
            guard (200..<300).contains(s) else { return afterRefusal(response, of: request) }
            // An early answer's `Upload-Offset` says what the server kept; without one, it is asked.
            // So after any tus `PATCH`: tus 1.0.0 answers each with the new offset (a MUST), and an
            // answer without it says nothing of what the server kept (it may hold none of it).
            if response.headers["upload-offset"] == nil && (!response.bodySentWhole || agreed == .tus) {
                guard response.bodySentWhole else { return answeredBeforeTheBodyEnded() }
                // Asked at once while such appends make progress (however many it takes); an
                // append from no later offset than the last one's kept nothing of that one: asked
                // as after a 409, ever more slowly, not resent in a tight loop (a code review).
                if let last = unconfirmedFrom, request.bodyOffset <= last {
                    return askOffsetAgain()
                }
                unconfirmedFrom = request.bodyOffset
                conflicts = 0
                return .send(remember(offsetRequest()))
            }
            conflicts = 0
            var acknowledged = request.bodyOffset + (request.bodyLength ?? 0)
            if let text = response.headers["upload-offset"] {
                // What the server says it holds; an offset before this append's start, past the
                // end, or not a number is a server that cannot be resumed against (as a `HEAD`'s).
                guard let n = Int64(text.trimmingCharacters(in: .whitespaces)), n >= request.bodyOffset, n <= length
                else {
                    let range = "\(request.bodyOffset)...\(length)"
                    return .failed(
                        Self.protocolError("the server's offset after an append (\(text)) is not a number in \(range)"))
                }
                acknowledged = n
            }
            offset = acknowledged
            if offset >= length && (agreed == .tus || request.completes) { return .completed }
            return next()
        }
    }

    /// The `Upload-Offset` a response states, when it is a number.
    private static func offset(in headers: [String: String]) -> Int64? {
        headers["upload-offset"].flatMap { Int64($0.trimmingCharacters(in: .whitespaces)) }.flatMap {
            $0 >= 0 ? $0 : nil
        }
    }

    /// A non-2xx answer to an append (or to an IETF creation the server had accepted with a 104).
    private mutating func afterRefusal(_ response: Response, of request: Request) -> Verdict {
        let s = response.status
        switch s {
        case 404, 410:
            return startOver(s)
        case 409:
            return askOffsetAgain()
        case 413:
            let learnt = Self.maxAppendSize(response.headers["upload-limit"])
            guard let limit = learnt, limit > 0, limit < (request.bodyLength ?? 0) else {
                return .failed(RetryPolicy.error(forHTTPStatus: s))
            }
            appendLimit = limit
            return .send(remember(offsetRequest()))
        default:
            var error = RetryPolicy.error(forHTTPStatus: s)
            if request.completes, response.bodySentWhole, uploadURL != nil {
                // The server refused the request that completed the upload after reading all of it
                // (a 5xx): the next attempt asks its offset as after any 5xx, and resumes if it
                // kept less; if it holds every byte, its "complete" is not taken as the upload's
                // end (``completionRefused``). The next attempt learns it from this request's
                // history entry (``UploadTask``), which a restart keeps.
                completionRefused = true
                error.message += Self.completionRefusedNote
            }
            return .failed(error)
        }
    }

    /// A final 2xx that came before the request's body was all sent (the creation's, or an
    /// append's without an `Upload-Offset`): the server stopped reading part way. Its offset is
    /// asked as after a `409` (in the same attempt, more and more slowly if it keeps doing it),
    /// and the rest sent from there; nothing acknowledged is taken from the answer.
    mutating func answeredBeforeTheBodyEnded() -> Verdict {
        guard uploadURL != nil else { return .failed(Self.protocolError("no upload URL")) }
        return askOffsetAgain()
    }

    /// Asks the server's offset (a `409`, or an answer that came too early), at once for the
    /// first ``maxConflictsInARow`` in a row, then after ``conflictDelay(after:)``.
    private mutating func askOffsetAgain() -> Verdict {
        conflicts += 1
        let ask = remember(offsetRequest())
        let wait = Self.conflictDelay(after: conflicts)
        return wait > 0 ? .sendAfter(ask, seconds: wait) : .send(ask)
    }

    /// The next append from the server's offset.
    private mutating func next() -> Verdict {
        guard let target = uploadURL, let proto = agreed else {
            return .failed(Self.protocolError("no upload URL"))
        }
        let remaining = length - offset
        let size = appendLimit.map { min($0, remaining) } ?? remaining
        let last = offset + size >= length
        var h: [String]
        switch proto {
        case .ietf:
            h = [
                "Upload-Draft-Interop-Version: \(Self.interopVersion)", "Content-Type: application/partial-upload",
                "Upload-Offset: \(offset)", "Upload-Complete: \(last ? "?1" : "?0")",
            ]
            if last, let d = digestBase64 { h.append("Repr-Digest: sha-256=:\(d):") }
        case .tus:
            h = [
                "Tus-Resumable: \(Self.tusVersion)", "Content-Type: application/offset+octet-stream",
                "Upload-Offset: \(offset)",
            ]
        }
        return .send(
            remember(
                Request(
                    purpose: .append, method: "PATCH", url: target, headers: h, bodyOffset: offset, bodyLength: size,
                    completes: last)))
    }

    private func offsetRequest() -> Request {
        let header =
            agreed == .tus
            ? "Tus-Resumable: \(Self.tusVersion)" : "Upload-Draft-Interop-Version: \(Self.interopVersion)"
        return Request(purpose: .offset, method: "HEAD", url: uploadURL ?? url, headers: [header, "Content-Type:"])
    }

    private mutating func remember(_ r: Request) -> Request {
        current = r
        return r
    }

    /// The upload URL is gone: forget it; the next attempt creates a new upload (a retry).
    private mutating func startOver(_ status: Int) -> Verdict {
        forgetUpload()
        return .failed(
            TransferError(
                .httpStatus, "HTTP \(status): the upload URL is gone; a retry starts the upload over from byte 0",
                retryable: true))
    }

    /// Forgets the server's upload: the next attempt creates a new one from byte 0.
    private mutating func forgetUpload() {
        uploadURL = nil
        agreed = nil
        offset = 0
        completionRefused = false
    }

    private mutating func learnLimit(_ headers: [String: String]) {
        if let n = Self.maxAppendSize(headers["upload-limit"]), n > 0 { appendLimit = n }
    }

    // MARK: - Parsing

    /// `max-append-size` of an `Upload-Limit` dictionary (`max-append-size=N, min-size=M`).
    static func maxAppendSize(_ field: String?) -> Int64? {
        guard let field else { return nil }
        for member in field.split(separator: ",") {
            let kv = member.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            if kv.count == 2, kv[0].lowercased() == "max-append-size" {
                return Int64(kv[1].split(separator: ";").first.map(String.init) ?? "")
            }
        }
        return nil
    }

    /// `location` resolved against `base`; nil unless http(s).
    static func resolve(_ location: String, against base: String) -> String? {
        guard let url = URL(string: location, relativeTo: URL(string: base)),
            let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https"
        else { return nil }
        return url.absoluteString
    }

    private static func base64(_ s: String) -> String { Data(s.utf8).base64EncodedString() }

    /// The base64 of the bytes a hex string spells; nil if it is not hex.
    static func base64(ofHex hex: String) -> String? {
        var bytes: [UInt8] = []
        var it = hex.makeIterator()
        while let a = it.next() {
            guard let b = it.next(), let v = UInt8(String([a, b]), radix: 16) else { return nil }
            bytes.append(v)
        }
        return Data(bytes).base64EncodedString()
    }

    /// An answer the protocol does not allow (no `Location` to a tus creation, no offset to a
    /// `HEAD`): not retryable, as a status outside SPEC's retryable list is not — asking the same
    /// server again gets the same answer.
    private static func protocolError(_ message: String) -> TransferError {
        TransferError(.httpStatus, message, retryable: false)
    }
}
