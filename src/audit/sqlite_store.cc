#include "audit/sqlite_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <variant>
#include <vector>

#include "audit/db_file.h"
#include "audit/sha256.h"

namespace warden::audit {

using nlohmann::json;

namespace {

struct DbCloser {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
struct StmtFinalizer {
  void operator()(sqlite3_stmt* stmt) const { sqlite3_finalize(stmt); }
};
using Db = std::unique_ptr<sqlite3, DbCloser>;
using Stmt = std::unique_ptr<sqlite3_stmt, StmtFinalizer>;

// Every column, in the order Decode reads them.
constexpr const char* kColumns =
    "id, time, kind, tenant, user, agent, session, tool, arguments, decision, rule, reason, "
    "approvals, result, labels, latency_us, prev_hash, hash";

// STRICT tables refuse a value of the wrong type, so a stored entry cannot be half text.
constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS audit_entries (
  id INTEGER PRIMARY KEY,
  time TEXT NOT NULL,
  kind TEXT NOT NULL,
  tenant TEXT NOT NULL,
  user TEXT NOT NULL,
  agent TEXT NOT NULL,
  session TEXT NOT NULL,
  tool TEXT NOT NULL,
  arguments TEXT NOT NULL,
  decision TEXT NOT NULL,
  rule TEXT NOT NULL,
  reason TEXT NOT NULL,
  approvals TEXT NOT NULL,
  result TEXT,
  labels TEXT NOT NULL,
  latency_us INTEGER NOT NULL,
  prev_hash TEXT NOT NULL,
  hash TEXT NOT NULL
) STRICT;
-- Two indexes only: each one is another page written and checksummed on every commit.
CREATE INDEX IF NOT EXISTS audit_entries_time ON audit_entries (time);
CREATE INDEX IF NOT EXISTS audit_entries_tenant ON audit_entries (tenant, id);
CREATE TABLE IF NOT EXISTS audit_head (
  singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
  count INTEGER NOT NULL,
  hash TEXT NOT NULL
) STRICT;
)sql";

Status SqlError(sqlite3* db, const std::string& step) {
  return Status::Error(step + ": " + sqlite3_errmsg(db) + " (sqlite error " +
                       std::to_string(sqlite3_extended_errcode(db)) + ")");
}

Status Exec(sqlite3* db, const char* sql, const std::string& step) {
  if (sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK) return SqlError(db, step);
  return Status::Ok();
}

Result<Stmt> Prepare(sqlite3* db, const std::string& sql, bool persistent = false) {
  sqlite3_stmt* stmt = nullptr;
  unsigned flags = persistent ? SQLITE_PREPARE_PERSISTENT : 0;
  if (sqlite3_prepare_v3(db, sql.c_str(), static_cast<int>(sql.size()), flags, &stmt, nullptr) !=
      SQLITE_OK) {
    return SqlError(db, "prepare");
  }
  return Stmt(stmt);
}

// Clears a cached statement's bindings and state when it goes out of scope.
class StmtReset {
 public:
  explicit StmtReset(sqlite3_stmt* stmt) : stmt_(stmt) {}
  ~StmtReset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  StmtReset(const StmtReset&) = delete;
  StmtReset& operator=(const StmtReset&) = delete;

