#include "credentials/secret_store.h"

#include <openssl/crypto.h>
#include <sqlite3.h>

#include <chrono>
#include <set>
#include <utility>

#include "credentials/aead.h"

namespace warden::credentials {

using namespace std::string_literals;
using state::Exec;
using state::Prepare;
using state::SqlError;
using state::StepDone;

namespace {

// STRICT, so that a hand-edited row cannot put text where the nonce or ciphertext belongs. A
// value's plaintext is never stored; its key_id names the master key it is sealed under, so that
// Open can say which key is missing instead of "does not decrypt".
constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS credentials_secrets (
  tenant TEXT NOT NULL,
  user TEXT NOT NULL,
  upstream TEXT NOT NULL,
  name TEXT NOT NULL,
  key_id TEXT NOT NULL,
  nonce BLOB NOT NULL,
  ciphertext BLOB NOT NULL,
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL,
  PRIMARY KEY (tenant, user, upstream, name)
) STRICT;
CREATE TABLE IF NOT EXISTS credentials_signing_keys (
  kid TEXT PRIMARY KEY,
  key_id TEXT NOT NULL,
  nonce BLOB NOT NULL,
  ciphertext BLOB NOT NULL,
  created_ms INTEGER NOT NULL,
  retired_ms INTEGER NOT NULL DEFAULT 0
) STRICT;
)sql";

constexpr const char* kSecrets = "credentials_secrets";
constexpr const char* kSigningKeys = "credentials_signing_keys";

constexpr int kTagBytes = 16;  // aead.cc's GCM tag, the difference between ciphertext and value
// Tenant, user and upstream names come from the policy and are short; a bound keeps a mistaken
// caller from storing megabytes of scope.
constexpr size_t kMaxScopeBytes = 1024;
constexpr size_t kMaxKidBytes = 128;

void BindBlob(sqlite3_stmt* stmt, int index, const std::string& bytes) {
  // A zero-length blob, not NULL, for an empty string: the columns are NOT NULL.
  sqlite3_bind_blob(stmt, index, bytes.empty() ? "" : bytes.data(), static_cast<int>(bytes.size()),
                    SQLITE_TRANSIENT);
}

std::string ColumnBlob(sqlite3_stmt* stmt, int index) {
  const void* data = sqlite3_column_blob(stmt, index);
  const int size = sqlite3_column_bytes(stmt, index);
  if (data == nullptr || size <= 0) return std::string();
  return std::string(static_cast<const char*>(data), static_cast<size_t>(size));
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void Cleanse(std::string& text) {
  if (!text.empty()) OPENSSL_cleanse(text.data(), text.size());
  text.clear();
}

// The associated data of a secret: every field that says whose and which secret a row is, and
// the key it is sealed under, NUL-separated (no field may hold a NUL, so no two rows share one).
// A row copied or moved under another tenant, user, upstream or name fails to decrypt.
std::string SecretAad(const SecretScope& scope, const std::string& name,
                      const std::string& key_id) {
  return "warden secret v1\0"s + scope.tenant + '\0' + scope.user + '\0' + scope.upstream + '\0' +
         name + '\0' + key_id;
}

std::string SigningKeyAad(const std::string& kid, const std::string& key_id) {
  return "warden signing key v1\0"s + kid + '\0' + key_id;
}

// How an error names a secret: its name and tenant, never its value.
std::string DescribeSecret(const std::string& tenant, const std::string& name) {
  return "secret " + name + (tenant.empty() ? " (no tenant)" : " (tenant " + tenant + ")");
}

Status NotConfigured(const std::string& what, const std::string& key_id) {
  return Status::Error(what + " is encrypted under master key " + key_id +
                       ", which is not configured: set credentials.master_key to that key, or "
                       "list it in credentials.previous_keys");
}

// Text that goes into an error message: control characters as '?', and at most 80 bytes, so a
// bad name cannot garble a terminal or fill a log.
std::string Printable(std::string_view text) {
  std::string out;
  for (unsigned char c : text.substr(0, 80)) out += (c < 0x20 || c == 0x7f) ? '?' : char(c);
  if (text.size() > 80) out += "...";
  return out;
}

Status CheckScopeField(const std::string& text, const char* field) {
  if (text.size() > kMaxScopeBytes) {
    return Status::Error(std::string("the secret's ") + field + " is longer than " +
                         std::to_string(kMaxScopeBytes) + " bytes");
  }
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f) {
      return Status::Error(std::string("the secret's ") + field + " '" + Printable(text) +
                           "' has a control character");
    }
  }
  return Status::Ok();
}

