/// The engine is what the RPC handlers serve (``JobService``): its methods have the protocol's
/// signatures.
extension Engine: JobService {}
