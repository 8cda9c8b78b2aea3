#include "state/approval_store.h"

#include <openssl/rand.h>
#include <sqlite3.h>

#include "audit/entry.h"

namespace warden::state {

using nlohmann::json;

namespace {

// STRICT, with CHECKs that keep a hand-edited row from meaning something the gateway would have
// to guess at: an unknown status, a decided row without its decider, a pending row with one,
// votes or arguments that are not JSON, a consumed row that was never approved. Times are the
// audit log's fixed-width RFC 3339 text, so they compare as strings.
// restart_cancelled (not in ApprovalRecord): CancelAllPending ended the row; retry_told: a retry
// has been told so (TakeRestartCancelled).
constexpr const char* kApprovalSchema = R"sql(
CREATE TABLE IF NOT EXISTS state_approvals (
  id TEXT PRIMARY KEY CHECK (length(id) = 36 AND substr(id, 1, 4) = 'apr_'
                             AND substr(id, 5) NOT GLOB '*[^0-9a-f]*'),
  tenant TEXT NOT NULL,
  user TEXT NOT NULL,
  agent TEXT NOT NULL,
  session TEXT NOT NULL,
  tool TEXT NOT NULL CHECK (tool <> ''),
  server TEXT NOT NULL,
  arguments TEXT NOT NULL CHECK (json_valid(arguments)),
  risk TEXT NOT NULL CHECK (risk IN ('low', 'medium', 'high')),
  rule TEXT NOT NULL,
  reason TEXT NOT NULL,
  reasons TEXT NOT NULL CHECK (json_valid(reasons) AND json_type(reasons) = 'array'),
  binding TEXT NOT NULL CHECK (length(binding) = 64 AND binding NOT GLOB '*[^0-9a-f]*'),
  retry_key TEXT NOT NULL CHECK (length(retry_key) = 64 AND retry_key NOT GLOB '*[^0-9a-f]*'),
  definition_hash TEXT NOT NULL CHECK (definition_hash = '' OR (length(definition_hash) = 64
                                       AND definition_hash NOT GLOB '*[^0-9a-f]*')),
  created TEXT NOT NULL,
  expires TEXT NOT NULL CHECK (expires >= created),
  status TEXT NOT NULL
    CHECK (status IN ('pending', 'approved', 'denied', 'expired', 'cancelled')),
  decided_by TEXT NOT NULL CHECK ((status = 'pending') = (decided_by = '')),
  decided_at TEXT NOT NULL CHECK ((status = 'pending') = (decided_at = '')),
  comment TEXT NOT NULL,
  votes_needed INTEGER NOT NULL CHECK (votes_needed IN (1, 2)),
  votes TEXT NOT NULL CHECK (json_valid(votes) AND json_type(votes) = 'array'
                             AND json_array_length(votes) <= votes_needed
                             AND (status <> 'approved' OR json_array_length(votes) = votes_needed)),
  consumed_at TEXT NOT NULL CHECK (consumed_at = '' OR status = 'approved'),
  restart_cancelled INTEGER NOT NULL CHECK (restart_cancelled IN (0, 1)
                                            AND (restart_cancelled = 0 OR status = 'cancelled')),
  retry_told INTEGER NOT NULL CHECK (retry_told IN (0, 1)
                                     AND (retry_told = 0 OR restart_cancelled = 1)),
  owner TEXT NOT NULL DEFAULT ''
) STRICT;
CREATE INDEX IF NOT EXISTS state_approvals_by_status ON state_approvals (status, created);
CREATE INDEX IF NOT EXISTS state_approvals_by_retry_key ON state_approvals (retry_key, created);
CREATE INDEX IF NOT EXISTS state_approvals_by_decided_at ON state_approvals (decided_at);
)sql";

// A table made before `owner` was added (development builds of this release) gets it.
constexpr const char* kAddOwnerColumn =
    "ALTER TABLE state_approvals ADD COLUMN owner TEXT NOT NULL DEFAULT ''";

constexpr const char* kApprovalColumns =
    "id, tenant, user, agent, session, tool, server, arguments, risk, rule, reason, reasons, "
    "binding, retry_key, definition_hash, created, expires, status, decided_by, decided_at, "
    "comment, votes_needed, votes, consumed_at, retry_told, owner";

constexpr size_t kMaxCommentBytes = 1024;     // a person's comment, or warden's why
constexpr size_t kMaxDeciderBytes = 256;      // who decided
constexpr size_t kMaxIdentityBytes = 1024;    // tenant, user, agent, session, tool, server
constexpr size_t kMaxPolicyTextBytes = 4096;  // rule, reason, each of reasons
// Who ends an approval that no person decided (expired, cancelled).
constexpr const char* kWarden = "warden";

bool IsLowerHex(std::string_view text, size_t size) {
  if (text.size() != size) return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool IsApprovalId(std::string_view id) {
  return id.size() == 36 && id.substr(0, 4) == "apr_" && IsLowerHex(id.substr(4), 32);
}

// The audit log's format, "2025-01-02T03:04:05.123456Z": fixed width, so text order is time order.
bool IsStoredTime(std::string_view text) {
  constexpr std::string_view kShape = "0000-00-00T00:00:00.000000Z";
  if (text.size() != kShape.size()) return false;
  for (size_t i = 0; i < text.size(); ++i) {
    const bool digit = text[i] >= '0' && text[i] <= '9';
    if (kShape[i] == '0' ? !digit : text[i] != kShape[i]) return false;
  }
  return true;
}

// A person's text: at most kMaxCommentBytes of valid UTF-8, with no control characters but
// newline and tab (a comment is shown to other people, in terminals and the console).
Status CheckComment(const std::string& comment, const char* what) {
  if (comment.size() > kMaxCommentBytes) {
    return Status::Error(std::string(what) + " is longer than " + std::to_string(kMaxCommentBytes) +
                         " bytes");
  }
  for (unsigned char c : comment) {
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
      return Status::Error(std::string(what) +
                           " has a control character (only newline and tab are allowed)");
    }
  }
  if (audit::ValidUtf8(comment) != comment) {
    return Status::Error(std::string(what) + " is not valid UTF-8");
  }
  return Status::Ok();
}

Status CheckDeciderText(const std::string& text, const char* what) {
  if (text.size() > kMaxDeciderBytes) {
    return Status::Error(std::string("the decider's ") + what + " is longer than " +
                         std::to_string(kMaxDeciderBytes) + " bytes");
  }
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f) {
      return Status::Error(std::string("the decider's ") + what + " has a control character");
    }
  }
  return Status::Ok();
}

