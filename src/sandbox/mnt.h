// The sandbox's filesystem: an ephemeral root on tmpfs, entered with pivot_root. Read-only,
// nosuid, nodev binds of the system directories; a generated /etc; fresh /proc; a minimal /dev;
// a size-limited /tmp; the caller's --ro/--rw binds, resolved without following symlinks and
// bound by file descriptor; protected paths inside --rw binds made read-only.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "common/status.h"
#include "sandbox/options.h"

namespace warden::sandbox::mnt {

struct BindEntry {
  std::string host;    // canonical absolute host path
  std::string inside;  // absolute path inside the sandbox
  bool writable = false;
  bool is_dir = true;
  dev_t dev = 0;       // identity the parent saw; the child refuses anything else
  ino_t ino = 0;
};

struct Plan {
  std::vector<BindEntry> system;  // /usr, real /lib64 etc., /etc files: read-only
  std::vector<std::pair<std::string, std::string>> symlinks;  // inside path -> target (merged /usr)
  std::vector<BindEntry> user;    // --ro / --rw, parents before children
  std::vector<std::string> protect;
  uint64_t tmpfs_bytes = 0;
  std::string passwd, group, hosts, resolv;  // generated /etc files
  // Descriptors the parent opened for the child (inherited through the clone); init keeps these
  // and closes every other descriptor it inherited.
  std::vector<int> Descriptors() const { return {}; }
};

// Parent side, before clone: resolves and checks every path, builds the plan. A missing or
// unusable --ro/--rw source is an error naming the option and the path.
Result<Plan> PlanFromParent(const Options& options, uid_t inside_uid, gid_t inside_gid);

// Child side (the sandbox's init, in its new user and mount namespaces, with capabilities in
// them): builds the root and pivots into it. Appends notes (e.g. a protected path that is absent).
Status BuildRootFromChild(const Plan& plan, std::vector<std::string>* notes);

}  // namespace warden::sandbox::mnt