 private:
  sqlite3_stmt* stmt_;
};

void BindText(sqlite3_stmt* stmt, int index, const std::string& text) {
  sqlite3_bind_text(stmt, index, text.data(), static_cast<int>(text.size()), SQLITE_STATIC);
}

std::string ColumnText(sqlite3_stmt* stmt, int index) {
  const unsigned char* text = sqlite3_column_text(stmt, index);
  return text ? std::string(reinterpret_cast<const char*>(text),
                            static_cast<size_t>(sqlite3_column_bytes(stmt, index)))
              : std::string();
}

Result<json> ColumnJson(sqlite3_stmt* stmt, int index, const char* name) {
  if (sqlite3_column_type(stmt, index) == SQLITE_NULL) return json(nullptr);
  json parsed = json::parse(ColumnText(stmt, index), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded())
    return Status::Error(std::string("column ") + name + " is not valid JSON");
  return parsed;
}

// One row of kColumns as an entry; any column that does not decode makes the row unreadable.
Result<AuditEntry> Decode(sqlite3_stmt* stmt) {
  json j = json::object();
  int64_t id = sqlite3_column_int64(stmt, 0);
  int64_t latency = sqlite3_column_int64(stmt, 15);
  if (id < 0 || latency < 0) return Status::Error("negative id or latency_us");
  j["id"] = static_cast<uint64_t>(id);
  j["latency_us"] = static_cast<uint64_t>(latency);
  const std::pair<int, const char*> texts[] = {{1, "time"},    {2, "kind"},       {3, "tenant"},
                                               {4, "user"},    {5, "agent"},      {6, "session"},
                                               {7, "tool"},    {9, "decision"},   {10, "rule"},
                                               {11, "reason"}, {16, "prev_hash"}, {17, "hash"}};
  for (auto [index, name] : texts) j[name] = ColumnText(stmt, index);
  const std::pair<int, const char*> documents[] = {
      {8, "arguments"}, {12, "approvals"}, {13, "result"}, {14, "labels"}};
  for (auto [index, name] : documents) {
    auto value = ColumnJson(stmt, index, name);
    if (!value) return value.status();
    j[name] = std::move(*value);
  }
  return FromJson(j);
}

Result<Db> OpenDb(const std::string& path, int flags, int busy_timeout_ms) {
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW,
                           nullptr);
  Db db(raw);
  if (rc != SQLITE_OK) {
    return Status::Error("open " + path + ": " + (raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc)));
  }
  sqlite3_extended_result_codes(raw, 1);
  sqlite3_busy_timeout(raw, busy_timeout_ms);
  return db;
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

// Runs `stmt` to the end, handing each row to `visit`.
Status StepRows(sqlite3* db, sqlite3_stmt* stmt, const RowVisitor& visit) {
  for (;;) {
    int rc = sqlite3_step(stmt);
    if (rc == SQLITE_DONE) return Status::Ok();
    if (rc != SQLITE_ROW) return SqlError(db, "read audit entries");
    auto id = static_cast<uint64_t>(sqlite3_column_int64(stmt, 0));
    if (!visit(id, Decode(stmt))) return Status::Ok();
  }
}

}  // namespace

struct SqliteAuditStore::Connection {
  Db db;
  Stmt head_select, head_update, insert;
};

namespace {

// WAL size (pages, 16 MB) at which the background checkpoint starts. Most frames are new
// versions of the same few pages (the head, the last leaf), so a longer WAL copies fewer
// pages per entry.
constexpr int kCheckpointPages = 4000;
// WAL size at which the committing thread checkpoints itself, should the background thread
// fall behind a sustained stream of commits: bounds the WAL at about 128 MB of 4 KB pages.
constexpr int kInlineCheckpointPages = 8 * kCheckpointPages;

}  // namespace

class SqliteAuditStore::Checkpointer {
 public:
  explicit Checkpointer(Db db) : db_(std::move(db)), thread_([this] { Run(); }) {}
  ~Checkpointer() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  void Request() {
    {
      std::lock_guard lock(mu_);
      wanted_ = true;
    }
    cv_.notify_one();
  }

 private:
  void Run() {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return wanted_ || stop_; });
      if (stop_) return;
      wanted_ = false;
      lock.unlock();
      // PASSIVE never blocks writers or readers; what it cannot copy now, the next one will.
      sqlite3_wal_checkpoint_v2(db_.get(), "main", SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
      lock.lock();
    }
  }

  Db db_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool wanted_ = false, stop_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

int SqliteAuditStore::OnWalCommit(void* store, sqlite3* db, const char* name, int wal_pages) {
  auto* self = static_cast<SqliteAuditStore*>(store);
  if (wal_pages >= kInlineCheckpointPages) {
    sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
  } else if (wal_pages >= kCheckpointPages && self->checkpointer_) {
    self->checkpointer_->Request();
  }
  return SQLITE_OK;
}