Status CheckDecider(const Decider& who) {
  if (who.name.empty()) return Status::Error("who decides is not said");
  if (who.user.empty()) return Status::Error("the decider's user is not said");
  WARDEN_RETURN_IF_ERROR(CheckDeciderText(who.name, "name"));
  WARDEN_RETURN_IF_ERROR(CheckDeciderText(who.user, "user"));
  return CheckDeciderText(who.tenant, "tenant");
}

// Whether `vote` was cast by the person `who` is: by tenant and user, never by the name shown.
bool SamePerson(const ApprovalVote& vote, const Decider& who) {
  return vote.tenant == who.tenant && vote.user == who.user;
}

Status CheckSize(const std::string& text, size_t limit, const char* field) {
  if (text.size() <= limit) return Status::Ok();
  return Status::Error(std::string("the approval's ") + field + " is longer than " +
                       std::to_string(limit) + " bytes");
}

// What Create refuses: anything the table's CHECKs would, with a message naming the field.
Status CheckNewApproval(const ApprovalRecord& r) {
  if (!r.id.empty() && !IsApprovalId(r.id)) {
    return Status::Error("approval id '" + r.id + "' is not apr_ and 32 lower-case hex digits");
  }
  if (r.tool.empty()) return Status::Error("the approval names no tool");
  const std::pair<const std::string*, const char*> identity[] = {
      {&r.tenant, "tenant"}, {&r.user, "user"},     {&r.agent, "agent"}, {&r.session, "session"},
      {&r.tool, "tool"},     {&r.server, "server"}, {&r.owner, "owner"}};
  for (const auto& [text, field] : identity) {
    WARDEN_RETURN_IF_ERROR(CheckSize(*text, kMaxIdentityBytes, field));
  }
  WARDEN_RETURN_IF_ERROR(CheckSize(r.rule, kMaxPolicyTextBytes, "rule"));
  WARDEN_RETURN_IF_ERROR(CheckSize(r.reason, kMaxPolicyTextBytes, "reason"));
  for (const std::string& line : r.reasons) {
    WARDEN_RETURN_IF_ERROR(CheckSize(line, kMaxPolicyTextBytes, "reasons line"));
  }
  if (json::parse(r.arguments, nullptr, /*allow_exceptions=*/false).is_discarded()) {
    return Status::Error("the approval's arguments are not JSON text");
  }
  if (r.risk != "low" && r.risk != "medium" && r.risk != "high") {
    return Status::Error("the approval's risk '" + r.risk + "' is not low, medium or high");
  }
  if (!IsLowerHex(r.binding, 64)) {
    return Status::Error("the approval's binding is not 64 lower-case hex digits (a SHA-256)");
  }
  if (!IsLowerHex(r.retry_key, 64)) {
    return Status::Error("the approval's retry_key is not 64 lower-case hex digits (a SHA-256)");
  }
  if (!r.definition_hash.empty() && !IsLowerHex(r.definition_hash, 64)) {
    return Status::Error("the approval's definition_hash is neither empty nor a SHA-256 in hex");
  }
  if (!IsStoredTime(r.created) || !IsStoredTime(r.expires)) {
    return Status::Error(
        "the approval's created and expires must be RFC 3339 UTC with six fractional digits "
        "(state::Now())");
  }
  if (r.expires < r.created) return Status::Error("the approval expires before it was created");
  if (r.votes_needed != 1 && r.votes_needed != 2) {
    return Status::Error("an approval needs 1 or 2 votes, not " + std::to_string(r.votes_needed));
  }
  return Status::Ok();
}

