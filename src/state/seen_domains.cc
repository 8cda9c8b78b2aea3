#include "state/seen_domains.h"

#include <sqlite3.h>

namespace warden::state {
namespace {

constexpr const char* kSeenSchema = R"sql(
CREATE TABLE IF NOT EXISTS state_seen_domains (
  tenant TEXT NOT NULL,
  agent TEXT NOT NULL,
  domain TEXT NOT NULL CHECK (domain != ''),
  first_seen TEXT NOT NULL,
  PRIMARY KEY (tenant, agent, domain)
) STRICT;
)sql";

constexpr size_t kMaxField = 1024;

}  // namespace

Result<std::unique_ptr<SeenDomainStore>> SeenDomainStore::Open(const DatabaseOptions& options) {
  auto db = OpenDatabase(options);
  if (!db) return db.status();
  if (options.create) {
    // A lost row costs one repeated alert, not a decision: NORMAL is enough.
    WARDEN_RETURN_IF_ERROR(
        Exec(db->get(), "PRAGMA synchronous = NORMAL", "set synchronous").Wrap(options.path));
    WARDEN_RETURN_IF_ERROR(
        Exec(db->get(), kSeenSchema, "create seen domains table").Wrap(options.path));
  }
  return std::unique_ptr<SeenDomainStore>(new SeenDomainStore(options, std::move(*db)));
}

Status SeenDomainStore::Add(const std::string& tenant, const std::string& agent,
                            const std::string& domain) {
  if (domain.empty()) return Status::Error("seen domain: empty domain");
  if (tenant.size() > kMaxField || agent.size() > kMaxField || domain.size() > kMaxField)
    return Status::Error("seen domain: a field is longer than 1024 bytes");
  if (!options_.create) return Status::Error("seen domains: the store is read-only");
  std::lock_guard lock(mu_);
  auto stmt = Prepare(db_.get(),
                      "INSERT INTO state_seen_domains (tenant, agent, domain, first_seen) "
                      "VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING");
  if (!stmt) return stmt.status().Wrap(options_.path);
  BindText(stmt->get(), 1, tenant);
  BindText(stmt->get(), 2, agent);
  BindText(stmt->get(), 3, domain);
  BindText(stmt->get(), 4, Now());
  return StepDone(db_.get(), stmt->get(), "add seen domain").Wrap(options_.path);
}

Result<std::vector<SeenDomain>> SeenDomainStore::Recent(size_t limit) {
  std::lock_guard lock(mu_);
  std::vector<SeenDomain> out;
  auto exists = TableExists(db_.get(), "state_seen_domains");
  if (!exists) return exists.status().Wrap(options_.path);
  if (!*exists) return out;
  auto stmt = Prepare(db_.get(),
                      "SELECT tenant, agent, domain, first_seen FROM (SELECT * FROM "
                      "state_seen_domains ORDER BY first_seen DESC LIMIT ?1) ORDER BY first_seen");
  if (!stmt) return stmt.status().Wrap(options_.path);
  BindInt(stmt->get(), 1, static_cast<int64_t>(limit));
  for (;;) {
    int rc = sqlite3_step(stmt->get());
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) return SqlError(db_.get(), "read seen domains").Wrap(options_.path);
    out.push_back({ColumnText(stmt->get(), 0), ColumnText(stmt->get(), 1),
                   ColumnText(stmt->get(), 2), ColumnText(stmt->get(), 3)});
  }
  return out;
}

}  // namespace warden::state
