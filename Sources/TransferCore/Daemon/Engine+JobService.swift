import Foundation

// Temporary: today's `Engine` behind the RPC layer's `JobService`, with its current methods. The
// new engine conforms by itself; delete this file then.
//
// Not what the protocol promises yet: `addMany` queues one job after another and removes those it
// queued when a later one is refused (not one transaction); `jobs(state:after:limit:)` reads every
// row of the state for each page; `commit()` has nothing to do (every change is its own
// transaction).
extension Engine: JobService {
    public func prevalidate(_ request: TransferRequest) throws {
        do {
            let req = try RequestValidator.validate(request)
            if (req.kind ?? "download") == "download" {
                if let destination = req.destination,
                    let clash = destinationConflict(destination, job: nil, replace: req.replace == true)
                {
                    throw clash
                }
            } else {
                _ = try UploadTask.inspectSources(of: req)
            }
        } catch {
            throw Self.refusal(error) ?? error
        }
    }

    public func addMany(_ requests: [TransferRequest]) throws -> [JobSnapshot] {
        for (index, request) in requests.enumerated() {
            do {
                try prevalidate(request)
            } catch let error as TransferError {
                throw BatchRefusal(index: index, error: error)
            }
        }
        var added: [JobSnapshot] = []
        for (index, request) in requests.enumerated() {
            do {
                added.append(try add(request))
            } catch {
                _ = control(.remove, ids: added.map(\.id), deleteFiles: false)
                guard let refusal = Self.refusal(error) else { throw error }
                throw BatchRefusal(index: index, error: refusal)
            }
        }
        return added
    }

    public func job(_ id: Int64) -> JobSnapshot? { get(id) }

    public func jobs(state: TransferState?, after: Int64?, limit: Int) -> [JobSnapshot] {
        guard limit > 0, let rows = try? store.jobs(state: state) else { return [] }
        let start = after.map { a in rows.firstIndex { ($0.id ?? 0) > a } ?? rows.endIndex } ?? rows.startIndex
        return rows[start...].prefix(limit).map(snapshot)
    }

    public func control(_ action: ControlAction, ids: [Int64], deleteFiles: Bool) -> ControlResult {
        control(action.method.rawValue, ids: ids, deleteFiles: deleteFiles)
    }

    public func curlCommand(_ id: Int64) -> String? { record(id).map(CurlCommandRenderer.render) }

    public func counts() -> [TransferState: Int] {
        let byName: [String: Int] = counts()
        var out: [TransferState: Int] = [:]
        for state in TransferState.allCases { out[state] = byName[state.rawValue] ?? 0 }
        return out
    }

    public func commit() throws {}

    /// The engine's refusals as `TransferError` (it still throws `RPCError.refusedInput` in places).
    private static func refusal(_ error: Error) -> TransferError? {
        switch error {
        case let error as TransferError:
            return error
        case let error as RPCError where error.code == RPCErrorCode.invalidParams:
            guard case .string(let name)? = error.data?["code"], let code = TransferErrorCode(rawValue: name) else {
                return TransferError(.invalidRequest, error.message)
            }
            return TransferError(code, error.message)
        default:
            return nil
        }
    }
}
