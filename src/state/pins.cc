#include "state/pins.h"

#include <sqlite3.h>

#include <map>

#include "audit/entry.h"
#include "audit/sha256.h"

namespace warden::state {

using nlohmann::json;

namespace {

// state_pin_servers: the servers whose first manifest was pinned. state_pins: one row per tool
// of each such server, its pin (null for a tool that arrived later) and what the server listed
// last. The status column is the outcome of the latest review; approvals change it too.
constexpr const char* kPinSchema = R"sql(
CREATE TABLE IF NOT EXISTS state_pin_servers (
  server TEXT PRIMARY KEY,
  first_seen TEXT NOT NULL
) STRICT;
CREATE TABLE IF NOT EXISTS state_pins (
  server TEXT NOT NULL,
  tool TEXT NOT NULL,
  exposed_name TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('pinned', 'changed', 'new', 'removed')),
  pinned_hash TEXT,
  pinned_definition TEXT,
  current_hash TEXT NOT NULL,
  current_definition TEXT NOT NULL,
  first_seen TEXT NOT NULL,
  changed_at TEXT NOT NULL,
  approved_by TEXT NOT NULL,
  approved_at TEXT NOT NULL,
  PRIMARY KEY (server, tool)
) STRICT;
CREATE INDEX IF NOT EXISTS state_pins_exposed ON state_pins (exposed_name);
CREATE TABLE IF NOT EXISTS state_meta (
  key TEXT PRIMARY KEY,
  value INTEGER NOT NULL
) STRICT;
)sql";

constexpr const char* kColumns =
    "server, tool, exposed_name, status, pinned_definition, current_definition, first_seen, "
    "changed_at, approved_by, approved_at";

Result<PinStatus> StatusFromColumn(const std::string& text) {
  if (text == "pinned") return PinStatus::kPinned;
  if (text == "changed") return PinStatus::kChanged;
  if (text == "new") return PinStatus::kNew;
  if (text == "removed") return PinStatus::kRemoved;
  return Status::Error("unknown pin status '" + text + "' in the database");
}

Result<json> JsonColumn(sqlite3_stmt* stmt, int index) {
  if (ColumnIsNull(stmt, index)) return json(nullptr);
  json parsed = json::parse(ColumnText(stmt, index), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return Status::Error("a stored tool definition is not valid JSON");
  return parsed;
}

// A row of the state_pins table as Review needs it.
struct PinRow {
  std::string status, pinned_hash, current_hash, exposed_name;
  bool has_pin = false;
};

// Checks the shape Review relies on and returns the tools by name.
Result<std::map<std::string, const json*>> IndexManifest(const std::string& server,
                                                         const json& tools) {
  if (server.empty()) return Status::Error("the upstream server's name is empty");
  if (!tools.is_array()) {
    return Status::Error("server " + server + ": the tools/list result's tools is not an array");
  }
  std::map<std::string, const json*> by_name;
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& tool = tools[i];
    auto name = tool.is_object() ? tool.find("name") : tool.end();
    if (!tool.is_object() || name == tool.end() || !name->is_string() ||
        name->get_ref<const std::string&>().empty()) {
      return Status::Error("server " + server + ": tool " + std::to_string(i) +
                           " is not an object with a non-empty string name");
    }
    const std::string& text = name->get_ref<const std::string&>();
    // Two definitions under one name: which one would a call reach? Neither is shown.
    if (!by_name.emplace(text, &tool).second) {
      return Status::Error("server " + server + " lists tool '" + text + "' twice");
    }
  }
  return by_name;
}

}  // namespace

json PinnedDefinition(const json& tool) {
  json out = json::object();
  if (!tool.is_object()) return out;
  for (const char* member : kPinnedMembers) {
    auto it = tool.find(member);
    if (it != tool.end()) out[member] = *it;
  }
  return out;
}

