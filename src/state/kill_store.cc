#include "state/kill_store.h"

#include <sqlite3.h>

namespace warden::state {
namespace {

// STRICT: a value of the wrong type is refused rather than stored half-right. The CHECKs keep
// rows a hand edit made meaningless (an unknown scope, a named global) out of the table: the
// gateway would otherwise have to guess what they mean. The switch table's columns and
// constraints, after "CREATE TABLE [IF NOT EXISTS] name":
constexpr const char* kSwitchColumns = R"sql( (
  scope TEXT NOT NULL CHECK (scope IN ('global', 'tenant', 'user', 'agent', 'session', 'tool',
                                       'task')),
  name TEXT NOT NULL CHECK ((scope = 'global') = (name = '')),
  reason TEXT NOT NULL,
  who TEXT NOT NULL,
  since TEXT NOT NULL,
  PRIMARY KEY (scope, name)
) STRICT;
)sql";

std::string KillSchema() {
  return std::string("CREATE TABLE IF NOT EXISTS state_kill_switches") + kSwitchColumns + R"sql(
CREATE TABLE IF NOT EXISTS state_kill_history (
  id INTEGER PRIMARY KEY,
  time TEXT NOT NULL,
  action TEXT NOT NULL CHECK (action IN ('kill', 'unkill')),
  scope TEXT NOT NULL,
  name TEXT NOT NULL,
  reason TEXT NOT NULL,
  who TEXT NOT NULL
) STRICT;
)sql";
}

// Files made before the user, session and task scopes have a CHECK that refuses them. SQLite cannot
// change a CHECK in place: the table is rebuilt with the new one, rows kept, in the opening
// transaction (history has no CHECK on scope).
std::string KillScopesUpgrade() {
  return std::string(
             "ALTER TABLE state_kill_switches RENAME TO state_kill_switches_before_scopes;\n"
             "CREATE TABLE state_kill_switches") +
         kSwitchColumns +
         "INSERT INTO state_kill_switches SELECT scope, name, reason, who, since "
         "FROM state_kill_switches_before_scopes;\n"
         "DROP TABLE state_kill_switches_before_scopes;\n";
}

constexpr size_t kMaxNameBytes = 256;
constexpr size_t kMaxReasonBytes = 1024;

Result<KillScope> ScopeFromColumn(const std::string& text) {
  if (text == "global") return KillScope::kGlobal;
  if (text == "tenant") return KillScope::kTenant;
  if (text == "user") return KillScope::kUser;
  if (text == "agent") return KillScope::kAgent;
  if (text == "session") return KillScope::kSession;
  if (text == "tool") return KillScope::kTool;
  if (text == "task") return KillScope::kTask;
  return Status::Error("unknown kill switch scope '" + text + "' in the database");
}

bool HasControlCharacter(const std::string& text) {
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f) return true;
  }
  return false;
}

}  // namespace

std::string_view ToString(KillScope scope) {
  switch (scope) {
    case KillScope::kGlobal:
      return "global";
    case KillScope::kTenant:
      return "tenant";
    case KillScope::kUser:
      return "user";
    case KillScope::kAgent:
      return "agent";
    case KillScope::kSession:
      return "session";
    case KillScope::kTool:
      return "tool";
    case KillScope::kTask:
      return "task";
  }
  return "global";
}

Result<KillScope> ParseKillScope(std::string_view text) {
  if (text == "all" || text == "global") return KillScope::kGlobal;
  if (text == "tenant") return KillScope::kTenant;
  if (text == "user") return KillScope::kUser;
  if (text == "agent") return KillScope::kAgent;
  if (text == "session") return KillScope::kSession;
  if (text == "tool") return KillScope::kTool;
  if (text == "task") return KillScope::kTask;
  return Status::Error("unknown kill switch scope '" + std::string(text) +
                       "': use all, tenant, user, agent, session, task or tool");
}

std::string KillKey(KillScope scope, const std::string& name) {
  if (scope == KillScope::kGlobal) return "global";
  return std::string(ToString(scope)) + ":" + name;
}

