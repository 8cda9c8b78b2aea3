#include "state/undo_store.h"

#include <sqlite3.h>

#include "audit/entry.h"

namespace warden::state {
namespace {

// STRICT, as the kill tables: a value of the wrong type is refused. The CHECKs keep rows a hand
// edit made meaningless out: a done row without who, an available row without a tool.
constexpr const char* kUndoSchema = R"sql(
CREATE TABLE IF NOT EXISTS state_undo (
  call_id INTEGER PRIMARY KEY CHECK (call_id > 0),
  time TEXT NOT NULL,
  tenant TEXT NOT NULL,
  user TEXT NOT NULL,
  agent TEXT NOT NULL,
  scope TEXT NOT NULL,
  session TEXT NOT NULL,
  tool TEXT NOT NULL,
  undo_tool TEXT NOT NULL,
  undo_args TEXT NOT NULL CHECK (json_valid(undo_args)),
  status TEXT NOT NULL
    CHECK (status IN ('available', 'unavailable', 'running', 'done', 'failed')),
  reason TEXT NOT NULL,
  undone_by TEXT NOT NULL,
  undone_at TEXT NOT NULL,
  undo_call_id INTEGER NOT NULL,
  snapshot TEXT NOT NULL,
  CHECK (status = 'unavailable' OR undo_tool != ''),
  CHECK (status NOT IN ('running', 'done', 'failed') OR undone_by != '')
) STRICT;
)sql";

constexpr const char* kUndoColumns =
    "call_id, time, tenant, user, agent, scope, session, tool, undo_tool, undo_args, status, "
    "reason, undone_by, undone_at, undo_call_id, snapshot";

Result<UndoRecord> UndoFromRow(sqlite3_stmt* stmt) {
  UndoRecord r;
  r.call_id = static_cast<uint64_t>(sqlite3_column_int64(stmt, 0));
  r.time = ColumnText(stmt, 1);
  r.tenant = ColumnText(stmt, 2);
  r.user = ColumnText(stmt, 3);
  r.agent = ColumnText(stmt, 4);
  r.scope = ColumnText(stmt, 5);
  r.session = ColumnText(stmt, 6);
  r.tool = ColumnText(stmt, 7);
  r.undo_tool = ColumnText(stmt, 8);
  r.undo_args = nlohmann::json::parse(ColumnText(stmt, 9), nullptr, false);
  if (r.undo_args.is_discarded())
    return Status::Error("state_undo row " + std::to_string(r.call_id) + ": undo_args is not JSON");
  auto status = ParseUndoStatus(ColumnText(stmt, 10));
  if (!status) return status.status();
  r.status = *status;
  r.reason = ColumnText(stmt, 11);
  r.undone_by = ColumnText(stmt, 12);
  r.undone_at = ColumnText(stmt, 13);
  r.undo_call_id = static_cast<uint64_t>(sqlite3_column_int64(stmt, 14));
  r.snapshot = ColumnText(stmt, 15);
  return r;
}

}  // namespace

std::string_view ToString(UndoStatus status) {
  switch (status) {
    case UndoStatus::kAvailable:
      return "available";
    case UndoStatus::kUnavailable:
      return "unavailable";
    case UndoStatus::kRunning:
      return "running";
    case UndoStatus::kDone:
      return "done";
    case UndoStatus::kFailed:
      return "failed";
  }
  return "unavailable";
}

Result<UndoStatus> ParseUndoStatus(std::string_view text) {
  for (UndoStatus s : {UndoStatus::kAvailable, UndoStatus::kUnavailable, UndoStatus::kRunning,
                       UndoStatus::kDone, UndoStatus::kFailed}) {
    if (text == ToString(s)) return s;
  }
  return Status::Error("unknown undo status '" + std::string(text) + "' in the database");
}

Result<std::unique_ptr<UndoStore>> UndoStore::Open(const DatabaseOptions& options) {
  auto db = OpenDatabase(options);
  if (!db) return db.status();
  if (options.create) {
    auto txn = WriteTransaction::Begin(db->get());
    if (!txn) return txn.status().Wrap(options.path);
    WARDEN_RETURN_IF_ERROR(Exec(db->get(), kUndoSchema, "create undo table").Wrap(options.path));
    WARDEN_RETURN_IF_ERROR((*txn)->Commit().Wrap(options.path));
  }
  return std::unique_ptr<UndoStore>(new UndoStore(options, std::move(*db)));
}

