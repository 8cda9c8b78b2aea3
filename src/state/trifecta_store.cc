#include "state/trifecta_store.h"

#include <sqlite3.h>

namespace warden::state {
namespace {

// STRICT, as the other state tables: a value of the wrong type is refused rather than stored
// half-right (a hash vector must be a blob). AUTOINCREMENT: ids are never reused after a purge,
// so that id order stays append order for every key. The (key, id) index serves Load (one key's
// rows in order), Forget and the grouping in PurgeBefore.
constexpr const char* kTrifectaSchema = R"sql(
CREATE TABLE IF NOT EXISTS state_trifecta (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  key TEXT NOT NULL CHECK (key != ''),
  call INTEGER NOT NULL,
  tool TEXT NOT NULL,
  legs INTEGER NOT NULL CHECK (legs BETWEEN 0 AND 255),
  prints BLOB NOT NULL,
  untrusted BLOB NOT NULL,
  trusted BLOB NOT NULL,
  time TEXT NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS state_trifecta_key_id ON state_trifecta (key, id);
)sql";

constexpr const char* kTrifectaAppend =
    "INSERT INTO state_trifecta (key, call, tool, legs, prints, untrusted, trusted, time) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";
constexpr const char* kTrifectaLoad =
    "SELECT id, call, tool, legs, prints, untrusted, trusted, time FROM state_trifecta "
    "WHERE key = ?1 ORDER BY id";
constexpr const char* kTrifectaForget = "DELETE FROM state_trifecta WHERE key = ?1";
// MAX(time) rather than the time of the row with the largest id: should the clock have stepped
// back between two appends, the key is kept while any of its rows is recent. Forgetting a
// session's state too early would let it send out what it read.
constexpr const char* kTrifectaPurge =
    "DELETE FROM state_trifecta WHERE key IN "
    "(SELECT key FROM state_trifecta GROUP BY key HAVING MAX(time) < ?1)";

constexpr size_t kHashBytes = sizeof(uint64_t);

// Resets a reused statement and clears its bindings when the scope ends, on every path, so
// that the next use starts clean and no bound buffer is referred to after it is gone.
class StatementUse {
 public:
  explicit StatementUse(sqlite3_stmt* stmt) : stmt_(stmt) {}
  ~StatementUse() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  StatementUse(const StatementUse&) = delete;
  StatementUse& operator=(const StatementUse&) = delete;

