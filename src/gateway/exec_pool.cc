#include "gateway/exec_pool.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/launcher.h"
#include "sandbox/workspace_dir.h"

namespace warden::gateway {

Result<std::unique_ptr<ExecPool>> ExecPool::Start(const sandbox::Options& profile, uint32_t size) {
  if (profile.net != sandbox::NetMode::kNone || !profile.allow.empty())
    return Status::Error("the profile has a network (pooled sandboxes have none)");
  if (!profile.backend.empty() && profile.backend != "native")
    return Status::Error("the profile's backend is " + profile.backend + " (pools are native)");
  for (const sandbox::Bind& b : profile.binds) {
    if (b.writable)
      return Status::Error("the profile binds " + b.host +
                           " writable (its protected paths would differ in a pooled workspace)");
  }
  auto pool = std::unique_ptr<ExecPool>(new ExecPool);
  std::string tmpl = sandbox::workspace::TempBase() + "/warden-serve-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) return Status::FromErrno("mkdtemp " + tmpl, errno);
  pool->dir_ = tmpl;
  pool->socket_ = tmpl + "/exec-pool.sock";
  pool->key_ = sandbox::ProfileArgs(profile);
  std::vector<std::string> args = {"pool",         "start",       "--socket",
                                   pool->socket_,  "--size",      std::to_string(size),
                                   "--workspace",  "--parent-pid", std::to_string(getpid())};
  args.insert(args.end(), pool->key_.begin(), pool->key_.end());
  // Its stdin and stdout are /dev/null (for `warden mcp` ours are the MCP stream); its stderr,
  // where it says what it is doing and what it lost, is ours.
  auto pid = sandbox::SpawnWarden(std::move(args), {.stdin_fd = -1, .stdout_fd = -1, .stderr_fd = 2});
  if (!pid) return pid.status().Wrap("start the exec pool");
  pool->pid_ = *pid;
  return pool;
}

ExecPool::~ExecPool() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  if (!socket_.empty()) unlink(socket_.c_str());
  if (!dir_.empty()) rmdir(dir_.c_str());
}

bool ExecPool::Serves(const sandbox::Options& profile) const {
  return profile.net == sandbox::NetMode::kNone && profile.allow.empty() &&
         (profile.backend.empty() || profile.backend == "native") &&
         sandbox::ProfileArgs(profile) == key_;
}

}  // namespace warden::gateway
