#include "gateway/audit_checkpoints.h"

#include <spdlog/spdlog.h>

#include "audit/merkle.h"
#include "common/guard.h"
#include "common/write_file.h"
#include "monitor/families.h"
#include "notify/http_post.h"

namespace warden::gateway {

AuditCheckpointer::AuditCheckpointer(audit::AuditLog& log, const policy::PolicyHolder& policy,
                                     Options options)
    : log_(log),
      policy_(policy),
      options_(std::move(options)),
      appends_at_start_(log_.stats().appends) {
  thread_ = std::thread([this] {
    RunGuarded("audit checkpointer", "the gateway takes no more checkpoints", [this] { Run(); });
  });
}

AuditCheckpointer::~AuditCheckpointer() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

AuditCheckpointer::Stats AuditCheckpointer::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void AuditCheckpointer::Run() {
  uint64_t signed_appends = appends_at_start_;
  auto last = std::chrono::steady_clock::now();
  std::unique_lock lock(mu_);
  while (!stop_) {
    wake_.wait_for(lock, options_.tick, [this] { return stop_; });
    if (stop_) break;
    auto policy = policy_.Current();
    if (!policy || !policy->storage.checkpoints) continue;
    const policy::CheckpointSchedule schedule = *policy->storage.checkpoints;
    const uint64_t appends = log_.stats().appends;
    const auto now = std::chrono::steady_clock::now();
    const bool enough = appends - signed_appends >= schedule.every_entries;
    const bool late = appends != signed_appends &&
                      now - last >= std::chrono::milliseconds(schedule.every_ms);
    if (!enough && !late) continue;
    lock.unlock();
    auto taken = Take(schedule);  // counts and logs its own failure
    lock.lock();
    // A failure waits for new entries too: a broken chain stays broken, a down witness is tried
    // again with the next checkpoint.
    signed_appends = appends;
    last = now;
    (void)taken;
  }
}

Result<std::string> AuditCheckpointer::Sign(const policy::CheckpointSchedule& schedule) {
  auto tree = log_.ReadTree();
  if (!tree) return tree.status();
  if (!tree->report.ok())
    return Status::Error("the chain is broken at entry " + std::to_string(tree->report.first_bad_id) +
                         " (" + tree->report.detail + "); nothing is signed about it");
  const std::string path =
      schedule.key.empty() ? audit::DefaultCheckpointKeyPath(options_.database) : schedule.key;
  if (!key_ || key_path_ != path) {
    auto key = audit::CheckpointKey::Load(path, /*create=*/true);
    if (!key) return key.status();
    key_.emplace(std::move(*key));
    key_path_ = path;
  }
  audit::Checkpoint c{schedule.origin, tree->leaves.size(), audit::MerkleRoot(tree->leaves)};
  auto note = key_->Sign(c);
  if (!note) return note.status();
  {
    std::lock_guard lock(mu_);
    stats_.last_size = c.size;
  }
  return note;
}

Result<std::string> AuditCheckpointer::Take(const policy::CheckpointSchedule& schedule) {
  std::lock_guard take(take_mu_);  // one at a time: the thread's, or a test's
  const monitor::Families& metrics = monitor::Metrics();
  auto fail = [&](const Status& st) -> Result<std::string> {
    spdlog::error("audit checkpoint: {}", st.message());
    metrics.checkpoints.Add({"failed"});
    std::lock_guard lock(mu_);
    ++stats_.failed;
    stats_.last_error = st.message();
    return st;
  };
  auto note = Sign(schedule);
  if (!note) return fail(note.status());
  if (!schedule.out.empty()) {
    if (Status st = ReplaceFileWith(schedule.out, *note, 0644, /*sync=*/true); !st.ok())
      return fail(st.Wrap("storage.checkpoints.out"));
  }
  if (!schedule.post.empty()) {
    if (Status st = notify::PostText(schedule.post, schedule.ca_file, *note, std::chrono::seconds(10));
        !st.ok())
      return fail(st.Wrap("storage.checkpoints.post"));
  }
  metrics.checkpoints.Add({"ok"});
  {
    std::lock_guard lock(mu_);
    ++stats_.taken;
  }
  return note;
}

}  // namespace warden::gateway