SqliteAuditStore::SqliteAuditStore(AuditOptions options) : options_(std::move(options)) {}

SqliteAuditStore::~SqliteAuditStore() {
  if (writer_) sqlite3_wal_hook(writer_->db.get(), nullptr, nullptr);
  checkpointer_.reset();
}

Result<std::unique_ptr<SqliteAuditStore>> SqliteAuditStore::Open(const AuditOptions& options) {
  std::unique_ptr<SqliteAuditStore> store(new SqliteAuditStore(options));
  const std::string& path = options.path;
  if (!options.create) {
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) {
      return Status::FromErrno(
          "no audit log at " + path + " (warden serve creates it; --db names another)", errno);
    }
    return store;
  }
  WARDEN_RETURN_IF_ERROR(audit::CreateDatabaseFile(path));
  auto db = OpenDb(path, SQLITE_OPEN_READWRITE, options.busy_timeout_ms);
  if (!db) return db.status();
  sqlite3* raw = db->get();

  auto mode = Prepare(raw, "PRAGMA journal_mode = WAL");
  if (!mode) return mode.status();
  if (sqlite3_step(mode->get()) != SQLITE_ROW || ColumnText(mode->get(), 0) != "wal") {
    return Status::Error("could not put " + path + " in WAL mode: " + sqlite3_errmsg(raw));
  }
  mode->reset();
  const char* sync = options.sync == SyncLevel::kFull ? "PRAGMA synchronous = FULL"
                                                      : "PRAGMA synchronous = NORMAL";
  WARDEN_RETURN_IF_ERROR(Exec(raw, sync, "set synchronous"));

  // The head is born with the table: a head missing beside existing entries stays missing,
  // so verify reports it and appends fail, rather than a new chain starting over at 1.
  WARDEN_RETURN_IF_ERROR(Exec(raw, "BEGIN IMMEDIATE", "begin schema transaction"));
  Status st = Exec(raw, kSchema, "create audit tables");
  if (st.ok()) {
    st = Exec(
        raw,
        "INSERT INTO audit_head (singleton, count, hash) SELECT 1, 0, "
        "'0000000000000000000000000000000000000000000000000000000000000000' "
        "WHERE NOT EXISTS (SELECT 1 FROM audit_head) AND NOT EXISTS (SELECT 1 FROM audit_entries)",
        "create audit head");
  }
  if (st.ok()) st = Exec(raw, "COMMIT", "commit audit tables");
  if (!st.ok()) {
    sqlite3_exec(raw, "ROLLBACK", nullptr, nullptr, nullptr);
    return st.Wrap(path);
  }

  auto conn = std::make_unique<Connection>();
  auto head_select = Prepare(raw, "SELECT count, hash FROM audit_head WHERE singleton = 1", true);
  auto head_update =
      Prepare(raw, "UPDATE audit_head SET count = ?1, hash = ?2 WHERE singleton = 1", true);
  auto insert = Prepare(raw,
                        std::string("INSERT INTO audit_entries (") + kColumns +
                            ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, "
                            "?14, ?15, ?16, ?17, ?18)",
                        true);
  for (auto* prepared : {&head_select, &head_update, &insert}) {
    if (!*prepared) return prepared->status().Wrap(path);
  }
  conn->head_select = std::move(*head_select);
  conn->head_update = std::move(*head_update);
  conn->insert = std::move(*insert);
  conn->db = std::move(*db);
  // Replaces SQLite's automatic checkpoint, which would run inside the committing Append.
  sqlite3_wal_hook(conn->db.get(), &SqliteAuditStore::OnWalCommit, store.get());
  store->writer_ = std::move(conn);
  auto checkpoint_db = OpenDb(path, SQLITE_OPEN_READWRITE, options.busy_timeout_ms);
  if (!checkpoint_db) return checkpoint_db.status();
  // SQLite 3.40 ignores a checkpoint on a connection that has not yet opened the WAL, which
  // happens on its first read.
  WARDEN_RETURN_IF_ERROR(
      Exec(checkpoint_db->get(), "SELECT count(*) FROM sqlite_master", "open the WAL"));
  store->checkpointer_ = std::make_unique<Checkpointer>(std::move(*checkpoint_db));
  return store;
}

