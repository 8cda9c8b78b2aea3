// The sandbox's init (PID 1 of its PID namespace): the ordered chain that turns a freshly cloned
// child into the sandbox, then the command's launch and the reaping loop. Everything here runs
// in the child; the parent's half is in subproc.h.
#pragma once

#include <string>
#include <vector>

#include "sandbox/mnt.h"
#include "sandbox/net.h"
#include "sandbox/rlimits.h"
#include "sandbox/user.h"

namespace warden::sandbox::contain {

struct ChildSpec {
  mnt::Plan plan;
  user::IdMap ids;
  rlimits::Spec limits;
  std::string hostname;
  std::vector<std::string> argv;
  std::vector<std::string> env;  // NAME=VALUE, complete (no host variables)
  std::string path;              // PATH used to find argv[0]
  std::string workdir;
  std::vector<std::string> writable_inside;  // --rw inside paths (Landlock write rules)
  bool landlock = true;           // apply the Landlock ruleset
  bool restrict_tcp = false;      // Landlock: TCP connect only to tcp_ports, no TCP bind
  std::vector<uint16_t> tcp_ports;
  std::vector<net::LoopbackSocket> sockets;  // made inside before capabilities go, sent to the parent
  bool seccomp_notify = true;     // ask for a seccomp listener to report violations
  bool new_cgroup_ns = false;     // unshare the cgroup namespace after the parent moved us
  // Pre-warmed (docs/pool.md): the whole chain runs, seccomp included, then init reports ready
  // and waits for the command's half (argv, env, workdir, rlimits, stdio) before forking it.
  bool pooled = false;
  int sync_fd = -1;               // SOCK_SEQPACKET to the parent
  int stdin_fd = -1, stdout_fd = -1, stderr_fd = -1;  // the command's ends
  // Where the supervisor's argv and environment strings lie in its memory, which the clone
  // copies: init overwrites them first thing, so that it holds no variable of whoever started
  // warden (ProcessTextFromParent fills it before the clone).
  struct Text {
    uintptr_t arg_start = 0, arg_end = 0, env_start = 0, env_end = 0;
  } text;
};

// The calling process's argv and environment areas, from /proc/self/stat (zeros when unreadable:
// init then clears only what `environ` points to).
ChildSpec::Text ProcessTextFromParent();

// Never returns. Exits 125 after reporting a setup error to the parent; otherwise exits 0
// after reporting the command's wait status, which ends every process left in the namespace.
[[noreturn]] void RunInitFromChild(const ChildSpec& spec);

}  // namespace warden::sandbox::contain
