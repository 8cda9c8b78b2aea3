#include "gateway/builtins/exec_pool.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gateway/builtins/builtin_tools.h"
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

ExecPoolPlan PlanExecPool(const policy::Policy* policy, std::optional<uint32_t> size_flag) {
  ExecPoolPlan plan{.size = 2, .profile_name = "default", .profile = DefaultExecProfile()};
  if (policy != nullptr) {
    const policy::SandboxPool& asked = policy->sandbox.pool;
    if (asked.set) plan.size = asked.size;
    if (!asked.profile.empty()) plan.profile_name = asked.profile;
    auto it = policy->sandbox.profiles.find(plan.profile_name);
    if (it != policy->sandbox.profiles.end()) plan.profile = it->second;
  }
  if (size_flag) plan.size = *size_flag;
  return plan;
}

std::string ExecPoolSlot::Apply(const ExecPoolPlan& plan) {
  std::lock_guard apply(apply_mu_);
  std::vector<std::string> key = sandbox::ProfileArgs(plan.profile);
  if (applied_ && plan.size == applied_size_ && key == applied_key_) return "";
  applied_ = true;
  applied_size_ = plan.size;
  applied_key_ = std::move(key);
  // The old pool goes first: two pools at once would hold twice the sandboxes (and memory).
  // Calls still running in it keep it until they end.
  std::shared_ptr<const ExecPool> old;
  {
    std::lock_guard lock(mu_);
    old = std::move(pool_);
  }
  old.reset();  // outside the lock: stopping a pool waits for it
  if (plan.size == 0) return "sandbox__exec runs without a pre-warmed pool (size 0)";
  auto started = ExecPool::Start(plan.profile, plan.size);
  if (!started) {
    return "sandbox__exec runs without a pre-warmed pool: profile '" + plan.profile_name +
           "': " + started.status().message();
  }
  std::lock_guard lock(mu_);
  pool_ = std::move(*started);
  return "sandbox__exec pre-warms " + std::to_string(plan.size) + " sandbox" +
         (plan.size == 1 ? "" : "es") + " of profile '" + plan.profile_name + "'";
}

std::shared_ptr<const ExecPool> ExecPoolSlot::Current() const {
  std::lock_guard lock(mu_);
  return pool_;
}

}  // namespace warden::gateway
