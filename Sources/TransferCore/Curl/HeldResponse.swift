/// What a held response's callbacks were given while it was held (``CurlEasy/holdsResponse``):
/// its header chunks and body bytes, kept in order up to ``limit`` bytes and handed to the owner's
/// callbacks on release. Reading a small answer whole, rather than pausing libcurl at its status
/// line, gives its connection back at once: held responses left paused sat on the host's
/// connections (`--max-per-host`), and the next requests waited for one. Loop-thread only.
struct HeldResponse {
    /// The most bytes kept (headers and body); past it libcurl is paused where it is, and hands
    /// over the rest itself once released.
    static let limit = 256 << 10

    /// Header chunks (a line each, as libcurl gives them), then the body.
    private var headers: [[UInt8]] = []
    private var body: [UInt8] = []
    /// Body bytes already handed over (a hand-over a callback paused goes on from here).
    private var delivered = 0
    private var size = 0

    /// Whether everything kept was handed over (or nothing was kept).
    var isHandedOver: Bool { headers.isEmpty && delivered == body.count }

    /// Keeps `chunk` if it fits: false when it would pass ``limit`` (the caller pauses libcurl).
    mutating func keep(_ chunk: UnsafeRawBufferPointer, header: Bool) -> Bool {
        if chunk.isEmpty { return true }  // an empty body's call: nothing to hand over
        guard size + chunk.count <= Self.limit else { return false }
        size += chunk.count
        if header { headers.append(Array(chunk)) } else { body.append(contentsOf: chunk) }
        return true
    }

    /// Takes the header chunks to hand over (each once).
    mutating func takeHeaders() -> [[UInt8]] {
        defer { headers = [] }
        return headers
    }

    /// The next body bytes to hand over, at most `most`; empty when all were.
    func nextBody(most: Int) -> ArraySlice<UInt8> {
        body[delivered..<min(body.count, delivered + most)]
    }

    /// `count` body bytes were taken.
    mutating func bodyTaken(_ count: Int) { delivered += count }
}