Result<std::string> NewApprovalId() {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof bytes) != 1) {
    return Status::Error("could not draw a random approval id (OpenSSL RAND_bytes failed)");
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id = "apr_";
  for (unsigned char b : bytes) {
    id += kHex[b >> 4];
    id += kHex[b & 0xf];
  }
  return id;
}

// Stored votes keep each approver's comment too (ApprovalVote::comment).
json VotesToJson(const std::vector<ApprovalVote>& votes, bool with_comment) {
  json out = json::array();
  for (const ApprovalVote& v : votes) {
    json vote = {{"who", v.who}, {"at", v.at}};
    if (with_comment) vote["comment"] = v.comment;
    vote["tenant"] = v.tenant;
    vote["user"] = v.user;
    vote["in_band"] = v.in_band;
    out.push_back(std::move(vote));
  }
  return out;
}

std::string DumpStored(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<ApprovalRecord> ReadApprovalRow(sqlite3_stmt* stmt) {
  ApprovalRecord r;
  int i = 0;
  for (std::string* field : {&r.id, &r.tenant, &r.user, &r.agent, &r.session, &r.tool, &r.server,
                             &r.arguments, &r.risk, &r.rule, &r.reason}) {
    *field = ColumnText(stmt, i++);
  }
  json reasons = json::parse(ColumnText(stmt, i++), nullptr, false);
  if (!reasons.is_array()) return Status::Error("approval " + r.id + ": reasons is not an array");
  for (const json& line : reasons) {
    if (!line.is_string()) return Status::Error("approval " + r.id + ": a reason is not text");
    r.reasons.push_back(line.get<std::string>());
  }
  for (std::string* field :
       {&r.binding, &r.retry_key, &r.definition_hash, &r.created, &r.expires}) {
    *field = ColumnText(stmt, i++);
  }
  auto status = ParseApprovalStatus(ColumnText(stmt, i++));
  if (!status) return status.status().Wrap("approval " + r.id);
  r.status = *status;
  r.decided_by = ColumnText(stmt, i++);
  r.decided_at = ColumnText(stmt, i++);
  r.comment = ColumnText(stmt, i++);
  r.votes_needed = sqlite3_column_int(stmt, i++);
  json votes = json::parse(ColumnText(stmt, i++), nullptr, false);
  if (!votes.is_array()) return Status::Error("approval " + r.id + ": votes is not an array");
  for (const json& v : votes) {
    if (!v.is_object() || !v.contains("who") || !v["who"].is_string() || !v.contains("at") ||
        !v["at"].is_string()) {
      return Status::Error("approval " + r.id + ": a vote is not {who, at}");
    }
    ApprovalVote vote{v["who"].get<std::string>(), v["at"].get<std::string>(), "", "", "", false};
    if (v.contains("comment") && v["comment"].is_string()) vote.comment = v["comment"];
    // A vote stored before votes named their person is that name's, with no tenant.
    vote.user = vote.who;
    if (v.contains("user") && v["user"].is_string()) vote.user = v["user"];
    if (v.contains("tenant") && v["tenant"].is_string()) vote.tenant = v["tenant"];
    if (v.contains("in_band") && v["in_band"].is_boolean()) vote.in_band = v["in_band"];
    r.votes.push_back(std::move(vote));
  }
  r.consumed_at = ColumnText(stmt, i++);
  r.retry_told = sqlite3_column_int(stmt, i++) != 0;
  r.owner = ColumnText(stmt, i++);
  return r;
}

// The rows `sql` (SELECT kApprovalColumns ...) returns, with ?1 bound to `param` when given.
Result<std::vector<ApprovalRecord>> SelectApprovals(sqlite3* db, const std::string& sql,
                                                    const std::string* param, int64_t limit) {
  auto stmt = Prepare(db, sql);
  if (!stmt) return stmt.status();
  if (param) BindText(stmt->get(), 1, *param);
  if (limit != 0) BindInt(stmt->get(), 2, limit);
  std::vector<ApprovalRecord> out;
  for (;;) {
    int rc = sqlite3_step(stmt->get());
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) return SqlError(db, "read approvals");
    auto record = ReadApprovalRow(stmt->get());
    if (!record) return record.status();
    out.push_back(std::move(*record));
  }
  return out;
}

