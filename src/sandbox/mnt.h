// The sandbox's filesystem: an ephemeral root on tmpfs, entered with pivot_root. Read-only,
// nosuid, nodev binds of the system directories; a generated /etc; fresh /proc; a minimal /dev;
// a size-limited /tmp; the caller's --ro/--rw binds, resolved without following symlinks, opened
// by the parent before the clone and bound by file descriptor; protected paths inside --rw binds
// made read-only.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"
#include "sandbox/options.h"

namespace warden::sandbox::mnt {

struct BindEntry {
  std::string host;    // canonical absolute host path
  std::string inside;  // absolute path inside the sandbox
  bool writable = false;
  bool is_dir = true;
  dev_t dev = 0;       // identity the parent saw; the child refuses anything else
  ino_t ino = 0;
  // A detached, private copy of the source's mount tree (open_tree(OPEN_TREE_CLONE)) with the
  // bind's flags already set, made by the parent before the clone with the parent's own access
  // to the path (as root: through directories the sandbox user could not search). The child only
  // attaches it. Empty when the parent may not clone mounts (an ordinary user: no CAP_SYS_ADMIN
  // over its mount namespace); the child then opens `host` itself, with the same permissions the
  // parent has. Copies of the entry share it.
  std::shared_ptr<UniqueFd> tree;
};

struct Plan {
  std::vector<BindEntry> system;  // /usr, real /lib64 etc., /etc files: read-only
  std::vector<std::pair<std::string, std::string>> symlinks;  // inside path -> target (merged /usr)
  std::vector<BindEntry> user;    // --ro / --rw, parents before children
  std::vector<std::string> protect;
  uint64_t tmpfs_bytes = 0;
  std::string passwd, group, hosts, resolv;  // generated /etc files

  // The descriptors the plan holds (every entry's `tree`, none below 3): the cloned child must
  // inherit exactly these from the plan, and nothing else of the parent's.
  std::vector<int> Descriptors() const;
  // Closes them in this process (copies of the plan share them, so every copy sees them closed):
  // the parent right after the clone, the child once its root is built (BuildRootFromChild does).
  // Const: the descriptors are the plan's resources, not part of its value.
  void CloseDescriptors() const;
};

// Parent side, before clone: resolves and checks every path, opens every bind source (no
// symlink followed, the device and inode checked against the resolved path) and clones its mount
// tree (BindEntry::tree), builds the plan. A missing or unusable --ro/--rw source is an error
// naming the option and the path. The caller closes the plan's descriptors after the clone.
Result<Plan> PlanFromParent(const Options& options, uid_t inside_uid, gid_t inside_gid);

// Child side (the sandbox's init, in its new user and mount namespaces, with capabilities in
// them): builds the root and pivots into it. Appends notes (e.g. a protected path that is absent).
// Closes the plan's descriptors before it returns, whether the root was built or not.
Status BuildRootFromChild(const Plan& plan, std::vector<std::string>* notes);

}  // namespace warden::sandbox::mnt
