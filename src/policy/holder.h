// The policy in force, swapped whole on reload. For the gateway's hot reload (SIGHUP, file change).
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "common/status.h"
#include "policy/policy.h"

namespace warden::policy {

// Thread-safe: any number of threads may call Current() while one reloads. Each call keeps the
// snapshot it took for as long as it holds the pointer, so one call never sees two policies.
class PolicyHolder {
 public:
  explicit PolicyHolder(std::shared_ptr<const Policy> initial = nullptr);

  // The policy in force; null until one is set. Never blocks on a reload in progress.
  std::shared_ptr<const Policy> Current() const;
  // Puts `policy` in force.
  void Set(std::shared_ptr<const Policy> policy);
  // Loads `path`; on success puts it in force, on error keeps the current policy and returns why
  // (the message names the file and line). The file is read and checked before anything changes.
  Status ReloadFrom(const std::string& path);

 private:
  std::atomic<std::shared_ptr<const Policy>> current_;
};

}  // namespace warden::policy
