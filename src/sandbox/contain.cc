#include "sandbox/contain.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "common/read_file.h"
#include "common/unique_fd.h"
#include "sandbox/caps.h"
#include "sandbox/landlock.h"
#include "sandbox/net.h"
#include "sandbox/pool_protocol.h"
#include "sandbox/seccomp.h"
#include "sandbox/seccomp_programs.h"
#include "sandbox/sync.h"

namespace warden::sandbox::contain {
namespace {

[[noreturn]] void Fail(int sync_fd, const Status& status) {
  sync::Send(sync_fd, sync::kSetupError, status.message());
  _exit(125);
}

Status ApplyLandlock(const ChildSpec& spec, int* abi) {
  landlock::Ruleset rules;
  std::vector<UniqueFd> fds;
  auto add = [&](const std::string& path, bool writable) -> Status {
    int fd = open(path.c_str(), O_PATH | O_CLOEXEC);
    if (fd < 0) return Status::FromErrno("open " + path + " for Landlock", errno);
    fds.emplace_back(fd);
    rules.paths.push_back({fd, writable});
    return Status::Ok();
  };
  WARDEN_RETURN_IF_ERROR(add("/", false));
  WARDEN_RETURN_IF_ERROR(add("/tmp", true));
  WARDEN_RETURN_IF_ERROR(add("/dev", true));  // device nodes: write to null, full; dirs stay read-only mounts
  WARDEN_RETURN_IF_ERROR(add("/proc", true));  // /proc/self/* tunables; /proc/sys is a read-only mount
  for (const auto& p : spec.writable_inside) WARDEN_RETURN_IF_ERROR(add(p, true));
  rules.restrict_net = spec.restrict_tcp;
  rules.connect_tcp_ports = spec.tcp_ports;
  bool applied = false;
  WARDEN_RETURN_IF_ERROR(landlock::ApplyFromChild(rules, &applied));
  *abi = applied ? landlock::AbiVersion() : 0;
  return Status::Ok();
}

// The command's execve arguments, made before the fork: the child is a vfork child (it shares
// this process's memory until it execs), so it allocates nothing and only makes system calls.
struct Prepared {
  std::vector<char*> argv, envp;
  // Where to look for argv[0]: itself when it has a slash, else each PATH entry (as execvp, but
  // with the sandbox's PATH).
  std::vector<std::string> candidates;
  bool direct = false;  // argv[0] has a slash: its own errno is the answer
};

Prepared Prepare(const ChildSpec& spec) {
  Prepared p;
  for (const auto& a : spec.argv) p.argv.push_back(const_cast<char*>(a.c_str()));
  p.argv.push_back(nullptr);
  for (const auto& e : spec.env) p.envp.push_back(const_cast<char*>(e.c_str()));
  p.envp.push_back(nullptr);
  const std::string& file = spec.argv[0];
  if (file.find('/') != std::string::npos) {
    p.candidates.push_back(file);
    p.direct = true;
    return p;
  }
  size_t start = 0;
  while (start <= spec.path.size()) {
    size_t colon = spec.path.find(':', start);
    std::string dir = spec.path.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    start = colon == std::string::npos ? spec.path.size() + 1 : colon + 1;
    p.candidates.push_back((dir.empty() ? "." : dir) + "/" + file);
  }
  return p;
}

// Execs the first candidate that exists. Returns the errno that explains the failure (the most
// telling one, as a shell would report it).
int ExecCommand(const Prepared& p) {
  int best = ENOENT;
  for (const std::string& candidate : p.candidates) {
    execve(candidate.c_str(), p.argv.data(), p.envp.data());
    if (p.direct || (errno != ENOENT && errno != ENOTDIR)) best = errno;
  }
  return best;
}

// Reports a setup failure of the command's child and ends it. Only on the way out may the vfork
// child allocate (the message): its parent resumes once it has exited.
[[noreturn]] void CommandSetupFailed(int sync_fd, const Status& st) {
  sync::Send(sync_fd, sync::kSetupError, st.message());
  _exit(125);
}

[[noreturn]] void RunCommand(const ChildSpec& spec, const Prepared& p) {
  if (dup2(spec.stdin_fd, 0) < 0 || dup2(spec.stdout_fd, 1) < 0 || dup2(spec.stderr_fd, 2) < 0) _exit(125);
  // Nothing but 0, 1, 2 crosses into the command; the sync socket is close-on-exec and stays
  // only to report an exec failure.
  int keep = spec.sync_fd;
  if (keep > 3) close_range(3, static_cast<unsigned>(keep - 1), 0);
  close_range(static_cast<unsigned>(keep + 1), ~0U, 0);
  // Limits apply to the command and what it starts, not to init (which must always be able to
  // reap and report).
  if (Status st = rlimits::ApplyFromChild(spec.limits); !st.ok()) CommandSetupFailed(keep, st);
  if (chdir(spec.workdir.c_str()) != 0)
    CommandSetupFailed(keep, Status::FromErrno("chdir to workdir " + spec.workdir, errno));
  // Default signal dispositions for the command (init's own handling must not leak into it).
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  int err = ExecCommand(p);
  char code[16];
  std::snprintf(code, sizeof code, "%d", err);
  sync::Send(keep, sync::kExecError, code);
  _exit(err == ENOENT ? 127 : 126);
}

// A function of its own, so that nothing of the caller's frame is live across the vfork.
__attribute__((noinline)) pid_t SpawnCommand(const ChildSpec& spec, const Prepared& p) {
  pid_t pid = vfork();
  if (pid == 0) RunCommand(spec, p);
  return pid;
}

// Init is a copy of the supervisor: it holds the supervisor's descriptors (a gateway's sockets,
// a pool's other sandboxes) until it closes them. Keeps the ones the sandbox needs, and puts
// /dev/null on 0, 1 and 2 where those are not among them (so that a stray diagnostic cannot land
// on a descriptor init opens later).
void CloseInheritedDescriptors(const ChildSpec& spec) {
  std::vector<int> keep = spec.plan.Descriptors();
  for (int fd : {spec.sync_fd, spec.stdin_fd, spec.stdout_fd, spec.stderr_fd}) {
    if (fd >= 0) keep.push_back(fd);
  }
  std::sort(keep.begin(), keep.end());
  keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
  unsigned next = 0;
  for (int fd : keep) {
    if (static_cast<unsigned>(fd) > next) close_range(next, static_cast<unsigned>(fd) - 1, 0);
    next = static_cast<unsigned>(fd) + 1;
  }
  close_range(next, ~0U, 0);
  for (int fd = 0; fd <= 2; ++fd) {
    if (std::binary_search(keep.begin(), keep.end(), fd)) continue;
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0) continue;
    if (null != fd) {
      dup2(null, fd);  // dup2 clears close-on-exec: init never execs, and the command gets its own
      close(null);
    }
  }
}

// Init holds no variable of whoever started warden, readable or not: the environment strings the
// kernel laid out for the supervisor, those its environ points to (setenv moves some to the heap)
// and the argv strings (/proc/1/cmdline is readable by anyone in the sandbox) are overwritten.
void ScrubInheritedText(const ChildSpec::Text& text) {
  if (environ != nullptr) {
    for (char** e = environ; *e != nullptr; ++e) explicit_bzero(*e, std::strlen(*e));
  }
  static char* no_environment[] = {nullptr};
  environ = no_environment;
  if (text.env_end > text.env_start) {
    explicit_bzero(reinterpret_cast<void*>(text.env_start), text.env_end - text.env_start);
  }
  if (text.arg_end > text.arg_start) {
    char* args = reinterpret_cast<char*>(text.arg_start);
    const size_t size = text.arg_end - text.arg_start;
    explicit_bzero(args, size);
    static constexpr char kName[] = "warden-init";
    std::memcpy(args, kName, std::min(size - 1, sizeof(kName) - 1));
  }
}

// Init's memory is a copy of the supervisor's: nobody in the sandbox may read or write it (with
// /proc/1/mem it could be made to speak for the supervisor's channel, and read the supervisor's
// data). Its uid switch keeps the same host uid when warden runs as an ordinary user, and the
// kernel then leaves the process dumpable: say so explicitly, after every credential change.
void NotDumpable(int sync_fd) {
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) Fail(sync_fd, Status::FromErrno("prctl(PR_SET_DUMPABLE, 0)", errno));
}

}  // namespace

