/// A refused request of `transfer.addMany`: its index in the batch (from 0) and why.
public struct BatchRefusal: Error, Equatable, Sendable {
    /// The index of the first refused request, counted from the batch's first request.
    public var index: Int
    /// Why it was refused.
    public var error: TransferError

    /// Creates a refusal.
    public init(index: Int, error: TransferError) {
        self.index = index
        self.error = error
    }
}
