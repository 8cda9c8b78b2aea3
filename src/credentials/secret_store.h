// The secret store (docs/credentials.md): named secrets per tenant, per user and optionally per
// upstream, encrypted at rest with AES-256-GCM under the master key ring, in the state database
// (table credentials_secrets, beside the audit log and state_*), plus the token signing keys
// (credentials_signing_keys), encrypted the same way. Values leave this class only through Get
// (the gateway, at call time) and never through List. Thread-safe: one connection, one mutex.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "credentials/master_key.h"
#include "state/database.h"

namespace warden::credentials {

// Where a secret belongs. tenant "" is single-user mode (a policy without tenants); user ""
// is the tenant's own secret, for every user of it; upstream "" is for any upstream, else only
// that upstream's credentials may use it.
struct SecretScope {
  std::string tenant, user, upstream;
};

// What List shows: everything but the value.
struct SecretInfo {
  SecretScope scope;
  std::string name;
  std::string key_id;                      // the master key it is encrypted under
  int64_t created_ms = 0, updated_ms = 0;  // Unix milliseconds
  size_t size = 0;                         // the value's length in bytes
};

struct SigningKeyRow {
  std::string kid;
  std::string private_der;  // PKCS#8 DER, decrypted
  int64_t created_ms = 0;
  int64_t retired_ms = 0;  // 0: current (signs); else retired (verifies until its tokens expire)
};

class SecretStore {
 public:
  // Secret names: 1 to 64 of [A-Za-z0-9_.-], starting with a letter or digit.
  static bool ValidName(std::string_view name);
  static constexpr size_t kMaxValueBytes = 64 * 1024;

  // Opens (with options.create, creates) the tables in the database options.path names and
  // checks the ring against what is stored: a secret or signing key encrypted under a key the
  // ring does not hold fails with "secret NAME (tenant T) is encrypted under master key ID, which
  // is not configured: set credentials.master_key to that key, or list it in
  // credentials.previous_keys" (the clear message a wrong master key gets at start).
  static Result<std::unique_ptr<SecretStore>> Open(const state::DatabaseOptions& options,
                                                   KeyRing ring);

  // Sets (creates or replaces) a secret; encrypted under ring.current().
  Status Set(const SecretScope& scope, const std::string& name, std::string_view value);
  // Removes it; false when there was none.
  Result<bool> Remove(const SecretScope& scope, const std::string& name);
  // Every secret, sorted by tenant, user, upstream, name; `tenant` non-null filters.
  Result<std::vector<SecretInfo>> List(const std::string* tenant = nullptr);

  // The value a call of `user` of `tenant` through upstream `upstream` gets for `name`, the
  // most specific first: the user's for this upstream, the user's, the tenant's for this
  // upstream, the tenant's. nullopt when none exists; an error when the row does not decrypt.
  struct Found {
    std::string value;
    SecretInfo info;
  };
  Result<std::optional<Found>> Get(const std::string& tenant, const std::string& user,
                                   const std::string& upstream, const std::string& name);

  // Re-encrypts every secret and signing key under ring.current(); returns how many rows changed.
  Result<size_t> Rewrap();

  // Signing keys (tokens.h): all of them, oldest first; Add stores a new current one and retires
  // the previous current at `now_ms`; Prune deletes keys retired before `before_ms`.
  Result<std::vector<SigningKeyRow>> SigningKeys();
  Status AddSigningKey(const std::string& kid, std::string_view private_der, int64_t now_ms);
  Result<size_t> PruneSigningKeys(int64_t before_ms);

  // Changes made by other connections since the last call (PRAGMA data_version): the gateway
  // re-reads what it cached (a rotated secret) when this is true.
  bool ChangedElsewhere();

  ~SecretStore();

 private:
  SecretStore(state::Db db, KeyRing ring);
  state::Db db_;
  KeyRing ring_;
  std::mutex mu_;
  int64_t data_version_ = -1;
};

}  // namespace warden::credentials
