/// Guesses a `Content-Type` from a file name (SPEC "Uploads": the user's `-H` if given, else
/// guessed from the extension, else `application/octet-stream`).
public enum MIMEType {
    /// The type of anything not in ``typesByExtension``.
    public static let fallback = "application/octet-stream"

    /// Common extensions (lowercase, without the dot) and their types. Text types carry no
    /// charset: the file's encoding is not known.
    public static let typesByExtension: [String: String] = [
        // Text and documents
        "txt": "text/plain", "text": "text/plain", "log": "text/plain", "md": "text/markdown",
        "csv": "text/csv", "tsv": "text/tab-separated-values",
        "html": "text/html", "htm": "text/html", "css": "text/css",
        "js": "text/javascript", "mjs": "text/javascript",
        "json": "application/json", "xml": "application/xml", "yaml": "application/yaml",
        "yml": "application/yaml", "pdf": "application/pdf", "rtf": "application/rtf",
        "wasm": "application/wasm",
        // Images
        "jpg": "image/jpeg", "jpeg": "image/jpeg", "png": "image/png", "gif": "image/gif",
        "svg": "image/svg+xml", "webp": "image/webp", "ico": "image/vnd.microsoft.icon",
        "bmp": "image/bmp", "tif": "image/tiff", "tiff": "image/tiff", "avif": "image/avif",
        // Audio and video
        "mp3": "audio/mpeg", "wav": "audio/wav", "ogg": "audio/ogg", "flac": "audio/flac",
        "m4a": "audio/mp4", "mp4": "video/mp4", "m4v": "video/mp4", "webm": "video/webm",
        "mkv": "video/x-matroska", "mov": "video/quicktime", "avi": "video/x-msvideo",
        // Archives and binaries
        "zip": "application/zip", "gz": "application/gzip", "tgz": "application/gzip",
        "tar": "application/x-tar", "bz2": "application/x-bzip2", "xz": "application/x-xz",
        "zst": "application/zstd", "7z": "application/x-7z-compressed",
        "iso": "application/x-iso9660-image", "bin": "application/octet-stream",
        "deb": "application/vnd.debian.binary-package", "rpm": "application/x-rpm",
        "jar": "application/java-archive",
    ]

    /// The type of the file at `path`, from its extension (case-insensitive): the text after the
    /// last `.` of the last path component. A leading dot (`.bashrc`) is not an extension.
    ///
    /// - Parameter path: A file path or name.
    /// - Returns: The type, or ``fallback``.
    public static func guess(forPath path: String) -> String {
        let component = path.split(separator: "/", omittingEmptySubsequences: true).last ?? ""
        guard let dot = component.lastIndex(of: "."), dot != component.startIndex else { return fallback }
        let ext = component[component.index(after: dot)...].lowercased()
        return typesByExtension[ext] ?? fallback
    }
}