Result<std::optional<ApprovalRecord>> SelectApproval(sqlite3* db, const std::string& id) {
  auto rows = SelectApprovals(
      db, std::string("SELECT ") + kApprovalColumns + " FROM state_approvals WHERE id = ?1", &id,
      0);
  if (!rows) return rows.status();
  if (rows->empty()) return std::optional<ApprovalRecord>();
  return std::optional<ApprovalRecord>(std::move(rows->front()));
}

// Writes the decision columns of `r` (status, decided_by, decided_at, comment, votes).
Status WriteDecision(sqlite3* db, const ApprovalRecord& r) {
  auto stmt = Prepare(db,
                      "UPDATE state_approvals SET status = ?2, decided_by = ?3, decided_at = ?4, "
                      "comment = ?5, votes = ?6 WHERE id = ?1");
  if (!stmt) return stmt.status();
  BindText(stmt->get(), 1, r.id);
  BindText(stmt->get(), 2, std::string(ToString(r.status)));
  BindText(stmt->get(), 3, r.decided_by);
  BindText(stmt->get(), 4, r.decided_at);
  BindText(stmt->get(), 5, r.comment);
  BindText(stmt->get(), 6, DumpStored(VotesToJson(r.votes, true)));
  return StepDone(db, stmt->get(), "record the decision on approval " + r.id);
}

// Runs `sql` (an UPDATE, ?1 bound to each of `params`) in a write transaction; how many rows
// it changed.
Result<int> UpdateInTransaction(sqlite3* db, const char* sql,
                                const std::vector<std::string>& params, const std::string& step) {
  auto txn = WriteTransaction::Begin(db);
  if (!txn) return txn.status();
  auto stmt = Prepare(db, sql);
  if (!stmt) return stmt.status();
  for (size_t i = 0; i < params.size(); ++i)
    BindText(stmt->get(), static_cast<int>(i + 1), params[i]);
  WARDEN_RETURN_IF_ERROR(StepDone(db, stmt->get(), step));
  const int changed = sqlite3_changes(db);
  WARDEN_RETURN_IF_ERROR((*txn)->Commit());
  return changed;
}

}  // namespace

Decider Person(std::string tenant, std::string user, std::string name) {
  if (name.empty()) name = user;
  return Decider{std::move(tenant), std::move(user), std::move(name), false};
}

Decider AgentClient(std::string tenant, std::string user) {
  return Decider{std::move(tenant), std::move(user), kAgentClientName, true};
}

