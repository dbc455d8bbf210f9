/// The `DELETE` that tells a server a resumable upload is abandoned (SPEC: `cancel` and `remove`
/// send `DELETE` to the upload URL, once, best effort; `Tus-Resumable` for tus). Builds the
/// request from the job's row; the engine sends it and forgets the answer.
enum UploadTermination {
    /// The request that terminates the job's upload, or nil when it has no upload URL.
    static func options(for r: JobRecord) -> CurlRequestOptions? {
        guard r.kind == .upload, let url = r.uploadUrl else { return nil }
        let req = r.request
        var o = CurlRequestOptions(url: url)
        o.userAgent = "aftransfer/\(AFTransferVersion.string)"
        o.body = .bodiless(method: "DELETE")
        o.caFile = req.cacert
        o.pinnedPublicKey = req.pinPubkey
        o.insecure = req.insecure == true
        let sameOrigin = RedirectPolicy.sameOrigin(r.url, url)
        if sameOrigin { o.userPassword = req.user }
        let owned: Set<String> = ["tus-resumable", "upload-draft-interop-version", "content-type", "content-length"]
        for h in req.headers ?? [] {
            guard let f = try? HeaderField.parse(h), !owned.contains(f.name.lowercased()) else { continue }
            if !sameOrigin && f.isSecret { continue }
            o.headers.append("\(f.name): \(f.value)")
        }
        switch r.resumable {
        case .tus?: o.headers.append("Tus-Resumable: \(ResumableUploadPlan.tusVersion)")
        default: o.headers.append("Upload-Draft-Interop-Version: \(ResumableUploadPlan.interopVersion)")
        }
        return o
    }
}
