// Checkpoints the gateway takes by itself (docs/audit.md, "Checkpoints the gateway takes"): a
// thread of its own watches how many entries this process appended and, as the policy's
// storage.checkpoints says (after N new entries, or T after the last checkpoint when entries
// came since), reads the whole chain from its own read snapshot, checks it, signs its Merkle
// root with the log's Ed25519 key, writes the note to a file (replaced whole) and POSTs it. No
// call waits for any of it: appends go on while the tree is read (WAL), and the POST is this
// thread's. A broken chain is never signed: the failure is logged and counted
// (warden_audit_checkpoints_total{result="failed"}), and the next attempt comes with new entries.
// The settings follow hot reload.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "audit/audit_log.h"
#include "audit/checkpoint.h"
#include "common/status.h"
#include "policy/holder.h"

namespace warden::gateway {

class AuditCheckpointer {
 public:
  struct Options {
    std::string database;  // the audit log's file: the default key sits beside it
    std::chrono::milliseconds tick{1000};  // how often the thread looks
  };
  struct Stats {
    uint64_t taken = 0, failed = 0;
    uint64_t last_size = 0;  // entries in the last checkpoint signed
    std::string last_error;
  };

  // `log` and `policy` must outlive it. Starts the thread.
  AuditCheckpointer(audit::AuditLog& log, const policy::PolicyHolder& policy, Options options);
  ~AuditCheckpointer();  // stops the thread (a POST in progress ends at its timeout, 10 s)
  AuditCheckpointer(const AuditCheckpointer&) = delete;
  AuditCheckpointer& operator=(const AuditCheckpointer&) = delete;

  // Signs, writes and posts one checkpoint now under `schedule`; returns the note. What the
  // thread does when one is due (exposed for tests).
  Result<std::string> Take(const policy::CheckpointSchedule& schedule);

  Stats stats() const;

 private:
  void Run();
  Result<std::string> Sign(const policy::CheckpointSchedule& schedule);

  audit::AuditLog& log_;
  const policy::PolicyHolder& policy_;
  const Options options_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  Stats stats_;
  std::mutex take_mu_;  // held through Take; guards the key
  // The key, loaded once per path (Load checks its file's mode and type every time it reads it).
  std::string key_path_;
  std::optional<audit::CheckpointKey> key_;
  // Entries appended before this checkpointer existed are not new. Read by the constructor, not
  // the thread: a thread scheduled late would count what came meanwhile as old.
  const uint64_t appends_at_start_;
  std::thread thread_;  // last: started once everything above is set
};

}  // namespace warden::gateway
