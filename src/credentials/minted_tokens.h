// The tokens warden minted that are still alive, and the ones revoked before their expiry
// (docs/credentials.md, "Revocation"): pulling a kill switch revokes the live tokens of the
// callers it stops, and the revoked ones are published (their jti and exp) at
// /.well-known/warden-revoked.json, which an upstream that must not honour a stopped caller's
// token for its remaining minutes checks beside the JWKS. Tokens are short-lived (5 minutes by
// default, an hour at most), so both lists stay small: an entry goes when its token expires.
// Bounded: past kMaxLive live tokens the oldest is forgotten (it can then no longer be revoked;
// counted in dropped()). Thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "credentials/tokens.h"

namespace warden::credentials {

class MintedTokens {
 public:
  static constexpr std::size_t kMaxLive = 100000;
  using Clock = std::chrono::system_clock;

  // Whose tokens to revoke: everyone's, or a tenant's, a user's or an agent's (by name, as kill
  // switches name them).
  enum class Holder { kAll, kTenant, kUser, kAgent };

  explicit MintedTokens(std::size_t max_live = kMaxLive) : max_live_(max_live) {}

  // A token just minted for (tenant, user, agent).
  void Record(const Token& token, const std::string& tenant, const std::string& user,
              const std::string& agent, Clock::time_point now = Clock::now());
  // Revokes every live token of the holder; returns how many.
  std::size_t Revoke(Holder holder, const std::string& name, Clock::time_point now = Clock::now());
  bool IsRevoked(const std::string& jti, Clock::time_point now = Clock::now()) const;
  // {"revoked": [{"jti", "exp"}...], "time": NOW}: the revoked tokens not yet expired, oldest
  // revocation first; exp and time in seconds since the epoch.
  nlohmann::json RevokedJson(Clock::time_point now = Clock::now()) const;
  uint64_t dropped() const;

 private:
  struct Entry {
    std::string jti, tenant, user, agent;
    Clock::time_point expires;
  };
  void Prune(Clock::time_point now);  // holds mu_

  const std::size_t max_live_;
  mutable std::mutex mu_;
  std::deque<Entry> live_;  // in minting order
  std::vector<Entry> revoked_;
  uint64_t dropped_ = 0;
};

}  // namespace warden::credentials
