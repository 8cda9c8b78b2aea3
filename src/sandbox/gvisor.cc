// The gvisor backend (backends.h): the command runs under gVisor's runsc, in an OCI bundle
// generated from the same Options as a native sandbox (gvisor_bundle.h), on the platform probed to
// work here (gvisor_platform.h). Docs: docs/backends.md.
//
// runsc itself runs as init of a fresh PID namespace that warden creates, with PDEATHSIG: killing
// that init (timeout, output cap, warden's own death) takes runsc, its gofer and the Sentry with
// it, so nothing outlives the run. runsc's state and log directories live in the run's private
// temporary directory, which a janitor process removes even when warden is SIGKILLed. Memory and
// CPU limits are enforced from outside, on a warden cgroup holding all of runsc (the Sentry's own
// memory counts). A pids limit is RLIMIT_NPROC inside gVisor's kernel (the host sees the Sentry's
// threads, not the command's processes); whether it refused a fork is read from gVisor's trace of
// the clone calls, streamed through a pipe (PidsTrace).
//
// With --net proxy, runsc's PID namespace also gets a fresh network namespace holding only
// loopback, in which warden creates the egress proxy's sockets before runsc starts; runsc then
// uses that namespace's stack (--network=host): the command can reach the proxy and nothing else.
//
// The output relay, timeout and stdin plan follow subproc.cc's Supervisor; the small pieces they
// share (WriteAll, PlanStdin, BuildEnv) are copied here rather than shared while that file is
// being changed elsewhere.
#include <fcntl.h>
#include <ftw.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "common/clock.h"
#include "common/unique_fd.h"
#include "sandbox/host_io.h"
#include "sandbox/backends.h"
#include "sandbox/cgroup.h"
#include "sandbox/gvisor_bundle.h"
#include "sandbox/gvisor_platform.h"
#include "sandbox/mnt.h"
#include "sandbox/net.h"
#include "sandbox/user.h"

