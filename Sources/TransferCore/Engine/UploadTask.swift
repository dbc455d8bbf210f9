import CCurl
import Foundation

/// One attempt of an upload (SPEC "Uploads"). Not built yet: fails without retry.
final class UploadTask: TransferTask {
    override var isUpload: Bool { true }
    override func prepare() throws {
        throw TransferError(.invalidRequest, "uploads are not implemented yet", retryable: false)
    }
}
