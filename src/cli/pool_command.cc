#include "cli/pool_command.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>

#include "sandbox/pool.h"
#include "sandbox/profile.h"

namespace warden::cli {
namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "warden pool: %s\n", message.c_str());
  return 125;
}

}  // namespace

PoolCommand::PoolCommand(CLI::App& app) {
  sub_ = app.add_subcommand("pool", "Pre-warmed sandboxes for `warden run --pool` (docs/pool.md)");
  sub_->require_subcommand(1);
  start_ = sub_->add_subcommand("start", "Serve a pool of pre-warmed sandboxes in the foreground");
  auto* s = start_;
  s->add_option("--socket", socket_, "Unix socket to serve (created 0600)")->required();
  s->add_option("--size", size_, "Sandboxes kept ready (default 4)");
  s->add_option("--idle-timeout", idle_timeout_,
                "Destroy and replace a ready sandbox older than this (30s, 10m; default never)");
  flags_.AddTo(s);
  s->add_flag("--workspace", workspace_,
              "Give each sandbox a fresh empty directory, read-write at /work (the working "
              "directory), removed after its one use");
  s->add_option("--parent-pid", parent_pid_,
                "Stop (as on SIGTERM) when process PID, which started this pool, ends");
  status_ = sub_->add_subcommand("status", "Show a pool's state");
  status_->add_option("--socket", socket_, "The pool's Unix socket")->required();
  status_->add_flag("--json", json_, "Print the state as one JSON object");
}

int PoolCommand::Execute() { return start_->parsed() ? Start() : ShowStatus(); }

int PoolCommand::Start() {
  sandbox::pool::PoolConfig config;
  config.socket_path = socket_;
  config.size = size_;
  config.workspace = workspace_;
  if (parent_pid_ != 0) {
    // The pool of a `warden serve`: it must not outlive the gateway that uses it.
    if (prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0) != 0 || getppid() != parent_pid_)
      return Fail("--parent-pid " + std::to_string(parent_pid_) + ": not (or no longer) our parent");
  }
  auto profile = flags_.ToOptions(*start_);
  if (!profile) return Fail(profile.status().message());
  config.profile = std::move(*profile);
  if (!idle_timeout_.empty()) {
    auto idle = sandbox::ParseDuration(idle_timeout_);
    if (!idle) return Fail(idle.status().Wrap("--idle-timeout").message());
    config.idle_timeout_ms = *idle;
  }
  return sandbox::pool::Serve(config);
}

int PoolCommand::ShowStatus() {
  auto st = sandbox::pool::QueryStatus(socket_);
  if (!st) return Fail(st.status().message());
  const nlohmann::json& j = *st;
  if (json_) {
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("pool %s (pid %d)\n", j.value("socket", "").c_str(), j.value("pid", 0));
  std::printf("  size %u: %u ready, %u starting, %u in use, %u clients waiting\n",
              j.value("size", 0u), j.value("ready", 0u), j.value("starting", 0u),
              j.value("in_use", 0u), j.value("waiting", 0u));
  std::printf("  started %lu, served %lu, refills %lu, failed %lu, expired %lu, refused %lu\n",
              j.value("started", 0ul), j.value("served", 0ul), j.value("refills", 0ul),
              j.value("failed", 0ul), j.value("expired", 0ul), j.value("refused", 0ul));
  if (j.contains("last_error"))
    std::printf("  last error: %s\n", j.value("last_error", "").c_str());
  return 0;
}

}  // namespace warden::cli
