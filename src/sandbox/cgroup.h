// Control groups for one sandbox: memory and pids limits, and the accounting behind the result
// record (peak memory, CPU time, whether the OOM killer or pids.max struck).
//
// Each sandbox gets its own cgroup, `warden-<pid>-<n>`, created as a child of warden's own cgroup
// in each hierarchy used (from /proc/self/cgroup), never at a fixed path: warden may itself run
// inside a container or a delegated subtree. cgroup v2 is used when the caller's v2 cgroup offers
// the memory and pids controllers; otherwise the v1 memory, pids and cpuacct hierarchies.
// Parent side only: nothing here runs inside the sandbox, except that the janitor helpers at the
// bottom are safe to call in a freshly forked child.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace warden::sandbox::cgroup {

// What the sandbox may use. 0 means no limit.
struct Limits {
  uint64_t memory_bytes = 0;  // RAM; swap is switched off for the cgroup where the kernel allows
  uint32_t pids = 0;          // processes and threads, counted together (pids.max)
};

// What the sandbox used, read from the cgroup's own counters (hierarchical: includes every process
// that ever lived in it).
struct Usage {
  uint64_t peak_memory_bytes = 0;  // 0 when the kernel has no peak counter (v2 before 5.19)
  uint64_t cpu_ns = 0;             // user + system
  bool oom_killed = false;         // the OOM killer killed at least one process in the cgroup
  bool pids_limit_hit = false;     // at least one fork/clone failed because of pids.max
};

// Where sandbox cgroups are created: the caller's own cgroup directory in each hierarchy.
// An empty string means "not used". Either `unified` (v2) or the three v1 directories are set.
struct Layout {
  bool v2 = false;
  std::string unified;  // v2
  std::string memory;   // v1
  std::string pids;     // v1
  std::string cpuacct;  // v1 (cpuacct may be co-mounted with cpu)
};

// Finds the caller's cgroup directories from the text of /proc/self/mountinfo and
// /proc/self/cgroup, without touching the filesystem. Every directory found is filled in and
// `v2` is left false: the choice between v2 and v1 needs the files (DetectLayout). When the v2
// cgroup is warden's own supervisor leaf (`warden-<self_pid>-0`, see CreateIn), its parent is
// returned instead.
Layout ParseLayout(std::string_view mountinfo, std::string_view proc_self_cgroup, pid_t self_pid);

// Reads /proc/self/{mountinfo,cgroup} and picks the hierarchies to use: v2 when the caller's v2
// cgroup lists memory and pids in cgroup.controllers, else v1 when memory, pids and cpuacct are
// all mounted. The error says what is missing on each side and how to enable it.
Result<Layout> DetectLayout();

// One sandbox's cgroup(s). Owns the directories: the destructor kills whatever still runs in
// them, waits briefly until they are empty and removes them. Movable, not copyable.
class Cgroup {
 public:
  // Creates the cgroup(s) under DetectLayout() and applies `limits`: memory limit plus swap off
  // (v1 memory.memsw.limit_in_bytes, else memory.swappiness 0; v2 memory.swap.max 0), and
  // pids.max. The error names the file and errno and says how to enable cgroups.
  static Result<Cgroup> CreateFromParent(const Limits& limits);

  // As CreateFromParent, under an explicit layout. A controller missing from the layout is only
  // an error when a limit needs it. v2: enables the controllers in the parent's
  // cgroup.subtree_control; when that fails because warden's own process sits in the parent
  // (the "no internal processes" rule of a delegated cgroup), warden moves itself into the leaf
  // `warden-<pid>-0` and retries.
  static Result<Cgroup> CreateIn(const Layout& layout, const Limits& limits);

  Cgroup(Cgroup&& other) noexcept;
  Cgroup& operator=(Cgroup&& other) noexcept;
  Cgroup(const Cgroup&) = delete;
  Cgroup& operator=(const Cgroup&) = delete;
  ~Cgroup();

  // Moves process `pid` (a host pid, i.e. as seen by warden) into every hierarchy of this cgroup.
  // Call on the parent side after clone and before the child execs, so that nothing the sandbox
  // runs escapes accounting. The error names the file; the caller should kill the child.
  Status AddProcessFromParent(pid_t pid);

  // Reads the counters. A counter the kernel lacks reads as 0 / false.
  Usage ReadUsage() const;

  // Kills every process in the cgroup and waits (bounded, about a second) until none is left.
  // v2: cgroup.kill. v1 (or v2 without cgroup.kill): SIGKILL each pid listed in cgroup.procs,
  // through a pidfd re-checked against cgroup.procs so a recycled pid is never signalled, and
  // repeat until empty. Error when processes remain.
  Status KillAll();

  // The directories, for a janitor that removes them if warden dies (RemoveWhenEmpty).
  std::vector<std::string> paths() const;
  bool is_v2() const { return v2_; }

 private:
  Cgroup() = default;
  std::vector<std::string> ProcsFiles() const;
  void Destroy();

  bool v2_ = false;
  std::string unified_;
  std::string memory_;
  std::string pids_;
  std::string cpuacct_;
};

// Ok when sandbox cgroups can be created here (DetectLayout succeeds and the directories are
// writable); otherwise the reason and how to fix it. For fail-closed checks before a run.
Status Available();

// Removes empty directories named `warden-<pid>-<n>` directly under the caller's cgroups whose
// <pid> no longer exists: the leftovers of a warden that was SIGKILLed. Directories that still
// hold processes are left alone. Returns how many were removed.
int SweepStale();

// Removes `paths` (cgroup directories) once they are empty, retrying rmdir on EBUSY for up to
// `timeout_ms`. A path that is already gone counts as done. For a janitor process forked before
// warden could die: async-signal-safe (no locks, no allocation, only syscalls), so it may run in a
// child forked from a multi-threaded warden. Build the C strings before forking.
void RemoveWhenEmpty(const char* const* paths, int count, int timeout_ms);

}  // namespace warden::sandbox::cgroup
