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
  s->add_option("--profile", profile_,
                "YAML profile every sandbox is built from; options given here override it");
  s->add_option("--timeout", timeout_, "Default wall-clock limit per command");
  s->add_option("--memory", memory_, "Memory limit of each sandbox (512M, 1G)");
  s->add_option("--pids", pids_, "Maximum number of processes and threads per sandbox");
  s->add_option("--cpu", cpu_, "Default CPU time limit per command");
  s->add_option("--output-limit", output_limit_, "Default cut for stdout and stderr (default 16M)");
  s->add_option("--tmpfs-size", tmpfs_size_, "Size of each sandbox's /tmp (default 64M)");
  s->add_option("--file-size", file_size_, "Default largest file a command may write");
  s->add_option("--open-files", open_files_, "Default open file limit (1024)");
  s->add_option("--ro", ro_, "Bind HOST[:INSIDE] read-only")->type_name("HOST[:INSIDE]");
  s->add_option("--rw", rw_, "Bind HOST[:INSIDE] writable")->type_name("HOST[:INSIDE]");
  s->add_option("--protect", protect_,
                "Path inside --rw binds that stays read-only (replaces the defaults)");
  s->add_flag("--no-protect", no_protect_, "Protect nothing inside --rw binds");
  s->add_option("--workdir", workdir_, "Default working directory inside");
  s->add_option("--env", env_, "Add NAME=VALUE to every command's environment");
  s->add_option("--accept-missing", accept_missing_,
                "Run without a missing feature: landlock, cgroups");
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
  sandbox::Options& o = config.profile;
  o.protect = sandbox::DefaultProtectedPaths();
  if (!profile_.empty()) {
    if (warden::Status st = sandbox::LoadProfile(profile_, &o); !st.ok()) return Fail(st.message());
  }
  auto size = [](const std::string& flag, const std::string& text,
                 uint64_t* out) -> warden::Status {
    if (text.empty()) return Status::Ok();
    auto v = sandbox::ParseSize(text);
    if (!v) return v.status().Wrap(flag);
    *out = *v;
    return Status::Ok();
  };
  auto duration = [](const std::string& flag, const std::string& text,
                     uint64_t* out) -> warden::Status {
    if (text.empty()) return Status::Ok();
    auto v = sandbox::ParseDuration(text);
    if (!v) return v.status().Wrap(flag);
    *out = *v;
    return Status::Ok();
  };
  for (const warden::Status& st :
       {duration("--timeout", timeout_, &o.timeout_ms), size("--memory", memory_, &o.memory_bytes),
        duration("--cpu", cpu_, &o.cpu_ms),
        size("--output-limit", output_limit_, &o.output_limit_bytes),
        size("--tmpfs-size", tmpfs_size_, &o.tmpfs_bytes),
        size("--file-size", file_size_, &o.file_size_bytes),
        duration("--idle-timeout", idle_timeout_, &config.idle_timeout_ms)}) {
    if (!st.ok()) return Fail(st.message());
  }
  if (start_->count("--pids")) o.pids = pids_;
  if (start_->count("--open-files")) o.open_files = open_files_;
  for (const auto& spec : ro_) o.binds.push_back(sandbox::ParseBindSpec(spec, false));
  for (const auto& spec : rw_) o.binds.push_back(sandbox::ParseBindSpec(spec, true));
  if (no_protect_ && !protect_.empty()) return Fail("--no-protect and --protect: choose one");
  if (no_protect_) o.protect.clear();
  if (!protect_.empty()) o.protect = protect_;
  if (!workdir_.empty()) o.workdir = workdir_;
  for (const auto& e : env_) {
    auto eq = e.find('=');
    if (eq == std::string::npos || eq == 0) return Fail("--env " + e + ": expected NAME=VALUE");
    o.env[e.substr(0, eq)] = e.substr(eq + 1);
  }
  for (const auto& f : accept_missing_) {
    if (f == "landlock")
      o.degrade.allow_no_landlock = true;
    else if (f == "cgroups")
      o.degrade.allow_no_cgroups = true;
    else
      return Fail("--accept-missing " + f + ": expected landlock or cgroups");
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