Status CheckScope(const SecretScope& scope) {
  WARDEN_RETURN_IF_ERROR(CheckScopeField(scope.tenant, "tenant"));
  WARDEN_RETURN_IF_ERROR(CheckScopeField(scope.user, "user"));
  return CheckScopeField(scope.upstream, "upstream");
}

Status CheckName(const std::string& name) {
  if (SecretStore::ValidName(name)) return Status::Ok();
  return Status::Error("secret name '" + Printable(name) +
                       "' is not valid: 1 to 64 letters, digits, '_', '.' or '-', starting "
                       "with a letter or digit");
}

Status Writable(sqlite3* db) {
  if (sqlite3_db_readonly(db, "main") == 1) {
    return Status::Error("the secret store was opened read-only");
  }
  return Status::Ok();
}

// A read-only store may open a file no gateway has set up: no secrets, no keys.
Result<bool> HasTable(sqlite3* db, const char* table) { return state::TableExists(db, table); }

struct SecretRow {
  SecretScope scope;
  std::string name, key_id;
  Sealed sealed;
};

struct SigningRow {
  std::string kid, key_id;
  Sealed sealed;
  int64_t created_ms = 0, retired_ms = 0;
};

Result<std::vector<SecretRow>> ReadSecretRows(sqlite3* db) {
  auto stmt = Prepare(db,
                      "SELECT tenant, user, upstream, name, key_id, nonce, ciphertext FROM "
                      "credentials_secrets ORDER BY tenant, user, upstream, name");
  if (!stmt) return stmt.status();
  std::vector<SecretRow> rows;
  int rc;
  while ((rc = sqlite3_step(stmt->get())) == SQLITE_ROW) {
    SecretRow row;
    row.scope.tenant = state::ColumnText(stmt->get(), 0);
    row.scope.user = state::ColumnText(stmt->get(), 1);
    row.scope.upstream = state::ColumnText(stmt->get(), 2);
    row.name = state::ColumnText(stmt->get(), 3);
    row.key_id = state::ColumnText(stmt->get(), 4);
    row.sealed.nonce = ColumnBlob(stmt->get(), 5);
    row.sealed.ciphertext = ColumnBlob(stmt->get(), 6);
    rows.push_back(std::move(row));
  }
  if (rc != SQLITE_DONE) return SqlError(db, "read the secrets");
  return rows;
}

Result<std::vector<SigningRow>> ReadSigningRows(sqlite3* db) {
  // Oldest first; rowid breaks a tie between keys made in the same millisecond.
  auto stmt = Prepare(db,
                      "SELECT kid, key_id, nonce, ciphertext, created_ms, retired_ms FROM "
                      "credentials_signing_keys ORDER BY created_ms, rowid");
  if (!stmt) return stmt.status();
  std::vector<SigningRow> rows;
  int rc;
  while ((rc = sqlite3_step(stmt->get())) == SQLITE_ROW) {
    SigningRow row;
    row.kid = state::ColumnText(stmt->get(), 0);
    row.key_id = state::ColumnText(stmt->get(), 1);
    row.sealed.nonce = ColumnBlob(stmt->get(), 2);
    row.sealed.ciphertext = ColumnBlob(stmt->get(), 3);
    row.created_ms = sqlite3_column_int64(stmt->get(), 4);
    row.retired_ms = sqlite3_column_int64(stmt->get(), 5);
    rows.push_back(std::move(row));
  }
  if (rc != SQLITE_DONE) return SqlError(db, "read the signing keys");
  return rows;
}

