// How a native sandbox's end becomes `warden run`'s exit code, reason and usage: one set of rules
// for the cold supervisor (subproc.cc) and the pool server (pool.cc), which see the same facts.
#pragma once

#include <sys/resource.h>

#include <optional>
#include <string>

#include "sandbox/cgroup.h"
#include "sandbox/options.h"
#include "sandbox/result.h"

namespace warden::sandbox {

// What the supervisor knows once the sandbox has ended.
struct Ending {
  int init_status = 0;                 // the init's own wait status (used when it reported none)
  struct rusage usage = {};            // CPU and peak RSS: the init's, or of all it reaped
  const cgroup::Cgroup* cgroup = nullptr;  // the sandbox's cgroup, when it has one
  std::string setup_error;             // the sandbox could not be built
  std::optional<Reason> killed_for;    // the supervisor killed it (timeout, cpu, output_limit...)
  int host_signal = 0;                 // the supervisor's caller got this signal and ended it
  std::optional<int> wait_status;      // the command's wait status, as the init reported it
  std::optional<int> exec_errno;       // the command could not be executed
};

// Fills `r`'s cpu_ms, peak_memory_bytes (from the cgroup when there is one), exit_code, signal,
// reason and error from `e`, for a run of `o`: setup_error 125; a kill by the supervisor with its
// reason (timeout 124, else 137); a signal to the caller 128+N; an exec failure 127 or 126; the
// command's status, with memory, pids and cpu told from the cgroup's counters and the limits.
void Conclude(const Options& o, const Ending& e, RunResult& r);

}  // namespace warden::sandbox
