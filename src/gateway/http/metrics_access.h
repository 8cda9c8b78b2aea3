// Who may read GET /metrics (docs/monitoring.md, "Scraping"): a peer on this host without a key,
// as Prometheus scrapes a local target; any other peer only with a bearer key whose hash the
// policy lists under monitoring.metrics.keys. A metrics key reads /metrics and nothing else (the
// loader refuses one that is also an identity key).
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "policy/policy.h"

namespace warden::gateway {

// Ok, or why not (for the 401's body; never quotes the header).
Status MetricsAccess(const policy::Policy& policy, std::string_view authorization,
                     const std::string& peer);

// Whether `peer` (an IP address as text) is this host: 127.0.0.0/8, ::1 or ::ffff:127.x.y.z.
bool IsLoopbackPeer(const std::string& peer);

}  // namespace warden::gateway
