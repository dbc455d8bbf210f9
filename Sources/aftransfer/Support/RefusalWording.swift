/// A refusal of a request, worded for the person who typed the command.
///
/// The library's refusals start with the request field they are about (`limitRate: "x" is not a
/// rate`, `onEnd: is empty`): the RPC's names, right for a script. On the command line the field
/// is an option, so the CLI says `--limit-rate: …`. A field that comes from an option is the same
/// for every line of a `-i` list, so such a refusal is not blamed on the list's first line.
struct RefusalWording {
    /// The request fields set by one option each, and the option's spelling.
    static let optionOfField: [String: String] = [
        "limitRate": "--limit-rate",
        "onEnd": "--on-end",
        "cacert": "--cacert",
        "pinCert": "--pin-cert",
        "pinPubkey": "--pin-pubkey",
        "priority": "--priority",
        "retries": "--retries",
        "user": "--user",
        "sha256": "--sha256",
        "connections": "--connections",
        "resumable": "--resumable",
        "method": "--method",
        "response": "--response",
    ]
    /// Fields that come from the command line for every request of a list without an option of
    /// their own: the directory is `-d`, or the working directory when there is no `-d`.
    static let commandWideFields: Set<String> = ["directory"]

    /// The message as the person reads it.
    let text: String
    /// Whether it is about an option of the command line rather than about one request of a list.
    let isAboutAnOption: Bool

    /// Rewords `message`, a library or daemon refusal of one request.
    init(_ message: String) {
        let field = message.firstIndex(of: ":").map { message[..<$0] } ?? ""
        if let option = Self.optionOfField[String(field)] {
            text = option + message[field.endIndex...]
            isAboutAnOption = true
        } else {
            text = message
            // `header NAME: …` is about a `-H`, which every line of a list gets.
            isAboutAnOption = Self.commandWideFields.contains(String(field)) || field.hasPrefix("header")
        }
    }

    /// `message` with the item's origin before it (`urls.txt line 3: …`), unless it is about an
    /// option.
    static func message(_ message: String, origin: String?) -> String {
        let wording = RefusalWording(message)
        guard let origin, !wording.isAboutAnOption else { return wording.text }
        return origin + ": " + wording.text
    }
}
