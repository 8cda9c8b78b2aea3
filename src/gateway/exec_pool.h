// The pre-warmed pool behind sandbox__exec (docs/pool.md, "In the gateway"): `warden serve` and
// `warden mcp` start `warden pool start --workspace` as a child serving the sandbox profile that
// sandbox__exec uses by default, and run each call whose profile is that one in a pooled sandbox
// (its workspace filled before the command starts). Any other call, and any call the pool cannot
// take, runs cold as before.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "sandbox/options.h"

namespace warden::gateway {

class ExecPool {
 public:
  // Starts the pool: `size` sandboxes of `profile` with a workspace each, on a socket in a private
  // directory. Error (nothing started) when the profile cannot be pooled the way sandbox__exec
  // needs: a network, another backend, or a writable bind (its protected paths would apply to a
  // cold run's workspace files but not to a pooled one's, which is empty when built). Call it
  // from the main thread before other threads start: the pool stops when that thread ends.
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

}  // namespace warden::gateway
