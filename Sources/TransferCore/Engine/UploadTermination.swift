/// The `DELETE` that tells a server a resumable upload is abandoned (SPEC: `cancel` and `remove`
/// send `DELETE` to the upload URL, once, best effort; `Tus-Resumable` for tus). Builds the
/// request from the job's row; the engine sends it and forgets the answer.
enum UploadTermination {
    /// The request that terminates the job's upload, or nil when it has no upload URL.
    static func options(for r: JobRecord) -> CurlRequestOptions? {
        guard r.kind == .upload, let url = r.uploadUrl else { return nil }
        let owned: Set<String> = ["tus-resumable", "upload-draft-interop-version", "content-type", "content-length"]
        var o = CurlRequestOptions.job(
            r.request, url: url, origin: r.url, sendCredentials: RedirectPolicy.sameOrigin(r.url, url), owned: owned)
        o.body = .bodiless(method: "DELETE")
        switch r.resumable {
        case .tus?: o.headers.append("Tus-Resumable: \(ResumableUploadPlan.tusVersion)")
        default: o.headers.append("Upload-Draft-Interop-Version: \(ResumableUploadPlan.interopVersion)")
        }
        return o
    }
}
