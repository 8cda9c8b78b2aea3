// The OCI bundle (config.json + rootfs) that the gvisor backend hands to runsc, generated from
// the same Options and mount plan as a native sandbox: read-only system directories and /etc
// files, the generated /etc, a size-limited /tmp, the --ro/--rw binds (protected paths re-bound
// read-only), the clean environment, workdir, hostname, rlimits, no capabilities, no_new_privs.
// Parent side only; everything is written under one private directory owned by the caller.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "sandbox/mnt.h"
#include "sandbox/options.h"

namespace warden::sandbox::gvisor {

// What the command runs with, decided before the bundle is written.
struct ProcessSpec {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // NAME=VALUE, the clean environment plus --env
  std::string workdir;           // absolute, inside
  uid_t uid = 0;                 // inside gVisor's kernel (no capabilities either way)
  gid_t gid = 0;
};

// The config.json document. Pure: reads nothing from the host. `plan` gives the mounts, `options`
// the hostname, rlimits (--pids as RLIMIT_NPROC, which gVisor's kernel counts for the command's
// tasks) and, with --net proxy, the absence of a network namespace of its own. Memory and CPU
// limits are not in it: warden enforces them from outside (gvisor.cc), because runsc would delete
// the cgroup (and its OOM counter) before warden could read it; a cgroup pids limit would count
// runsc's own threads.
nlohmann::json MakeConfig(const Options& options, const mnt::Plan& plan, const ProcessSpec& process);

// Writes `dir`/config.json and `dir`/rootfs (the read-only root: the merged-/usr links, the
// generated /etc files and an empty mount point for every mount). `dir` must exist and be empty.
// The error names the file that could not be written.
Status WriteBundle(const std::string& dir, const Options& options, const mnt::Plan& plan, const ProcessSpec& process);

// Where `inside` (an absolute path inside the sandbox) lives on the host, following the plan's
// mounts (the deepest one wins) and the merged-/usr links; "" when it is on the empty root or in
// /tmp (nothing there before the command starts).
std::string HostPathFor(const mnt::Plan& plan, const std::string& inside);

// Finds the command the way execvp would inside the sandbox (PATH from `path_env` when argv0 has
// no slash). Returns 0 when found and executable, ENOENT when nowhere, EACCES when found but not
// executable. Lets warden report 127/126 as native does: runsc reports both as its own failure.
int CheckCommand(const mnt::Plan& plan, const std::string& argv0, const std::string& path_env);

}  // namespace warden::sandbox::gvisor