Result<std::string> OpenSecret(const KeyRing& ring, const SecretRow& row) {
  const std::string what = DescribeSecret(row.scope.tenant, row.name);
  const MasterKey* key = ring.Find(row.key_id);
  if (key == nullptr) return NotConfigured(what, row.key_id);
  auto value = Open(*key, row.sealed, SecretAad(row.scope, row.name, row.key_id));
  if (!value) return value.status().Wrap(what);
  return value;
}

Result<std::string> OpenSigningKey(const KeyRing& ring, const SigningRow& row) {
  const std::string what = "signing key " + row.kid;
  const MasterKey* key = ring.Find(row.key_id);
  if (key == nullptr) return NotConfigured(what, row.key_id);
  auto der = Open(*key, row.sealed, SigningKeyAad(row.kid, row.key_id));
  if (!der) return der.status().Wrap(what);
  return der;
}

Result<int64_t> DataVersion(sqlite3* db) {
  auto stmt = Prepare(db, "PRAGMA data_version");
  if (!stmt) return stmt.status();
  if (sqlite3_step(stmt->get()) != SQLITE_ROW) return SqlError(db, "read data_version");
  return static_cast<int64_t>(sqlite3_column_int64(stmt->get(), 0));
}

// Every row's key is in the ring, and one row per key actually decrypts: a key file that holds
// a different key under a colliding id, or a tampered table, is reported at start rather than on
// the first call that needs the secret.
Status CheckRing(sqlite3* db, const KeyRing& ring) {
  auto read = state::ReadTransaction::Begin(db);
  if (!read) return read.status();
  std::set<std::string> verified;
  auto has_secrets = HasTable(db, kSecrets);
  if (!has_secrets) return has_secrets.status();
  if (*has_secrets) {
    auto rows = ReadSecretRows(db);
    if (!rows) return rows.status();
    // Every id first, so the message about a missing key (the likely mistake) wins over one
    // about a row that does not decrypt.
    for (const SecretRow& row : *rows) {
      if (ring.Find(row.key_id) == nullptr) {
        return NotConfigured(DescribeSecret(row.scope.tenant, row.name), row.key_id);
      }
    }
    for (const SecretRow& row : *rows) {
      if (!verified.insert(row.key_id).second) continue;
      auto value = OpenSecret(ring, row);
      if (!value) return value.status();
      Cleanse(*value);
    }
  }
  auto has_keys = HasTable(db, kSigningKeys);
  if (!has_keys) return has_keys.status();
  if (*has_keys) {
    auto rows = ReadSigningRows(db);
    if (!rows) return rows.status();
    for (const SigningRow& row : *rows) {
      if (ring.Find(row.key_id) == nullptr) {
        return NotConfigured("signing key " + row.kid, row.key_id);
      }
    }
    for (const SigningRow& row : *rows) {
      if (!verified.insert(row.key_id).second) continue;
      auto der = OpenSigningKey(ring, row);
      if (!der) return der.status();
      Cleanse(*der);
    }
  }
  return Status::Ok();
}

}  // namespace

bool SecretStore::ValidName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  auto alnum = [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
  };
  if (!alnum(name[0])) return false;
  for (char c : name) {
    if (!alnum(c) && c != '_' && c != '.' && c != '-') return false;
  }
  return true;
}

SecretStore::SecretStore(state::Db db, KeyRing ring) : db_(std::move(db)), ring_(std::move(ring)) {}

SecretStore::~SecretStore() {
  for (MasterKey& key : ring_.keys) OPENSSL_cleanse(key.bytes.data(), key.bytes.size());
}

Result<std::unique_ptr<SecretStore>> SecretStore::Open(const state::DatabaseOptions& options,
                                                       KeyRing ring) {
  if (ring.keys.empty()) return Status::Error("the secret store was given no master key");
  auto db = state::OpenDatabase(options);
  if (!db) return db.status();
  if (options.create) {
    auto txn = state::WriteTransaction::Begin(db->get());
    if (!txn) return txn.status().Wrap(options.path);
    WARDEN_RETURN_IF_ERROR(
        Exec(db->get(), kSchema, "create the credentials tables").Wrap(options.path));
    WARDEN_RETURN_IF_ERROR((*txn)->Commit().Wrap(options.path));
  }
  WARDEN_RETURN_IF_ERROR(CheckRing(db->get(), ring).Wrap(options.path));
  auto version = DataVersion(db->get());
  if (!version) return version.status().Wrap(options.path);
  std::unique_ptr<SecretStore> store(new SecretStore(std::move(*db), std::move(ring)));
  store->data_version_ = *version;
  return store;
}