namespace warden::sandbox {
namespace {

constexpr const char* kRunDir = "/run/warden";
// runsc exits with this status when it could not start the container at all.
constexpr int kRunscFailed = 128;

RunResult SetupError(const std::string& message) {
  RunResult r;
  r.backend = "gvisor";
  r.exit_code = 125;
  r.reason = Reason::kSetupError;
  r.error = message;
  return r;
}





std::string FindRunsc() {
  std::string path = getenv("PATH") ? getenv("PATH") : "";
  path += ":/usr/sbin:/usr/bin:/usr/local/bin:/usr/local/sbin";
  std::istringstream dirs(path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty() || dir.front() != '/') continue;
    std::string candidate = dir + "/runsc";
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

int RemoveEntry(const char* path, const struct stat*, int type, struct FTW*) {
  if (type == FTW_DP) rmdir(path);
  else unlink(path);
  return 0;
}

void RemoveTree(const std::string& dir) {
  nftw(dir.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

// A forked process that removes the run's temporary directory and cgroups if warden dies before
// it could (SIGKILL). It waits for its pipe to close (warden gone or done), then removes what is
// left: cgroups first (async-signal-safe), then the directory by exec'ing rm.
class Janitor {
 public:
  static std::optional<Janitor> Start(const std::string& dir, const std::vector<std::string>& cgroups) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) return std::nullopt;
    std::vector<const char*> cpaths;
    for (const auto& s : cgroups) cpaths.push_back(s.c_str());
    const char* rm_argv[] = {"rm", "-rf", "--one-file-system", "--", dir.c_str(), nullptr};
    pid_t pid = fork();
    if (pid < 0) {
      close(p[0]);
      close(p[1]);
      return std::nullopt;
    }
    if (pid == 0) {
      for (int s : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGQUIT}) signal(s, SIG_IGN);
      close(p[1]);
      if (p[0] != 3) dup2(p[0], 3);
      int devnull = open("/dev/null", O_RDWR);
      if (devnull >= 0) {
        dup2(devnull, 0);
        dup2(devnull, 1);
        dup2(devnull, 2);
      }
      close_range(4, ~0U, 0);
      char c;
      while (read(3, &c, 1) < 0 && errno == EINTR) {}
      if (!cpaths.empty()) cgroup::RemoveWhenEmpty(cpaths.data(), static_cast<int>(cpaths.size()), 10000);
      execv("/bin/rm", const_cast<char* const*>(rm_argv));
      _exit(0);
    }
    close(p[0]);
    Janitor j;
    j.pid_ = pid;
    j.pipe_.reset(p[1]);
    return j;
  }
  // As subproc.cc's janitor: let it go without waiting (reaped now if done, else by init).
  void Finish() {
    pipe_.reset();
    if (pid_ > 0) waitpid(pid_, nullptr, WNOHANG);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  UniqueFd pipe_;
};

// Reads gVisor's system call trace (clone, fork, vfork and clone3 only, asked for with --pids)
// and remembers whether any of them failed with EAGAIN: RLIMIT_NPROC refused a process. The trace
// goes through a pipe, never to disk. A command can forge a line (its own task name is in it),
// which only gives its own run reason `pids`; it cannot hide one.
class PidsTrace {
 public:
  void Feed(const char* data, size_t len) {
    pending_.append(data, len);
    for (size_t nl; (nl = pending_.find('\n')) != std::string::npos; pending_.erase(0, nl + 1)) {
      if (IsRefusedFork(std::string_view(pending_).substr(0, nl))) limit_hit_ = true;
    }
    if (pending_.size() > 65536) pending_.clear();  // a line no trace entry makes
  }
  bool limit_hit() const { return limit_hit_; }
  static constexpr const char* kSyscalls = "clone,fork,vfork,clone3";

 private:
  static bool IsRefusedFork(std::string_view line) {
    if (line.find("strace.go") == std::string_view::npos || line.find(" errno=11 ") == std::string_view::npos) return false;
    for (const char* call : {" X clone(", " X fork(", " X vfork(", " X clone3("}) {
      if (line.find(call) != std::string_view::npos) return true;
    }
    return false;
  }
  std::string pending_;
  bool limit_hit_ = false;
};

// One runsc run of options.argv on one platform.
class Runner {
 public:
  Runner(const Options& o, const Io& io, NetworkProvider* network, std::string runsc, std::string platform)
      : opt_(o), io_(io), network_(network), runsc_(std::move(runsc)), platform_(std::move(platform)) {}
  ~Runner();
  RunResult Run();

 private:
  Status Prepare();
  Status Launch();
  void Loop();
  void OnStream(OutputStream& s, bool* limit_hit);
  void OnStdinRelay();
  void OnTrace();
  Status SetUpNetworkFromParent();
  void Kill(Reason why);
  RunResult Collect();
  std::string RunscError() const;
  // Unique per run: runsc names its control socket (an abstract one, shared by every runsc on the
  // host) after the container.
  std::string ContainerId() const { return "warden-" + dir_.substr(dir_.rfind('/') + 1); }

  const Options& opt_;
  const Io& io_;
  NetworkProvider* const network_;  // set when --net proxy
  const std::string runsc_, platform_;
  RunResult result_;
  mnt::Plan plan_;
  gvisor::ProcessSpec process_;
  std::string dir_;
  std::optional<cgroup::Cgroup> cg_;
  std::optional<Janitor> janitor_;
  StdinPlan stdin_;
  OutputStream out_, err_;
  UniqueFd pidfd_, epoll_, timer_, cpu_timer_, sigfd_;
  UniqueFd trace_;  // read end of gVisor's clone trace, with --pids
  PidsTrace pids_trace_;
  pid_t pid_ = -1;
  uint64_t start_ms_ = 0, end_ms_ = 0;
  bool exited_ = false;
  std::optional<Reason> killed_for_;
  int host_signal_ = 0;
  int command_check_ = 0;  // errno from CheckCommand: 0, ENOENT or EACCES
};

Runner::~Runner() {
  if (pid_ > 0) {
    syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGKILL, nullptr, 0);
    waitpid(pid_, nullptr, __WALL);
  }
  cg_.reset();
  if (!dir_.empty()) RemoveTree(dir_);
  if (janitor_) janitor_->Finish();
}

Status Runner::Prepare() {
  WARDEN_RETURN_IF_ERROR(Validate(opt_));
  if (opt_.net == NetMode::kProxy && network_ == nullptr) {
    return Status::Error("--net proxy: no egress proxy is available to this caller");
  }
  if (geteuid() != 0) {
    return Status::Error("--backend gvisor needs warden to run as root (runsc creates its own namespaces and drops privileges itself)");
  }
  // gVisor's kernel keeps host ids as they are and its gofer creates files with the command's
  // ids, so the command runs as the host identity a native sandbox maps to (user.h: 65534 when
  // warden is root): files it writes in a --rw bind get the same owner as under native.
  const user::IdMap ids = user::ChooseFromParent();
  auto plan = mnt::PlanFromParent(opt_, ids.host_uid, ids.host_gid);
  if (!plan) return plan.status();
  plan_ = std::move(*plan);
  plan_.CloseDescriptors();  // runsc opens the bind sources itself: the plan gives it paths only
  std::string path;
  process_.argv = opt_.argv;
  process_.env = BuildEnv(opt_, &path);
  if (opt_.net == NetMode::kProxy) {
    // As native: the proxy's variables, unless --env set one.
    for (const auto& [k, v] : network_->Environment()) {
      if (!opt_.env.count(k)) process_.env.push_back(k + "=" + v);
    }
  }
  process_.uid = ids.host_uid;
  process_.gid = ids.host_gid;
  process_.workdir = opt_.workdir;
  if (process_.workdir.empty()) {
    process_.workdir = "/tmp";
    for (const auto& b : plan_.user) {
      if (b.writable && b.is_dir) {
        process_.workdir = b.inside;
        break;
      }
    }
  }
  command_check_ = gvisor::CheckCommand(plan_, opt_.argv[0], path);
  if (command_check_ != 0) return Status::Ok();

  // Under /run (root's tmpfs), not /tmp: the host's /tmp stays free of warden's files.
  if (mkdir(kRunDir, 0755) != 0 && errno != EEXIST) return Status::FromErrno(std::string("mkdir ") + kRunDir, errno);
  char tmpl[] = "/run/warden/gvisor-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return Status::FromErrno("create the bundle directory under /run/warden", errno);
  dir_ = tmpl;
  if (opt_.memory_bytes || opt_.cpu_ms) {
    cgroup::SweepStale();
    auto cg = cgroup::Cgroup::CreateFromParent({opt_.memory_bytes, 0});
    if (!cg) {
      return cg.status().Wrap(std::string(opt_.memory_bytes ? "--memory" : "--cpu") +
                              " with --backend gvisor needs cgroups (warden enforces it on runsc from outside)");
    }
    cg_ = std::move(*cg);
    result_.cgroup = cg_->is_v2() ? "v2" : "v1";
  }
  janitor_ = Janitor::Start(dir_, cg_ ? cg_->paths() : std::vector<std::string>{});
  if (!janitor_) return Status::FromErrno("start the janitor process", errno);
  WARDEN_RETURN_IF_ERROR(mkdir((dir_ + "/bundle").c_str(), 0755) == 0 ? Status::Ok() : Status::FromErrno("mkdir bundle", errno));
  WARDEN_RETURN_IF_ERROR(gvisor::WriteBundle(dir_ + "/bundle", opt_, plan_, process_).Wrap("write the OCI bundle"));
  return Status::Ok();
}

Status Runner::Launch() {
  auto st_in = PlanStdin(io_.stdin_fd);
  if (!st_in) return st_in.status();
  stdin_ = std::move(*st_in);
  int po[2], pe[2], go[2], ex[2];
  if (pipe2(po, O_CLOEXEC) != 0 || pipe2(pe, O_CLOEXEC) != 0) return Status::FromErrno("pipe for output", errno);
  out_.fd.reset(po[0]);
  err_.fd.reset(pe[0]);
  UniqueFd child_out(po[1]), child_err(pe[1]);
  out_.out = io_.stdout_fd;
  err_.out = io_.stderr_fd;
  if (pipe2(go, O_CLOEXEC) != 0 || pipe2(ex, O_CLOEXEC) != 0) return Status::FromErrno("pipe for launch", errno);
  UniqueFd go_read(go[0]), go_write(go[1]), ex_read(ex[0]), ex_write(ex[1]);
  UniqueFd trace_write;
  if (opt_.pids) {
    int tp[2];
    if (pipe2(tp, O_CLOEXEC | O_NONBLOCK) != 0) return Status::FromErrno("pipe for gVisor's clone trace", errno);
    trace_.reset(tp[0]);
    trace_write.reset(tp[1]);
    // runsc blocks on a full pipe rather than losing lines: only the read end is non-blocking.
    fcntl(trace_write.get(), F_SETFL, 0);
  }

  // Everything the child needs is built before the clone: it only makes system calls.
  const bool proxy = opt_.net == NetMode::kProxy;
  std::vector<std::string> args = {runsc_, "--root", dir_ + "/state", "--platform", platform_,
                                   // host: the stack of the private namespace made below (proxy only)
                                   "--network", proxy ? "host" : "none", "--ignore-cgroups",
                                   "--log", dir_ + "/runsc.log"};
  if (opt_.pids) {
    // runsc reopens the path in each of its processes: fd 3 is the trace pipe in the child.
    for (const char* a : {"--strace", "--debug-log", "/proc/self/fd/3"}) args.push_back(a);
    args.push_back(std::string("--strace-syscalls=") + PidsTrace::kSyscalls);
  }
  for (const std::string& a : {std::string("run"), std::string("--bundle"), dir_ + "/bundle", ContainerId()}) args.push_back(a);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  char env_path[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
  char* envp[] = {env_path, nullptr};
  const int in_fd = stdin_.child_end.get(), out_fd = child_out.get(), err_fd = child_err.get();
  const int trace_fd = trace_write.get();

  struct clone_args ca = {};
  int pidfd = -1;
  ca.flags = CLONE_NEWPID | CLONE_NEWNS | CLONE_PIDFD | (proxy ? CLONE_NEWNET : 0);
  ca.pidfd = reinterpret_cast<uint64_t>(&pidfd);
  ca.exit_signal = SIGCHLD;
  long pid = syscall(SYS_clone3, &ca, sizeof(ca));
  if (pid < 0) return Status::FromErrno("clone runsc's PID namespace", errno);
  if (pid == 0) {
    // runsc's init: dies with warden; waits for its cgroup; gets its own /proc for the new PID
    // namespace (runsc re-executes itself through /proc/self/exe).
    auto fail = [&](const char* step) {
      int err = errno;
      char msg[256];
      int n = snprintf(msg, sizeof(msg), "%s: %s", step, strerror(err));
      if (n > 0) (void)!write(ex_write.get(), msg, static_cast<size_t>(n));
      _exit(125);
    };
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    char c;
    if (read(go_read.get(), &c, 1) != 1) _exit(125);
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) fail("make mounts private");
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) fail("mount /proc for runsc");
    if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0) fail("set up runsc's stdio");
    int first_closed = 3;
    if (trace_fd >= 0) {
      if (dup2(trace_fd, 3) < 0) fail("set up gVisor's trace pipe");
      first_closed = 4;
    }
    // Descriptors warden inherited stay out of runsc (and so out of the sandbox).
    if (close_range(static_cast<unsigned>(first_closed), ~0U, CLOSE_RANGE_CLOEXEC) != 0) fail("close inherited descriptors");
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execve(argv[0], argv.data(), envp);
    fail("exec runsc");
  }
  pid_ = static_cast<pid_t>(pid);
  pidfd_.reset(pidfd);
  go_read.reset();
  ex_write.reset();
  trace_write.reset();
  start_ms_ = MonotonicMs();
  Status st = cg_ ? cg_->AddProcessFromParent(pid_) : Status::Ok();
  if (st.ok() && proxy) st = SetUpNetworkFromParent();
  if (st.ok() && write(go_write.get(), "g", 1) != 1) st = Status::FromErrno("start runsc", errno);
  if (st.ok()) {
    char msg[256];
    ssize_t n;
    while ((n = read(ex_read.get(), msg, sizeof(msg) - 1)) < 0 && errno == EINTR) {}
    if (n > 0) st = Status::Error(std::string(msg, static_cast<size_t>(n)) + " (" + runsc_ + ")");
  }
  if (!st.ok()) {
    syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGKILL, nullptr, 0);
    waitpid(pid_, nullptr, __WALL);
    pid_ = -1;
    return st;
  }
  return Status::Ok();
}

