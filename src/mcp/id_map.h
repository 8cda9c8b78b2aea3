// Request-id rewriting for forwarded requests. Two downstream sessions may both send id 1 to the
// same upstream; the gateway therefore gives each forwarded request a fresh upstream id and, when
// the upstream answers, maps the reply back to the session and the id (with its exact JSON type)
// that the downstream client used. Pure bookkeeping: no I/O, not thread-safe (one per upstream
// connection, used from that connection's strand).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"
#include "mcp/jsonrpc.h"

namespace warden::mcp {

// Where an upstream reply goes back to.
struct DownstreamRoute {
  std::string session;  // the downstream session id
  Id id;                // the id the downstream client used, exact type and value
  friend bool operator==(const DownstreamRoute&, const DownstreamRoute&) = default;
};

class IdMapper {
 public:
  // At most `capacity` requests may be in flight at once through this mapper.
  explicit IdMapper(std::size_t capacity = 4096) : capacity_(capacity) {}

  // Records a request about to be forwarded and returns the id to send upstream (an integer never
  // handed out before by this mapper). Fails, recording nothing, when `capacity` requests are
  // already in flight or when (session, id) is already in flight (a client reusing a live id).
  Result<Id> Forward(const std::string& session, const Id& downstream_id);

  // The upstream answered `upstream_id`: returns where the reply goes and forgets the entry.
  // nullopt for an id this mapper did not issue or already resolved (including a string id that
  // looks like an issued integer): the caller drops such a reply.
  std::optional<DownstreamRoute> Resolve(const Id& upstream_id);

  // The downstream client cancelled (session, id): returns the upstream id to name in the
  // notifications/cancelled sent upstream and forgets the entry; nullopt when not in flight.
  // A reply that arrives later for that upstream id then resolves to nothing, as the spec expects.
  std::optional<Id> Cancel(const std::string& session, const Id& downstream_id);

  // The downstream session ended: forgets all its entries and returns their upstream ids.
  std::vector<Id> ForgetSession(const std::string& session);

  // The upstream id for (session, id) while it is in flight (for mapping progress or logs).
  std::optional<Id> UpstreamIdFor(const std::string& session, const Id& downstream_id) const;

  std::size_t in_flight() const { return by_upstream_.size(); }
  std::size_t capacity() const { return capacity_; }

 private:
  struct RouteHash {
    std::size_t operator()(const DownstreamRoute& r) const {
      return std::hash<std::string>{}(r.session) * 31 + r.id.Hash();
    }
  };

  std::size_t capacity_;
  std::int64_t next_ = 1;
  std::unordered_map<std::int64_t, DownstreamRoute> by_upstream_;
  std::unordered_map<DownstreamRoute, std::int64_t, RouteHash> by_downstream_;
};

}  // namespace warden::mcp
