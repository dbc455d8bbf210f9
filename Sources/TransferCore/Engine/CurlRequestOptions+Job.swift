extension CurlRequestOptions {
    /// A request of a job to `url`: the user agent, the job's TLS settings, its credentials when
    /// `sendCredentials` (not after a redirect left their origin), and its headers except those
    /// named in `owned` (lowercase; the request sets them itself) and, without credentials, the
    /// secret ones; a user's `Host` only while `url` is on the host of the job's URL, `origin`
    /// (as curl: a redirect to another host must not ask it for the first one's site). A
    /// transfer's own requests and an upload's terminating `DELETE` start here.
    static func job(
        _ req: TransferRequest, url: String, origin: String, sendCredentials: Bool, owned: Set<String>
    ) -> CurlRequestOptions {
        var o = CurlRequestOptions(url: url)
        o.userAgent = "aftransfer/\(AFTransferVersion.string)"
        if sendCredentials { o.userPassword = req.user }
        o.caFile = req.cacert
        o.pinnedPublicKey = req.pinPubkey
        o.insecure = req.insecure == true
        for h in req.headers ?? [] {
            guard let f = try? HeaderField.parse(h) else { continue }
            if !sendCredentials && f.isSecret { continue }
            if f.name.lowercased() == "host" && url != origin && !RedirectPolicy.sameHost(origin, url) { continue }
            if owned.contains(f.name.lowercased()) { continue }
            o.headers.append("\(f.name): \(f.value)")
        }
        return o
    }
}