std::string_view ToString(ApprovalStatus status) {
  switch (status) {
    case ApprovalStatus::kPending:
      return "pending";
    case ApprovalStatus::kApproved:
      return "approved";
    case ApprovalStatus::kDenied:
      return "denied";
    case ApprovalStatus::kExpired:
      return "expired";
    case ApprovalStatus::kCancelled:
      return "cancelled";
  }
  return "pending";
}

Result<ApprovalStatus> ParseApprovalStatus(std::string_view text) {
  if (text == "pending") return ApprovalStatus::kPending;
  if (text == "approved") return ApprovalStatus::kApproved;
  if (text == "denied") return ApprovalStatus::kDenied;
  if (text == "expired") return ApprovalStatus::kExpired;
  if (text == "cancelled") return ApprovalStatus::kCancelled;
  return Status::Error("unknown approval status '" + std::string(text) + "'");
}

json ToJson(const ApprovalRecord& r) {
  // The stored text is JSON (Create and the table's CHECK see to it); should it not parse, the
  // text itself is shown rather than nothing.
  json arguments = json::parse(r.arguments, nullptr, /*allow_exceptions=*/false);
  if (arguments.is_discarded()) arguments = r.arguments;
  return {{"id", r.id},
          {"tenant", r.tenant},
          {"user", r.user},
          {"agent", r.agent},
          {"session", r.session},
          {"tool", r.tool},
          {"server", r.server},
          {"arguments", std::move(arguments)},
          {"risk", r.risk},
          {"rule", r.rule},
          {"reason", r.reason},
          {"reasons", r.reasons},
          {"binding", r.binding},
          {"definition_hash", r.definition_hash},
          {"created", r.created},
          {"expires", r.expires},
          {"status", ToString(r.status)},
          {"decided_by", r.decided_by},
          {"decided_at", r.decided_at},
          {"comment", r.comment},
          {"votes_needed", r.votes_needed},
          {"votes", VotesToJson(r.votes, true)},
          {"consumed_at", r.consumed_at}};
}

Result<std::unique_ptr<ApprovalStore>> ApprovalStore::Open(const DatabaseOptions& options) {
  auto db = OpenDatabase(options);
  if (!db) return db.status();
  if (options.create) {
    auto txn = WriteTransaction::Begin(db->get());
    if (!txn) return txn.status().Wrap(options.path);
    WARDEN_RETURN_IF_ERROR(
        Exec(db->get(), kApprovalSchema, "create the approvals table").Wrap(options.path));
    auto owner = Prepare(db->get(),
                         "SELECT 1 FROM pragma_table_info('state_approvals') WHERE name = 'owner'");
    if (!owner) return owner.status().Wrap(options.path);
    const int rc = sqlite3_step(owner->get());
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
      return SqlError(db->get(), "read the approvals table's columns").Wrap(options.path);
    }
    owner->reset();
    if (rc == SQLITE_DONE) {
      WARDEN_RETURN_IF_ERROR(
          Exec(db->get(), kAddOwnerColumn, "add the approvals' owner column").Wrap(options.path));
    }
    WARDEN_RETURN_IF_ERROR((*txn)->Commit().Wrap(options.path));
  }
  return std::unique_ptr<ApprovalStore>(new ApprovalStore(options, std::move(*db)));
}

Status ApprovalStore::Writable() const {
  if (!options_.create) return Status::Error(options_.path + " was opened read-only");
  return Status::Ok();
}

Result<bool> ApprovalStore::HasTable() {
  auto exists = TableExists(db_.get(), "state_approvals");
  if (!exists) return exists.status();
  // A reader may open a file no gateway has set up yet: no approvals. A store that created the
  // table and now misses it was tampered with.
  if (!*exists && options_.create) {
    return Status::Error("table state_approvals is missing from " + options_.path);
  }
  return *exists;
}

