import TransferBase

/// Hands over the elements of a result's top-level arrays one at a time as their bytes arrive
/// (`{"jobs":[{…},…],"refused":[{…},…]}`), each to be parsed alone: a control command on 100,000
/// jobs held the whole parsed answer (300 MiB) to print one line a job.
///
/// A small state machine over JSON's lexical structure, as ``JobIdScanner``: it tracks nesting
/// and strings (with escapes), reads each member name of the result object, and collects the
/// bytes of every object directly inside an array member. Anything it does not expect makes
/// ``isComplete`` false; the caller then reports a protocol violation.
struct ResultElementScanner {
    /// Receives a member's name and one element's bytes.
    typealias Sink = (_ member: String, _ element: [UInt8]) throws -> Void

    private let sink: Sink
    private var depth = 0
    private var string = JSONStringReader()
    /// At depth 1, before a member's name.
    private var expectingName = false
    private var readingName = false
    private var name: [UInt8] = []
    private var member = ""
    /// The element being collected (an object directly inside a member's array).
    private var element: [UInt8] = []
    private var inElement = false
    private var broken = false
    private var done = false

    /// Creates a scanner that gives each element to `sink`.
    init(sink: @escaping Sink) { self.sink = sink }

    /// Whether a whole result object was read and nothing was out of place.
    var isComplete: Bool { done && !broken }

    /// Feeds the next bytes of the result.
    mutating func feed(_ bytes: UnsafeRawBufferPointer) throws {
        for b in bytes where !broken { try step(b) }
    }

    private mutating func step(_ b: UInt8) throws {
        if inElement { element.append(b) }
        if string.isOpen {
            if string.take(b) {
                if readingName { name.append(b) }
            } else if readingName {
                readingName = false
                member = String(decoding: name, as: UTF8.self)
            }
            return
        }
        switch b {
        case UInt8(ascii: "\""):
            string.open()
            if depth == 1 && expectingName {
                expectingName = false
                readingName = true
                name.removeAll(keepingCapacity: true)
            }
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            if depth == 2 && b == UInt8(ascii: "{") && !inElement {
                inElement = true
                element.removeAll(keepingCapacity: true)
                element.append(b)
            }
            depth += 1
            if depth == 1 { expectingName = b == UInt8(ascii: "{") }
        case UInt8(ascii: "}"), UInt8(ascii: "]"):
            depth -= 1
            if depth < 0 {
                broken = true
            } else if depth == 2 && inElement {
                inElement = false
                try sink(member, element)
            } else if depth == 0 {
                done = true
            }
        case UInt8(ascii: ","):
            if depth == 1 { expectingName = true }
        default:
            break
        }
    }
}