Status SecretStore::Set(const SecretScope& scope, const std::string& name, std::string_view value) {
  WARDEN_RETURN_IF_ERROR(CheckName(name));
  WARDEN_RETURN_IF_ERROR(CheckScope(scope));
  // The value's size, never its text: this message is shown and logged.
  if (value.empty()) return Status::Error("the value of secret " + name + " is empty");
  if (value.size() > kMaxValueBytes) {
    return Status::Error("the value of secret " + name + " is " + std::to_string(value.size()) +
                         " bytes, more than the " + std::to_string(kMaxValueBytes) +
                         " a secret may hold");
  }
  std::lock_guard<std::mutex> lock(mu_);
  sqlite3* db = db_.get();
  WARDEN_RETURN_IF_ERROR(Writable(db));
  const MasterKey& key = ring_.current();
  auto sealed = Seal(key, value, SecretAad(scope, name, key.id));
  if (!sealed) return sealed.status().Wrap("encrypt " + DescribeSecret(scope.tenant, name));
  // An upsert keeps created_ms: it says when the secret first existed, updated_ms when it last
  // changed.
  auto stmt = Prepare(db,
                      "INSERT INTO credentials_secrets (tenant, user, upstream, name, key_id, "
                      "nonce, ciphertext, created_ms, updated_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, "
                      "?7, ?8, ?8) ON CONFLICT (tenant, user, upstream, name) DO UPDATE SET "
                      "key_id = excluded.key_id, nonce = excluded.nonce, ciphertext = "
                      "excluded.ciphertext, updated_ms = excluded.updated_ms");
  if (!stmt) return stmt.status();
  state::BindText(stmt->get(), 1, scope.tenant);
  state::BindText(stmt->get(), 2, scope.user);
  state::BindText(stmt->get(), 3, scope.upstream);
  state::BindText(stmt->get(), 4, name);
  state::BindText(stmt->get(), 5, key.id);
  BindBlob(stmt->get(), 6, sealed->nonce);
  BindBlob(stmt->get(), 7, sealed->ciphertext);
  state::BindInt(stmt->get(), 8, NowMs());
  return StepDone(db, stmt->get(), "store " + DescribeSecret(scope.tenant, name));
}

Result<bool> SecretStore::Remove(const SecretScope& scope, const std::string& name) {
  WARDEN_RETURN_IF_ERROR(CheckName(name));
  std::lock_guard<std::mutex> lock(mu_);
  sqlite3* db = db_.get();
  WARDEN_RETURN_IF_ERROR(Writable(db));
  auto stmt = Prepare(db,
                      "DELETE FROM credentials_secrets WHERE tenant = ?1 AND user = ?2 AND "
                      "upstream = ?3 AND name = ?4");
  if (!stmt) return stmt.status();
  state::BindText(stmt->get(), 1, scope.tenant);
  state::BindText(stmt->get(), 2, scope.user);
  state::BindText(stmt->get(), 3, scope.upstream);
  state::BindText(stmt->get(), 4, name);
  WARDEN_RETURN_IF_ERROR(StepDone(db, stmt->get(), "remove " + DescribeSecret(scope.tenant, name)));
  return sqlite3_changes(db) > 0;
}