std::string DefinitionHash(const json& tool) {
  return audit::Sha256Hex(audit::CanonicalJson(PinnedDefinition(tool)));
}

std::vector<std::string> ChangedMembers(const json& pinned, const json& current) {
  std::vector<std::string> out;
  for (const char* member : kPinnedMembers) {
    const json* a = pinned.is_object() && pinned.contains(member) ? &pinned[member] : nullptr;
    const json* b = current.is_object() && current.contains(member) ? &current[member] : nullptr;
    if ((a == nullptr) != (b == nullptr) || (a && *a != *b)) out.emplace_back(member);
  }
  return out;
}

const char* ToString(PinStatus status) {
  switch (status) {
    case PinStatus::kPinned:
      return "pinned";
    case PinStatus::kChanged:
      return "changed";
    case PinStatus::kNew:
      return "new";
    case PinStatus::kRemoved:
      return "removed";
  }
  return "changed";
}

Result<std::unique_ptr<PinStore>> PinStore::Open(const DatabaseOptions& options) {
  auto db = OpenDatabase(options);
  if (!db) return db.status();
  if (options.create) {
    auto txn = WriteTransaction::Begin(db->get());
    if (!txn) return txn.status().Wrap(options.path);
    WARDEN_RETURN_IF_ERROR(Exec(db->get(), kPinSchema, "create tool pin tables").Wrap(options.path));
    WARDEN_RETURN_IF_ERROR((*txn)->Commit().Wrap(options.path));
  }
  return std::unique_ptr<PinStore>(new PinStore(options, std::move(*db)));
}

