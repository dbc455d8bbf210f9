import Foundation

/// The curl command equivalent to a job (Alamofire's cURL output), secrets redacted.
public enum CurlCommandRenderer {
    /// Quotes one shell word.
    public static func quote(_ s: String) -> String {
        if !s.isEmpty && s.allSatisfy({ $0.isLetter || $0.isNumber || "-_./:=@,+%".contains($0) }) { return s }
        return "'" + s.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }

    /// Renders `curl …` for the stored job.
    public static func render(_ r: JobRecord) -> String {
        let req = r.request
        var args = ["curl", "--fail", "--location", "--proto", "=http,https", "--max-redirs", "10"]
        if r.kind == .download {
            args += ["-H", "Accept-Encoding: identity"]
            if let dest = r.destination {
                args += ["-C", "-", "-o", dest]
            } else {
                args += ["-O", "-J"]
                if let dir = req.directory { args += ["--output-dir", dir] }
                if req.createDirs == true { args.append("--create-dirs") }
            }
        } else {
            let mode = req.resumableMode
            if let src = req.source, mode != .tus { args += ["-T", src] }
            for f in req.form ?? [] { args += ["-F", f] }
            let method = mode == .tus ? "POST" : r.method
            if (req.form == nil && method != "PUT") || (req.form != nil && method != "POST") { args += ["-X", method] }
            args += resumableHeaders(r, mode: mode)
            if let resp = req.response { args += ["-o", resp] }
        }
        for h in req.headers ?? [] {
            if let f = try? HeaderField.parse(h) { args += ["-H", f.redactedLine] } else { args += ["-H", h] }
        }
        if let user = req.user {
            let name = user.split(separator: ":", maxSplits: 1).first.map(String.init) ?? ""
            args += ["--user", "\(name):***"]
        } else if let comps = URLComponents(string: r.url), let name = comps.user {
            // Credentials in the URL move to --user, password redacted, so the command still names them.
            args += ["--user", comps.password == nil ? name : "\(name):***"]
        }
        if let rate = req.limitRate { args += ["--limit-rate", rate] }
        if let retries = req.retries { args += ["--retry", "\(retries)"] }
        if let c = req.cacert { args += ["--cacert", c] }
        if let p = req.pinPubkey { args += ["--pinnedpubkey", p] }
        if req.insecure == true { args.append("--insecure") }
        args.append(URLRedaction.redact(r.url))
        return args.map(quote).joined(separator: " ")
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