Result<std::vector<SecretInfo>> SecretStore::List(const std::string* tenant) {
  std::lock_guard<std::mutex> lock(mu_);
  sqlite3* db = db_.get();
  auto exists = HasTable(db, kSecrets);
  if (!exists) return exists.status();
  std::vector<SecretInfo> out;
  if (!*exists) return out;
  // The value's size comes from the ciphertext's length: List never decrypts anything.
  std::string sql =
      "SELECT tenant, user, upstream, name, key_id, length(ciphertext), created_ms, updated_ms "
      "FROM credentials_secrets";
  if (tenant != nullptr) sql += " WHERE tenant = ?1";
  sql += " ORDER BY tenant, user, upstream, name";
  auto stmt = Prepare(db, sql);
  if (!stmt) return stmt.status();
  if (tenant != nullptr) state::BindText(stmt->get(), 1, *tenant);
  int rc;
  while ((rc = sqlite3_step(stmt->get())) == SQLITE_ROW) {
    SecretInfo info;
    info.scope.tenant = state::ColumnText(stmt->get(), 0);
    info.scope.user = state::ColumnText(stmt->get(), 1);
    info.scope.upstream = state::ColumnText(stmt->get(), 2);
    info.name = state::ColumnText(stmt->get(), 3);
    info.key_id = state::ColumnText(stmt->get(), 4);
    const int64_t sealed_size = sqlite3_column_int64(stmt->get(), 5);
    info.size = sealed_size > kTagBytes ? static_cast<size_t>(sealed_size - kTagBytes) : 0;
    info.created_ms = sqlite3_column_int64(stmt->get(), 6);
    info.updated_ms = sqlite3_column_int64(stmt->get(), 7);
    out.push_back(std::move(info));
  }
  if (rc != SQLITE_DONE) return SqlError(db, "list the secrets");
  return out;
}

Result<std::optional<SecretStore::Found>> SecretStore::Get(const std::string& tenant,
                                                           const std::string& user,
                                                           const std::string& upstream,
                                                           const std::string& name) {
  WARDEN_RETURN_IF_ERROR(CheckName(name));
  std::lock_guard<std::mutex> lock(mu_);
  sqlite3* db = db_.get();
  auto exists = HasTable(db, kSecrets);
  if (!exists) return exists.status();
  if (!*exists) return std::optional<Found>();
  // All four lookups see one snapshot. Begun before the statement is prepared, so that the
  // statement is finalized before the transaction ends.
  auto read = state::ReadTransaction::Begin(db);
  if (!read) return read.status();
  auto stmt = Prepare(db,
                      "SELECT key_id, nonce, ciphertext, created_ms, updated_ms FROM "
                      "credentials_secrets WHERE tenant = ?1 AND user = ?2 AND upstream = ?3 AND "
                      "name = ?4");
  if (!stmt) return stmt.status();
  // The most specific first. A caller without a user or upstream ("" for either) makes two of
  // the four the same row; asking twice is harmless.
  const std::pair<const std::string*, const std::string*> order[] = {
      {&user, &upstream}, {&user, nullptr}, {nullptr, &upstream}, {nullptr, nullptr}};
  static const std::string kNone;
  for (const auto& [u, up] : order) {
    SecretRow row;
    row.scope = {tenant, u ? *u : kNone, up ? *up : kNone};
    row.name = name;
    sqlite3_reset(stmt->get());
    state::BindText(stmt->get(), 1, row.scope.tenant);
    state::BindText(stmt->get(), 2, row.scope.user);
    state::BindText(stmt->get(), 3, row.scope.upstream);
    state::BindText(stmt->get(), 4, name);
    const int rc = sqlite3_step(stmt->get());
    if (rc == SQLITE_DONE) continue;
    if (rc != SQLITE_ROW) return SqlError(db, "read " + DescribeSecret(tenant, name));
    row.key_id = state::ColumnText(stmt->get(), 0);
    row.sealed.nonce = ColumnBlob(stmt->get(), 1);
    row.sealed.ciphertext = ColumnBlob(stmt->get(), 2);
    Found found;
    found.info.scope = row.scope;
    found.info.name = name;
    found.info.key_id = row.key_id;
    found.info.created_ms = sqlite3_column_int64(stmt->get(), 3);
    found.info.updated_ms = sqlite3_column_int64(stmt->get(), 4);
    auto value = OpenSecret(ring_, row);
    if (!value) return value.status();
    found.value = std::move(*value);
    found.info.size = found.value.size();
    return std::optional<Found>(std::move(found));
  }
  return std::optional<Found>();
}

