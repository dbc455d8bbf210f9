/// The random numbers behind retry jitter: SplitMix64, seeded once from the system's generator.
/// Jitter needs spread, not secrecy; `Double.random(in:)` with the system generator made a
/// `getrandom` system call for every transition the job machine decided (two a job with
/// thousands of small files).
public struct JitterSource: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// A source seeded from the system's generator.
    public init() {
        var system = SystemRandomNumberGenerator()
        state = system.next()
    }

    /// A source with a fixed seed (for tests).
    public init(seed: UInt64) { state = seed }

    /// The next 64 random bits (SplitMix64).
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A jitter sample in `-1...1`.
    public mutating func sample() -> Double { Double.random(in: -1...1, using: &self) }
}
