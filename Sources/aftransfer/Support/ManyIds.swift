/// Ids given by the thousand (`aftransfer pause $(seq 1 20000)`), kept away from
/// swift-argument-parser: it parses n positional values in O(n²) time (each value's origins are
/// merged into a set that is copied for every value), and 20,000 ids took 6 s before any work.
/// ``take(from:)`` keeps the first ``keptForParsing`` ids of an id-taking command in the
/// arguments, so that the parser still checks the command line as a whole, and holds the rest
/// (plain decimal ids, in order) for the command to add to its own (``all(_:)``).
enum ManyIds {
    /// The commands whose positional arguments are job ids.
    static let commands: Set<String> = ["pause", "resume", "cancel", "retry", "remove", "wait", "watch"]
    /// The options of those commands that take a value (the value is not an id).
    static let optionsWithValue: Set<String> = ["--home", "--socket", "--timeout"]
    /// Ids left for the parser.
    static let keptForParsing = 64

    /// The ids taken out of the arguments, in their order.
    nonisolated(unsafe) private(set) static var taken: [Int64] = []

    /// The arguments (without the program's name) with the ids past the first
    /// ``keptForParsing`` of an id-taking command taken out (into ``taken``). Anything after `--`
    /// and any id that is not a plain positive decimal `Int64` stays, for the parser to judge.
    static func take(from arguments: [String]) -> [String] {
        guard let command = arguments.first, commands.contains(command) else { return arguments }
        var kept = [command]
        kept.reserveCapacity(arguments.count)
        var seen = 0
        var valueNext = false
        var rest = false
        for argument in arguments.dropFirst() {
            defer { valueNext = !rest && optionsWithValue.contains(argument) }
            if rest || valueNext || argument == "--" {
                rest = rest || (!valueNext && argument == "--")
                kept.append(argument)
                continue
            }
            guard !argument.isEmpty, argument.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                let id = Int64(argument)
            else {
                kept.append(argument)
                continue
            }
            seen += 1
            if seen <= keptForParsing {
                kept.append(argument)
            } else {
                taken.append(id)
            }
        }
        return kept
    }

    /// A command's parsed ids followed by the ones taken before parsing.
    static func all(_ parsed: [Int64]) -> [Int64] {
        taken.isEmpty ? parsed : parsed + taken
    }
}
