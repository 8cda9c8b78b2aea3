#include "cli/profile_flags.h"

#include <cstdlib>

#include "sandbox/profile.h"

namespace warden::cli {
namespace {

Status Size(const std::string& flag, const std::string& text, uint64_t* out) {
  if (text.empty()) return Status::Ok();
  auto v = sandbox::ParseSize(text);
  if (!v) return v.status().Wrap(flag);
  *out = *v;
  return Status::Ok();
}

Status Duration(const std::string& flag, const std::string& text, uint64_t* out) {
  if (text.empty()) return Status::Ok();
  auto v = sandbox::ParseDuration(text);
  if (!v) return v.status().Wrap(flag);
  *out = *v;
  return Status::Ok();
}

}  // namespace

void ProfileFlags::AddTo(CLI::App* s) {
  s->add_option("--profile", profile, "YAML profile; options given here override it");
  s->add_option("--timeout", timeout, "Wall-clock limit for the whole process tree (30, 30s, 500ms, 2m)");
  s->add_option("--memory", memory, "Memory limit (512M, 1G)");
  s->add_option("--pids", pids, "Maximum number of processes and threads");
  s->add_option("--cpu", cpu, "CPU time limit for the whole tree (10s)");
  s->add_option("--output-limit", output_limit, "Cut stdout and stderr each at this size (default 16M; 0 = none)");
  s->add_option("--tmpfs-size", tmpfs_size, "Size of the private /tmp (default 64M)");
  s->add_option("--file-size", file_size, "Largest file the command may write (RLIMIT_FSIZE)");
  s->add_option("--open-files", open_files, "Open file limit (default 1024)");
  s->add_option("--ro", ro, "Bind HOST[:INSIDE] read-only")->type_name("HOST[:INSIDE]");
  s->add_option("--rw", rw, "Bind HOST[:INSIDE] writable")->type_name("HOST[:INSIDE]");
  s->add_option("--protect", protect, "Path inside --rw binds that stays read-only (replaces the defaults)");
  s->add_flag("--no-protect", no_protect, "Protect nothing inside --rw binds (not even the defaults)");
  s->add_option("--workdir", workdir, "Working directory inside (default: the first --rw, else /tmp)");
  s->add_option("--env", env, "Add NAME=VALUE to the clean environment");
  s->add_option("--env-inherit", env_inherit,
                "Copy NAME from this process's environment into the clean one (keeps a secret "
                "out of argv)");
  s->add_option("--accept-missing", accept_missing,
                "Run without a missing feature: landlock, cgroups (recorded in the result)");
}

Result<sandbox::Options> ProfileFlags::ToOptions(const CLI::App& app) const {
  sandbox::Options o;
  o.protect = sandbox::DefaultProtectedPaths();
  if (!profile.empty()) WARDEN_RETURN_IF_ERROR(sandbox::LoadProfile(profile, &o));
  for (const Status& st :
       {Duration("--timeout", timeout, &o.timeout_ms), Size("--memory", memory, &o.memory_bytes),
        Duration("--cpu", cpu, &o.cpu_ms), Size("--output-limit", output_limit, &o.output_limit_bytes),
        Size("--tmpfs-size", tmpfs_size, &o.tmpfs_bytes), Size("--file-size", file_size, &o.file_size_bytes)}) {
    if (!st.ok()) return st;
  }
  if (app.count("--pids")) o.pids = pids;
  if (app.count("--open-files")) o.open_files = open_files;
  for (const auto& spec : ro) o.binds.push_back(sandbox::ParseBindSpec(spec, false));
  for (const auto& spec : rw) o.binds.push_back(sandbox::ParseBindSpec(spec, true));
  if (no_protect && !protect.empty()) return Status::Error("--no-protect and --protect: choose one");
  if (no_protect) o.protect.clear();
  if (!protect.empty()) o.protect = protect;
  if (!workdir.empty()) o.workdir = workdir;
  for (const auto& e : env) {
    auto eq = e.find('=');
    if (eq == std::string::npos || eq == 0) return Status::Error("--env " + e + ": expected NAME=VALUE");
    o.env[e.substr(0, eq)] = e.substr(eq + 1);
  }
  for (const auto& name : env_inherit) {
    const char* value = std::getenv(name.c_str());
    // The value is never in the message: it is a secret by assumption.
    if (name.empty() || name.find('=') != std::string::npos)
      return Status::Error("--env-inherit " + name + ": expected a variable's name");
    if (!value) return Status::Error("--env-inherit " + name + ": not set in warden's environment");
    o.env[name] = value;
  }
  for (const auto& f : accept_missing) {
    if (f == "landlock") o.degrade.allow_no_landlock = true;
    else if (f == "cgroups") o.degrade.allow_no_cgroups = true;
    else return Status::Error("--accept-missing " + f + ": expected landlock or cgroups");
  }
  return o;
}

}  // namespace warden::cli