Result<std::set<std::string>> PinStore::Review(const std::string& server, const std::string& prefix,
                                               const json& tools) {
  auto manifest = IndexManifest(server, tools);
  if (!manifest) return manifest.status();
  if (!options_.create) return Status::Error(options_.path + " was opened read-only");
  std::lock_guard lock(mu_);
  sqlite3* db = db_.get();
  const std::string now = Now();
  auto txn = WriteTransaction::Begin(db);
  if (!txn) return txn.status();

  auto known = Prepare(db, "SELECT 1 FROM state_pin_servers WHERE server = ?1");
  if (!known) return known.status();
  BindText(known->get(), 1, server);
  int rc = sqlite3_step(known->get());
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return SqlError(db, "read pinned servers");
  const bool first_manifest = rc == SQLITE_DONE;
  sqlite3_reset(known->get());

  std::set<std::string> shown;
  auto insert = Prepare(db, std::string("INSERT INTO state_pins (server, tool, exposed_name, "
                                        "status, pinned_hash, pinned_definition, current_hash, "
                                        "current_definition, first_seen, changed_at, "
                                        "approved_by, approved_at) VALUES (?1, ?2, ?3, ?4, ?5, "
                                        "?6, ?7, ?8, ?9, ?10, '', '')"));
  if (!insert) return insert.status();
  auto insert_tool = [&](const std::string& name, const json& tool, bool pin) -> Status {
    std::string definition = audit::CanonicalJson(PinnedDefinition(tool));
    std::string hash = audit::Sha256Hex(definition);
    sqlite3_stmt* s = insert->get();
    sqlite3_clear_bindings(s);
    BindText(s, 1, server);
    BindText(s, 2, name);
    BindText(s, 3, prefix + name);
    BindText(s, 4, pin ? "pinned" : "new");
    if (pin) {
      BindText(s, 5, hash);
      BindText(s, 6, definition);
    }
    BindText(s, 7, hash);
    BindText(s, 8, definition);
    BindText(s, 9, now);
    BindText(s, 10, pin ? "" : now);
    return StepDone(db, s, "pin tool " + name);
  };

  if (first_manifest) {
    // Nothing to trust in an empty manifest (a server still starting, say): pin on the first
    // one that lists tools.
    if (manifest->empty()) return shown;
    auto add = Prepare(db, "INSERT INTO state_pin_servers (server, first_seen) VALUES (?1, ?2)");
    if (!add) return add.status();
    BindText(add->get(), 1, server);
    BindText(add->get(), 2, now);
    WARDEN_RETURN_IF_ERROR(StepDone(db, add->get(), "pin server " + server));
    for (const auto& [name, tool] : *manifest) {
      WARDEN_RETURN_IF_ERROR(insert_tool(name, *tool, /*pin=*/true));
      shown.insert(name);
    }
    WARDEN_RETURN_IF_ERROR((*txn)->Commit());
    return shown;
  }

  std::map<std::string, PinRow> rows;
  {
    auto select = Prepare(db,
                          "SELECT tool, status, pinned_hash, current_hash, exposed_name "
                          "FROM state_pins WHERE server = ?1");
    if (!select) return select.status();
    BindText(select->get(), 1, server);
    while ((rc = sqlite3_step(select->get())) == SQLITE_ROW) {
      PinRow row{ColumnText(select->get(), 1), ColumnText(select->get(), 2),
                 ColumnText(select->get(), 3), ColumnText(select->get(), 4),
                 !ColumnIsNull(select->get(), 2)};
      rows.emplace(ColumnText(select->get(), 0), std::move(row));
    }
    if (rc != SQLITE_DONE) return SqlError(db, "read tool pins");
  }

  bool dirty = false;
  auto update = Prepare(db,
                        "UPDATE state_pins SET status = ?3, current_hash = ?4, "
                        "current_definition = ?5, exposed_name = ?6, changed_at = ?7 "
                        "WHERE server = ?1 AND tool = ?2");
  if (!update) return update.status();
  for (const auto& [name, tool] : *manifest) {
    auto it = rows.find(name);
    if (it == rows.end()) {
      WARDEN_RETURN_IF_ERROR(insert_tool(name, *tool, /*pin=*/false));
      dirty = true;
      continue;
    }
    const PinRow& row = it->second;
    std::string definition = audit::CanonicalJson(PinnedDefinition(*tool));
    std::string hash = audit::Sha256Hex(definition);
    const char* status = !row.has_pin ? "new" : hash == row.pinned_hash ? "pinned" : "changed";
    if (std::string_view(status) == "pinned") shown.insert(name);
    if (row.status == status && row.current_hash == hash && row.exposed_name == prefix + name) {
      continue;
    }
    sqlite3_stmt* s = update->get();
    BindText(s, 1, server);
    BindText(s, 2, name);
    BindText(s, 3, status);
    BindText(s, 4, hash);
    BindText(s, 5, definition);
    BindText(s, 6, prefix + name);
    BindText(s, 7, now);
    WARDEN_RETURN_IF_ERROR(StepDone(db, s, "update tool pin " + name));
    dirty = true;
  }

  // Gone from the manifest: a pin is kept (and shown as removed); a tool never approved is
  // forgotten.
  auto mark_removed = Prepare(db,
                              "UPDATE state_pins SET status = 'removed', changed_at = ?3 "
                              "WHERE server = ?1 AND tool = ?2");
  auto forget = Prepare(db, "DELETE FROM state_pins WHERE server = ?1 AND tool = ?2");
  if (!mark_removed) return mark_removed.status();
  if (!forget) return forget.status();
  for (const auto& [name, row] : rows) {
    if (manifest->count(name) || row.status == "removed") continue;
    sqlite3_stmt* s = row.has_pin ? mark_removed->get() : forget->get();
    BindText(s, 1, server);
    BindText(s, 2, name);
    if (row.has_pin) BindText(s, 3, now);
    WARDEN_RETURN_IF_ERROR(StepDone(db, s, "mark tool " + name + " removed"));
    dirty = true;
  }
  // Nothing changed: the transaction rolls back and the file is not written.
  if (dirty) WARDEN_RETURN_IF_ERROR((*txn)->Commit());
  return shown;
}

