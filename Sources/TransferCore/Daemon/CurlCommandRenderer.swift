import Foundation

/// The curl command equivalent to a job (Alamofire's cURL output), secrets redacted.
public enum CurlCommandRenderer {
    /// The digits of a `\xHH` escape.
    private static let hexDigits = Array("0123456789ABCDEF")

    /// Quotes one shell word. A word with control characters (a file name may have them), or
    /// bidirectional controls (U+202E and kin, which reorder what a terminal shows), is written
    /// `$'…'` with each of their bytes as `\xHH` (bash, zsh and ksh read it back exactly), so that
    /// printing the command never sends them to the terminal.
    public static func quote(_ s: String) -> String {
        if !s.isEmpty && s.allSatisfy({ $0.isLetter || $0.isNumber || "-_./:=@,+%".contains($0) }) { return s }
        guard s.unicodeScalars.contains(where: needsEscape) else {
            return "'" + s.replacingOccurrences(of: "'", with: "'\\''") + "'"
        }
        var out = "$'"
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\\": out += "\\\\"
            case "'": out += "\\'"
            case _ where needsEscape(scalar):
                for byte in String(scalar).utf8 {
                    out += "\\x" + String(hexDigits[Int(byte >> 4)]) + String(hexDigits[Int(byte & 15)])
                }
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "'"
    }

