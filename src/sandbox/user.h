// User namespace identity: who the sandbox runs as inside, and which host uid/gid that is.
#pragma once

#include <sys/types.h>

#include "common/status.h"

namespace warden::sandbox::user {

// Inside, the command always runs as uid/gid 1000 ("sandbox"). On the host that is the caller
// when warden runs unprivileged, and an unprivileged id (65534, "nobody") when warden runs as
// root, so that root-owned host files stay out of reach even through a bind.
struct IdMap {
  uid_t inside_uid = 1000;
  gid_t inside_gid = 1000;
  uid_t host_uid = 0;
  gid_t host_gid = 0;
  bool host_is_root = false;
};

IdMap ChooseFromParent();

// Parent side, after clone: writes the child's setgroups policy, uid_map and gid_map.
Status InitNsFromParent(pid_t child, const IdMap& map);

// Child side, first step after the maps exist: becomes the inside uid/gid while keeping the
// capabilities it holds in its own user namespace (needed to build mounts). Supplementary
// groups are cleared where the kernel allows it (root callers); unprivileged callers keep
// theirs, which the kernel shows as nogroup and which setgroups(2) cannot drop.
Status SwitchFromChild(const IdMap& map);

}  // namespace warden::sandbox::user