Result<size_t> SecretStore::Rewrap() {
  std::lock_guard<std::mutex> lock(mu_);
  sqlite3* db = db_.get();
  WARDEN_RETURN_IF_ERROR(Writable(db));
  auto txn = state::WriteTransaction::Begin(db);
  if (!txn) return txn.status();
  const MasterKey& current = ring_.current();
  size_t changed = 0;

  auto secrets = ReadSecretRows(db);
  if (!secrets) return secrets.status();
  auto update_secret = Prepare(db,
                               "UPDATE credentials_secrets SET key_id = ?5, nonce = ?6, "
                               "ciphertext = ?7 WHERE tenant = ?1 AND user = ?2 AND upstream = ?3 "
                               "AND name = ?4");
  if (!update_secret) return update_secret.status();
  for (const SecretRow& row : *secrets) {
    if (row.key_id == current.id) continue;
    auto value = OpenSecret(ring_, row);
    if (!value) return value.status();
    auto sealed = Seal(current, *value, SecretAad(row.scope, row.name, current.id));
    Cleanse(*value);
    if (!sealed)
      return sealed.status().Wrap("re-encrypt " + DescribeSecret(row.scope.tenant, row.name));
    sqlite3_stmt* stmt = update_secret->get();
    state::BindText(stmt, 1, row.scope.tenant);
    state::BindText(stmt, 2, row.scope.user);
    state::BindText(stmt, 3, row.scope.upstream);
    state::BindText(stmt, 4, row.name);
    state::BindText(stmt, 5, current.id);
    BindBlob(stmt, 6, sealed->nonce);
    BindBlob(stmt, 7, sealed->ciphertext);
    WARDEN_RETURN_IF_ERROR(
        StepDone(db, stmt, "re-encrypt " + DescribeSecret(row.scope.tenant, row.name)));
    ++changed;
  }

  auto keys = ReadSigningRows(db);
  if (!keys) return keys.status();
  auto update_key = Prepare(db,
                            "UPDATE credentials_signing_keys SET key_id = ?2, nonce = ?3, "
                            "ciphertext = ?4 WHERE kid = ?1");
  if (!update_key) return update_key.status();
  for (const SigningRow& row : *keys) {
    if (row.key_id == current.id) continue;
    auto der = OpenSigningKey(ring_, row);
    if (!der) return der.status();
    auto sealed = Seal(current, *der, SigningKeyAad(row.kid, current.id));
    Cleanse(*der);
    if (!sealed) return sealed.status().Wrap("re-encrypt signing key " + row.kid);
    sqlite3_stmt* stmt = update_key->get();
    state::BindText(stmt, 1, row.kid);
    state::BindText(stmt, 2, current.id);
    BindBlob(stmt, 3, sealed->nonce);
    BindBlob(stmt, 4, sealed->ciphertext);
    WARDEN_RETURN_IF_ERROR(StepDone(db, stmt, "re-encrypt signing key " + row.kid));
    ++changed;
  }
  WARDEN_RETURN_IF_ERROR((*txn)->Commit());
  return changed;
}

Result<std::vector<SigningKeyRow>> SecretStore::SigningKeys() {
  std::lock_guard<std::mutex> lock(mu_);
  sqlite3* db = db_.get();
  auto exists = HasTable(db, kSigningKeys);
  if (!exists) return exists.status();
  std::vector<SigningKeyRow> out;
  if (!*exists) return out;
  auto rows = ReadSigningRows(db);
  if (!rows) return rows.status();
  for (const SigningRow& row : *rows) {
    auto der = OpenSigningKey(ring_, row);
    if (!der) {
      for (SigningKeyRow& done : out) Cleanse(done.private_der);
      return der.status();
    }
    out.push_back({row.kid, std::move(*der), row.created_ms, row.retired_ms});
  }
  return out;
}

