#include "gateway/http/metrics_access.h"

#include <arpa/inet.h>

#include <algorithm>

#include "identity/identity.h"

namespace warden::gateway {

bool IsLoopbackPeer(const std::string& peer) {
  in6_addr a6{};
  if (inet_pton(AF_INET6, peer.c_str(), &a6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&a6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127;
  }
  in_addr a4{};
  return inet_pton(AF_INET, peer.c_str(), &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127;
}

Status MetricsAccess(const policy::Policy& policy, std::string_view authorization,
                     const std::string& peer) {
  const std::vector<std::string>& keys = policy.monitoring.metrics_keys;
  const bool local = IsLoopbackPeer(peer);
  if (authorization.empty()) {
    if (local) return Status::Ok();
    if (keys.empty())
      return Status::Error(
          "/metrics answers this host only: the policy names no metrics key "
          "(monitoring.metrics.keys) for scrapers elsewhere");
    return Status::Error("missing credentials: send 'Authorization: Bearer <metrics key>'");
  }
  // A key is a claim wherever it comes from: checked, never ignored.
  if (keys.empty())
    return Status::Error(std::string("the policy names no metrics key (monitoring.metrics.keys)") +
                         (local ? ": from this host, send no Authorization header" : ""));
  auto credentials = identity::BearerCredentials(authorization);
  if (!credentials) return Status::Error(credentials.status().message() + " (a metrics key)");
  const std::string hash = identity::HashApiKey(*credentials);
  if (std::find(keys.begin(), keys.end(), hash) == keys.end())
    return Status::Error("not a metrics key of the policy in force (monitoring.metrics.keys)");
  return Status::Ok();
}

}  // namespace warden::gateway
