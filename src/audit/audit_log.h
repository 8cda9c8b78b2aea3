// The audit log: append-only, hash-chained, durable before Append returns.
//
//   auto log = AuditLog::Open({.path = "./var/warden/warden.db", .sync = SyncLevel::kFull});
//   AuditEntry e{.tenant = "acme", .tool = "fs__read", .decision = "allow", ...};
//   auto receipt = (*log)->Append(std::move(e));   // returns once the entry is durable
//
// One AuditLog per store per process; it is safe to share across threads.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <ostream>
#include <vector>

#include "audit/entry.h"
#include "audit/filter.h"
#include "audit/merkle.h"
#include "audit/options.h"
#include "audit/store.h"
#include "audit/verify.h"

namespace warden::audit {

// What Append gives back: where the entry sits in the chain.
struct AuditReceipt {
  uint64_t id = 0;
  std::string time;
  std::string hash;
};

struct AuditStats {
  uint64_t appends = 0;  // entries acknowledged
  uint64_t commits = 0;  // transactions that wrote them (appends / commits = mean batch)
  uint64_t largest_batch = 0;
  uint64_t failures = 0;  // Append calls that returned an error
};

class AuditLog {
 public:
  // Opens the SQLite store described by `options` (see options.h).
  static Result<std::unique_ptr<AuditLog>> Open(const AuditOptions& options);
  // A log over any store; `max_batch` and `before_commit` as in AuditOptions.
  AuditLog(std::unique_ptr<AuditStore> store, size_t max_batch,
           std::function<void(size_t)> before_commit = nullptr);
  ~AuditLog();
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

  // Redacts `entry` (arguments, reason and result excerpt, see redact.h), sets its time when
  // empty, and appends it at the end of the chain; id, prev_hash and hash given by `entry` are
  // ignored. Returns only once the entry is durable at the store's sync level; concurrent
  // calls share one transaction (group commit). On error the entry was not written: the
  // caller must not act as if it had been (the gateway fails the call). Thread-safe.
  Result<AuditReceipt> Append(AuditEntry entry);

  // Walks the whole chain from one snapshot; the report names the first bad entry. An error
  // Status means the store could not be read, not that the chain is bad.
  Result<VerifyReport> Verify();

  // Verify's walk, and the Merkle tree's leaves (EntryLeafHash of each entry, in id order) from
  // the same snapshot; `leaves` is empty unless the chain is intact (nothing is proved or signed
  // about a broken log).
  struct Tree {
    VerifyReport report;
    std::vector<Digest> leaves;
  };
  Result<Tree> ReadTree();

  // Entries matching `filter`, in id order.
  Result<std::vector<AuditEntry>> Query(const AuditFilter& filter);
  // The last `n` entries, in id order.
  Result<std::vector<AuditEntry>> Tail(size_t n);
  // Writes the entries matching `filter` to `out`, one CanonicalLine per line, streaming.
  // Returns how many were written.
  Result<uint64_t> ExportJsonl(const AuditFilter& filter, std::ostream& out);

  AuditStats stats() const;

 private:
  struct Writer;
  // Leader side of group commit: writes the queued entries (up to max_batch) in one
  // transaction and wakes their callers. Called with mu_ held; returns with it held.
  void CommitQueued(std::unique_lock<std::mutex>& lock);

  std::unique_ptr<AuditStore> store_;
  size_t max_batch_;
  std::function<void(size_t)> before_commit_;

  std::mutex mu_;
  std::deque<Writer*> queue_;  // waiting callers; the front one commits for all it takes

  std::atomic<uint64_t> appends_{0}, commits_{0}, largest_batch_{0}, failures_{0};
};

// Verifies a JSONL export (ExportJsonl of the whole log): each line's hash and the links
// between lines. With no head record, the last line stands for it.
Result<VerifyReport> VerifyJsonl(std::istream& in);

}  // namespace warden::audit
