import CUV
import Foundation

/// A file the daemon writes for the user: a download's target, or an upload's `--response`
/// file. Bytes go to its part (`<path>.aftpart`) and are moved into place only when verified.
/// The one place for directory checks and creation, destination clashes, the verified rename
/// and the directory fsync after it. Loop-thread only.
struct Destination {
    /// The suffix of part files.
    static let partSuffix = ".aftpart"

    /// The absolute path of the final file.
    let path: String

    /// The directory the file goes in.
    var directory: String { Self.directory(of: path) }

    /// The directory of `path`, as `NSString.deletingLastPathComponent` gives it: on bytes for an
    /// absolute path without a trailing or doubled slash at its end (every path the engine makes),
    /// which cost ~28 k instructions a call through `NSString`.
    static func directory(of path: String) -> String {
        let utf8 = path.utf8
        let slash = UInt8(ascii: "/")
        if utf8.first == slash, utf8.last != slash, let cut = utf8.lastIndex(of: slash) {
            if cut == utf8.startIndex { return "/" }
            if utf8[utf8.index(before: cut)] != slash { return String(path[..<cut]) }
        }
        return (path as NSString).deletingLastPathComponent
    }

    /// `name` in `directory`, as `NSString.appendingPathComponent` gives it (on bytes for a
    /// directory without a trailing slash).
    static func path(of name: String, in directory: String) -> String {
        guard let last = directory.utf8.last, last != UInt8(ascii: "/") else {
            return (directory as NSString).appendingPathComponent(name)
        }
        return directory + "/" + name
    }

    /// The part file: `<path>.aftpart`, or, when that name would pass the 255-byte limit of a
    /// file name, a shortened name with a digest of the full one (still a pure function of the
    /// path, so recovery finds it).
    var partPath: String { Self.partPath(path) }

    /// The part file of `path` (see ``partPath``).
    static func partPath(_ path: String) -> String {
        // The common case on bytes, without bridging to NSString: a last component short enough.
        let utf8 = path.utf8
        if utf8.last != UInt8(ascii: "/") {
            let nameStart = utf8.lastIndex(of: UInt8(ascii: "/")).map { utf8.index(after: $0) } ?? utf8.startIndex
            if utf8.distance(from: nameStart, to: utf8.endIndex) + partSuffix.utf8.count <= 255 {
                return path + partSuffix
            }
        }
        let name = (path as NSString).lastPathComponent
        if name.utf8.count + partSuffix.utf8.count <= 255 { return path + partSuffix }
        let short = (shortPrefix(name) + "." + Sha256.hex(of: Array(name.utf8)).prefix(16)) + partSuffix
        return ((path as NSString).deletingLastPathComponent as NSString).appendingPathComponent(short)
    }

    private static func shortPrefix(_ name: String) -> String {
        var prefix = ""
        for ch in name.unicodeScalars {
            if prefix.utf8.count + String(ch).utf8.count > 200 { break }
            prefix.unicodeScalars.append(ch)
        }
        return prefix
    }

    /// Checks that the directory exists, or creates each missing level with `mode` when asked
    /// (`--create-dirs`).
    /// - Throws: `destination_missing_dir`.
    static func ensureDirectory(_ dir: String, create: Bool, mode: mode_t) throws {
        var isDir: ObjCBool = false
        if FileManager.default.fileExists(atPath: dir, isDirectory: &isDir) {
            if isDir.boolValue { return }
            throw TransferError(.destinationMissingDir, "\(dir) is not a directory", retryable: false)
        }
        guard create else {
            throw TransferError(
                .destinationMissingDir, "directory \(dir) does not exist (use --create-dirs)", retryable: false)
        }
        var missing: [String] = []
        var cur = dir
        while !cur.isEmpty && cur != "/" && !FileManager.default.fileExists(atPath: cur) {
            missing.append(cur)
            cur = (cur as NSString).deletingLastPathComponent
        }
        for d in missing.reversed() {
            // Each level with the user's mode (the daemon's umask is 077).
            if mkdir(d, mode) != 0 && errno != EEXIST {
                let e = errno
                throw TransferError(
                    .destinationMissingDir, "cannot create \(d): \(String(cString: strerror(e)))", retryable: false)
            }
            chmod(d, mode)
        }
    }

