// How an audit log is opened. A plain struct: every field has its documented default.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace warden::audit {

// How durable an entry is when Append returns (ARCHITECTURE.md, "Audit").
enum class SyncLevel {
  // Handed to the operating system (SQLite WAL, synchronous=NORMAL): a crash or kill -9 of
  // warden loses nothing; a power loss may lose the last commits.
  kNormal,
  // Also flushed to the disk (synchronous=FULL: the WAL is fsynced at each commit): a power
  // loss loses nothing. Concurrent appends share one commit and one flush (group commit).
  kFull,
};
std::string_view ToString(SyncLevel level);
// "normal" or "full" (the config's storage.sync); an error naming the bad value otherwise.
Result<SyncLevel> ParseSyncLevel(std::string_view text);

// The embedded default store, relative to warden's working directory.
inline constexpr std::string_view kDefaultDatabasePath = "./var/warden/warden.db";

struct AuditOptions {
  // The SQLite database file. It may hold other components' tables too: the audit log's own
  // are named audit_*.
  std::string path = std::string(kDefaultDatabasePath);
  SyncLevel sync = SyncLevel::kNormal;
  // Create the file (mode 0600) and its missing parent directories (mode 0700). When false,
  // a missing file is an error and nothing is ever written: what the read-only commands use.
  bool create = true;
  // Longest wait for another connection's write lock (another warden process) before Append
  // fails, in milliseconds.
  int busy_timeout_ms = 10000;
  // Most entries one group commit writes in its transaction.
  size_t max_batch = 1024;
  // Called by the committing thread with the batch size just before each commit's
  // transaction begins: for tests and metrics. Must not call back into the log.
  std::function<void(size_t batch_size)> before_commit;
};

}  // namespace warden::audit
