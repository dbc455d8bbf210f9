import Foundation

/// ``RPCClient`` calls named by ``RPCMethod`` (the client itself takes the wire name).
extension RPCClient {
    /// Sends one request and waits for its result.
    /// - Parameters:
    ///   - method: the method.
    ///   - params: the params object, or nil to send none.
    /// - Returns: the result.
    /// - Throws: ``RPCError`` when the daemon answers with an error; ``ClientError`` otherwise.
    @discardableResult
    public func call(method: RPCMethod, params: JSONValue? = nil) throws -> JSONValue {
        try call(method: method.rawValue, params: params)
    }

    /// Sends one request with typed params and decodes its result.
    /// - Parameters:
    ///   - method: the method.
    ///   - params: the params, encoded as an object.
    ///   - result: the result's type.
    /// - Returns: the decoded result.
    /// - Throws: ``RPCError`` when the daemon answers with an error; ``ClientError`` otherwise.
    public func call<P: Encodable, R: Decodable>(method: RPCMethod, params: P, as result: R.Type = R.self) throws -> R {
        try call(method: method.rawValue, params: params, as: result)
    }
}
