import CUV

/// Gives freed heap memory back to the system. glibc keeps what a burst of work freed (a flood of
/// clients, a long list) in its arenas; `malloc_trim` returns it, so the daemon's memory comes
/// back to where it was once the burst is over.
public enum HeapTrimmer {
    /// Returns the free memory at the top of the heap and in its arenas to the system.
    public static func trim() {
        _ = aft_malloc_trim()
    }
}
