#include "mcp/id_map.h"

namespace warden::mcp {

Result<Id> IdMapper::Forward(const std::string& session, const Id& downstream_id) {
  if (by_upstream_.size() >= capacity_) {
    return Status::Error("too many requests in flight to this upstream (limit " +
                         std::to_string(capacity_) + ")");
  }
  DownstreamRoute route{session, downstream_id};
  if (by_downstream_.contains(route)) {
    return Status::Error("request id " + downstream_id.ToString() +
                         " is already in flight in this session");
  }
  const std::int64_t upstream = next_++;
  by_upstream_.emplace(upstream, route);
  by_downstream_.emplace(std::move(route), upstream);
  return Id(upstream);
}

std::optional<DownstreamRoute> IdMapper::Resolve(const Id& upstream_id) {
  // Only integers are issued; a string "7" is not our 7.
  const std::optional<std::int64_t> key = upstream_id.AsInt64();
  if (!key) return std::nullopt;
  auto it = by_upstream_.find(*key);
  if (it == by_upstream_.end()) return std::nullopt;
  DownstreamRoute route = std::move(it->second);
  by_upstream_.erase(it);
  by_downstream_.erase(route);
  return route;
}

std::optional<Id> IdMapper::Cancel(const std::string& session, const Id& downstream_id) {
  auto it = by_downstream_.find(DownstreamRoute{session, downstream_id});
  if (it == by_downstream_.end()) return std::nullopt;
  const std::int64_t upstream = it->second;
  by_upstream_.erase(upstream);
  by_downstream_.erase(it);
  return Id(upstream);
}

std::vector<Id> IdMapper::ForgetSession(const std::string& session) {
  std::vector<Id> dropped;
  for (auto it = by_downstream_.begin(); it != by_downstream_.end();) {
    if (it->first.session == session) {
      dropped.emplace_back(it->second);
      by_upstream_.erase(it->second);
      it = by_downstream_.erase(it);
    } else {
      ++it;
    }
  }
  return dropped;
}

std::optional<Id> IdMapper::UpstreamIdFor(const std::string& session,
                                          const Id& downstream_id) const {
  auto it = by_downstream_.find(DownstreamRoute{session, downstream_id});
  if (it == by_downstream_.end()) return std::nullopt;
  return Id(it->second);
}

}  // namespace warden::mcp
