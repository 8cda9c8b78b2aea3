// The gateway's durable state lives in the same SQLite file as the audit log (default
// ./var/warden/warden.db), in its own tables (named state_*) and on its own connections. This
// header is the small SQLite toolkit the state stores share: opening the file the way the audit
// log does (mode 0600, WAL, busy timeout, no symbolic links), statements, and transactions.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace warden::state {

// Where the state is and how to open it. A plain struct: every field has its documented default.
struct DatabaseOptions {
  // The SQLite file shared with the audit log (audit::kDefaultDatabasePath).
  std::string path = "./var/warden/warden.db";
  // Create the file (mode 0600), its missing parent directories (mode 0700) and the state
  // tables. When false a missing file is an error and nothing is ever written: what read-only
  // commands (`warden kill list`, `warden tools list`) use.
  bool create = true;
  // Longest wait for another connection's write lock (another warden process), milliseconds.
  int busy_timeout_ms = 10000;
};

struct DbCloser {
  void operator()(sqlite3* db) const;
};
struct StmtFinalizer {
  void operator()(sqlite3_stmt* stmt) const;
};
using Db = std::unique_ptr<sqlite3, DbCloser>;
using Stmt = std::unique_ptr<sqlite3_stmt, StmtFinalizer>;

// Opens one connection to options.path. With options.create: creates what is missing, puts the
// file in WAL mode (readers never wait for the writer) and sets synchronous=FULL on this
// connection: state changes are rare and an operator's kill must survive a power loss.
// Without: opens it read-only, and fails with a message naming the path when it is missing.
// Refuses a path whose last component is a symbolic link.
Result<Db> OpenDatabase(const DatabaseOptions& options);

// "step: sqlite message (sqlite error N)".
Status SqlError(sqlite3* db, const std::string& step);
Status Exec(sqlite3* db, const char* sql, const std::string& step);
Result<Stmt> Prepare(sqlite3* db, const std::string& sql);
// Whether a table exists (read-only connections may open a file no writer has set up yet).
Result<bool> TableExists(sqlite3* db, const char* name);

// Binds by 1-based index; text is copied by SQLite (SQLITE_TRANSIENT), so temporaries are safe.
void BindText(sqlite3_stmt* stmt, int index, const std::string& text);
void BindInt(sqlite3_stmt* stmt, int index, int64_t value);
std::string ColumnText(sqlite3_stmt* stmt, int index);
bool ColumnIsNull(sqlite3_stmt* stmt, int index);

// Runs a statement that returns no rows (INSERT, UPDATE, DELETE) once.
Status StepDone(sqlite3* db, sqlite3_stmt* stmt, const std::string& step);

// A write transaction, BEGIN IMMEDIATE: it takes the write lock before reading, so that what it
// reads cannot be changed by another process before it commits. Rolls back unless committed.
class WriteTransaction {
 public:
  static Result<std::unique_ptr<WriteTransaction>> Begin(sqlite3* db);
  ~WriteTransaction();
  WriteTransaction(const WriteTransaction&) = delete;
  WriteTransaction& operator=(const WriteTransaction&) = delete;
  Status Commit();

 private:
  explicit WriteTransaction(sqlite3* db) : db_(db) {}
  sqlite3* db_;
  bool done_ = false;
};

// A read transaction: every statement inside sees one snapshot. Ends when destroyed.
class ReadTransaction {
 public:
  static Result<std::unique_ptr<ReadTransaction>> Begin(sqlite3* db);
  ~ReadTransaction();
  ReadTransaction(const ReadTransaction&) = delete;
  ReadTransaction& operator=(const ReadTransaction&) = delete;

 private:
  explicit ReadTransaction(sqlite3* db) : db_(db) {}
  sqlite3* db_;
};

// Now, RFC 3339 UTC with six fractional digits (the audit log's format).
std::string Now();

}  // namespace warden::state
