#include "state/database.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <cerrno>

#include "audit/db_file.h"
#include "audit/time_format.h"

namespace warden::state {

void DbCloser::operator()(sqlite3* db) const { sqlite3_close_v2(db); }
void StmtFinalizer::operator()(sqlite3_stmt* stmt) const { sqlite3_finalize(stmt); }

Status SqlError(sqlite3* db, const std::string& step) {
  return Status::Error(step + ": " + sqlite3_errmsg(db) + " (sqlite error " +
                       std::to_string(sqlite3_extended_errcode(db)) + ")");
}

Status Exec(sqlite3* db, const char* sql, const std::string& step) {
  if (sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK) return SqlError(db, step);
  return Status::Ok();
}

Result<Stmt> Prepare(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), static_cast<int>(sql.size()), &stmt, nullptr) !=
      SQLITE_OK) {
    return SqlError(db, "prepare");
  }
  return Stmt(stmt);
}

Result<bool> TableExists(sqlite3* db, const char* name) {
  auto stmt = Prepare(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1");
  if (!stmt) return stmt.status();
  sqlite3_bind_text(stmt->get(), 1, name, -1, SQLITE_STATIC);
  int rc = sqlite3_step(stmt->get());
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return SqlError(db, "read schema");
}

void BindText(sqlite3_stmt* stmt, int index, const std::string& text) {
  sqlite3_bind_text(stmt, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
}

void BindInt(sqlite3_stmt* stmt, int index, int64_t value) {
  sqlite3_bind_int64(stmt, index, value);
}

std::string ColumnText(sqlite3_stmt* stmt, int index) {
  const unsigned char* text = sqlite3_column_text(stmt, index);
  return text ? std::string(reinterpret_cast<const char*>(text),
                            static_cast<size_t>(sqlite3_column_bytes(stmt, index)))
              : std::string();
}

bool ColumnIsNull(sqlite3_stmt* stmt, int index) {
  return sqlite3_column_type(stmt, index) == SQLITE_NULL;
}

Status StepDone(sqlite3* db, sqlite3_stmt* stmt, const std::string& step) {
  int rc = sqlite3_step(stmt);
  sqlite3_reset(stmt);
  if (rc != SQLITE_DONE) return SqlError(db, step);
  return Status::Ok();
}

Result<Db> OpenDatabase(const DatabaseOptions& options) {
  const std::string& path = options.path;
  if (path.empty()) return Status::Error("the state database path is empty");
  int flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW;
  if (options.create) {
    WARDEN_RETURN_IF_ERROR(audit::CreateDatabaseFile(path));
    flags |= SQLITE_OPEN_READWRITE;
  } else {
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) {
      return Status::FromErrno(
          "no warden database at " + path + " (warden serve creates it; --db names another)",
          errno);
    }
    flags |= SQLITE_OPEN_READONLY;
  }
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  Db db(raw);
  if (rc != SQLITE_OK) {
    return Status::Error("open " + path + ": " + (raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc)));
  }
  sqlite3_extended_result_codes(raw, 1);
  sqlite3_busy_timeout(raw, options.busy_timeout_ms);
  if (!options.create) return db;

  auto mode = Prepare(raw, "PRAGMA journal_mode = WAL");
  if (!mode) return mode.status().Wrap(path);
  if (sqlite3_step(mode->get()) != SQLITE_ROW || ColumnText(mode->get(), 0) != "wal") {
    return Status::Error("could not put " + path + " in WAL mode: " + sqlite3_errmsg(raw));
  }
  mode->reset();
  WARDEN_RETURN_IF_ERROR(Exec(raw, "PRAGMA synchronous = FULL", "set synchronous").Wrap(path));
  return db;
}

Result<std::unique_ptr<WriteTransaction>> WriteTransaction::Begin(sqlite3* db) {
  WARDEN_RETURN_IF_ERROR(Exec(db, "BEGIN IMMEDIATE", "begin write transaction"));
  return std::unique_ptr<WriteTransaction>(new WriteTransaction(db));
}

WriteTransaction::~WriteTransaction() {
  if (!done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

Status WriteTransaction::Commit() {
  Status st = Exec(db_, "COMMIT", "commit");
  if (st.ok()) done_ = true;
  return st;
}

Result<std::unique_ptr<ReadTransaction>> ReadTransaction::Begin(sqlite3* db) {
  WARDEN_RETURN_IF_ERROR(Exec(db, "BEGIN", "begin read transaction"));
  return std::unique_ptr<ReadTransaction>(new ReadTransaction(db));
}

ReadTransaction::~ReadTransaction() { sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr); }

std::string Now() { return audit::NowRfc3339(); }

}  // namespace warden::state
