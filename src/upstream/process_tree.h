// The processes below a pid, found in /proc. For the stdio transport's teardown: what was inside
// a sandbox is pinned by pidfds before the kill, so that each can be waited for without taking a
// recycled pid for it.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"

namespace warden::upstream {

// The parent pid in the text of a /proc/PID/stat ("PID (COMM) STATE PPID ..."; COMM may hold
// spaces and ')'), or nullopt when the text is not of that form.
std::optional<pid_t> ParentFromStat(const std::string& stat);

// Every process's parent, from /proc: parent -> child. Processes come and go while /proc is read:
// one that is gone before its stat could be read (open fails with ENOENT, read with ESRCH) is
// left out. Never throws.
std::multimap<pid_t, pid_t> ProcChildren();

// Every process below `root` (children, grandchildren, ...) pinned by a pidfd. Processes that
// exit while the tree is walked are left out.
std::vector<UniqueFd> PinDescendants(pid_t root);

}  // namespace warden::upstream