Status SecretStore::AddSigningKey(const std::string& kid, std::string_view private_der,
                                  int64_t now_ms) {
  if (kid.empty() || kid.size() > kMaxKidBytes) {
    return Status::Error("a signing key's kid must be 1 to " + std::to_string(kMaxKidBytes) +
                         " bytes");
  }
  for (unsigned char c : kid) {
    // The kid is a JWT header field and a JWKS member: printable ASCII without spaces.
    if (c <= 0x20 || c >= 0x7f) {
      return Status::Error("signing key kid '" + Printable(kid) +
                           "' has a character other than printable ASCII");
    }
  }
  if (private_der.empty()) return Status::Error("signing key " + kid + " is empty");
  if (private_der.size() > kMaxValueBytes) {
    return Status::Error("signing key " + kid + " is larger than " +
                         std::to_string(kMaxValueBytes) + " bytes");
  }
  if (now_ms <= 0) return Status::Error("signing key " + kid + " has no creation time");
  std::lock_guard<std::mutex> lock(mu_);
  sqlite3* db = db_.get();
  WARDEN_RETURN_IF_ERROR(Writable(db));
  const MasterKey& key = ring_.current();
  auto sealed = Seal(key, private_der, SigningKeyAad(kid, key.id));
  if (!sealed) return sealed.status().Wrap("encrypt signing key " + kid);
  auto txn = state::WriteTransaction::Begin(db);
  if (!txn) return txn.status();
  auto exists = Prepare(db, "SELECT 1 FROM credentials_signing_keys WHERE kid = ?1");
  if (!exists) return exists.status();
  state::BindText(exists->get(), 1, kid);
  const int rc = sqlite3_step(exists->get());
  if (rc == SQLITE_ROW) return Status::Error("signing key " + kid + " is already stored");
  if (rc != SQLITE_DONE) return SqlError(db, "read signing key " + kid);
  // One current key at a time: the one added last. The one it replaces keeps verifying tokens
  // it signed until they expire (TokenMinter publishes it until retired + max lifetime).
  auto retire =
      Prepare(db, "UPDATE credentials_signing_keys SET retired_ms = ?1 WHERE retired_ms = 0");
  if (!retire) return retire.status();
  state::BindInt(retire->get(), 1, now_ms);
  WARDEN_RETURN_IF_ERROR(StepDone(db, retire->get(), "retire the current signing key"));
  auto insert = Prepare(db,
                        "INSERT INTO credentials_signing_keys (kid, key_id, nonce, ciphertext, "
                        "created_ms, retired_ms) VALUES (?1, ?2, ?3, ?4, ?5, 0)");
  if (!insert) return insert.status();
  state::BindText(insert->get(), 1, kid);
  state::BindText(insert->get(), 2, key.id);
  BindBlob(insert->get(), 3, sealed->nonce);
  BindBlob(insert->get(), 4, sealed->ciphertext);
  state::BindInt(insert->get(), 5, now_ms);
  WARDEN_RETURN_IF_ERROR(StepDone(db, insert->get(), "store signing key " + kid));
  return (*txn)->Commit();
}

Result<size_t> SecretStore::PruneSigningKeys(int64_t before_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  sqlite3* db = db_.get();
  WARDEN_RETURN_IF_ERROR(Writable(db));
  // retired_ms <> 0: the current key is never pruned, however old.
  auto stmt = Prepare(db,
                      "DELETE FROM credentials_signing_keys WHERE retired_ms <> 0 AND "
                      "retired_ms < ?1");
  if (!stmt) return stmt.status();
  state::BindInt(stmt->get(), 1, before_ms);
  WARDEN_RETURN_IF_ERROR(StepDone(db, stmt->get(), "prune the signing keys"));
  return static_cast<size_t>(sqlite3_changes(db));
}

bool SecretStore::ChangedElsewhere() {
  std::lock_guard<std::mutex> lock(mu_);
  auto version = DataVersion(db_.get());
  // When the version cannot be read, say "changed": the caller re-reads, and that read reports
  // the database's trouble, where "unchanged" would keep serving a stale cache in silence.
  if (!version) return true;
  const bool changed = *version != data_version_;
  data_version_ = *version;
  return changed;
}

}  // namespace warden::credentials