Status SqliteAuditStore::AppendBatch(std::span<AuditEntry* const> batch) {
  if (batch.empty()) return Status::Ok();
  std::lock_guard lock(write_mu_);
  if (!writer_) return Status::Error("audit log " + options_.path + " was opened read-only");
  sqlite3* db = writer_->db.get();
  // IMMEDIATE takes the write lock before the head is read, so no other process can append
  // between our read of the head and our commit.
  WARDEN_RETURN_IF_ERROR(Exec(db, "BEGIN IMMEDIATE", "begin audit transaction"));
  Status st = WriteBatch(batch);
  if (st.ok()) st = Exec(db, "COMMIT", "commit audit entries");
  if (!st.ok()) sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
  return st;
}

Status SqliteAuditStore::WriteBatch(std::span<AuditEntry* const> batch) {
  sqlite3* db = writer_->db.get();
  sqlite3_stmt* head_select = writer_->head_select.get();
  uint64_t count;
  std::string hash;
  {
    StmtReset reset(head_select);
    int rc = sqlite3_step(head_select);
    if (rc == SQLITE_DONE)
      return Status::Error("the audit head record is missing: run `warden audit verify`");
    if (rc != SQLITE_ROW) return SqlError(db, "read audit head");
    count = static_cast<uint64_t>(sqlite3_column_int64(head_select, 0));
    hash = ColumnText(head_select, 1);
  }
  sqlite3_stmt* insert = writer_->insert.get();
  for (AuditEntry* e : batch) {
    e->id = ++count;
    e->prev_hash = hash;
    CanonicalFields fields = CanonicalJsonFields(*e);
    e->hash = Sha256Hex(e->prev_hash, CanonicalBody(*e, fields));
    hash = e->hash;
    std::string kind(ToString(e->kind));
    StmtReset reset(insert);
    sqlite3_bind_int64(insert, 1, static_cast<int64_t>(e->id));
    BindText(insert, 2, e->time);
    BindText(insert, 3, kind);
    BindText(insert, 4, e->tenant);
    BindText(insert, 5, e->user);
    BindText(insert, 6, e->agent);
    BindText(insert, 7, e->session);
    BindText(insert, 8, e->tool);
    BindText(insert, 9, fields.arguments);
    BindText(insert, 10, e->decision);
    BindText(insert, 11, e->rule);
    BindText(insert, 12, e->reason);
    BindText(insert, 13, fields.approvals);
    if (e->result) {
      BindText(insert, 14, fields.result);
    } else {
      sqlite3_bind_null(insert, 14);
    }
    BindText(insert, 15, fields.labels);
    sqlite3_bind_int64(insert, 16, static_cast<int64_t>(e->latency_us));
    BindText(insert, 17, e->prev_hash);
    BindText(insert, 18, e->hash);
    if (sqlite3_step(insert) != SQLITE_DONE)
      return SqlError(db, "insert audit entry " + std::to_string(e->id));
  }
  sqlite3_stmt* head_update = writer_->head_update.get();
  StmtReset reset(head_update);
  sqlite3_bind_int64(head_update, 1, static_cast<int64_t>(count));
  BindText(head_update, 2, hash);
  if (sqlite3_step(head_update) != SQLITE_DONE) return SqlError(db, "update audit head");
  return Status::Ok();
}

Result<std::unique_ptr<SqliteAuditStore::Connection>> SqliteAuditStore::OpenReader() const {
  auto db = OpenDb(options_.path, SQLITE_OPEN_READONLY, options_.busy_timeout_ms);
  if (!db) return db.status();
  auto conn = std::make_unique<Connection>();
  conn->db = std::move(*db);
  return conn;
}