Status ValidateKill(KillScope scope, const std::string& name) {
  std::string what(ToString(scope));
  if (scope == KillScope::kGlobal) {
    if (!name.empty()) return Status::Error("the global kill switch takes no name");
    return Status::Ok();
  }
  const std::string article = scope == KillScope::kAgent ? "an " : "a ";
  if (name.empty()) {
    return Status::Error(article + what + " kill switch needs " + article + what + " name");
  }
  if (name.size() > kMaxNameBytes) {
    return Status::Error(what + " name is longer than " + std::to_string(kMaxNameBytes) + " bytes");
  }
  if (HasControlCharacter(name)) return Status::Error(what + " name has a control character");
  if (name.find_first_of("*?") != std::string::npos) {
    return Status::Error(
        what + " name '" + name + "' has a wildcard: kill switches name one exact " + what +
        (scope == KillScope::kTool ? " (SERVER__TOOL)" : "") + ", or use `all` for everything");
  }
  return Status::Ok();
}

Result<std::unique_ptr<KillStore>> KillStore::Open(const DatabaseOptions& options) {
  auto db = OpenDatabase(options);
  if (!db) return db.status();
  if (options.create) {
    auto txn = WriteTransaction::Begin(db->get());
    if (!txn) return txn.status().Wrap(options.path);
    WARDEN_RETURN_IF_ERROR(
        Exec(db->get(), KillSchema().c_str(), "create kill switch tables").Wrap(options.path));
    auto old = Prepare(db->get(),
                       "SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                       "name = 'state_kill_switches' AND sql NOT LIKE '%''task''%'");
    if (!old) return old.status().Wrap(options.path);
    const int rc = sqlite3_step(old->get());
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return SqlError(db->get(), "read the kill switch schema");
    old->reset();
    if (rc == SQLITE_ROW) {
      WARDEN_RETURN_IF_ERROR(Exec(db->get(), KillScopesUpgrade().c_str(),
                                  "add the user, session and task scopes to the kill switch table")
                                 .Wrap(options.path));
    }
    WARDEN_RETURN_IF_ERROR((*txn)->Commit().Wrap(options.path));
  }
  return std::unique_ptr<KillStore>(new KillStore(options, std::move(*db)));
}

Result<bool> KillStore::Kill(KillScope scope, const std::string& name, const std::string& reason,
                             const std::string& who) {
  WARDEN_RETURN_IF_ERROR(ValidateKill(scope, name));
  if (reason.size() > kMaxReasonBytes) {
    return Status::Error("the reason is longer than " + std::to_string(kMaxReasonBytes) + " bytes");
  }
  return Record("kill", scope, name, reason, who);
}

Result<bool> KillStore::Unkill(KillScope scope, const std::string& name, const std::string& who) {
  WARDEN_RETURN_IF_ERROR(ValidateKill(scope, name));
  return Record("unkill", scope, name, "", who);
}

Result<bool> KillStore::Record(const char* action, KillScope scope, const std::string& name,
                               const std::string& reason, const std::string& who) {
  if (!options_.create) return Status::Error(options_.path + " was opened read-only");
  std::lock_guard lock(mu_);
  sqlite3* db = db_.get();
  const bool kill = std::string_view(action) == "kill";
  const std::string scope_text(ToString(scope));
  const std::string now = Now();
  auto txn = WriteTransaction::Begin(db);
  if (!txn) return txn.status();

  auto existing = Prepare(db, "SELECT 1 FROM state_kill_switches WHERE scope = ?1 AND name = ?2");
  if (!existing) return existing.status();
  BindText(existing->get(), 1, scope_text);
  BindText(existing->get(), 2, name);
  int rc = sqlite3_step(existing->get());
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return SqlError(db, "read kill switch");
  const bool was_active = rc == SQLITE_ROW;
  sqlite3_reset(existing->get());

  auto change =
      Prepare(db, kill ? "INSERT INTO state_kill_switches (scope, name, reason, who, "
                         "since) VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (scope, name) "
                         "DO UPDATE SET reason = ?3, who = ?4, since = ?5"
                       : "DELETE FROM state_kill_switches WHERE scope = ?1 AND name = ?2");
  if (!change) return change.status();
  BindText(change->get(), 1, scope_text);
  BindText(change->get(), 2, name);
  if (kill) {
    BindText(change->get(), 3, reason);
    BindText(change->get(), 4, who);
    BindText(change->get(), 5, now);
  }
  WARDEN_RETURN_IF_ERROR(StepDone(db, change->get(), std::string(action) + " switch"));

  auto history = Prepare(db,
                         "INSERT INTO state_kill_history (time, action, scope, name, reason, who) "
                         "VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
  if (!history) return history.status();
  BindText(history->get(), 1, now);
  BindText(history->get(), 2, action);
  BindText(history->get(), 3, scope_text);
  BindText(history->get(), 4, name);
  BindText(history->get(), 5, reason);
  BindText(history->get(), 6, who);
  WARDEN_RETURN_IF_ERROR(StepDone(db, history->get(), "record kill switch history"));
  WARDEN_RETURN_IF_ERROR((*txn)->Commit());
  return kill ? !was_active : was_active;
}

template <typename T>
Result<std::vector<T>> KillStore::MissingTable(const char* table, std::vector<T>& empty) const {
  // A reader may open a file no gateway has set up yet: nothing is pulled. A store that
  // created the table and now misses it was tampered with, and must not read as "no switches".
  if (!options_.create) return std::move(empty);
  return Status::Error("table " + std::string(table) + " is missing from " + options_.path);
}

Result<std::vector<KillSwitch>> KillStore::Active() {
  std::lock_guard lock(mu_);
  sqlite3* db = db_.get();
  std::vector<KillSwitch> out;
  auto exists = TableExists(db, "state_kill_switches");
  if (!exists) return exists.status();
  if (!*exists) return MissingTable("state_kill_switches", out);
  auto stmt = Prepare(db,
                      "SELECT scope, name, reason, who, since FROM state_kill_switches "
                      "ORDER BY CASE scope WHEN 'global' THEN 0 WHEN 'tenant' THEN 1 "
                      "WHEN 'user' THEN 2 WHEN 'agent' THEN 3 WHEN 'session' THEN 4 "
                      "WHEN 'task' THEN 5 ELSE 6 END, "
                      "name");
  if (!stmt) return stmt.status();
  for (;;) {
    int rc = sqlite3_step(stmt->get());
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) return SqlError(db, "read kill switches");
    auto scope = ScopeFromColumn(ColumnText(stmt->get(), 0));
    if (!scope) return scope.status();
    out.push_back({*scope, ColumnText(stmt->get(), 1), ColumnText(stmt->get(), 2),
                   ColumnText(stmt->get(), 3), ColumnText(stmt->get(), 4)});
  }
  return out;
}

Result<std::vector<KillEvent>> KillStore::History(size_t limit) {
  std::lock_guard lock(mu_);
  sqlite3* db = db_.get();
  std::vector<KillEvent> out;
  auto exists = TableExists(db, "state_kill_history");
  if (!exists) return exists.status();
  if (!*exists) return MissingTable("state_kill_history", out);
  auto stmt = Prepare(db,
                      "SELECT id, time, action, scope, name, reason, who FROM ("
                      "SELECT * FROM state_kill_history ORDER BY id DESC LIMIT ?1) ORDER BY id");
  if (!stmt) return stmt.status();
  BindInt(stmt->get(), 1, limit == 0 ? -1 : static_cast<int64_t>(limit));
  for (;;) {
    int rc = sqlite3_step(stmt->get());
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) return SqlError(db, "read kill switch history");
    auto scope = ScopeFromColumn(ColumnText(stmt->get(), 3));
    if (!scope) return scope.status();
    KillEvent e;
    e.id = sqlite3_column_int64(stmt->get(), 0);
    e.time = ColumnText(stmt->get(), 1);
    e.action = ColumnText(stmt->get(), 2);
    e.scope = *scope;
    e.name = ColumnText(stmt->get(), 4);
    e.reason = ColumnText(stmt->get(), 5);
    e.who = ColumnText(stmt->get(), 6);
    out.push_back(std::move(e));
  }
  return out;
}

Result<int64_t> KillStore::DataVersion() {
  std::lock_guard lock(mu_);
  sqlite3* db = db_.get();
  auto stmt = Prepare(db, "PRAGMA data_version");
  if (!stmt) return stmt.status();
  if (sqlite3_step(stmt->get()) != SQLITE_ROW) return SqlError(db, "read data_version");
  return static_cast<int64_t>(sqlite3_column_int64(stmt->get(), 0));
}

}  // namespace warden::state