Result<std::vector<PinnedTool>> PinStore::Select(const std::string& where, const std::string& a,
                                                 const std::string& b) {
  sqlite3* db = db_.get();
  std::vector<PinnedTool> out;
  auto exists = TableExists(db, "state_pins");
  if (!exists) return exists.status();
  if (!*exists) return out;
  auto stmt = Prepare(db, std::string("SELECT ") + kColumns + " FROM state_pins" + where +
                              " ORDER BY server, exposed_name");
  if (!stmt) return stmt.status();
  sqlite3_stmt* s = stmt->get();
  int params = sqlite3_bind_parameter_count(s);
  if (params >= 1) BindText(s, 1, a);
  if (params >= 2) BindText(s, 2, b);
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    PinnedTool t;
    t.server = ColumnText(s, 0);
    t.upstream_name = ColumnText(s, 1);
    t.exposed_name = ColumnText(s, 2);
    auto status = StatusFromColumn(ColumnText(s, 3));
    if (!status) return status.status();
    t.status = *status;
    auto pinned = JsonColumn(s, 4);
    if (!pinned) return pinned.status().Wrap(t.exposed_name);
    auto current = JsonColumn(s, 5);
    if (!current) return current.status().Wrap(t.exposed_name);
    t.pinned_definition = std::move(*pinned);
    t.definition = std::move(*current);
    if (t.status == PinStatus::kChanged)
      t.changed = ChangedMembers(t.pinned_definition, t.definition);
    t.first_seen = ColumnText(s, 6);
    t.changed_at = ColumnText(s, 7);
    t.approved_by = ColumnText(s, 8);
    t.approved_at = ColumnText(s, 9);
    out.push_back(std::move(t));
  }
  if (rc != SQLITE_DONE) return SqlError(db, "read tool pins");
  return out;
}

Result<std::vector<PinnedTool>> PinStore::List(const std::string& server) {
  std::lock_guard lock(mu_);
  auto txn = ReadTransaction::Begin(db_.get());
  if (!txn) return txn.status();
  return server.empty() ? Select("", "", "") : Select(" WHERE server = ?1", server, "");
}

Status PinStore::ApproveRow(const PinnedTool& tool, const std::string& who,
                            const std::string& now) {
  sqlite3* db = db_.get();
  if (tool.status == PinStatus::kPinned) return Status::Ok();
  auto stmt = Prepare(db, tool.status == PinStatus::kRemoved
                              ? "DELETE FROM state_pins WHERE server = ?1 AND tool = ?2"
                              : "UPDATE state_pins SET status = 'pinned', pinned_hash = "
                                "current_hash, pinned_definition = current_definition, "
                                "approved_by = ?3, approved_at = ?4 "
                                "WHERE server = ?1 AND tool = ?2");
  if (!stmt) return stmt.status();
  BindText(stmt->get(), 1, tool.server);
  BindText(stmt->get(), 2, tool.upstream_name);
  if (tool.status != PinStatus::kRemoved) {
    BindText(stmt->get(), 3, who);
    BindText(stmt->get(), 4, now);
  }
  return StepDone(db, stmt->get(), "approve " + tool.exposed_name);
}

Status PinStore::BumpGeneration() {
  generation_read_.reset();  // this process's own approval shows at once
  return Exec(db_.get(),
              "INSERT INTO state_meta (key, value) VALUES ('pin_generation', 1) "
              "ON CONFLICT (key) DO UPDATE SET value = value + 1",
              "count approvals");
}

