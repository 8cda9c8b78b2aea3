#include "credentials/minted_tokens.h"

#include <algorithm>
#include <iterator>

namespace warden::credentials {

namespace {

int64_t Seconds(MintedTokens::Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

}  // namespace

void MintedTokens::Prune(Clock::time_point now) {
  // Lifetimes differ (a policy reload may change them), so an expired token may sit behind a
  // live one: remove_if over the whole list is linear, and the list is small.
  live_.erase(std::remove_if(live_.begin(), live_.end(),
                             [&](const Entry& e) { return e.expires <= now; }),
              live_.end());
  revoked_.erase(std::remove_if(revoked_.begin(), revoked_.end(),
                                [&](const Entry& e) { return e.expires <= now; }),
                 revoked_.end());
}

void MintedTokens::Record(const Token& token, const std::string& tenant, const std::string& user,
                          const std::string& agent, Clock::time_point now) {
  std::lock_guard lock(mu_);
  // Pruning on every record would make minting linear in the live tokens; once per 1024 and
  // whenever the bound is reached keeps it amortised constant.
  if (live_.size() >= max_live_ || (live_.size() & 1023) == 0) Prune(now);
  while (live_.size() >= max_live_) {
    live_.pop_front();
    ++dropped_;
  }
  live_.push_back({token.jti, tenant, user, agent, token.expires});
}

std::size_t MintedTokens::Revoke(Holder holder, const std::string& name, Clock::time_point now) {
  std::lock_guard lock(mu_);
  Prune(now);
  auto covered = [&](const Entry& e) {
    switch (holder) {
      case Holder::kAll: return true;
      case Holder::kTenant: return e.tenant == name;
      case Holder::kUser: return e.user == name;
      case Holder::kAgent: return e.agent == name;
    }
    return false;
  };
  // Those kept first, in order; the revoked after them, moved out in one pass.
  auto split = std::stable_partition(live_.begin(), live_.end(),
                                     [&](const Entry& e) { return !covered(e); });
  const std::size_t n = static_cast<std::size_t>(live_.end() - split);
  std::move(split, live_.end(), std::back_inserter(revoked_));
  live_.erase(split, live_.end());
  return n;
}

bool MintedTokens::IsRevoked(const std::string& jti, Clock::time_point now) const {
  std::lock_guard lock(mu_);
  return std::any_of(revoked_.begin(), revoked_.end(),
                     [&](const Entry& e) { return e.jti == jti && e.expires > now; });
}

nlohmann::json MintedTokens::RevokedJson(Clock::time_point now) const {
  std::lock_guard lock(mu_);
  nlohmann::json list = nlohmann::json::array();
  for (const Entry& e : revoked_)
    if (e.expires > now) list.push_back({{"jti", e.jti}, {"exp", Seconds(e.expires)}});
  return {{"revoked", std::move(list)}, {"time", Seconds(now)}};
}

uint64_t MintedTokens::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

}  // namespace warden::credentials
