// Which gVisor platform (how the Sentry intercepts the command's system calls) works on this
// machine. Probed by running /bin/true under each candidate with a short timeout, because a
// platform can fail by hanging (kvm on a nested, paravirtualised /dev/kvm) as well as by refusing.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace warden::sandbox::gvisor {

struct PlatformChoice {
  std::string platform;            // "" when none works
  std::vector<std::string> tried;  // "kvm: no answer within 3000 ms", ... (why the others lost)
  bool from_cache = false;         // read from the per-boot cache file, not probed now
};

// Runs /bin/true under `platform`; true when it exited 0 within `timeout_ms`. On false, `why`
// says what happened. Supplied by the runner so that the probe uses the same launch path.
using ProbeFn = std::function<bool(const std::string& platform, int timeout_ms, std::string* why)>;

// Candidates in order of preference (fastest first): systrap, kvm (only when /dev/kvm opens),
// ptrace. The answer is kept for the life of the process and in /run/warden/gvisor-platform,
// keyed by the runsc binary (inode, size, mtime) and the boot id, so a hanging candidate costs its
// timeout once per boot rather than once per `warden run`.
PlatformChoice ChoosePlatform(const std::string& runsc, const ProbeFn& probe);

}  // namespace warden::sandbox::gvisor
