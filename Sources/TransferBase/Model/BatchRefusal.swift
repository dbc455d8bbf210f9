/// A refused request of a batch (`transfer.addMany`): nothing of the batch was queued.
public struct BatchRefusal: Error, Sendable, Equatable {
    /// The index of the first refused request, from 0 (across all parts of a batch).
    public var index: Int
    /// Why it was refused.
    public var error: TransferError

    /// Creates a refusal of the request at `index`.
    public init(index: Int, error: TransferError) {
        self.index = index
        self.error = error
    }
}