 private:
  sqlite3_stmt* stmt_;
};

// Little-endian whatever the host's order, so that a file moved between machines reads the same.
std::string PackTrifectaHashes(const std::vector<uint64_t>& hashes) {
  std::string out(hashes.size() * kHashBytes, '\0');
  char* p = out.data();
  for (uint64_t h : hashes) {
    for (size_t i = 0; i < kHashBytes; ++i) *p++ = static_cast<char>((h >> (8 * i)) & 0xff);
  }
  return out;
}

// An empty blob (not NULL: the column is NOT NULL) for an empty vector. `packed` is bound
// without a copy: it must outlive the StatementUse that clears the binding.
void BindTrifectaBlob(sqlite3_stmt* stmt, int index, const std::string& packed) {
  if (packed.empty()) {
    sqlite3_bind_zeroblob(stmt, index, 0);
  } else {
    sqlite3_bind_blob(stmt, index, packed.data(), static_cast<int>(packed.size()), SQLITE_STATIC);
  }
}

Result<std::vector<uint64_t>> UnpackTrifectaHashes(sqlite3_stmt* stmt, int index,
                                                   const char* column, const std::string& key,
                                                   int64_t id) {
  const std::string where =
      "state_trifecta row " + std::to_string(id) + " of key '" + key + "': " + column;
  if (sqlite3_column_type(stmt, index) != SQLITE_BLOB) {
    return Status::Error(where + " is not a blob of hashes");
  }
  const auto* bytes = static_cast<const unsigned char*>(sqlite3_column_blob(stmt, index));
  const size_t size = static_cast<size_t>(sqlite3_column_bytes(stmt, index));
  if (size % kHashBytes != 0) {
    return Status::Error(where + " is " + std::to_string(size) +
                         " bytes, not a whole number of 8-byte hashes: the database is damaged");
  }
  std::vector<uint64_t> out(size / kHashBytes);
  for (size_t n = 0; n < out.size(); ++n) {
    uint64_t h = 0;
    for (size_t i = 0; i < kHashBytes; ++i) {
      h |= static_cast<uint64_t>(bytes[n * kHashBytes + i]) << (8 * i);
    }
    out[n] = h;
  }
  return out;
}

Status ValidateTrifectaKey(const std::string& key) {
  if (key.empty()) return Status::Error("a trifecta state key is empty");
  if (key.size() > kMaxTrifectaKeyBytes) {
    return Status::Error("trifecta state key '" + key.substr(0, 64) + "...' is " +
                         std::to_string(key.size()) + " bytes, longer than " +
                         std::to_string(kMaxTrifectaKeyBytes));
  }
  if (key.find('\0') != std::string::npos) {
    return Status::Error("trifecta state key '" + key.substr(0, key.find('\0')) +
                         "...' has a NUL byte");
  }
  return Status::Ok();
}

Status ValidateTrifectaHashCount(const std::string& key, const char* what,
                                 const std::vector<uint64_t>& hashes) {
  if (hashes.size() <= kMaxTrifectaHashes) return Status::Ok();
  return Status::Error("trifecta row for key '" + key + "': " + what + " holds " +
                       std::to_string(hashes.size()) + " hashes, more than " +
                       std::to_string(kMaxTrifectaHashes));
}

}  // namespace

Result<std::unique_ptr<TrifectaStore>> TrifectaStore::Open(const DatabaseOptions& options,
                                                           bool sync_full) {
  auto db = OpenDatabase(options);
  if (!db) return db.status();
  if (options.create) {
    // OpenDatabase chose FULL, for the rare operator changes; these rows come with tool calls.
    if (!sync_full) {
      WARDEN_RETURN_IF_ERROR(
          Exec(db->get(), "PRAGMA synchronous = NORMAL", "set synchronous").Wrap(options.path));
    }
    auto txn = WriteTransaction::Begin(db->get());
    if (!txn) return txn.status().Wrap(options.path);
    WARDEN_RETURN_IF_ERROR(
        Exec(db->get(), kTrifectaSchema, "create trifecta table").Wrap(options.path));
    WARDEN_RETURN_IF_ERROR((*txn)->Commit().Wrap(options.path));
  }
  std::unique_ptr<TrifectaStore> store(new TrifectaStore(options, std::move(*db)));
  WARDEN_RETURN_IF_ERROR(store->PrepareStatements().Wrap(options.path));
  return store;
}

Status TrifectaStore::PrepareStatements() {
  sqlite3* db = db_.get();
  if (!data_version_) {
    auto version = Prepare(db, "PRAGMA data_version");
    if (!version) return version.status().Wrap("prepare data_version");
    data_version_ = std::move(*version);
  }
  if (!options_.create) {
    // A file no gateway has set up yet has no table to prepare against: Load reads no rows
    // until one has.
    auto exists = TableExists(db, "state_trifecta");
    if (!exists) return exists.status();
    if (!*exists) return Status::Ok();
  }
  auto prepare = [db](Stmt& into, const char* sql, const char* what) -> Status {
    auto stmt = Prepare(db, sql);
    if (!stmt) return stmt.status().Wrap(std::string("prepare trifecta ") + what);
    into = std::move(*stmt);
    return Status::Ok();
  };
  WARDEN_RETURN_IF_ERROR(prepare(load_, kTrifectaLoad, "load"));
  if (!options_.create) return Status::Ok();
  WARDEN_RETURN_IF_ERROR(prepare(append_, kTrifectaAppend, "append"));
  WARDEN_RETURN_IF_ERROR(prepare(forget_, kTrifectaForget, "forget"));
  WARDEN_RETURN_IF_ERROR(prepare(purge_, kTrifectaPurge, "purge"));
  return Status::Ok();
}

Status TrifectaStore::Writable() const {
  if (!options_.create) return Status::Error(options_.path + " was opened read-only");
  return Status::Ok();
}

Status TrifectaStore::Append(const std::string& key, const TrifectaRow& row) {
  WARDEN_RETURN_IF_ERROR(Writable());
  WARDEN_RETURN_IF_ERROR(ValidateTrifectaKey(key));
  WARDEN_RETURN_IF_ERROR(ValidateTrifectaHashCount(key, "prints", row.prints));
  WARDEN_RETURN_IF_ERROR(ValidateTrifectaHashCount(key, "untrusted_tokens", row.untrusted_tokens));
  WARDEN_RETURN_IF_ERROR(ValidateTrifectaHashCount(key, "trusted_tokens", row.trusted_tokens));
  // Packed before taking the lock (up to 1.5 MiB of copying), and declared before `use` so that
  // they outlive the bindings that point at them.
  const std::string prints = PackTrifectaHashes(row.prints);
  const std::string untrusted = PackTrifectaHashes(row.untrusted_tokens);
  const std::string trusted = PackTrifectaHashes(row.trusted_tokens);
  const std::string time = row.time.empty() ? Now() : row.time;

  std::lock_guard lock(mu_);
  sqlite3* db = db_.get();
  sqlite3_stmt* stmt = append_.get();
  StatementUse use(stmt);
  BindText(stmt, 1, key);
  // Stored as SQLite's signed 64-bit integer; the cast back in Load restores ids above 2^63.
  BindInt(stmt, 2, static_cast<int64_t>(row.call));
  BindText(stmt, 3, row.tool);
  BindInt(stmt, 4, row.legs);
  BindTrifectaBlob(stmt, 5, prints);
  BindTrifectaBlob(stmt, 6, untrusted);
  BindTrifectaBlob(stmt, 7, trusted);
  BindText(stmt, 8, time);
  return StepDone(db, stmt, "append trifecta row for key '" + key + "'");
}

Result<std::vector<TrifectaRow>> TrifectaStore::Load(const std::string& key) {
  WARDEN_RETURN_IF_ERROR(ValidateTrifectaKey(key));
  std::lock_guard lock(mu_);
  sqlite3* db = db_.get();
  std::vector<TrifectaRow> out;
  if (!load_) {
    // Read-only, and the table was missing: it may exist by now.
    WARDEN_RETURN_IF_ERROR(PrepareStatements().Wrap(options_.path));
    if (!load_) return out;
  }
  sqlite3_stmt* stmt = load_.get();
  StatementUse use(stmt);
  BindText(stmt, 1, key);
  for (;;) {
    const int rc = sqlite3_step(stmt);
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) return SqlError(db, "load trifecta rows of key '" + key + "'");
    const int64_t id = sqlite3_column_int64(stmt, 0);
    TrifectaRow row;
    row.call = static_cast<uint64_t>(sqlite3_column_int64(stmt, 1));
    row.tool = ColumnText(stmt, 2);
    const int64_t legs = sqlite3_column_int64(stmt, 3);
    if (legs < 0 || legs > 0xff) {
      return Status::Error("state_trifecta row " + std::to_string(id) + " of key '" + key +
                           "': legs " + std::to_string(legs) + " is not a byte");
    }
    row.legs = static_cast<uint8_t>(legs);
    auto prints = UnpackTrifectaHashes(stmt, 4, "prints", key, id);
    if (!prints) return prints.status();
    auto untrusted = UnpackTrifectaHashes(stmt, 5, "untrusted", key, id);
    if (!untrusted) return untrusted.status();
    auto trusted = UnpackTrifectaHashes(stmt, 6, "trusted", key, id);
    if (!trusted) return trusted.status();
    row.prints = std::move(*prints);
    row.untrusted_tokens = std::move(*untrusted);
    row.trusted_tokens = std::move(*trusted);
    row.time = ColumnText(stmt, 7);
    out.push_back(std::move(row));
  }
  return out;
}

