import ArgumentParser
import TransferBase

/// `aftransfer download URL [-o FILE | -d DIR] …` and `aftransfer download -i LIST -d DIR …`.
struct DownloadCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "download",
        abstract: "Queue a download and print its id.",
        discussion: """
            Without -o, the file name comes from the server (Content-Disposition) or the URL, and \
            the file goes to -d DIR or the working directory. With -i, each line of LIST is a URL, \
            or 'URL<TAB>FILE' to name the file (relative to -d DIR); blank lines and '#' comments \
            are skipped; one bad line refuses the whole list. '-i -' reads the list from stdin.
            """)

    @Argument(help: "The URL (http or https).")
    var url: String?

    @Option(
        name: [.customShort("o"), .customLong("output")], help: ArgumentHelp("Write to this file.", valueName: "file"))
    var output: String?

    @Option(
        name: [.customShort("d"), .customLong("dir")],
        help: ArgumentHelp("Write into this directory, under the name the server suggests.", valueName: "dir"))
    var directory: String?

    @Option(
        name: [.customShort("i"), .customLong("input-file")],
        help: ArgumentHelp("Queue every URL of this list, all or nothing.", valueName: "list"))
    var inputFile: String?

    @Flag(help: "Create missing parent directories of the target.")
    var createDirs = false

    @Flag(help: "Replace an existing target file.")
    var replace = false

    @Option(help: ArgumentHelp("The expected SHA-256 of the file, in hex.", valueName: "hex"))
    var sha256: String?

    @Option(
        name: [.customShort("x"), .customLong("connections")], parsing: .unconditional,
        help: ArgumentHelp(
            "Fetch over up to N connections at once (1-16; default 1, or aftransferd --connections).",
            valueName: "n"))
    var connections: Int?

    @OptionGroup(title: "Transfer options")
    var transfer: TransferOptions

    @OptionGroup(title: "Global options")
    var global: GlobalOptions

    func validate() throws {
        let range = RequestValidator.connectionsRange
        if let connections, !range.contains(connections) {
            throw ValidationError("-x/--connections must be between \(range.lowerBound) and \(range.upperBound).")
        }
        // An empty path would be made absolute as the working directory, and refused as that.
        if output?.isEmpty == true { throw ValidationError("-o cannot be empty.") }
        if inputFile?.isEmpty == true { throw ValidationError("-i cannot be empty (use -i - for stdin).") }
        if output != nil, directory != nil { throw ValidationError("-o and -d cannot be used together.") }
        if directory?.isEmpty == true {
            throw ValidationError("-d cannot be empty (use -d . for the working directory).")
        }
        if inputFile != nil {
            if output != nil {
                throw ValidationError("-o cannot be used with -i; name files in the list with URL<TAB>FILE.")
            }
            if url != nil { throw ValidationError("give either a URL or -i LIST, not both.") }
            if sha256 != nil {
                // One digest cannot be every file's; a list would fail all its jobs but one.
                throw ValidationError("--sha256 cannot be used with -i; it is the digest of one file.")
            }
        } else if url == nil {
            throw ValidationError("missing URL (or -i LIST).")
        }
    }

    func run() throws {
        let directory = Paths.absolute(self.directory ?? ".")
        var items: [Submission.Item] = []
        if let inputFile {
            let list = try ListFile.read(inputFile)
            let origin = inputFile == "-" ? "stdin" : inputFile
            if let entry = list.entries.first(where: { $0.file?.unicodeScalars.contains("\t") == true }) {
                // URL<TAB>FILE: a second TAB would be part of the file's name.
                throw CLIFailure.usage("\(origin) line \(entry.line): more than one TAB (write URL<TAB>FILE)")
            }
            if let clash = ListFile.firstClash(in: list.entries, directory: directory) {
                throw CLIFailure.usage("\(origin) line \(clash.entry.line): \(clash.reason)")
            }
            for entry in list.entries {
                var request = makeRequest(url: entry.url)
                if let target = ListFile.target(of: entry, in: directory) {
                    request.destination = target
                } else {
                    request.directory = directory
                }
                items.append(
                    Submission.Item(origin: "\(origin) line \(entry.line)", line: entry.line, request: request))
            }
            if items.isEmpty {
                Console.error("no URLs in \(origin); nothing queued")
                return
            }
        } else if let url {
            var request = makeRequest(url: url)
            if let output {
                request.destination = Paths.absoluteFile(output)
            } else {
                request.directory = directory
            }
            items.append(Submission.Item(origin: nil, request: request))
        }
        try Submission(items: items, options: transfer, global: global).run()
    }

    private func makeRequest(url: String) -> TransferRequest {
        var request = TransferRequest(url: url)
        request.kind = "download"
        if createDirs { request.createDirs = true }
        if replace { request.replace = true }
        request.sha256 = sha256
        request.connections = connections
        transfer.apply(to: &request)
        return request
    }
}
