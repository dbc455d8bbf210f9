/// A control command on jobs (SPEC "Control commands"): `pause`, `resume`, `cancel`, `retry`,
/// `remove`.
public enum ControlAction: String, Codable, Sendable, CaseIterable {
    case pause, resume, cancel, retry, remove
}
