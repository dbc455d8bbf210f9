import Foundation
import TransferBase

/// Plans how a list's requests travel to `transfer.addMany` (SPEC "Scale"): in one message when
/// the encoded line fits, else in parts of one batch, each line at most ``maximumLineLength``
/// bytes. Pure: it measures, it does not send.
struct BatchSplitter {
    /// The longest line the CLI sends: the daemon refuses lines over 1 MiB; this leaves a margin.
    static let defaultMaximumLineLength = 900 * 1024
    /// The method that queues many requests at once.
    static let method = RPCMethod.transferAddMany.rawValue

    /// How the requests are sent.
    enum Plan: Equatable {
        /// All of them in one `{"requests": [...]}` message.
        case single
        /// Consecutive ranges of request indexes, one `{"batch", "requests", "final"}` part each.
        case parts([Range<Int>])
    }

    /// One request that does not fit in a line by itself.
    struct RequestTooLarge: Error, Equatable {
        /// The request's index, from 0.
        var index: Int
        /// Its encoded size in bytes.
        var size: Int
    }

    /// The longest line allowed, in bytes, newline included.
    var maximumLineLength = BatchSplitter.defaultMaximumLineLength

    /// Plans the messages for requests of the given encoded sizes.
    /// - Parameters:
    ///   - sizes: each request's encoded length in bytes, in order.
    ///   - singleOverhead: the bytes of a single message with no requests (envelope, newline).
    ///   - partOverhead: the bytes of a part with no requests (envelope, batch id, `final`, newline).
    /// - Returns: ``Plan/single`` when everything fits in one line, else the parts' ranges.
    /// - Throws: ``RequestTooLarge`` for the first request that cannot fit in any part.
    func plan(sizes: [Int], singleOverhead: Int, partOverhead: Int) throws -> Plan {
        // Requests in a JSON array take their own bytes plus one comma between two.
        let total = sizes.reduce(0, +) + max(sizes.count - 1, 0)
        if singleOverhead + total <= maximumLineLength { return .single }
        var parts: [Range<Int>] = []
        var start = 0
        var length = partOverhead
        for (index, size) in sizes.enumerated() {
            guard partOverhead + size <= maximumLineLength else { throw RequestTooLarge(index: index, size: size) }
            let added = index == start ? size : size + 1
            if length + added > maximumLineLength {
                parts.append(start..<index)
                start = index
                length = partOverhead + size
            } else {
                length += added
            }
        }
        parts.append(start..<sizes.count)
        return .parts(parts)
    }

    /// The params of a single message: `{"requests": [...]}`.
    static func singleParams(_ requests: [JSONValue]) -> JSONValue {
        .object(["requests": .array(requests)])
    }

    /// The params of one part: `{"batch": ID, "requests": [...], "final": true|false}`.
    static func partParams(batch: String, requests: [JSONValue], final: Bool) -> JSONValue {
        .object(["batch": .string(batch), "requests": .array(requests), "final": .bool(final)])
    }

    /// A fresh batch id: 16 random hex digits.
    static func newBatchID() -> String {
        String(format: "%016llx", UInt64.random(in: 0...UInt64.max))
    }

    /// The encoded length of a request line carrying `params`, as ``RPCClient`` sends it (newline
    /// included), with room for any request id.
    static func lineLength(params: JSONValue) throws -> Int {
        let envelope: JSONValue = .object([
            "jsonrpc": .string("2.0"), "id": .int(Int64.max), "method": .string(method), "params": params,
        ])
        var writer = JobJSONWriter()
        writer.value(envelope)
        return writer.bytes.count + 1
    }

    /// The overheads for ``plan(sizes:singleOverhead:partOverhead:)``: the lines of a single
    /// message and of a (non-final, the longer) part, with no requests.
    static func overheads() throws -> (single: Int, part: Int) {
        let single = try lineLength(params: singleParams([]))
        let part = try lineLength(params: partParams(batch: newBatchID(), requests: [], final: false))
        return (single, part)
    }

    /// One request's params as the JSON text ``RPCClient`` sends, written straight from its
    /// fields: the same bytes as `Codable` and a tree give (``JobJSONWriter/json(_:)``), without
    /// them (encoding 2,000 requests that way was a twelfth of the CLI's time to queue them).
    static func encode(_ request: TransferRequest) -> [UInt8] {
        var writer = JobJSONWriter(capacity: 256)
        writer.write(request)
        return writer.bytes
    }

    /// The params of a message as JSON text, from requests already encoded (``encode(_:)``): a
    /// single message's when `batch` is nil, else one part's; the same bytes as
    /// ``singleParams(_:)`` and ``partParams(batch:requests:final:)`` give.
    static func params(batch: String?, final: Bool, requests: ArraySlice<[UInt8]>) -> [UInt8] {
        var writer = JobJSONWriter(capacity: requests.reduce(64) { $0 + $1.count + 1 })
        if let batch {
            writer.key(#"{"batch":"#)
            writer.string(batch)
            writer.key(#","final":"#)
            writer.bool(final)
            writer.key(#","requests":["#)
        } else {
            writer.key(#"{"requests":["#)
        }
        for (i, request) in requests.enumerated() {
            if i > 0 { writer.bytes.append(UInt8(ascii: ",")) }
            writer.raw(request)
        }
        writer.key("]}")
        return writer.bytes
    }
}
