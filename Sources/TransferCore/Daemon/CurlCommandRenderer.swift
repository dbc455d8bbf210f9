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
            if let src = req.source { args += ["-T", src] }
            for f in req.form ?? [] { args += ["-F", f] }
            let method = r.method
            if (req.form == nil && method != "PUT") || (req.form != nil && method != "POST") { args += ["-X", method] }
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
}