Status TrifectaStore::Forget(const std::string& key) {
  WARDEN_RETURN_IF_ERROR(Writable());
  WARDEN_RETURN_IF_ERROR(ValidateTrifectaKey(key));
  std::lock_guard lock(mu_);
  sqlite3_stmt* stmt = forget_.get();
  StatementUse use(stmt);
  BindText(stmt, 1, key);
  return StepDone(db_.get(), stmt, "forget trifecta rows of key '" + key + "'");
}

Result<uint64_t> TrifectaStore::PurgeBefore(const std::string& before) {
  WARDEN_RETURN_IF_ERROR(Writable());
  if (before.empty()) return Status::Error("purging trifecta state needs a time (RFC 3339 UTC)");
  std::lock_guard lock(mu_);
  sqlite3* db = db_.get();
  sqlite3_stmt* stmt = purge_.get();
  StatementUse use(stmt);
  BindText(stmt, 1, before);
  WARDEN_RETURN_IF_ERROR(StepDone(db, stmt, "purge trifecta rows before " + before));
  return static_cast<uint64_t>(sqlite3_changes64(db));
}

Result<int64_t> TrifectaStore::DataVersion() {
  std::lock_guard lock(mu_);
  sqlite3* db = db_.get();
  sqlite3_stmt* stmt = data_version_.get();
  StatementUse use(stmt);
  if (sqlite3_step(stmt) != SQLITE_ROW) return SqlError(db, "read data_version");
  return static_cast<int64_t>(sqlite3_column_int64(stmt, 0));
}

}  // namespace warden::state