    /// The refusal of a request whose file (a download's `destination`, an upload's `response`) an
    /// earlier request of the same list holds, by that one's index: one wording for a list in one
    /// message and one sent in parts (the CLI turns the index into the list's line).
    static func heldByEarlierRequest(_ path: String, download: Bool, earlier: Int) -> TransferError {
        let field = download ? "destination" : "response"
        return TransferError(
            .destinationExists, "\(field): \(path) is also the file of request \(earlier)", retryable: false)
    }

    /// A `destination_exists` error if another job holds this path (`holder`), or the file
    /// exists and may not be replaced.
    func clash(replace: Bool, heldBy holder: Int64?) -> TransferError? {
        if let holder {
            // The job is named (0: another request of the same list), so that the user knows
            // which one to wait for, or to remove.
            let which = holder > 0 ? " (job \(holder))" : ""
            return TransferError(.destinationExists, "another job downloads to \(path)\(which)", retryable: false)
        }
        var st = stat()
        if !replace && stat(path, &st) == 0 {
            return TransferError(.destinationExists, "\(path) exists (use --replace)", retryable: false)
        }
        return nil
    }

    /// Moves a verified, synced part into place and makes the rename durable with a (coalesced)
    /// fsync of the directory; `done(nil)` when both are done. Both run in one work item on
    /// libuv's pool: the rename is refused atomically when the destination exists (or is a
    /// directory) and may not be replaced (`renameat2`, one call in place of a look and a rename
    /// on the loop), then ``DirectorySyncer/syncAfterRename(_:)`` shares the directory's fsync.
    /// The caller has already recorded that the job is finalizing (bookkeeping before the rename
    /// is what lets recovery recognize a rename that a crash interrupted).
    func moveIntoPlace(
        from part: String, replace: Bool, syncer: DirectorySyncer, _ done: @escaping (TransferError?) -> Void
    ) {
        let path = self.path
        let directory = self.directory
        WorkPool.run(syncer.loop, { Self.move(part, to: path, in: directory, replace: replace, syncer: syncer) }) {
            done(Self.moveError($0, part: part, to: path, in: directory))
        }
    }

    /// Whether `path` holds the download a crash interrupted between its rename and the row that
    /// records its end, for recovery of a job that was finalizing and whose part is gone. A file
    /// of another length is not it. A small one (up to ``DownloadTask/heldBodyLimit``) may have
    /// been written and moved in one work item, after which a file that was there before (with
    /// `--replace`) would look the same: its digest must be the one recorded. A bigger one went
    /// through a part that existed until the rename, so its presence is proof enough.
    static func holdsFinishedDownload(_ path: String, size: Int64?, sha256: String?) -> Bool {
        var st = stat()
        guard stat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return false }
        let length = Int64(st.st_size)
        if let size, size != length { return false }
        guard length <= Int64(DownloadTask.heldBodyLimit), let sha256 else { return true }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let digest = Sha256()
        return digest.update(fd: fd, to: length) && digest.finalizeHex() == sha256.lowercased()
    }

    /// The rename and the directory's fsync (a pool thread): 0, ``renamedButNotSynced`` or the
    /// rename's errno.
    private static func move(
        _ part: String, to path: String, in directory: String, replace: Bool, syncer: DirectorySyncer
    ) -> Int32 {
        let rc = replace ? Glibc.rename(part, path) : aft_rename_noreplace(part, path)
        if rc != 0 { return errno }
        return syncer.syncAfterRename(directory) == 0 ? 0 : renamedButNotSynced
    }

    /// The error of ``move(_:to:in:replace:syncer:)``'s result, or nil when the file is in place.
    static func moveError(_ e: Int32, part: String, to path: String, in directory: String) -> TransferError? {
        switch e {
        case 0:
            return nil
        case renamedButNotSynced:
            // The file is in place; a failed directory fsync only weakens power-loss
            // durability, which the log says.
            Log.info("cannot fsync \(directory) after a rename")
            return nil
        case EEXIST, EISDIR, ENOTEMPTY:
            return TransferError(.destinationExists, "\(path) exists", retryable: false)
        default:
            return FileErrors.error(e, "cannot move \(part) into \(path)")
        }
    }

    /// The work item's result when the rename succeeded and the directory's fsync did not.
    private static let renamedButNotSynced: Int32 = -1
}
