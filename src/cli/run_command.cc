#include "cli/run_command.h"

#include <cstdio>
#include <fstream>

#include <sys/resource.h>

#include "egress/sandbox_network.h"
#include "sandbox/pool.h"
#include "sandbox/profile.h"
#include "sandbox/sandbox.h"

namespace warden::cli {
namespace {

using sandbox::Options;

int Fail(const std::string& message) {
  std::fprintf(stderr, "warden: %s\n", message.c_str());
  return 125;
}

}  // namespace

RunCommand::RunCommand(CLI::App& app) {
  sub_ = app.add_subcommand("run", "Run COMMAND in a fresh sandbox and wait for it");
  auto* s = sub_;
  s->add_option("--profile", profile_, "YAML profile; options given here override it");
  s->add_option("--timeout", timeout_, "Wall-clock limit for the whole process tree (30, 30s, 500ms, 2m)");
  s->add_option("--memory", memory_, "Memory limit (512M, 1G)");
  s->add_option("--pids", pids_, "Maximum number of processes and threads");
  s->add_option("--cpu", cpu_, "CPU time limit for the whole tree (10s)");
  s->add_option("--output-limit", output_limit_, "Cut stdout and stderr each at this size (default 16M; 0 = none)");
  s->add_option("--tmpfs-size", tmpfs_size_, "Size of the private /tmp (default 64M)");
  s->add_option("--file-size", file_size_, "Largest file the command may write (RLIMIT_FSIZE)");
  s->add_option("--open-files", open_files_, "Open file limit (default 1024)");
  s->add_option("--ro", ro_, "Bind HOST[:INSIDE] read-only")->type_name("HOST[:INSIDE]");
  s->add_option("--rw", rw_, "Bind HOST[:INSIDE] writable")->type_name("HOST[:INSIDE]");
  s->add_option("--protect", protect_, "Path inside --rw binds that stays read-only (replaces the defaults)");
  s->add_flag("--no-protect", no_protect_, "Protect nothing inside --rw binds (not even the defaults)");
  s->add_option("--workdir", workdir_, "Working directory inside (default: the first --rw, else /tmp)");
  s->add_option("--env", env_, "Add NAME=VALUE to the clean environment");
  s->add_option("--net", net_, "Network: none (default) or proxy");
  s->add_option("--allow", allow_, "Allow egress to HOST[:PORT] (implies --net proxy)");
  s->add_option("--resolve", resolve_, "Map HOST=IP for the egress proxy");
  s->add_option("--backend", backend_, "Isolation backend: native (default), gvisor, microvm");
  s->add_option("--accept-missing", accept_missing_, "Run without a missing feature: landlock, cgroups (recorded in the result)");
  s->add_option("--pool", pool_, "Run in a pre-warmed sandbox of the pool serving this socket (warden pool start)");
  s->add_option("--json", json_, "Write the result record to FILE ('-' for stderr)");
  s->add_option("command", command_, "The command and its arguments (after --)")->required();
  s->positionals_at_end();
}

int RunCommand::Execute() {
  Options o;
  o.protect = sandbox::DefaultProtectedPaths();
  if (!profile_.empty()) {
    Status st = sandbox::LoadProfile(profile_, &o);
    if (!st.ok()) return Fail(st.message());
  }
  auto size = [](const std::string& flag, const std::string& text, uint64_t* out) -> Status {
    if (text.empty()) return Status::Ok();
    auto v = sandbox::ParseSize(text);
    if (!v) return v.status().Wrap(flag);
    *out = *v;
    return Status::Ok();
  };
  auto duration = [](const std::string& flag, const std::string& text, uint64_t* out) -> Status {
    if (text.empty()) return Status::Ok();
    auto v = sandbox::ParseDuration(text);
    if (!v) return v.status().Wrap(flag);
    *out = *v;
    return Status::Ok();
  };
  for (const Status& st : {duration("--timeout", timeout_, &o.timeout_ms), size("--memory", memory_, &o.memory_bytes),
                           duration("--cpu", cpu_, &o.cpu_ms), size("--output-limit", output_limit_, &o.output_limit_bytes),
                           size("--tmpfs-size", tmpfs_size_, &o.tmpfs_bytes), size("--file-size", file_size_, &o.file_size_bytes)}) {
    if (!st.ok()) return Fail(st.message());
  }
  if (sub_->count("--pids")) o.pids = pids_;
  if (sub_->count("--open-files")) o.open_files = open_files_;
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
  if (!net_.empty()) {
    if (net_ == "none") o.net = sandbox::NetMode::kNone;
    else if (net_ == "proxy") o.net = sandbox::NetMode::kProxy;
    else return Fail("--net " + net_ + ": expected none or proxy");
  }
  for (const auto& a : allow_) o.allow.push_back(a);
  if (!o.allow.empty()) o.net = sandbox::NetMode::kProxy;
  for (const auto& r : resolve_) {
    auto eq = r.find('=');
    if (eq == std::string::npos || eq == 0) return Fail("--resolve " + r + ": expected HOST=IP");
    o.resolve[r.substr(0, eq)] = r.substr(eq + 1);
  }
  if (!backend_.empty()) o.backend = backend_;
  for (const auto& f : accept_missing_) {
    if (f == "landlock") o.degrade.allow_no_landlock = true;
    else if (f == "cgroups") o.degrade.allow_no_cgroups = true;
    else return Fail("--accept-missing " + f + ": expected landlock or cgroups");
  }
  o.argv = command_;

  std::unique_ptr<egress::SandboxNetwork> network;
  if (o.net == sandbox::NetMode::kProxy && pool_.empty()) {
    auto created = egress::SandboxNetwork::Create(o.allow, o.resolve);
    if (!created) return Fail(created.status().message());
    network = std::move(*created);
    // A busy tunnel holds two sockets and two pipes in this process.
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
      rl.rlim_cur = rl.rlim_max;
      setrlimit(RLIMIT_NOFILE, &rl);
    }
  }
  sandbox::RunResult r = pool_.empty() ? sandbox::Run(o, {}, network.get())
                                       : sandbox::pool::RunPooled(pool_, o, {}, /*forward_signals=*/true);
  if (r.reason == sandbox::Reason::kSetupError) std::fprintf(stderr, "warden: %s\n", r.error.c_str());
  else if (!r.error.empty()) std::fprintf(stderr, "warden: %s\n", r.error.c_str());
  if (!json_.empty()) {
    std::string record = sandbox::ToJson(r) + "\n";
    if (json_ == "-") {
      std::fputs(record.c_str(), stderr);
    } else {
      std::ofstream out(json_, std::ios::trunc);
      out << record;
      if (!out) std::fprintf(stderr, "warden: --json %s: could not write the result record\n", json_.c_str());
    }
  }
  return r.exit_code;
}

}  // namespace warden::cli