Result<ApprovalRecord> ApprovalStore::Create(ApprovalRecord record) {
  WARDEN_RETURN_IF_ERROR(Writable());
  WARDEN_RETURN_IF_ERROR(CheckNewApproval(record));
  // A new approval is pending, whatever the caller left in the decision fields.
  record.status = ApprovalStatus::kPending;
  record.decided_by.clear();
  record.decided_at.clear();
  record.comment.clear();
  record.votes.clear();
  record.consumed_at.clear();
  record.retry_told = false;
  const bool fresh_id = record.id.empty();

  std::lock_guard lock(mu_);
  sqlite3* db = db_.get();
  auto stmt = Prepare(db, std::string("INSERT INTO state_approvals (") + kApprovalColumns +
                              ", restart_cancelled) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, "
                              "?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, 'pending', '', '', '', "
                              "?18, '[]', '', 0, ?19, 0)");
  if (!stmt) return stmt.status();
  // 128 random bits do not collide; should the generator ever repeat itself, a second draw
  // rather than an error.
  for (int attempt = 0;; ++attempt) {
    if (fresh_id) {
      auto id = NewApprovalId();
      if (!id) return id.status();
      record.id = std::move(*id);
    }
    int i = 1;
    for (const std::string* field :
         {&record.id, &record.tenant, &record.user, &record.agent, &record.session, &record.tool,
          &record.server, &record.arguments, &record.risk, &record.rule, &record.reason}) {
      BindText(stmt->get(), i++, *field);
    }
    BindText(stmt->get(), i++, DumpStored(json(record.reasons)));
    for (const std::string* field : {&record.binding, &record.retry_key, &record.definition_hash,
                                     &record.created, &record.expires}) {
      BindText(stmt->get(), i++, *field);
    }
    BindInt(stmt->get(), i++, record.votes_needed);
    BindText(stmt->get(), i++, record.owner);
    Status inserted = StepDone(db, stmt->get(), "store approval " + record.id);
    if (inserted.ok()) return record;
    const bool duplicate = sqlite3_extended_errcode(db) == SQLITE_CONSTRAINT_PRIMARYKEY;
    if (!fresh_id || !duplicate || attempt == 2) return inserted;
  }
}

Result<std::optional<ApprovalRecord>> ApprovalStore::Get(const std::string& id) {
  std::lock_guard lock(mu_);
  auto exists = HasTable();
  if (!exists) return exists.status();
  if (!*exists) return std::optional<ApprovalRecord>();
  return SelectApproval(db_.get(), id);
}

Result<std::vector<ApprovalRecord>> ApprovalStore::List(bool all, size_t limit) {
  std::lock_guard lock(mu_);
  auto exists = HasTable();
  if (!exists) return exists.status();
  if (!*exists) return std::vector<ApprovalRecord>();
  std::string sql = std::string("SELECT ") + kApprovalColumns + " FROM state_approvals " +
                    (all ? "ORDER BY created DESC, rowid DESC"
                         : "WHERE status = 'pending' ORDER BY created, rowid") +
                    (limit != 0 ? " LIMIT ?2" : "");
  return SelectApprovals(db_.get(), sql, nullptr, static_cast<int64_t>(limit));
}

