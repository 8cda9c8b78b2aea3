#include "gateway/exec_pool.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
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
  const std::string bin = sandbox::LauncherBinary();
  if (bin.empty()) return Status::Error("no warden binary to start the pool with");
  auto pool = std::unique_ptr<ExecPool>(new ExecPool);
  std::string tmpl = sandbox::workspace::TempBase() + "/warden-serve-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) return Status::FromErrno("mkdtemp " + tmpl, errno);
  pool->dir_ = tmpl;
  pool->socket_ = tmpl + "/exec-pool.sock";
  pool->key_ = sandbox::ProfileArgs(profile);

  std::vector<std::string> args = {bin,          "pool",
                                   "start",      "--socket",
                                   pool->socket_, "--size",
                                   std::to_string(size), "--workspace",
                                   "--parent-pid", std::to_string(getpid())};
  args.insert(args.end(), pool->key_.begin(), pool->key_.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string path_env = "PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";
  char* envp[] = {path_env.data(), nullptr};
  // Its stdout is /dev/null (for `warden mcp` ours is the MCP stream); its stderr, where it says
  // what it is doing and what it lost, is ours.
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  int rc = posix_spawn(&pool->pid_, bin.c_str(), &fa, &attr, argv.data(), envp);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    pool->pid_ = -1;
    return Status::FromErrno("start " + bin + " pool start", rc);
  }
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
