import ArgumentParser
import TransferBase

/// `aftransfer upload FILE URL …` and `aftransfer upload --form NAME=@FILE … URL …`.
struct UploadCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "upload",
        abstract: "Queue an upload and print its id.",
        usage: """
            aftransfer upload <file> <url> [--method PUT|POST] [--response <file>] [<options>]
            aftransfer upload --form NAME=@FILE[;type=MIME][;filename=NAME] --form NAME=VALUE... <url> [<options>]
            """,
        discussion: """
            A file upload streams FILE with PUT (default) or POST. --form builds a \
            multipart/form-data body (POST by default) of text fields and files streamed from disk. \
            The response is kept with the job (see status --json) unless --response saves it.
            """)

    @Argument(help: "The file to send (omitted with --form).")
    var file: String?

    @Argument(help: "The URL (http or https).")
    var url: String?

    /// The positional arguments given: `FILE URL`, or only `URL` with `--form`.
    private var positionals: [String] { [file, url].compactMap { $0 } }

    @Option(
        name: .customLong("form"),
        help: ArgumentHelp(
            "A multipart part: NAME=@FILE[;type=MIME][;filename=NAME] or NAME=VALUE (repeatable).", valueName: "part"))
    var form: [String] = []

    @Option(help: ArgumentHelp("PUT or POST.", valueName: "method"))
    var method: String?

    @Option(help: ArgumentHelp("Save the response body to this file.", valueName: "file"))
    var response: String?

    @Flag(help: "Create missing parent directories of the --response file.")
    var createDirs = false

    @Flag(help: "Replace an existing --response file.")
    var replace = false

    @Option(
        help: ArgumentHelp(
            "Resumable upload: auto (IETF draft, plain if the server does not offer it), tus (tus 1.0) or off (default auto).",
            valueName: "mode"), completion: .list(ResumableMode.allCases.map(\.rawValue)))
    var resumable: String?

    @Option(help: ArgumentHelp("The source file's expected SHA-256 (hex), checked before sending.", valueName: "hex"))
    var sha256: String?

    @OptionGroup(title: "Transfer options")
    var transfer: TransferOptions

    @OptionGroup(title: "Global options")
    var global: GlobalOptions

    func validate() throws {
        if form.isEmpty {
            guard positionals.count == 2 else {
                throw ValidationError("expected a FILE and a URL (or --form parts and a URL).")
            }
        } else {
            guard positionals.count == 1 else { throw ValidationError("with --form, give only the URL.") }
        }
        // An empty path would be made absolute as the working directory, and refused as that.
        if form.isEmpty, file?.isEmpty == true { throw ValidationError("the FILE cannot be empty.") }
        if response?.isEmpty == true { throw ValidationError("--response cannot be empty.") }
        if let method, !["PUT", "POST"].contains(method.uppercased()) {
            throw ValidationError("--method must be PUT or POST.")
        }
        if (createDirs || replace) && response == nil {
            throw ValidationError("--create-dirs and --replace apply to the --response file: give --response too.")
        }
        if let resumable, ResumableMode(rawValue: resumable.lowercased()) == nil {
            throw ValidationError("--resumable must be auto, tus or off.")
        }
    }

    func run() throws {
        var request = TransferRequest(url: positionals[positionals.count - 1])
        request.kind = "upload"
        request.method = method?.uppercased()
        if form.isEmpty {
            request.source = Paths.absolute(positionals[0])
        } else {
            request.form = try form.map { spec in
                do {
                    switch try FormPart.parse(spec) {
                    case .field:
                        return spec
                    case .file(let name, let path, let contentType, let filename):
                        return FormPart.file(
                            name: name, path: Paths.absolute(path), contentType: contentType, filename: filename
                        ).spec
                    }
                } catch {
                    throw CLIFailure.usage(Submission.message(of: error))
                }
            }
        }
        request.response = response.map(Paths.absoluteFile)
        if createDirs { request.createDirs = true }
        if replace { request.replace = true }
        request.resumable = resumable?.lowercased()
        request.sha256 = sha256
        transfer.apply(to: &request)
        try Submission(items: [Submission.Item(origin: nil, request: request)], options: transfer, global: global).run()
    }
}
