// Which entries a query, tail or export returns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "audit/entry.h"

namespace warden::audit {

struct AuditFilter {
  // Time range in the canonical form of time_format.h (ParseTimeBound makes one):
  // since <= time < until; "" leaves that side open.
  std::string since, until;
  // Exact matches; "" matches anything.
  std::string tenant, user, agent, session, tool, decision;
  std::optional<EntryKind> kind;
  uint64_t after_id = 0;  // only entries with a larger id (paging)
  size_t limit = 0;       // at most this many entries; 0 = no limit
  // With a limit: the newest `limit` matching entries rather than the oldest. Either way the
  // entries come back in id order.
  bool newest = false;
};

}  // namespace warden::audit