// The child is waiting for its go: its new network namespace has only loopback, down. warden
// brings it up and makes the proxy's sockets in it (as native, net.h), then serves them from its
// own namespace. runsc will see nothing else there.
Status Runner::SetUpNetworkFromParent() {
  Status st = net::StartInNamespaceFromParent(pid_, *network_);
  return st.ok() ? st : st.Wrap("set up the sandbox's network");
}

void Runner::Kill(Reason why) {
  if (exited_) return;
  if (!killed_for_) killed_for_ = why;
  // The namespace's init is runsc: its death takes the gofer and the Sentry with it.
  syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGKILL, nullptr, 0);
}

void Runner::OnStream(OutputStream& s, bool* limit_hit) {
  if (PumpOutput(s, opt_.output_limit_bytes, limit_hit)) return;
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, s.fd.get(), nullptr);
  s.open = false;
}

void Runner::OnStdinRelay() { RelayStdin(stdin_, epoll_.get()); }

void Runner::OnTrace() {
  char buf[65536];
  ssize_t n = read(trace_.get(), buf, sizeof(buf));
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, trace_.get(), nullptr);
    trace_.reset();
    return;
  }
  pids_trace_.Feed(buf, static_cast<size_t>(n));
}

void Runner::Loop() {
  epoll_.reset(epoll_create1(EPOLL_CLOEXEC));
  auto add = [this](int fd) {
    struct epoll_event ev = {EPOLLIN, {.fd = fd}};
    return epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) == 0;
  };
  add(pidfd_.get());
  add(out_.fd.get());
  add(err_.fd.get());
  if (trace_.valid()) add(trace_.get());
  if (stdin_.relay_in.valid() && !add(stdin_.relay_in.get())) {
    stdin_.relay_in.reset();
    stdin_.relay_out.reset();
  }
  stdin_.child_end.reset();  // runsc holds its own copy
  if (opt_.timeout_ms) {
    timer_.reset(timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC));
    struct itimerspec its = {};
    its.it_value.tv_sec = static_cast<time_t>(opt_.timeout_ms / 1000);
    its.it_value.tv_nsec = static_cast<long>((opt_.timeout_ms % 1000) * 1000000);
    timerfd_settime(timer_.get(), 0, &its, nullptr);
    add(timer_.get());
  }
  if (opt_.cpu_ms && cg_) {
    cpu_timer_.reset(timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC));
    struct itimerspec its = {};
    its.it_value.tv_nsec = its.it_interval.tv_nsec = 50 * 1000000;
    timerfd_settime(cpu_timer_.get(), 0, &its, nullptr);
    add(cpu_timer_.get());
  }
  sigset_t sigs = TerminationSignals();
  sigfd_.reset(signalfd(-1, &sigs, SFD_CLOEXEC));
  add(sigfd_.get());

  uint64_t drain_deadline = 0;
  while (!exited_ || out_.open || err_.open || trace_.valid()) {
    int timeout = -1;
    if (exited_) {
      uint64_t now = MonotonicMs();
      if (now >= drain_deadline) break;
      timeout = static_cast<int>(drain_deadline - now);
    }
    struct epoll_event events[16];
    int n = epoll_wait(epoll_.get(), events, 16, timeout);
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      bool limit_hit = false;
      if (fd == pidfd_.get()) {
        if (!exited_) {
          exited_ = true;
          end_ms_ = MonotonicMs();
          drain_deadline = end_ms_ + 2000;
          epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, pidfd_.get(), nullptr);
        }
      } else if (out_.fd.valid() && fd == out_.fd.get()) {
        OnStream(out_, &limit_hit);
      } else if (err_.fd.valid() && fd == err_.fd.get()) {
        OnStream(err_, &limit_hit);
      } else if (trace_.valid() && fd == trace_.get()) {
        OnTrace();
      } else if (stdin_.relay_in.valid() && fd == stdin_.relay_in.get()) {
        OnStdinRelay();
      } else if (timer_.valid() && fd == timer_.get()) {
        uint64_t ticks;
        (void)!read(timer_.get(), &ticks, sizeof(ticks));
        Kill(Reason::kTimeout);
      } else if (cpu_timer_.valid() && fd == cpu_timer_.get()) {
        uint64_t ticks;
        (void)!read(cpu_timer_.get(), &ticks, sizeof(ticks));
        if (cg_->ReadUsage().cpu_ns / 1000000 >= opt_.cpu_ms) Kill(Reason::kCpu);
      } else if (sigfd_.valid() && fd == sigfd_.get()) {
        struct signalfd_siginfo si;
        if (read(sigfd_.get(), &si, sizeof(si)) == sizeof(si) && host_signal_ == 0) {
          host_signal_ = static_cast<int>(si.ssi_signo);
        }
        Kill(Reason::kSignaled);
      }
      if (limit_hit) Kill(Reason::kOutputLimit);
    }
  }
}

