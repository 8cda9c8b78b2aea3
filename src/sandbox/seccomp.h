// The seccomp filter of the sandbox: which system calls the sandboxed tree may not make, and
// which errno each refusal returns. One table (RefusalTable) drives both the in-kernel ERRNO
// answers and the supervisor's answers to user notifications, so the two cannot disagree.
// Rationale for every row and the known limits: docs/seccomp.md.
//
// Two sides, named after the side of the fork they run on:
//   InstallFromChild     in the sandboxed process, last step before exec.
//   AnswerOneFromParent  in the supervisor, once per pending notification.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <linux/filter.h>

#include <vector>

#include "common/status.h"

namespace warden::sandbox::seccomp {

struct FilterOptions {
  // Route refused syscalls to a SECCOMP user-notification listener, so that the supervisor can
  // record them. When the kernel refuses a listener (EBUSY: an ancestor filter already owns one,
  // e.g. warden nested in warden) the same calls are refused in-kernel with the same errno.
  bool report_violations = true;
  // The compiled programs to load, as CompileProgram() makes them; warden passes the ones made at
  // build time (seccomp_programs.h) so that no sandbox pays libseccomp's compiler (about 0.7 ms).
  // Empty: compile here.
  std::vector<sock_filter> notify_program;
  std::vector<sock_filter> errno_program;
};

// Compiles the refusal table into a BPF program: refused calls go to the user-notification
// listener when `notify`, else fail in-kernel with their errno. Deterministic for a given
// libseccomp and architecture, which is what lets the build precompile it.
Result<std::vector<sock_filter>> CompileProgram(bool notify);

// Runs in the sandboxed child, single-threaded, right before exec (or the fork of the command).
// Sets PR_SET_NO_NEW_PRIVS (idempotent: a filter must never load without it), then builds and
// loads the filter. Foreign ABIs (i386 `int 0x80`, x32) kill the process with SIGSYS.
//
// On success *notify_fd is the listener fd (O_CLOEXEC) when report_violations is set and the
// kernel granted one, else -1. The caller owns it and must hand it to the supervisor and close
// its own copy before untrusted code runs: whoever holds it answers the refusals. Until the
// supervisor serves it, a refused call blocks, so make none between this call and the hand-off.
// On error nothing is loaded (the caller must not exec) and *notify_fd is -1.
Status InstallFromChild(const FilterOptions& options, int* notify_fd);

// One refused call, as seen by the supervisor.
struct Violation {
  std::string syscall;     // table name, e.g. "mount"
  int nr = 0;              // native syscall number
  int errno_returned = 0;  // what the sandboxed call got
  uint64_t args[6] = {};   // raw register values (pointers are not followed)
  int pid = 0;             // thread id in the supervisor's pid namespace (0 if not visible)
};

// Runs in the supervisor, when notify_fd polls readable (e.g. after epoll reported it); never
// blocks. Receives one notification, answers it with the table's errno for that syscall and
// arguments, and returns what was refused. The call is never let through (no
// SECCOMP_USER_NOTIF_FLAG_CONTINUE), so no argument can change under us. One thread serves a
// listener.
//
// A Violation with an empty `syscall` is a skipped record: the notification vanished before it
// was answered (its thread died, or a signal interrupted the call, which notifies again if it
// restarts; the kernel reports this as ENOENT). Keep serving.
// Errors, by err(): ESRCH when every task using the filter has exited; anything else (EBADF,
// ...) when the fd is unusable. Either way, stop serving and close the fd.
Result<Violation> AnswerOneFromParent(int notify_fd);

// ---- The refusal table: exposed for the tests, the docs check and `warden doctor`. ----

enum class ArgOp {
  kEq,        // arg == value
  kNe,        // arg != value
  kGe,        // arg >= value (unsigned)
  kMaskedEq,  // (arg & mask) == value
};

// One comparison on a raw 64-bit syscall argument register.
struct ArgMatch {
  unsigned arg = 0;  // 0..5
  ArgOp op = ArgOp::kEq;
  uint64_t value = 0;
  uint64_t mask = 0;  // kMaskedEq only
};

// A refused syscall, or one refused argument pattern of it: a call is refused when every
// ArgMatch holds (an empty `when` refuses every call). libseccomp allows one comparison per
// argument per rule, so `when` names each argument at most once. Rows of one syscall overlap
// only where they agree on the errno (two CLONE_NEW* flags at once).
struct Refusal {
  std::string syscall;
  int errno_value = 0;
  // false: answered in-kernel even when a listener exists, because the call is routine and
  // expected to fail (glibc tries clone3 on every thread creation).
  bool reported = true;
  std::vector<ArgMatch> when;
};

// Every refusal, in filter order. The single source of truth for the filter and the answers.
std::vector<Refusal> RefusalTable();

// The row that refuses syscall `nr` with these arguments, or nullopt if the filter allows it.
std::optional<Refusal> MatchRefusal(int nr, const uint64_t args[6]);

// Native syscall number for a table name, or -1 when neither libseccomp nor warden's own list
// of newer syscalls knows it on this architecture.
int SyscallNumber(const std::string& name);

// Table names this build cannot number (so the filter skips them); empty on a healthy build.
std::vector<std::string> UnresolvedSyscalls();

}  // namespace warden::sandbox::seccomp
