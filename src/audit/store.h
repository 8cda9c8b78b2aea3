// The storage behind an AuditLog. SQLite implements it today (sqlite_store.h); PostgreSQL, for
// several gateways sharing one log, implements the same contract later.
//
// The store, not the log, links the chain: the head (last hash and count) must be read and
// written in the same transaction as the entries, because another process (a second gateway,
// `warden kill` writing an admin entry) may append between two of our transactions.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "audit/entry.h"
#include "audit/filter.h"
#include "common/status.h"

namespace warden::audit {

// The record kept beside the entries and updated in the same transaction: how many entries
// the chain has and the hash of the last one. It reveals a deleted tail.
struct ChainHead {
  uint64_t count = 0;
  std::string hash = kGenesisHash;
};

// Called for each stored row in id order with its id and the entry, or the reason the row
// could not be read as one (which verify reports as an edit). Returns false to stop.
using RowVisitor = std::function<bool(uint64_t id, const Result<AuditEntry>& row)>;

class AuditStore {
 public:
  virtual ~AuditStore() = default;

  // Appends `batch` in one transaction: reads the head, gives each entry the next id and the
  // previous hash, sets its hash with ComputeEntryHash, writes the entries and the new head,
  // and commits at the store's durability level. Returns only when the commit is durable at
  // that level. On failure nothing was written (the ids and hashes set in `batch` are void).
  // Calls may come from any thread; the store serialises them.
  virtual Status AppendBatch(std::span<AuditEntry* const> batch) = 0;

  // Visits the entries matching `filter` in id order.
  virtual Status Scan(const AuditFilter& filter, const RowVisitor& visit) = 0;

  // From one consistent snapshot: sets *head (nullopt when the store has no head record) and
  // visits every row in id order.
  virtual Status ScanChain(std::optional<ChainHead>* head, const RowVisitor& visit) = 0;
};

}  // namespace warden::audit
