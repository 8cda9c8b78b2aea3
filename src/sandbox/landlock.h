// Landlock: a second, kernel-enforced copy of the sandbox's filesystem and network policy.
//
// The mount namespace already decides what the sandbox can see; Landlock repeats the same
// decision per access right, so a mistake in the mount setup (a bind left writable, a path
// reachable through /proc/<pid>/root, a mount the sandbox manages to create) is not enough to
// escape. It also denies TCP bind and limits TCP connect to the proxy port, and (ABI 6+) stops the
// sandbox from signalling processes or reaching abstract unix sockets outside it.
// Child side only: ApplyFromChild runs inside the sandboxed process.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"

namespace warden::sandbox::landlock {

// A file or directory the sandbox may use, by descriptor (preferably O_PATH) so that the rule
// names exactly the object that was checked, not whatever a path resolves to later.
struct PathRule {
  int fd = -1;            // a directory or file inside the new root; the caller closes it
  bool writable = false;  // false: read and execute only; true: every filesystem right
};

struct Ruleset {
  std::vector<PathRule> paths;              // everything else is denied
  std::vector<uint16_t> connect_tcp_ports;  // with restrict_net: the only TCP connect targets
  bool restrict_net = false;                // deny TCP bind, limit TCP connect (ABI 4+)
};

// The Landlock ABI version of the running kernel; 0 when it lacks Landlock or has it disabled.
int AbiVersion();

// Restricts the calling process (and its future children) to `rules`. Call in the sandboxed
// process once its root is in place and before seccomp, while it is single-threaded (Landlock
// binds the calling thread). Sets no_new_privs, which an unprivileged caller needs anyway.
//
// Filesystem: every right the running ABI knows is handled; read-only rules grant execute,
// read-file and read-dir, writable rules grant all (write, truncate, device ioctl, make, remove,
// refer). Rights an older ABI lacks are masked out; a rule on a file gets only the file rights.
// Network (restrict_net and ABI 4+): TCP bind is denied, TCP connect allowed only to
// connect_tcp_ports. On ABI 1-3 network rules are skipped: the network namespace still applies.
// Scopes (ABI 6+): no signals to, and no abstract unix socket connections with, processes outside
// the Landlock domain.
//
// Returns ok with *applied = false when the kernel has no Landlock (the caller decides whether
// that is acceptable); an error naming the step and errno when a step fails.
Status ApplyFromChild(const Ruleset& rules, bool* applied);

}  // namespace warden::sandbox::landlock