Status UndoStore::Record(const UndoRecord& record) {
  if (!options_.create) return Status::Error(options_.path + " was opened read-only");
  if (record.call_id == 0) return Status::Error("an undo plan needs the call's audit id");
  if (record.status != UndoStatus::kAvailable && record.status != UndoStatus::kUnavailable)
    return Status::Error("a new undo plan is available or unavailable, not " +
                         std::string(ToString(record.status)));
  std::lock_guard lock(mu_);
  sqlite3* db = db_.get();
  auto stmt = Prepare(db, std::string("INSERT INTO state_undo (") + kUndoColumns +
                              ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, '', "
                              "'', 0, ?13)");
  if (!stmt) return stmt.status();
  BindInt(stmt->get(), 1, static_cast<int64_t>(record.call_id));
  BindText(stmt->get(), 2, record.time.empty() ? Now() : record.time);
  BindText(stmt->get(), 3, record.tenant);
  BindText(stmt->get(), 4, record.user);
  BindText(stmt->get(), 5, record.agent);
  BindText(stmt->get(), 6, record.scope);
  BindText(stmt->get(), 7, record.session);
  BindText(stmt->get(), 8, record.tool);
  BindText(stmt->get(), 9, record.undo_tool);
  BindText(stmt->get(), 10, audit::CanonicalJson(record.undo_args));
  BindText(stmt->get(), 11, std::string(ToString(record.status)));
  BindText(stmt->get(), 12, record.reason);
  BindText(stmt->get(), 13, record.snapshot);
  return StepDone(db, stmt->get(), "record undo plan for call " + std::to_string(record.call_id));
}

Result<std::optional<UndoRecord>> UndoStore::FindLocked(uint64_t call_id) {
  sqlite3* db = db_.get();
  auto exists = TableExists(db, "state_undo");
  if (!exists) return exists.status();
  if (!*exists) {
    if (options_.create) return Status::Error("table state_undo is missing from " + options_.path);
    return std::optional<UndoRecord>();
  }
  auto stmt =
      Prepare(db, std::string("SELECT ") + kUndoColumns + " FROM state_undo WHERE call_id = ?1");
  if (!stmt) return stmt.status();
  BindInt(stmt->get(), 1, static_cast<int64_t>(call_id));
  int rc = sqlite3_step(stmt->get());
  if (rc == SQLITE_DONE) return std::optional<UndoRecord>();
  if (rc != SQLITE_ROW) return SqlError(db, "read undo plan");
  auto record = UndoFromRow(stmt->get());
  if (!record) return record.status();
  return std::optional<UndoRecord>(std::move(*record));
}

Result<std::optional<UndoRecord>> UndoStore::Find(uint64_t call_id) {
  std::lock_guard lock(mu_);
  return FindLocked(call_id);
}

Result<UndoClaim> UndoStore::Claim(uint64_t call_id, const std::string& who) {
  if (!options_.create) return Status::Error(options_.path + " was opened read-only");
  if (who.empty()) return Status::Error("an undo must say who asks for it");
  std::lock_guard lock(mu_);
  sqlite3* db = db_.get();
  // BEGIN IMMEDIATE: the read and the update see one state, whatever another process does.
  auto txn = WriteTransaction::Begin(db);
  if (!txn) return txn.status();
  auto found = FindLocked(call_id);
  if (!found) return found.status();
  UndoClaim claim;
  if (!*found) return claim;
  claim.record = **found;
  if (claim.record.status != UndoStatus::kAvailable && claim.record.status != UndoStatus::kFailed)
    return claim;
  auto stmt = Prepare(db,
                      "UPDATE state_undo SET status = 'running', undone_by = ?2 "
                      "WHERE call_id = ?1 AND status IN ('available', 'failed')");
  if (!stmt) return stmt.status();
  BindInt(stmt->get(), 1, static_cast<int64_t>(call_id));
  BindText(stmt->get(), 2, who);
  WARDEN_RETURN_IF_ERROR(
      StepDone(db, stmt->get(), "claim undo of call " + std::to_string(call_id)));
  claim.claimed = sqlite3_changes(db) == 1;
  WARDEN_RETURN_IF_ERROR((*txn)->Commit());
  return claim;
}

Result<bool> UndoStore::Finish(uint64_t call_id, bool done, const std::string& reason,
                               uint64_t undo_call_id) {
  if (!options_.create) return Status::Error(options_.path + " was opened read-only");
  std::lock_guard lock(mu_);
  sqlite3* db = db_.get();
  auto stmt = Prepare(db,
                      "UPDATE state_undo SET status = ?2, reason = ?3, undone_at = ?4, "
                      "undo_call_id = ?5 WHERE call_id = ?1 AND status = 'running'");
  if (!stmt) return stmt.status();
  BindInt(stmt->get(), 1, static_cast<int64_t>(call_id));
  BindText(stmt->get(), 2, done ? "done" : "failed");
  BindText(stmt->get(), 3, reason);
  BindText(stmt->get(), 4, Now());
  BindInt(stmt->get(), 5, static_cast<int64_t>(undo_call_id));
  WARDEN_RETURN_IF_ERROR(
      StepDone(db, stmt->get(), "finish undo of call " + std::to_string(call_id)));
  return sqlite3_changes(db) == 1;
}

}  // namespace warden::state
