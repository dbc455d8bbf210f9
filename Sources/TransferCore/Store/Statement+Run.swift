import GRDB
import GRDBSQLite

extension Statement {
    /// Runs a statement that returns no rows once, with `values` bound in order, straight through
    /// SQLite's C API: GRDB's `execute(arguments:)` builds `StatementArguments` and binds through
    /// generic wrappers, which was a tenth of the daemon's loop with thousands of small files
    /// (every state change is an `UPDATE`). The statement is left reset, as GRDB expects it.
    /// - Throws: `DatabaseError` with SQLite's code and message (`SQLITE_FULL` on a full disk).
    func run(_ values: [DatabaseValue]) throws {
        let statement = sqliteStatement
        sqlite3_reset(statement)
        for (i, value) in values.enumerated() {
            let code = value.bind(to: statement, at: CInt(i + 1))
            if code != SQLITE_OK { throw failure(code) }
        }
        let code = sqlite3_step(statement)
        let error = code == SQLITE_DONE ? nil : failure(code)
        sqlite3_reset(statement)
        sqlite3_clear_bindings(statement)
        if let error { throw error }
    }

    private func failure(_ code: CInt) -> DatabaseError {
        let message = sqlite3_db_handle(sqliteStatement).flatMap { sqlite3_errmsg($0) }.map { String(cString: $0) }
        return DatabaseError(resultCode: ResultCode(rawValue: code), message: message, sql: sql)
    }
}