Result<PinnedTool> PinStore::Approve(const std::string& name, const std::string& who) {
  if (!options_.create) return Status::Error(options_.path + " was opened read-only");
  std::lock_guard lock(mu_);
  auto txn = WriteTransaction::Begin(db_.get());
  if (!txn) return txn.status();
  auto found = Select(" WHERE exposed_name = ?1", name, "");
  if (!found) return found.status();
  size_t split = name.find("__");
  if (found->empty() && split != std::string::npos && split > 0) {
    found =
        Select(" WHERE server = ?1 AND tool = ?2", name.substr(0, split), name.substr(split + 2));
    if (!found) return found.status();
  }
  if (found->empty()) {
    return Status::Error("no tool named '" + name +
                         "' is pinned or waiting for approval (`warden tools list` shows them)");
  }
  if (found->size() > 1) {
    return Status::Error("'" + name + "' names tools of several servers (" + (*found)[0].server +
                         ", " + (*found)[1].server + "): approve with SERVER__TOOL");
  }
  PinnedTool before = std::move((*found)[0]);
  if (before.status == PinStatus::kPinned) return before;
  WARDEN_RETURN_IF_ERROR(ApproveRow(before, who, Now()));
  WARDEN_RETURN_IF_ERROR(BumpGeneration());
  WARDEN_RETURN_IF_ERROR((*txn)->Commit());
  return before;
}

Result<std::vector<PinnedTool>> PinStore::ApproveServer(const std::string& server,
                                                        const std::string& who) {
  if (!options_.create) return Status::Error(options_.path + " was opened read-only");
  std::lock_guard lock(mu_);
  sqlite3* db = db_.get();
  auto txn = WriteTransaction::Begin(db);
  if (!txn) return txn.status();
  auto known = Prepare(db, "SELECT 1 FROM state_pin_servers WHERE server = ?1");
  if (!known) return known.status();
  BindText(known->get(), 1, server);
  int rc = sqlite3_step(known->get());
  if (rc == SQLITE_DONE) {
    return Status::Error("no manifest of a server named '" + server +
                         "' has been pinned (`warden tools list` shows the servers)");
  }
  if (rc != SQLITE_ROW) return SqlError(db, "read pinned servers");
  sqlite3_reset(known->get());
  auto waiting = Select(" WHERE server = ?1 AND status != 'pinned'", server, "");
  if (!waiting) return waiting.status();
  if (waiting->empty()) return waiting;
  const std::string now = Now();
  for (const PinnedTool& tool : *waiting) WARDEN_RETURN_IF_ERROR(ApproveRow(tool, who, now));
  WARDEN_RETURN_IF_ERROR(BumpGeneration());
  WARDEN_RETURN_IF_ERROR((*txn)->Commit());
  return waiting;
}

Result<int64_t> PinStore::ApprovalGeneration() {
  std::lock_guard lock(mu_);
  // Asked on every forwarded call; SQLite is asked at most every kGenerationFresh (each read
  // costs a page-cache reload once another connection, the audit log's, has committed).
  const auto now = std::chrono::steady_clock::now();
  if (generation_read_ && now - generation_read_->first < kGenerationFresh)
    return generation_read_->second;
  auto read = ReadGeneration();
  if (read) generation_read_ = std::make_pair(now, *read);
  return read;
}

Result<int64_t> PinStore::ReadGeneration() {
  sqlite3* db = db_.get();
  // Asked on every forwarded call: the statement is prepared once, when the table exists
  // (preparing it, and asking the schema first, cost ~50 us a call).
  if (!generation_stmt_) {
    auto exists = TableExists(db, "state_meta");
    if (!exists) return exists.status();
    if (!*exists) return int64_t{0};
    auto stmt = Prepare(db, "SELECT value FROM state_meta WHERE key = 'pin_generation'");
    if (!stmt) return stmt.status();
    generation_stmt_ = std::move(*stmt);
  }
  sqlite3_stmt* stmt = generation_stmt_.get();
  const int rc = sqlite3_step(stmt);
  const int64_t value = rc == SQLITE_ROW ? sqlite3_column_int64(stmt, 0) : 0;
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
    Status error = SqlError(db, "read approval generation");
    generation_stmt_.reset();  // prepared again next time (the schema may have changed)
    return error;
  }
  sqlite3_reset(stmt);
  return value;
}

}  // namespace warden::state