Result<DecideResult> ApprovalStore::Decide(const std::string& id, const Decider& who,
                                           const std::string& comment, bool approve) {
  WARDEN_RETURN_IF_ERROR(Writable());
  WARDEN_RETURN_IF_ERROR(CheckDecider(who));
  WARDEN_RETURN_IF_ERROR(CheckComment(comment, "the comment"));
  std::lock_guard lock(mu_);
  sqlite3* db = db_.get();
  // The write lock first, then the read: another process's decision either committed before
  // this read (and is seen) or waits for this commit (and then sees this one).
  auto txn = WriteTransaction::Begin(db);
  if (!txn) return txn.status();
  auto found = SelectApproval(db, id);
  if (!found) return found.status();
  DecideResult result;
  if (!*found) {
    result.error = DecideError::kNotFound;
    return result;
  }
  ApprovalRecord& r = result.record = std::move(**found);
  if (r.status != ApprovalStatus::kPending) {
    result.error = DecideError::kAlreadyDecided;
    return result;
  }
  const std::string now = Now();
  if (now > r.expires) {
    // The gateway's timer has not got to it yet (or the gateway is not running): the timeout is
    // the policy's bound on how long a call may wait, so it is not approved, or denied, late.
    r.status = ApprovalStatus::kExpired;
    r.decided_by = kWarden;
    r.decided_at = now;
    r.comment = "expired at " + r.expires + ", before this decision";
    WARDEN_RETURN_IF_ERROR(WriteDecision(db, r));
    WARDEN_RETURN_IF_ERROR((*txn)->Commit());
    result.error = DecideError::kAlreadyDecided;
    return result;
  }
  if (approve) {
    // The agent's own client is not a person: it may be the one vote self_approve allows, but
    // never one of two.
    if (who.in_band && r.votes_needed > 1) {
      result.error = DecideError::kNeedsPerson;
      return result;
    }
    for (const ApprovalVote& vote : r.votes) {
      if (SamePerson(vote, who)) {
        result.error = DecideError::kSameApprover;
        return result;
      }
    }
    r.votes.push_back({who.name, now, comment, who.tenant, who.user, who.in_band});
    if (static_cast<int>(r.votes.size()) >= r.votes_needed) {
      r.status = ApprovalStatus::kApproved;
      std::string voters;
      for (const ApprovalVote& vote : r.votes) voters += (voters.empty() ? "" : ", ") + vote.who;
      r.decided_by = std::move(voters);
      r.decided_at = now;
      r.comment = comment;
      result.decided = true;
    }
  } else {
    r.status = ApprovalStatus::kDenied;
    r.decided_by = who.name;
    r.decided_at = now;
    r.comment = comment;
    result.decided = true;
  }
  WARDEN_RETURN_IF_ERROR(WriteDecision(db, r));
  WARDEN_RETURN_IF_ERROR((*txn)->Commit());
  return result;
}

Result<DecideResult> ApprovalStore::Approve(const std::string& id, const Decider& who,
                                            const std::string& comment) {
  return Decide(id, who, comment, /*approve=*/true);
}

Result<DecideResult> ApprovalStore::Deny(const std::string& id, const Decider& who,
                                         const std::string& comment) {
  return Decide(id, who, comment, /*approve=*/false);
}

Result<bool> ApprovalStore::End(const std::string& id, ApprovalStatus status,
                                const std::string& why) {
  WARDEN_RETURN_IF_ERROR(Writable());
  WARDEN_RETURN_IF_ERROR(CheckComment(why, "the reason"));
  std::lock_guard lock(mu_);
  auto changed = UpdateInTransaction(
      db_.get(),
      "UPDATE state_approvals SET status = ?2, decided_by = ?3, decided_at = ?4, comment = ?5 "
      "WHERE id = ?1 AND status = 'pending'",
      {id, std::string(ToString(status)), kWarden, Now(), why},
      std::string(status == ApprovalStatus::kExpired ? "expire" : "cancel") + " approval " + id);
  if (!changed) return changed.status();
  return *changed == 1;
}

Result<bool> ApprovalStore::Expire(const std::string& id, const std::string& why) {
  return End(id, ApprovalStatus::kExpired, why);
}

Result<bool> ApprovalStore::Cancel(const std::string& id, const std::string& why) {
  return End(id, ApprovalStatus::kCancelled, why);
}

Result<bool> ApprovalStore::Consume(const std::string& id) {
  WARDEN_RETURN_IF_ERROR(Writable());
  std::lock_guard lock(mu_);
  auto changed = UpdateInTransaction(db_.get(),
                                     "UPDATE state_approvals SET consumed_at = ?2 WHERE id = ?1 "
                                     "AND status = 'approved' AND consumed_at = ''",
                                     {id, Now()}, "consume approval " + id);
  if (!changed) return changed.status();
  return *changed == 1;
}

Result<size_t> ApprovalStore::CancelAllPending(const std::string& why) {
  WARDEN_RETURN_IF_ERROR(Writable());
  WARDEN_RETURN_IF_ERROR(CheckComment(why, "the reason"));
  std::lock_guard lock(mu_);
  auto changed = UpdateInTransaction(
      db_.get(),
      "UPDATE state_approvals SET status = 'cancelled', decided_by = ?1, decided_at = ?2, "
      "comment = ?3, restart_cancelled = 1 WHERE status = 'pending'",
      {kWarden, Now(), why}, "cancel the pending approvals");
  if (!changed) return changed.status();
  return static_cast<size_t>(*changed);
}

