#include "sandbox/outcome.h"

#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>

namespace warden::sandbox {

void Conclude(const Options& o, const Ending& e, RunResult& r) {
  const struct rusage& ru = e.usage;
  r.cpu_ms = static_cast<uint64_t>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
             static_cast<uint64_t>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
  r.peak_memory_bytes = static_cast<uint64_t>(ru.ru_maxrss) * 1024;
  cgroup::Usage usage;
  if (e.cgroup) {
    usage = e.cgroup->ReadUsage();
    if (usage.cpu_ns) r.cpu_ms = usage.cpu_ns / 1000000;
    if (usage.peak_memory_bytes) r.peak_memory_bytes = usage.peak_memory_bytes;
  }
  if (!e.setup_error.empty()) {
    r.exit_code = 125;
    r.reason = Reason::kSetupError;
    r.error = e.setup_error;
    return;
  }
  if (e.killed_for && *e.killed_for != Reason::kSignaled) {
    r.reason = *e.killed_for;
    r.signal = SIGKILL;
    r.exit_code = r.reason == Reason::kTimeout ? 124 : 128 + SIGKILL;
    return;
  }
  if (e.host_signal != 0 && !e.wait_status) {
    // Interrupted from outside: report it the way a shell would report the command's death.
    r.reason = Reason::kSignaled;
    r.signal = e.host_signal;
    r.exit_code = 128 + e.host_signal;
    r.error =
        std::string("warden received ") + sigabbrev_np(e.host_signal) + ": the sandbox was killed";
    return;
  }
  // The v1 oom_kill counter can lag the SIGKILL it explains (seen under ASan): a tree that
  // reached its memory limit and died of SIGKILL was killed for memory.
  const bool at_memory_limit = o.memory_bytes != 0 && usage.peak_memory_bytes >= o.memory_bytes;
  const bool memory_kill = e.cgroup && (usage.oom_killed || at_memory_limit);
  if (!e.wait_status) {
    // Init died without reporting: killed by a signal to warden, or by the kernel (the OOM killer
    // may choose init itself when it is the largest process in the group, as under ASan).
    r.signal = WIFSIGNALED(e.init_status) ? WTERMSIG(e.init_status) : SIGKILL;
    r.exit_code = 128 + r.signal;
    r.reason = memory_kill && r.signal == SIGKILL ? Reason::kMemory : Reason::kSignaled;
    return;
  }
  const int ws = *e.wait_status;
  if (e.exec_errno) {
    r.exit_code = *e.exec_errno == ENOENT ? 127 : 126;
    r.reason = Reason::kExited;
    r.error = (*e.exec_errno == ENOENT ? "command not found: " : "command not executable: ") +
              o.argv[0] + " (" + strerror(*e.exec_errno) + ")";
    return;
  }
  if (WIFSIGNALED(ws)) {
    r.signal = WTERMSIG(ws);
    r.exit_code = 128 + r.signal;
    r.reason = Reason::kSignaled;
    if (memory_kill && r.signal == SIGKILL)
      r.reason = Reason::kMemory;
    else if (o.cpu_ms && (r.signal == SIGXCPU || r.signal == SIGKILL) &&
             r.cpu_ms + 1000 >= o.cpu_ms)
      r.reason = Reason::kCpu;
  } else {
    r.exit_code = WEXITSTATUS(ws);
    r.reason = Reason::kExited;
    if (e.cgroup && usage.oom_killed && r.exit_code != 0)
      r.reason = Reason::kMemory;
    else if (e.cgroup && usage.pids_limit_hit && r.exit_code != 0)
      r.reason = Reason::kPids;
  }
}

}  // namespace warden::sandbox