// runsc's own complaint when it could not start the container: the last error in its log. runsc
// writes errors as JSON objects ({"msg":...,"level":"error"}) whatever --log-format says, and
// FATAL ERROR lines in text.
std::string Runner::RunscError() const {
  std::ifstream log(dir_ + "/runsc.log");
  std::string line, last;
  while (std::getline(log, line)) {
    if (auto pos = line.find("FATAL ERROR: "); pos != std::string::npos) {
      last = line.substr(pos + 13);
      continue;
    }
    for (size_t start = line.find('{'); start != std::string::npos; start = line.find('{', start + 1)) {
      size_t end = line.find('}', start);
      if (end == std::string::npos) break;
      auto record = nlohmann::json::parse(line.substr(start, end - start + 1), nullptr, false);
      if (record.is_object() && record.value("level", "") == "error" && record.contains("msg") && record["msg"].is_string()) {
        last = record["msg"].get<std::string>();
      }
      start = end;
    }
  }
  return last;
}

RunResult Runner::Collect() {
  int status = 0;
  struct rusage ru = {};
  wait4(pid_, &status, __WALL, &ru);
  pid_ = -1;
  RunResult& r = result_;
  r.wall_ms = end_ms_ - start_ms_;
  r.stdout_truncated = out_.truncated;
  r.stderr_truncated = err_.truncated;
  r.stdout_bytes = out_.delivered;
  r.stderr_bytes = err_.delivered;
  r.cpu_ms = static_cast<uint64_t>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
             static_cast<uint64_t>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
  r.peak_memory_bytes = static_cast<uint64_t>(ru.ru_maxrss) * 1024;
  cgroup::Usage usage;
  if (cg_) {
    usage = cg_->ReadUsage();
    if (usage.cpu_ns) r.cpu_ms = usage.cpu_ns / 1000000;
    if (usage.peak_memory_bytes) r.peak_memory_bytes = usage.peak_memory_bytes;
  }
  if (killed_for_ && *killed_for_ != Reason::kSignaled) {
    r.reason = *killed_for_;
    r.signal = SIGKILL;
    r.exit_code = r.reason == Reason::kTimeout ? 124 : 128 + SIGKILL;
    return r;
  }
  if (host_signal_ != 0) {
    r.reason = Reason::kSignaled;
    r.signal = host_signal_;
    r.exit_code = 128 + host_signal_;
    r.error = std::string("warden received ") + sigabbrev_np(host_signal_) + ": the sandbox was killed";
    return r;
  }
  const bool at_memory_limit = opt_.memory_bytes != 0 && usage.peak_memory_bytes >= opt_.memory_bytes;
  const bool memory_kill = cg_ && (usage.oom_killed || at_memory_limit);
  if (WIFSIGNALED(status)) {
    // runsc itself was killed: by the OOM killer at the limit, or from outside.
    r.signal = WTERMSIG(status);
    r.exit_code = 128 + r.signal;
    r.reason = memory_kill && r.signal == SIGKILL ? Reason::kMemory : Reason::kSignaled;
    return r;
  }
  const int code = WEXITSTATUS(status);
  if (code == kRunscFailed) {
    std::string why = RunscError();
    if (!why.empty()) {
      RunResult e = SetupError("runsc could not start the command: " + why);
      e.notes = r.notes;
      e.cgroup = r.cgroup;
      e.wall_ms = r.wall_ms;
      return e;
    }
  }
  if (memory_kill && (code == 128 + SIGKILL || code == kRunscFailed)) {
    // The OOM killer struck the Sentry (or runsc) at the limit: the whole sandbox died.
    r.signal = SIGKILL;
    r.exit_code = 128 + SIGKILL;
    r.reason = Reason::kMemory;
    return r;
  }
  if (code > 128 && code < 128 + 65) {
    // runsc reports death by signal N as 128+N, indistinguishable from exit(128+N): the far more
    // common case is the signal (docs/backends.md).
    r.signal = code - 128;
    r.exit_code = code;
    r.reason = Reason::kSignaled;
    return r;
  }
  r.exit_code = code;
  // As native: a refused fork is the reason only when the command then failed.
  r.reason = pids_trace_.limit_hit() && code != 0 ? Reason::kPids : Reason::kExited;
  return r;
}