ChildSpec::Text ProcessTextFromParent() {
  ChildSpec::Text text;
  auto stat = ReadFileUpTo("/proc/self/stat", 4096);
  if (!stat) return text;
  const std::string buf = std::move(*stat);
  // Fields 48 to 51 (arg_start, arg_end, env_start, env_end) counted from 1; the command name
  // (field 2) may hold spaces and parentheses, so count from after its closing one (field 3 on).
  const char* p = std::strrchr(buf.c_str(), ')');
  if (p == nullptr) return text;
  ++p;
  unsigned long long values[51] = {};
  int field = 2;
  while (*p != '\0' && field < 51) {
    while (*p == ' ') ++p;
    if (*p == '\0') break;
    ++field;
    char* end = nullptr;
    values[field - 1] = std::strtoull(p, &end, 10);
    while (*end != '\0' && *end != ' ') ++end;  // the state field is a letter
    p = end;
  }
  if (field < 51) return text;
  text.arg_start = static_cast<uintptr_t>(values[47]);
  text.arg_end = static_cast<uintptr_t>(values[48]);
  text.env_start = static_cast<uintptr_t>(values[49]);
  text.env_end = static_cast<uintptr_t>(values[50]);
  return text;
}

[[noreturn]] void RunInitFromChild(const ChildSpec& spec) {
  const int sync_fd = spec.sync_fd;
  CloseInheritedDescriptors(spec);
  ScrubInheritedText(spec.text);
  // If warden dies, so does the sandbox: init's death ends every process in the namespace.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) Fail(sync_fd, Status::FromErrno("prctl(PR_SET_PDEATHSIG)", errno));
  auto go = sync::Receive(sync_fd);
  if (!go.ok() || go->type != sync::kGo) _exit(125);  // parent gone or gave up
  // The parent is done with our /proc files (id maps): from here on nobody but root on the host
  // may open them.
  NotDumpable(sync_fd);
  if (spec.new_cgroup_ns && unshare(CLONE_NEWCGROUP) != 0) Fail(sync_fd, Status::FromErrno("unshare cgroup namespace", errno));
  if (setsid() < 0) Fail(sync_fd, Status::FromErrno("setsid", errno));
  Status st = user::SwitchFromChild(spec.ids);
  if (!st.ok()) Fail(sync_fd, st.Wrap("switch to the sandbox user"));
  NotDumpable(sync_fd);
  // The uid change cleared the parent-death signal: set it again, then make sure the parent did
  // not die in between (its end of the socket would have hung up).
  if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) Fail(sync_fd, Status::FromErrno("prctl(PR_SET_PDEATHSIG)", errno));
  struct pollfd pfd = {sync_fd, POLLRDHUP, 0};
  if (poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLHUP | POLLRDHUP))) _exit(125);
  std::vector<std::string> notes;
  st = mnt::BuildRootFromChild(spec.plan, &notes);
  if (!st.ok()) Fail(sync_fd, st.Wrap("build the sandbox root"));
  for (const auto& n : notes) sync::Send(sync_fd, sync::kNote, n);
  if (sethostname(spec.hostname.data(), spec.hostname.size()) != 0) Fail(sync_fd, Status::FromErrno("sethostname", errno));
  // A new network namespace starts with loopback down: bring it up (before seccomp). The sockets
  // the parent serves are made here, while init still has its capabilities in the namespace (the
  // parent could enter it only with CAP_SYS_ADMIN in its own user namespace, which an ordinary
  // user lacks).
  st = net::LoopbackUp();
  if (!st.ok()) Fail(sync_fd, st);
  for (const net::LoopbackSocket& wanted : spec.sockets) {
    auto sock = net::OpenLoopback(wanted);
    if (!sock) Fail(sync_fd, sock.status().Wrap("make the sandbox's loopback socket"));
    sync::Send(sync_fd, sync::kSocket, std::to_string(wanted.port), sock->get());
  }
  st = caps::DropAllFromChild();
  if (!st.ok()) Fail(sync_fd, st.Wrap("drop capabilities"));
  if (spec.landlock) {
    int abi = 0;
    st = ApplyLandlock(spec, &abi);
    if (!st.ok()) Fail(sync_fd, st.Wrap("Landlock"));
    sync::Send(sync_fd, sync::kLandlock, std::to_string(abi));
  }
  // Seccomp goes last: from here on init itself only forks, waits and reports.
  int notify_fd = -1;
  seccomp::FilterOptions filter;
  filter.report_violations = spec.seccomp_notify;
  filter.notify_program = seccomp::PrecompiledProgram(true);
  filter.errno_program = seccomp::PrecompiledProgram(false);
  st = seccomp::InstallFromChild(filter, &notify_fd);
  if (!st.ok()) Fail(sync_fd, st.Wrap("seccomp"));
  if (notify_fd >= 0) {
    sync::Send(sync_fd, sync::kNotifyFd, "", notify_fd);
    close(notify_fd);
  }
  // Locked down: the parent accepts nothing of the build phase after this (sync::Gate).
  if (!sync::Send(sync_fd, sync::kReady).ok()) _exit(125);

  // A pooled init waits here, already locked down, for the command it will run once.
  ChildSpec claimed;
  if (spec.pooled) {
    claimed = spec;
    st = pool::ReceiveClaimFromChild(&claimed);
    if (!st.ok()) Fail(sync_fd, st.Wrap("receive the pool's claim"));
  }
  const ChildSpec& run = spec.pooled ? claimed : spec;

  // vfork: no copy of this process's page tables and no copy-on-write faults before the exec
  // (the child only makes system calls; Prepare did the allocating).
  const Prepared prepared = Prepare(run);
  pid_t command = SpawnCommand(run, prepared);
  if (command < 0) Fail(sync_fd, Status::FromErrno("fork the command", errno));
  close(run.stdin_fd);
  close(run.stdout_fd);
  close(run.stderr_fd);
  // Reap everything (orphans are re-parented to us) until the command itself ends.
  int command_status = 0;
  for (;;) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, __WALL);
    if (pid < 0) {
      if (errno == EINTR) continue;
      _exit(125);
    }
    if (pid == command) {
      command_status = status;
      break;
    }
  }
  // Then end whatever the command left running and reap it: when the parent hears the exit
  // status, nothing of the command is alive (a pool answers its client at that point, before this
  // init's own exit and the namespace teardown). Everything here runs as our uid without
  // capabilities of its own, so kill(-1) reaches all of it.
  kill(-1, SIGKILL);
  while (waitpid(-1, nullptr, __WALL) > 0 || errno == EINTR) {
  }
  // The wait status, then the CPU time and peak memory of everything reaped (the parent's
  // record has them from this init's rusage otherwise).
  struct rusage ru = {};
  getrusage(RUSAGE_CHILDREN, &ru);
  const uint64_t cpu_us = static_cast<uint64_t>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 +
                          static_cast<uint64_t>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
  sync::Send(sync_fd, sync::kExit,
             std::to_string(command_status) + " " + std::to_string(cpu_us) + " " +
                 std::to_string(ru.ru_maxrss));
  _exit(0);
}

}  // namespace warden::sandbox::contain