Status SqliteAuditStore::Scan(const AuditFilter& filter, const RowVisitor& visit) {
  auto reader = OpenReader();
  if (!reader) return reader.status();
  sqlite3* db = (*reader)->db.get();
  auto exists = TableExists(db, "audit_entries");
  if (!exists) return exists.status();
  if (!*exists) return Status::Ok();

  std::string where = " WHERE 1 = 1";
  std::vector<std::variant<std::string, int64_t>> params;
  auto add = [&](const char* clause, const std::string& value) {
    if (value.empty()) return;
    where += clause;
    params.emplace_back(value);
  };
  add(" AND time >= ?", filter.since);
  add(" AND time < ?", filter.until);
  add(" AND tenant = ?", filter.tenant);
  add(" AND user = ?", filter.user);
  add(" AND agent = ?", filter.agent);
  add(" AND session = ?", filter.session);
  add(" AND tool = ?", filter.tool);
  add(" AND decision = ?", filter.decision);
  if (filter.kind) add(" AND kind = ?", std::string(ToString(*filter.kind)));
  if (filter.after_id > 0) {
    where += " AND id > ?";
    params.emplace_back(static_cast<int64_t>(filter.after_id));
  }
  std::string sql = std::string("SELECT ") + kColumns + " FROM audit_entries" + where;
  if (filter.limit > 0) {
    sql += filter.newest ? " ORDER BY id DESC LIMIT ?" : " ORDER BY id LIMIT ?";
    params.emplace_back(static_cast<int64_t>(filter.limit));
    if (filter.newest) sql = std::string("SELECT ") + kColumns + " FROM (" + sql + ") ORDER BY id";
  } else {
    sql += " ORDER BY id";
  }
  auto stmt = Prepare(db, sql);
  if (!stmt) return stmt.status();
  for (size_t i = 0; i < params.size(); ++i) {
    int index = static_cast<int>(i + 1);
    if (auto* text = std::get_if<std::string>(&params[i])) {
      BindText(stmt->get(), index, *text);
    } else {
      sqlite3_bind_int64(stmt->get(), index, std::get<int64_t>(params[i]));
    }
  }
  return StepRows(db, stmt->get(), visit);
}

Status SqliteAuditStore::ScanChain(std::optional<ChainHead>* head, const RowVisitor& visit) {
  head->reset();
  auto reader = OpenReader();
  if (!reader) return reader.status();
  sqlite3* db = (*reader)->db.get();
  // One read transaction: the head and the rows come from the same snapshot even while
  // appends go on.
  WARDEN_RETURN_IF_ERROR(Exec(db, "BEGIN", "begin read transaction"));
  Status st = [&]() -> Status {
    auto has_head = TableExists(db, "audit_head");
    if (!has_head) return has_head.status();
    if (*has_head) {
      auto stmt = Prepare(db, "SELECT count, hash FROM audit_head WHERE singleton = 1");
      if (!stmt) return stmt.status();
      int rc = sqlite3_step(stmt->get());
      if (rc == SQLITE_ROW) {
        *head = ChainHead{static_cast<uint64_t>(sqlite3_column_int64(stmt->get(), 0)),
                          ColumnText(stmt->get(), 1)};
      } else if (rc != SQLITE_DONE) {
        return SqlError(db, "read audit head");
      }
    }
    auto has_entries = TableExists(db, "audit_entries");
    if (!has_entries) return has_entries.status();
    if (!*has_entries) {
      if (!*has_head) *head = ChainHead{};  // nothing written yet: an empty, valid chain
      return Status::Ok();
    }
    auto stmt = Prepare(db, std::string("SELECT ") + kColumns + " FROM audit_entries ORDER BY id");
    if (!stmt) return stmt.status();
    return StepRows(db, stmt->get(), visit);
  }();
  sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
  return st;
}

}  // namespace warden::audit
