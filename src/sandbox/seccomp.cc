// The seccomp filter: the refusal table, its compilation with libseccomp, loading it in the child,
// and answering user notifications in the supervisor. Why each row exists: docs/seccomp.md.
#include "sandbox/seccomp.h"

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <poll.h>
#include <sched.h>
#include <seccomp.h>  // also <linux/seccomp.h>: the notification structs and ioctls
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <set>
#include <utility>

#include "common/unique_fd.h"

#ifndef SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
#define SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (1UL << 5)
#endif

namespace warden::sandbox::seccomp {
namespace {

// ---------------------------------------------------------------------------------------------
// Building the table.

constexpr uint64_t kLow32 = 0xffffffffULL;

ArgMatch Eq(unsigned arg, uint64_t value) { return {arg, ArgOp::kEq, value, 0}; }
ArgMatch Ne(unsigned arg, uint64_t value) { return {arg, ArgOp::kNe, value, 0}; }
ArgMatch Ge(unsigned arg, uint64_t value) { return {arg, ArgOp::kGe, value, 0}; }
ArgMatch Masked(unsigned arg, uint64_t mask, uint64_t value) {
  return {arg, ArgOp::kMaskedEq, value, mask};
}
// The kernel reads `int` and `unsigned int` arguments from the low half of the register. Compare
// only that half, or a caller could hide a value behind garbage in the high half (CVE-2019-10063
// smuggled TIOCSTI past an exact 64-bit comparison this way).
ArgMatch Low32Eq(unsigned arg, uint32_t value) { return Masked(arg, kLow32, value); }

Refusal Row(const char* syscall, int err, std::vector<ArgMatch> when = {}) {
  return Refusal{syscall, err, /*reported=*/true, std::move(when)};
}

void AddAlways(std::vector<Refusal>& table, int err, std::initializer_list<const char*> names) {
  for (const char* name : names) table.push_back(Row(name, err));
}

// Kernel-global state and privileged surfaces that agent code never needs. EPERM is what an
// unprivileged process gets for most of them anyway, so callers already handle it.
void AddPrivilegedRefusals(std::vector<Refusal>& table) {
  // Mount tree: the supervisor builds the mounts before exec; the child never needs these.
  AddAlways(table, EPERM,
            {"mount", "umount2", "fsopen", "fsconfig", "fsmount", "fspick", "move_mount",
             "open_tree", "open_tree_attr", "mount_setattr", "pivot_root", "chroot",
             "statmount", "listmount"});
  // Cross-process memory and descriptor access.
  AddAlways(table, EPERM,
            {"ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
             "process_madvise"});
  // Kernel keyrings are not namespaced.
  AddAlways(table, EPERM, {"keyctl", "add_key", "request_key"});
  // Large kernel attack surface with a long CVE record.
  AddAlways(table, EPERM, {"bpf", "perf_event_open", "fanotify_init"});
  // Replacing, stopping or extending the running kernel.
  AddAlways(
      table, EPERM,
      {"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot"});
  // File handles bypass the mount view (the 2014 "shocker" container escape).
  AddAlways(table, EPERM, {"open_by_handle_at", "name_to_handle_at"});
  // The wall clock is not namespaced.
  AddAlways(table, EPERM, {"settimeofday", "clock_settime", "clock_adjtime", "adjtimex"});
  // Host administration, raw hardware, obsolete or leaky interfaces.
  AddAlways(table, EPERM,
            {"swapon", "swapoff", "acct", "quotactl", "quotactl_fd", "syslog", "vhangup", "iopl",
             "ioperm", "lookup_dcookie", "uselib", "ustat", "sysfs"});
  // NUMA placement of memory: host-wide policy surface.
  AddAlways(table, EPERM,
            {"move_pages", "mbind", "set_mempolicy", "get_mempolicy", "migrate_pages",
             "set_mempolicy_home_node"});
}

// Feature probes: ENOSYS reads as "this kernel lacks it" and libraries fall back (libuv, glibc).
void AddProbeRefusals(std::vector<Refusal>& table) {
  // io_uring operations are not syscalls and so bypass seccomp; only setup can be refused.
  AddAlways(table, ENOSYS,
            {"io_uring_setup", "io_uring_enter", "io_uring_register", "userfaultfd"});
  // clone3 passes its flags in memory that seccomp cannot read; glibc then falls back to clone(),
  // whose flags are filtered. Not reported: glibc tries it on every pthread_create and spawn.
  table.push_back(Refusal{"clone3", ENOSYS, /*reported=*/false, {}});
}

// New namespaces expose CAP_SYS_ADMIN-only kernel code to the sandbox (the largest source of
// container escapes); joining one leaves the sandbox.
void AddNamespaceRefusals(std::vector<Refusal>& table) {
  // libseccomp has no "any of these bits" test, so each flag is its own row.
  for (uint64_t flag : {CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER,
                        CLONE_NEWPID, CLONE_NEWNET}) {
    table.push_back(Row("clone", EPERM, {Masked(0, flag, flag)}));
    table.push_back(Row("unshare", EPERM, {Masked(0, flag, flag)}));
  }
  // CLONE_NEWTIME (0x80) sits in clone()'s exit-signal byte: only unshare can ask for it.
  table.push_back(Row("unshare", EPERM, {Masked(0, CLONE_NEWTIME, CLONE_NEWTIME)}));
  table.push_back(Row("setns", EPERM));
}

// Families a sandboxed program may open, ascending. AF_NETLINK is limited further below.
constexpr int kAllowedFamilies[] = {AF_UNIX, AF_INET, AF_INET6, AF_NETLINK};

void AddSocketRefusals(std::vector<Refusal>& table, const char* syscall) {
  // Every other family, as the gaps between allowed values plus everything above the last. The
  // family is compared as a whole register, so garbage in the high half is refused too (fail
  // closed; libc never sends any). EAFNOSUPPORT is the kernel's own answer for a family it was
  // built without, which programs treat as "not available here" and route around.
  int next = 0;
  for (int allowed : kAllowedFamilies) {
    for (int family = next; family < allowed; ++family) {
      table.push_back(Row(syscall, EAFNOSUPPORT, {Eq(0, family)}));
    }
    next = allowed + 1;
  }
  table.push_back(Row(syscall, EAFNOSUPPORT, {Ge(0, next)}));
  // Raw IP: EPERM is what the kernel answers without CAP_NET_RAW; ping falls back to ICMP
  // datagram sockets. SOCK_NONBLOCK and SOCK_CLOEXEC are masked out of the type.
  constexpr uint64_t kTypeMask = kLow32 & ~uint64_t{SOCK_NONBLOCK | SOCK_CLOEXEC};
  for (int family : {AF_INET, AF_INET6}) {
    for (int type : {SOCK_RAW, SOCK_PACKET}) {
      table.push_back(Row(syscall, EPERM, {Eq(0, family), Masked(1, kTypeMask, type)}));
    }
  }
  // Netlink beyond NETLINK_ROUTE (getifaddrs): audit, xfrm, netfilter, ... EPROTONOSUPPORT is
  // the kernel's answer for a netlink protocol it lacks; libaudit users then carry on.
  table.push_back(Row(syscall, EPROTONOSUPPORT, {Eq(0, AF_NETLINK), Ne(2, NETLINK_ROUTE)}));
}

void AddIoctlAndPrctlRefusals(std::vector<Refusal>& table) {
  // Typing into the controlling terminal (CVE-2017-5226), console control, line-discipline
  // modules with their own CVE record.
  for (uint32_t command : {TIOCSTI, TIOCLINUX, TIOCSETD}) {
    table.push_back(Row("ioctl", EPERM, {Low32Eq(1, command)}));
  }
  // Rewriting the process's memory-map description (exe link, brk, auxv).
  table.push_back(Row("prctl", EPERM, {Low32Eq(0, PR_SET_MM)}));
}

// personality(2) may only take Docker's values: any combination of PER_LINUX32 and UNAME26, or
// the query value 0xffffffff. libseccomp can neither say "none of" nor compare one argument twice
// in a rule, so the refused values are a union of single masked comparisons on the low 32 bits
// (the kernel ignores the high half). Call the other 30 bits "other bits":
//   - around a cycle through the other bits, one row per adjacent pair (a, b): "a set, b clear".
//     Any value whose other bits are neither all clear nor all set has such a pair.
//   - the three values with every other bit set that are not 0xffffffff.
// No row matches an allowed value: it has no other bit set, or no bit clear at all.
void AddPersonalityRefusals(std::vector<Refusal>& table) {
  constexpr uint32_t kFreeBits = uint32_t{PER_LINUX32} | uint32_t{UNAME26};
  constexpr uint32_t kOtherBits = ~kFreeBits;
  std::vector<uint32_t> other;
  for (int bit = 0; bit < 32; ++bit) {
    if (kOtherBits & (1u << bit)) other.push_back(1u << bit);
  }
  for (size_t i = 0; i < other.size(); ++i) {
    const uint32_t set = other[i];
    const uint32_t clear = other[(i + 1) % other.size()];
    table.push_back(Row("personality", EPERM, {Masked(0, set | clear, set)}));
  }
  for (uint32_t flags : {0u, uint32_t{PER_LINUX32}, uint32_t{UNAME26}}) {
    table.push_back(Row("personality", EPERM, {Low32Eq(0, kOtherBits | flags)}));
  }
}

// ---------------------------------------------------------------------------------------------
// Syscall names and numbers.

// Syscalls newer than libseccomp 2.5.4's table. From 424 on, every architecture but alpha shares
// one number per syscall, so these need no per-architecture list.
struct NewerSyscall {
  const char* name;
  int nr;
};
#if defined(__alpha__)
#error "the shared syscall numbers below are offset on alpha"
#endif
constexpr NewerSyscall kNewerSyscalls[] = {
    {"statmount", 457},       // Linux 6.8
    {"listmount", 458},       // Linux 6.8
    {"open_tree_attr", 467},  // Linux 6.15
};

std::string SyscallName(int nr) {
  if (char* name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr)) {
    std::string result(name);
    std::free(name);
    return result;
  }
  for (const NewerSyscall& syscall : kNewerSyscalls) {
    if (syscall.nr == nr) return syscall.name;
  }
  return "syscall " + std::to_string(nr);
}

bool Holds(const ArgMatch& match, const uint64_t args[6]) {
  const uint64_t arg = args[match.arg];
  switch (match.op) {
    case ArgOp::kEq:
      return arg == match.value;
    case ArgOp::kNe:
      return arg != match.value;
    case ArgOp::kGe:
      return arg >= match.value;
    case ArgOp::kMaskedEq:
      return (arg & match.mask) == match.value;
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// Compiling and loading the filter (child side).

enum class Delivery { kNotify, kErrno };

using ScmpContext = std::unique_ptr<void, decltype(&seccomp_release)>;

uint32_t ActionFor(const Refusal& row, Delivery delivery) {
  if (delivery == Delivery::kNotify && row.reported) return SCMP_ACT_NOTIFY;
  return SCMP_ACT_ERRNO(static_cast<uint32_t>(row.errno_value));
}

scmp_arg_cmp ToScmp(const ArgMatch& match) {
  scmp_arg_cmp cmp{};
  cmp.arg = match.arg;
  cmp.datum_a = match.value;
  switch (match.op) {
    case ArgOp::kEq:
      cmp.op = SCMP_CMP_EQ;
      break;
    case ArgOp::kNe:
      cmp.op = SCMP_CMP_NE;
      break;
    case ArgOp::kGe:
      cmp.op = SCMP_CMP_GE;
      break;
    case ArgOp::kMaskedEq:
      cmp.op = SCMP_CMP_MASKED_EQ;
      cmp.datum_a = match.mask;
      cmp.datum_b = match.value;
      break;
  }
  return cmp;
}

Status AddRule(scmp_filter_ctx ctx, const Refusal& row, Delivery delivery) {
  const int nr = SyscallNumber(row.syscall);
  if (nr < 0) return Status::Ok();  // unknown to this build: skipped, see UnresolvedSyscalls()
  std::vector<scmp_arg_cmp> cmps;
  for (const ArgMatch& match : row.when) cmps.push_back(ToScmp(match));
  // _exact: fail rather than let libseccomp rewrite the rule into something else.
  const int rc = seccomp_rule_add_exact_array(ctx, ActionFor(row, delivery), nr,
                                              static_cast<unsigned>(cmps.size()), cmps.data());
  if (rc < 0) return Status::FromErrno("seccomp rule for " + row.syscall, -rc);
  return Status::Ok();
}

// libseccomp exports only to a file descriptor; a memfd, unlike a pipe, never blocks the writer.
Result<std::vector<sock_filter>> ExportProgram(scmp_filter_ctx ctx) {
  UniqueFd memfd(memfd_create("warden-seccomp-bpf", MFD_CLOEXEC));
  if (!memfd.valid()) return Status::FromErrno("memfd_create", errno);
  if (int rc = seccomp_export_bpf(ctx, memfd.get()); rc < 0) {
    return Status::FromErrno("seccomp_export_bpf", -rc);
  }
  struct stat st {};
  if (fstat(memfd.get(), &st) != 0) return Status::FromErrno("fstat(bpf memfd)", errno);
  const size_t size = static_cast<size_t>(st.st_size);
  if (size == 0 || size % sizeof(sock_filter) != 0 || size / sizeof(sock_filter) > BPF_MAXINSNS) {
    return Status::Error("seccomp: exported BPF program has an unusable size of " +
                         std::to_string(size) + " bytes");
  }
  std::vector<sock_filter> program(size / sizeof(sock_filter));
  auto* bytes = reinterpret_cast<char*>(program.data());
  for (size_t done = 0; done < size;) {
    const ssize_t n = pread(memfd.get(), bytes + done, size - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::FromErrno("pread(bpf memfd)", n < 0 ? errno : EIO);
    done += static_cast<size_t>(n);
  }
  return program;
}

Result<std::vector<sock_filter>> CompileFilter(Delivery delivery) {
  ScmpContext ctx(seccomp_init(SCMP_ACT_ALLOW), &seccomp_release);
  if (!ctx) return Status::Error("seccomp_init failed");
  // The filter lists native numbers only. A call through a foreign ABI (i386 `int 0x80`, x32
  // numbers on x86_64) would dodge every row, so it kills the whole process.
  if (int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
      rc < 0) {
    return Status::FromErrno("seccomp_attr_set(ACT_BADARCH)", -rc);
  }
  // A binary search over syscall numbers instead of a linear scan of every refused syscall.
  if (int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_OPTIMIZE, 2); rc < 0) {
    return Status::FromErrno("seccomp_attr_set(CTL_OPTIMIZE)", -rc);
  }
  for (const Refusal& row : RefusalTable()) {
    WARDEN_RETURN_IF_ERROR(AddRule(ctx.get(), row, delivery));
  }
  return ExportProgram(ctx.get());
}

// Loads `program` on the calling thread; returns the listener fd when `flags` ask for one.
// Loaded by hand rather than by seccomp_load(): libseccomp 2.5 keeps one listener fd per process
// and, once it holds one, silently loads later notify filters without a listener (their refusals
// would then return ENOSYS); it also hides EBUSY and cannot pass WAIT_KILLABLE_RECV.
Result<int> LoadProgram(std::vector<sock_filter>& program, unsigned long flags) {
  sock_fprog fprog{};
  fprog.len = static_cast<unsigned short>(program.size());
  fprog.filter = program.data();
  const long rc = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &fprog);
  if (rc < 0) return Status::FromErrno("seccomp(SECCOMP_SET_MODE_FILTER)", errno);
  return static_cast<int>(rc);
}

// WAIT_KILLABLE_RECV (Linux 5.19): once the supervisor has read a notification, ordinary signals
// no longer interrupt the refused call, so it is answered once instead of restarting and being
// reported twice. Older kernels reject the flag with EINVAL; the listener works without it.
Result<UniqueFd> LoadWithListener(std::vector<sock_filter>& program) {
  Result<int> fd = LoadProgram(
      program, SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV);
  if (!fd.ok() && fd.status().err() == EINVAL) {
    fd = LoadProgram(program, SECCOMP_FILTER_FLAG_NEW_LISTENER);
  }
  if (!fd.ok()) return fd.status();
  return UniqueFd(*fd);
}

// ---------------------------------------------------------------------------------------------
// Answering notifications (supervisor side).

// Whether a notification is pending, without waiting: the supervisor's epoll loop must never
// block here. Polling first also tells "tree gone" (POLLHUP) apart from "this notification
// vanished" (nothing pending), which a RECV would both report as ENOENT on current kernels.
Result<bool> NotificationPending(int notify_fd) {
  if (notify_fd < 0) return Status::FromErrno("seccomp listener", EBADF);  // poll() skips it
  pollfd pfd{notify_fd, POLLIN, 0};
  int n = 0;
  do {
    n = poll(&pfd, 1, 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return Status::FromErrno("poll(seccomp listener)", errno);
  if (pfd.revents & POLLIN) return true;
  if (pfd.revents & POLLNVAL) return Status::FromErrno("poll(seccomp listener)", EBADF);
  if (pfd.revents & POLLHUP) {
    return Status::FromErrno("seccomp listener: every filtered task has exited", ESRCH);
  }
  if (pfd.revents & POLLERR) return Status::FromErrno("poll(seccomp listener)", EIO);
  return false;
}

// A notification that vanished: its thread died, or a signal interrupted the refused call (which
// notifies again if it restarts). Nothing to record.
Violation Vanished() { return Violation{}; }

Violation Describe(const seccomp_notif& request) {
  Violation violation;
  violation.nr = request.data.nr;
  violation.pid = static_cast<int>(request.pid);
  for (int i = 0; i < 6; ++i) violation.args[i] = request.data.args[i];
  const std::optional<Refusal> row = MatchRefusal(violation.nr, violation.args);
  // Only this filter notifies this listener, so a miss means table and filter disagree: still
  // refuse (fail closed) with the generic errno.
  violation.syscall = row ? row->syscall : SyscallName(violation.nr);
  violation.errno_returned = row ? row->errno_value : EPERM;
  return violation;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Public interface.

std::vector<Refusal> RefusalTable() {
  std::vector<Refusal> table;
  AddPrivilegedRefusals(table);
  AddProbeRefusals(table);
  AddNamespaceRefusals(table);
  AddSocketRefusals(table, "socket");
  AddSocketRefusals(table, "socketpair");
  AddIoctlAndPrctlRefusals(table);
  AddPersonalityRefusals(table);
  return table;
}

int SyscallNumber(const std::string& name) {
  // Negative from libseccomp: unknown (__NR_SCMP_ERROR) or absent on this architecture.
  const int nr = seccomp_syscall_resolve_name(name.c_str());
  if (nr >= 0) return nr;
  for (const NewerSyscall& syscall : kNewerSyscalls) {
    if (name == syscall.name) return syscall.nr;
  }
  return -1;
}

std::vector<std::string> UnresolvedSyscalls() {
  std::set<std::string> unresolved;
  for (const Refusal& row : RefusalTable()) {
    if (SyscallNumber(row.syscall) < 0) unresolved.insert(row.syscall);
  }
  return {unresolved.begin(), unresolved.end()};
}

std::optional<Refusal> MatchRefusal(int nr, const uint64_t args[6]) {
  const std::string name = SyscallName(nr);
  for (Refusal& row : RefusalTable()) {
    if (row.syscall != name) continue;
    bool all_hold = true;
    for (const ArgMatch& match : row.when) all_hold = all_hold && Holds(match, args);
    if (all_hold) return std::move(row);
  }
  return std::nullopt;
}

Status InstallFromChild(const FilterOptions& options, int* notify_fd) {
  if (notify_fd == nullptr) return Status::Error("seccomp: notify_fd must not be null");
  *notify_fd = -1;
  // With CAP_SYS_ADMIN the kernel would load the filter without it, and a setuid exec could then
  // run under a filter it did not expect. Never let the filter exist without it.
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    return Status::FromErrno("seccomp: prctl(PR_SET_NO_NEW_PRIVS)", errno);
  }
  if (options.report_violations) {
    Result<std::vector<sock_filter>> program =
        options.notify_program.empty() ? CompileFilter(Delivery::kNotify) : options.notify_program;
    if (!program.ok()) return program.status().Wrap("seccomp (notify)");
    Result<UniqueFd> listener = LoadWithListener(*program);
    if (listener.ok()) {
      *notify_fd = listener->release();
      return Status::Ok();
    }
    // EBUSY: an ancestor filter owns the one listener a task may have (warden inside warden).
    // Refuse the same calls in-kernel instead.
    if (listener.status().err() != EBUSY) return listener.status().Wrap("seccomp (notify)");
  }
  Result<std::vector<sock_filter>> program =
      options.errno_program.empty() ? CompileFilter(Delivery::kErrno) : options.errno_program;
  if (!program.ok()) return program.status().Wrap("seccomp");
  return LoadProgram(*program, 0).status().Wrap("seccomp");
}

Result<std::vector<sock_filter>> CompileProgram(bool notify) {
  return CompileFilter(notify ? Delivery::kNotify : Delivery::kErrno);
}

Result<Violation> AnswerOneFromParent(int notify_fd) {
  Result<bool> pending = NotificationPending(notify_fd);
  if (!pending.ok()) return pending.status();
  if (!*pending) return Vanished();  // gone since the caller's epoll saw it
  seccomp_notif request{};           // the kernel insists on a zeroed buffer
  if (ioctl(notify_fd, SECCOMP_IOCTL_NOTIF_RECV, &request) != 0) {
    // EINTR: a signal hit the supervisor; the fd stays readable and epoll reports it again.
    if (errno == ENOENT || errno == EINTR) return Vanished();
    return Status::FromErrno("ioctl(SECCOMP_IOCTL_NOTIF_RECV)", errno);
  }
  Violation violation = Describe(request);
  seccomp_notif_resp response{};
  response.id = request.id;
  response.error = -violation.errno_returned;
  if (ioctl(notify_fd, SECCOMP_IOCTL_NOTIF_SEND, &response) != 0) {
    if (errno == ENOENT) return Vanished();  // died or interrupted after we read it
    return Status::FromErrno("ioctl(SECCOMP_IOCTL_NOTIF_SEND)", errno);
  }
  return violation;
}

}  // namespace warden::sandbox::seccomp