Result<std::vector<ApprovalRecord>> ApprovalStore::CancelOrphaned(
    const std::string& why, const std::function<bool(const std::string& owner)>& gone) {
  WARDEN_RETURN_IF_ERROR(Writable());
  WARDEN_RETURN_IF_ERROR(CheckComment(why, "the reason"));
  std::lock_guard lock(mu_);
  sqlite3* db = db_.get();
  // One transaction: a row another gateway decides meanwhile is either decided first (and not
  // pending here) or waits for this commit (and then finds it cancelled).
  auto txn = WriteTransaction::Begin(db);
  if (!txn) return txn.status();
  auto pending = SelectApprovals(db,
                                 std::string("SELECT ") + kApprovalColumns +
                                     " FROM state_approvals WHERE status = 'pending' "
                                     "ORDER BY created, rowid",
                                 nullptr, 0);
  if (!pending) return pending.status();
  auto cancel = Prepare(db,
                        "UPDATE state_approvals SET status = 'cancelled', decided_by = ?2, "
                        "decided_at = ?3, comment = ?4, restart_cancelled = 1 WHERE id = ?1");
  if (!cancel) return cancel.status();
  const std::string now = Now();
  std::vector<ApprovalRecord> out;
  for (ApprovalRecord& r : *pending) {
    if (!gone(r.owner)) continue;
    BindText(cancel->get(), 1, r.id);
    BindText(cancel->get(), 2, kWarden);
    BindText(cancel->get(), 3, now);
    BindText(cancel->get(), 4, why);
    WARDEN_RETURN_IF_ERROR(StepDone(db, cancel->get(), "cancel approval " + r.id));
    r.status = ApprovalStatus::kCancelled;
    r.decided_by = kWarden;
    r.decided_at = now;
    r.comment = why;
    out.push_back(std::move(r));
  }
  WARDEN_RETURN_IF_ERROR((*txn)->Commit());
  return out;
}

Result<std::vector<ApprovalRecord>> ApprovalStore::DecidedSince(const std::string& since) {
  std::lock_guard lock(mu_);
  auto exists = HasTable();
  if (!exists) return exists.status();
  if (!*exists) return std::vector<ApprovalRecord>();
  return SelectApprovals(db_.get(),
                         std::string("SELECT ") + kApprovalColumns +
                             " FROM state_approvals WHERE status <> 'pending' AND decided_at >= ?1 "
                             "ORDER BY decided_at, rowid",
                         &since, 0);
}

Result<std::optional<ApprovalRecord>> ApprovalStore::TakeRestartCancelled(
    const std::string& retry_key) {
  WARDEN_RETURN_IF_ERROR(Writable());
  std::lock_guard lock(mu_);
  sqlite3* db = db_.get();
  auto txn = WriteTransaction::Begin(db);
  if (!txn) return txn.status();
  auto rows = SelectApprovals(db,
                              std::string("SELECT ") + kApprovalColumns +
                                  " FROM state_approvals WHERE retry_key = ?1 AND "
                                  "restart_cancelled = 1 AND retry_told = 0 "
                                  "ORDER BY created DESC, rowid DESC LIMIT 1",
                              &retry_key, 0);
  if (!rows) return rows.status();
  if (rows->empty()) return std::optional<ApprovalRecord>();
  ApprovalRecord& r = rows->front();
  auto told = Prepare(db, "UPDATE state_approvals SET retry_told = 1 WHERE id = ?1");
  if (!told) return told.status();
  BindText(told->get(), 1, r.id);
  WARDEN_RETURN_IF_ERROR(StepDone(db, told->get(), "mark approval " + r.id + " told"));
  WARDEN_RETURN_IF_ERROR((*txn)->Commit());
  r.retry_told = true;
  return std::optional<ApprovalRecord>(std::move(r));
}

Result<int64_t> ApprovalStore::DataVersion() {
  std::lock_guard lock(mu_);
  sqlite3* db = db_.get();
  auto stmt = Prepare(db, "PRAGMA data_version");
  if (!stmt) return stmt.status();
  if (sqlite3_step(stmt->get()) != SQLITE_ROW) return SqlError(db, "read data_version");
  return static_cast<int64_t>(sqlite3_column_int64(stmt->get(), 0));
}

}  // namespace warden::state
