#include "cli/credentials_setup.h"

#include <chrono>

namespace warden::cli {

namespace {

credentials::KeySource SourceOf(const policy::KeySourceSpec& spec) {
  credentials::KeySource source;
  source.env = spec.env;
  source.file = spec.file;
  return source;
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Result<credentials::KeyRing> KeyRingOf(const policy::Policy& policy) {
  if (!policy.credentials.set) {
    return Status::Error(
        "the policy has no 'credentials' section, so there is no master key for the secret "
        "store: add credentials: { master_key: { env: VAR } } (or { file: PATH }) and pass "
        "--config FILE");
  }
  std::vector<credentials::KeySource> previous;
  for (const policy::KeySourceSpec& spec : policy.credentials.previous_keys)
    previous.push_back(SourceOf(spec));
  auto ring = credentials::LoadKeyRing(SourceOf(policy.credentials.master_key), previous);
  if (!ring) return ring.status().Wrap("credentials.master_key");
  return ring;
}

Result<std::unique_ptr<credentials::SecretStore>> OpenSecretStore(const policy::Policy& policy,
                                                                  const std::string& db_path,
                                                                  bool create) {
  auto ring = KeyRingOf(policy);
  if (!ring) return ring.status();
  auto store =
      credentials::SecretStore::Open({.path = db_path, .create = create}, std::move(*ring));
  if (!store) return store.status().Wrap("secret store in " + db_path);
  return store;
}

Result<std::unique_ptr<credentials::TokenMinter>> OpenTokenMinter(credentials::SecretStore& store) {
  auto entries = credentials::SigningKeyEntries(store);
  if (!entries) return entries.status();
  bool current = false;
  for (const auto& e : *entries) current = current || !e.retired;
  if (!current) {
    auto key = credentials::SigningKey::Generate();
    if (!key) return key.status();
    WARDEN_RETURN_IF_ERROR(store.AddSigningKey(key->kid(), key->PrivateDer(), NowMs()));
    entries = credentials::SigningKeyEntries(store);
    if (!entries) return entries.status();
  }
  // A retired key is kept (and published) until every token it signed has expired; the longest
  // lifetime a token can have is an hour (the loader's bound).
  (void)store.PruneSigningKeys(NowMs() - 3600 * 1000);
  // Every token's lifetime is at most an hour (the loader's bound): the minter's own bound.
  return credentials::TokenMinter::Create(std::move(*entries), std::chrono::seconds(3600));
}

bool SameKeys(const policy::CredentialsSection& a, const policy::CredentialsSection& b) {
  auto same = [](const policy::KeySourceSpec& x, const policy::KeySourceSpec& y) {
    return x.env == y.env && x.file == y.file;
  };
  if (a.set != b.set || !same(a.master_key, b.master_key) ||
      a.previous_keys.size() != b.previous_keys.size())
    return false;
  for (size_t i = 0; i < a.previous_keys.size(); ++i)
    if (!same(a.previous_keys[i], b.previous_keys[i])) return false;
  return true;
}

}  // namespace warden::cli