RunResult Runner::Run() {
  sigset_t old_mask;
  sigset_t sigs = TerminationSignals();
  sigprocmask(SIG_BLOCK, &sigs, &old_mask);
  result_.backend = "gvisor";
  result_.platform = platform_;
  Status st = Prepare();
  if (st.ok() && command_check_ != 0) {
    sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    RunResult r = result_;
    r.exit_code = command_check_ == ENOENT ? 127 : 126;
    r.reason = Reason::kExited;
    r.error = (command_check_ == ENOENT ? "command not found: " : "command not executable: ") + opt_.argv[0] + " (" +
              strerror(command_check_) + ")";
    return r;
  }
  if (st.ok()) st = Launch();
  if (!st.ok()) {
    sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    RunResult r = SetupError(st.message());
    r.platform = platform_;
    return r;
  }
  Loop();
  if (!exited_) {
    Kill(Reason::kSignaled);
    end_ms_ = MonotonicMs();
  }
  RunResult r = Collect();
  if (network_ != nullptr && opt_.net == NetMode::kProxy) network_->Finish(&r);
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  return r;
}

}  // namespace

RunResult RunGvisor(const Options& options, const Io& io, NetworkProvider* network) {
  const std::string runsc = FindRunsc();
  if (runsc.empty()) {
    return SetupError("--backend gvisor: runsc was not found in PATH, /usr/bin or /usr/sbin: install gVisor (Debian package runsc; scripts/install-deps.sh)");
  }
  if (Status st = Validate(options); !st.ok()) return SetupError(st.message());
  auto probe = [&runsc](const std::string& platform, int timeout_ms, std::string* why) {
    Options o;
    o.argv = {"/bin/true"};
    o.timeout_ms = static_cast<uint64_t>(timeout_ms);
    UniqueFd null_fd(open("/dev/null", O_RDWR | O_CLOEXEC));
    Io io{null_fd.get(), null_fd.get(), null_fd.get()};
    Runner runner(o, io, nullptr, runsc, platform);
    RunResult r = runner.Run();
    if (r.exit_code == 0) return true;
    if (r.reason == Reason::kTimeout) *why = "no answer within " + std::to_string(timeout_ms) + " ms";
    else if (!r.error.empty()) *why = r.error;
    else *why = "exit status " + std::to_string(r.exit_code);
    return false;
  };
  gvisor::PlatformChoice choice = gvisor::ChoosePlatform(runsc, probe);
  if (choice.platform.empty()) {
    std::string tried;
    for (const auto& t : choice.tried) tried += (tried.empty() ? "" : "; ") + t;
    return SetupError("--backend gvisor: no gVisor platform works on this machine (" + tried + ")");
  }
  Runner runner(options, io, network, runsc, choice.platform);
  RunResult r = runner.Run();
  std::string note = "gvisor platform " + choice.platform + (choice.from_cache ? " (probed earlier this boot" : " (probed now");
  for (const auto& t : choice.tried) note += "; " + t;
  r.notes.push_back(note + ")");
  return r;
}

}  // namespace warden::sandbox
