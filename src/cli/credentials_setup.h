// Opening what a policy's `credentials` section names (docs/credentials.md): the master key ring
// (from the environment or a file, never the policy), the secret store in the state database,
// and, for a gateway, the token minter with its signing keys (one is made on first start, kept
// encrypted in the store). `warden serve`, `warden mcp` and `warden secrets` share it, so that
// all of them find the same store with the same key.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "credentials/secret_store.h"
#include "credentials/tokens.h"
#include "policy/model.h"

namespace warden::cli {

// The ring of `policy.credentials`. Errors name the section and the source ("credentials.
// master_key: environment variable WARDEN_MASTER_KEY is not set").
Result<credentials::KeyRing> KeyRingOf(const policy::Policy& policy);

// The store in `db_path` under the policy's key ring. Fails, with the message naming what to do,
// when the policy has no credentials section, the key cannot be read, or the stored secrets are
// encrypted under another key.
Result<std::unique_ptr<credentials::SecretStore>> OpenSecretStore(const policy::Policy& policy,
                                                                  const std::string& db_path,
                                                                  bool create);

// The minter over the store's signing keys; makes and stores the first key when there is none,
// and drops keys retired longer ago than any token they signed can live.
Result<std::unique_ptr<credentials::TokenMinter>> OpenTokenMinter(credentials::SecretStore& store);

// Whether two policies name the same keys (a reload that changes them needs a restart).
bool SameKeys(const policy::CredentialsSection& a, const policy::CredentialsSection& b);

}  // namespace warden::cli
