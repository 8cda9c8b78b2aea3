// The domains each tenant and agent has already used (the first_domain detector,
// docs/monitoring.md): one table in the warden database, state_seen_domains, so that a restart
// does not alert again on every domain an agent reaches. Rows are (tenant, agent, domain, first
// seen); agent "" is the tenant's own set. Written off the call path (the alert's work), read
// once at start. Thread-safe.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "state/database.h"

namespace warden::state {

struct SeenDomain {
  std::string tenant, agent, domain, first_seen;  // first_seen: RFC 3339 UTC
};

class SeenDomainStore {
 public:
  // Opens the database; with options.create, creates the table.
  static Result<std::unique_ptr<SeenDomainStore>> Open(const DatabaseOptions& options);

  // Records a use; a row already there keeps its first_seen. Errors: an empty domain, a field
  // over 1024 bytes, a read-only store, SQLite failures.
  Status Add(const std::string& tenant, const std::string& agent, const std::string& domain);
  // The newest `limit` rows (by first use), oldest first: what a gateway seeds its detector with.
  Result<std::vector<SeenDomain>> Recent(size_t limit);

 private:
  SeenDomainStore(DatabaseOptions options, Db db)
      : options_(std::move(options)), db_(std::move(db)) {}
  DatabaseOptions options_;
  std::mutex mu_;
  Db db_;
};

}  // namespace warden::state
