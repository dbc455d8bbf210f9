import GRDB
import XCTest

@testable import TransferBase
@testable import TransferCore

final class StatementRunTests: XCTestCase {
    func testThatValuesAreBoundInOrderAndEveryKindRoundTrips() throws {
        let db = try DatabaseQueue()
        try db.write { db in
            try db.execute(sql: "CREATE TABLE t (i INTEGER, d REAL, s TEXT, b BLOB, n TEXT)")
            let insert = try db.cachedStatement(sql: "INSERT INTO t VALUES (?, ?, ?, ?, ?)")
            try insert.run([
                Int64(42).databaseValue, 1.5.databaseValue, "é ✓".databaseValue,
                Data([0, 1, 2]).databaseValue, .null,
            ])
            try insert.run([Int64(43).databaseValue, 2.5.databaseValue, "two".databaseValue, .null, .null])
            let row = try XCTUnwrap(Row.fetchOne(db, sql: "SELECT * FROM t WHERE i = 42"))
            XCTAssertEqual(row["d"] as Double, 1.5)
            XCTAssertEqual(row["s"] as String, "é ✓")
            XCTAssertEqual(row["b"] as Data, Data([0, 1, 2]))
            XCTAssertTrue(row["n"] == nil as String?)
            XCTAssertEqual(try Int.fetchOne(db, sql: "SELECT count(*) FROM t"), 2)
        }
    }

    func testThatAFailureIsADatabaseErrorAndTheStatementRunsAgainAfterIt() throws {
        let db = try DatabaseQueue()
        try db.write { db in
            try db.execute(sql: "CREATE TABLE t (id INTEGER PRIMARY KEY)")
            let insert = try db.cachedStatement(sql: "INSERT INTO t (id) VALUES (?)")
            try insert.run([Int64(1).databaseValue])
            XCTAssertThrowsError(try insert.run([Int64(1).databaseValue])) { error in
                XCTAssertEqual((error as? DatabaseError)?.resultCode, .SQLITE_CONSTRAINT)
            }
            try insert.run([Int64(2).databaseValue])
            XCTAssertEqual(try Int.fetchOne(db, sql: "SELECT count(*) FROM t"), 2)
        }
    }
}