    private static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        scalar.properties.generalCategory == .control || scalar.properties.isBidiControl
    }

    /// Renders `curl …` for the stored job.
    public static func render(_ r: JobRecord) -> String {
        let req = r.request
        // --globoff: `[]` and `{}` in a URL or a file name are themselves, as for the daemon.
        var args = ["curl", "--globoff", "--fail", "--location", "--proto", "=http,https", "--max-redirs", "10"]
        // From https, every hop stays https (SPEC: never https→http), as the daemon follows them.
        if r.url.lowercased().hasPrefix("https:") { args += ["--proto-redir", "=https"] }
        args += ["-A", "aftransfer/\(AFTransferVersion.string)"]
        if r.kind == .download {
            args += ["-H", "Accept-Encoding: identity"]
            if let dest = r.destination {
                // No `-C -`: curl would resume into whatever file is at the destination, with no
                // validator, splicing two versions (the daemon resumes only its own part, with
                // `If-Range`); the command fetches the whole file, as a `--replace` job ends.
                args += ["-o", dest]
                if req.createDirs == true { args.append("--create-dirs") }
            } else {
                args += ["-O", "-J"]
                if let dir = req.directory { args += ["--output-dir", dir] }
                if req.createDirs == true { args.append("--create-dirs") }
            }
        } else {
            let mode = req.resumableMode
            if let src = req.source, mode != .tus {
                args += ["-T", src]
                // curl adds the file's name to a URL whose path is empty or ends with `/`; the
                // daemon sends to the URL as given.
                if let target = requestTargetCurlWouldChange(r.url) { args += ["--request-target", target] }
                // The type the daemon sends (never libcurl's default), unless a -H gives one.
                if HeaderField.last(named: "content-type", in: req.headers) == nil {
                    args += ["-H", "Content-Type: \(MIMEType.guess(forPath: src))"]
                }
            }
            for spec in req.form ?? [] { args += formArguments(spec) }
            // No 100-continue round trip, as the daemon sends it, unless the user asks for one.
            if HeaderField.last(named: "expect", in: req.headers) == nil {
                args += ["-H", "Expect:"]
            }
            let method = r.firstMethod
            if (req.form == nil && method != "PUT") || (req.form != nil && method != "POST") { args += ["-X", method] }
            args += resumableHeaders(r, mode: mode)
            if let resp = req.response { args += ["-o", resp] }
        }
        for h in req.headers ?? [] {
            guard let f = try? HeaderField.parse(h) else {
                args += ["-H", h]
                continue
            }
            // A download's coding is the daemon's (identity, above), whatever a stored job's -H says.
            if r.kind == .download && f.name.lowercased() == "accept-encoding" { continue }
            args += ["-H", f.redactedLine]
        }
        var url = URLRedaction.redact(r.url)
        if let user = req.user {
            let name = user.split(separator: ":", maxSplits: 1).first.map(String.init) ?? ""
            args += ["--user", "\(name):***"]
        } else if let comps = URLComponents(string: r.url), let name = comps.user {
            if name.contains(":"), var shown = URLComponents(string: url) {
                // `--user` ends the name at its first colon: a name holding one (`u%3Aa`) stays
                // in the URL, still encoded, the password redacted.
                shown.percentEncodedUser = comps.percentEncodedUser
                shown.percentEncodedPassword = comps.password == nil ? nil : "***"
                url = shown.string ?? url
            } else {
                // Credentials in the URL move to --user, password redacted, so the command still
                // names them. A user alone is sent with an empty password (`USER:`), as `--user
                // USER:` says.
                args += ["--user", comps.password == nil ? "\(name):" : "\(name):***"]
            }
        }
        if let rate = req.limitRate {
            // In bytes a second: curl takes no `1.5M`, `500KB` or `2MiB`, which RATE does.
            args += ["--limit-rate", RateParser.parse(rate).map(String.init) ?? rate]
        }
        // The job's retries, its default included: curl alone would not retry at all.
        args += ["--retry", "\(req.retries ?? RetryPolicy.defaultRetryLimit)"]
        if let c = req.cacert { args += ["--cacert", c] }
        if let p = req.pinPubkey { args += ["--pinnedpubkey", p] }
        if req.insecure == true { args.append("--insecure") }
        args.append(url)
        return args.map(quote).joined(separator: " ")
    }

    /// The request target (`/path?query`) of an upload URL whose path is empty or ends with `/`
    /// (to which `curl -T FILE` would add FILE's name), or nil.
    static func requestTargetCurlWouldChange(_ url: String) -> String? {
        // Taken from the URL's text, as libcurl sends it (URLComponents would percent-encode a
        // `[` of the query): what follows the authority, up to a fragment.
        guard let scheme = url.range(of: "://") else { return nil }
        let afterAuthority = url[scheme.upperBound...]
        let start = afterAuthority.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? afterAuthority.endIndex
        var target = String(afterAuthority[start...])
        if let hash = target.firstIndex(of: "#") { target = String(target[..<hash]) }
        let path = target.prefix { $0 != "?" }
        guard path.isEmpty || path.hasSuffix("/") else { return nil }
        return path.isEmpty ? "/" + target : target
    }

    /// One `--form` part as curl takes it: a text part with `--form-string` (with `-F`, curl would
    /// read a file for a value starting with `<` or `@`, and cut it at `;`), a file part with `-F`
    /// and the type the daemon sends.
    private static func formArguments(_ spec: String) -> [String] {
        switch try? FormPart.parse(spec) {
        case .field(let name, let value)?:
            return ["--form-string", "\(name)=\(value)"]
        case .file(let name, let path, let contentType, let filename)?:
            let type = contentType ?? MIMEType.guess(forPath: path)
            return ["-F", FormPart.file(name: name, path: path, contentType: type, filename: filename).spec]
        case nil:
            return ["-F", spec]
        }
    }

    /// The resumable protocol's headers of an upload's first request (SPEC "Resumable uploads"):
    /// IETF creation with `Upload-Complete: ?1`, or tus creation (`POST`, no body).
    private static func resumableHeaders(_ r: JobRecord, mode: ResumableMode) -> [String] {
        guard mode != .off, let src = r.request.source else { return [] }
        var plan = ResumableUploadPlan(
            mode: mode, url: r.url, method: r.method, length: r.total ?? r.sourceSize ?? 0,
            contentType: MIMEType.guess(forPath: src), filename: URL(fileURLWithPath: src).lastPathComponent,
            sha256Hex: r.request.sha256, uploadURL: nil, agreed: nil, offset: 0, appendLimit: nil)
        return plan.first().headers.filter { !$0.lowercased().hasPrefix("content-type:") }.flatMap { ["-H", $0] }
    }
}
