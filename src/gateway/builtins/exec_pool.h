// The pre-warmed pool behind sandbox__exec (docs/pool.md, "In the gateway"): `warden serve` and
// `warden mcp` start `warden pool start --workspace` as a child serving the sandbox profile that
// sandbox__exec uses by default, and run each call whose profile is that one in a pooled sandbox
// (its workspace filled before the command starts). Any other call, and any call the pool cannot
// take, runs cold as before.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "policy/model.h"
#include "sandbox/options.h"

namespace warden::gateway {

class ExecPool {
 public:
  // Starts the pool: `size` sandboxes of `profile` with a workspace each, on a socket in a private
  // directory. Error (nothing started) when the profile cannot be pooled the way sandbox__exec
  // needs: a network, another backend, or a writable bind (its protected paths would apply to a
  // cold run's workspace files but not to a pooled one's, which is empty when built). The pool
  // stops when the calling thread ends (its parent-death signal): call it from a thread that
  // lives as long as the gateway (the main thread, the policy watcher).
  static Result<std::unique_ptr<ExecPool>> Start(const sandbox::Options& profile, uint32_t size);
  // Stops the pool (SIGTERM: it destroys its sandboxes and workspaces) and waits for it.
  ~ExecPool();

  // Whether a call on `profile` may go to the pool: the profile it was started with, exactly.
  bool Serves(const sandbox::Options& profile) const;
  const std::string& socket() const { return socket_; }
  pid_t pid() const { return pid_; }

 private:
  ExecPool() = default;

  pid_t pid_ = -1;
  std::string dir_, socket_;
  std::vector<std::string> key_;  // ProfileArgs of the pooled profile
};

// What sandbox__exec's pool should be: `size` sandboxes of the profile named `profile_name`.
struct ExecPoolPlan {
  uint32_t size = 0;  // 0: no pool
  std::string profile_name;
  sandbox::Options profile;
};

// The plan a gateway follows under `policy` (null: none loaded): --exec-pool N (`size_flag`) when
// given, else the policy's sandbox.pool size, else 2; the policy's sandbox.pool profile, else its
// `default` profile, else the built-in one (DefaultExecProfile).
ExecPoolPlan PlanExecPool(const policy::Policy* policy, std::optional<uint32_t> size_flag);

// sandbox__exec's pool as the policy in force asks for it. Apply starts a new pool when the plan
// changes (at the gateway's start, at each policy reload); a call takes Current() and holds it to
// its end, so a replaced pool stops (its sandboxes destroyed) once its last call is over. Calls
// on a profile no pool serves run cold, as when there is no pool at all.
class ExecPoolSlot {
 public:
  ExecPoolSlot() = default;
  // A slot holding `pool` (tests; null: none).
  explicit ExecPoolSlot(std::unique_ptr<ExecPool> pool) : pool_(std::move(pool)) {}

  // Follows `plan`: nothing when it is the plan applied last (a pool that could not start is not
  // retried until the plan changes), else the old pool is let go and a new one started. Returns
  // what changed, for the gateway's log, or "" when nothing did. Call it from a thread that lives
  // as long as the gateway (ExecPool::Start).
  std::string Apply(const ExecPoolPlan& plan);
  std::shared_ptr<const ExecPool> Current() const;

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const ExecPool> pool_;
  std::mutex apply_mu_;  // one Apply at a time; held while a pool starts
  bool applied_ = false;
  uint32_t applied_size_ = 0;
  std::vector<std::string> applied_key_;  // ProfileArgs of the plan applied last
};

}  // namespace warden::gateway
