// The parent's half of a sandbox run: preflight checks, clone, id maps and cgroups, then one
// epoll loop that streams output, enforces the wall-clock, CPU and output limits, answers
// seccomp notifications and collects the result. See contain.cc for the child's half.
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <optional>

#include "common/clock.h"
#include "common/unique_fd.h"
#include "sandbox/host_io.h"
#include "sandbox/outcome.h"
#include "sandbox/backends.h"
#include "sandbox/cgroup.h"
#include "sandbox/contain.h"
#include "sandbox/landlock.h"
#include "sandbox/sandbox.h"
#include "sandbox/seccomp.h"
#include "sandbox/sync.h"

namespace warden::sandbox {
namespace {

constexpr size_t kMaxViolations = 100;


RunResult SetupError(const Status& st) {
  RunResult r;
  r.exit_code = 125;
  r.reason = Reason::kSetupError;
  r.error = st.message();
  return r;
}





// A forked process that outlives warden only to remove the sandbox's cgroup directories if
// warden is killed (SIGKILL leaves no chance to clean up). It waits for its pipe to close, which
// happens when warden and the sandbox's init are both gone, then removes what is left.
class Janitor {
 public:
  static std::optional<Janitor> Start(const std::vector<std::string>& paths) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) return std::nullopt;
    std::vector<const char*> cpaths;
    for (const auto& s : paths) cpaths.push_back(s.c_str());
    pid_t pid = fork();
    if (pid < 0) {
      close(p[0]);
      close(p[1]);
      return std::nullopt;
    }
    if (pid == 0) {
      signal(SIGINT, SIG_IGN);
      signal(SIGTERM, SIG_IGN);
      signal(SIGHUP, SIG_IGN);
      signal(SIGPIPE, SIG_IGN);
      close(p[1]);
      if (p[0] != 3) {
        dup2(p[0], 3);
      }
      close_range(0, 2, 0);
      close_range(4, ~0U, 0);
      char c;
      while (read(3, &c, 1) < 0 && errno == EINTR) {}
      cgroup::RemoveWhenEmpty(cpaths.data(), static_cast<int>(cpaths.size()), 10000);
      _exit(0);
    }
    close(p[0]);
    Janitor j;
    j.pid_ = pid;
    j.pipe_.reset(p[1]);
    return j;
  }
  // Lets the janitor go (it finds nothing left to remove) without waiting for it: a wait costs a
  // scheduling round trip on a busy machine (milliseconds, measured in bench/). Reaped if it has
  // already exited; otherwise it is reaped by whoever inherits it when warden exits.
  void Finish() {
    pipe_.reset();
    if (pid_ > 0) waitpid(pid_, nullptr, WNOHANG);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  UniqueFd pipe_;
};

class Supervisor {
 public:
  Supervisor(const Options& o, const Io& io, NetworkProvider* network) : opt_(o), io_(io), network_(network) {}
  RunResult Run();

 private:
  Status Prepare(contain::ChildSpec* spec);
  Status Launch(contain::ChildSpec& spec);
  void Loop();
  void OnSync();
  void OnSocket(UniqueFd socket);
  void OnStream(OutputStream& s, bool* limit_hit);
  void OnStdinRelay();
  void OnNotify();
  void Kill(Reason why);
  RunResult Collect();

  const Options& opt_;
  const Io& io_;
  NetworkProvider* network_;
  RunResult result_;
  uint64_t start_ms_ = 0, end_ms_ = 0;
  std::optional<cgroup::Cgroup> cg_;
  std::optional<Janitor> janitor_;
  StdinPlan stdin_;
  OutputStream out_, err_;
  UniqueFd sync_, pidfd_, epoll_, timer_, cpu_timer_, notify_, sigfd_;
  pid_t pid_ = -1;
  bool exited_ = false;
  std::optional<Reason> killed_for_;
  int host_signal_ = 0;  // a signal warden itself received (SIGINT, SIGTERM, ...)
  std::optional<int> wait_status_;
  std::optional<int> exec_errno_;
  std::string setup_error_;
  sync::Gate gate_;
  std::vector<UniqueFd> sockets_;  // the network's loopback sockets, as init sends them
  size_t sockets_wanted_ = 0;
  sigset_t old_mask_;
};

Status Supervisor::Prepare(contain::ChildSpec* spec) {
  WARDEN_RETURN_IF_ERROR(Validate(opt_));
  spec->ids = user::ChooseFromParent();
  auto plan = mnt::PlanFromParent(opt_, spec->ids.inside_uid, spec->ids.inside_gid);
  if (!plan) return plan.status();
  spec->plan = std::move(*plan);
  // Fail closed: a missing defence is an error unless the profile accepted it.
  if (landlock::AbiVersion() <= 0) {
    if (!opt_.degrade.allow_no_landlock) {
      return Status::Error("Landlock is not available in this kernel (enable CONFIG_SECURITY_LANDLOCK and add 'landlock' to the lsm= boot parameter), "
                           "or accept running without it with a profile that says 'accept_missing: [landlock]'");
    }
    spec->landlock = false;
    result_.degraded.push_back("landlock");
  }
  spec->limits.file_size_bytes = opt_.file_size_bytes;
  spec->limits.open_files = opt_.open_files;
  if (opt_.memory_bytes || opt_.pids || opt_.cpu_ms) {
    cgroup::SweepStale();
    auto cg = cgroup::Cgroup::CreateFromParent({opt_.memory_bytes, opt_.pids ? opt_.pids + 1 : 0});
    if (cg) {
      cg_ = std::move(*cg);
      result_.cgroup = cg_->is_v2() ? "v2" : "v1";
      janitor_ = Janitor::Start(cg_->paths());
      spec->new_cgroup_ns = true;
    } else if (opt_.degrade.allow_no_cgroups) {
      result_.degraded.push_back("cgroups");
      result_.notes.push_back("cgroups unavailable (" + cg.status().message() + "): limits enforced per process with rlimits");
      spec->limits.address_space_bytes = opt_.memory_bytes;
      spec->limits.processes = opt_.pids;
    } else {
      return cg.status().Wrap("--memory/--pids/--cpu need cgroups (or a profile with 'accept_missing: [cgroups]' to fall back to rlimits)");
    }
  }
  if (opt_.cpu_ms) spec->limits.cpu_seconds = (opt_.cpu_ms + 999) / 1000 + 1;  // backstop; the tree is watched below
  spec->hostname = opt_.hostname;
  spec->argv = opt_.argv;
  spec->env = BuildEnv(opt_, &spec->path);
  for (const auto& b : spec->plan.user) {
    if (b.writable && b.is_dir) spec->writable_inside.push_back(b.inside);
  }
  spec->workdir = !opt_.workdir.empty() ? opt_.workdir : (!spec->writable_inside.empty() ? spec->writable_inside[0] : "/tmp");
  spec->seccomp_notify = true;
  spec->text = contain::ProcessTextFromParent();
  if (opt_.net == NetMode::kProxy) {
    if (network_ == nullptr) return Status::Error("--net proxy: no egress proxy is available to this caller");
    for (const auto& [k, v] : network_->Environment()) {
      if (!opt_.env.count(k)) spec->env.push_back(k + "=" + v);
    }
    spec->restrict_tcp = true;
    spec->tcp_ports = network_->AllowedTcpPorts();
    spec->sockets = network_->Sockets();
    sockets_wanted_ = spec->sockets.size();
  }
  return Status::Ok();
}

Status Supervisor::Launch(contain::ChildSpec& spec) {
  auto st_in = PlanStdin(io_.stdin_fd);
  if (!st_in) return st_in.status();
  stdin_ = std::move(*st_in);
  int po[2], pe[2], sv[2];
  if (pipe2(po, O_CLOEXEC) != 0 || pipe2(pe, O_CLOEXEC) != 0) return Status::FromErrno("pipe for output", errno);
  out_.fd.reset(po[0]);
  err_.fd.reset(pe[0]);
  UniqueFd child_out(po[1]), child_err(pe[1]);
  out_.out = io_.stdout_fd;
  err_.out = io_.stderr_fd;
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return Status::FromErrno("socketpair", errno);
  sync_.reset(sv[0]);
  UniqueFd child_sync(sv[1]);
  spec.sync_fd = child_sync.get();
  spec.stdin_fd = stdin_.child_end.get();
  spec.stdout_fd = child_out.get();
  spec.stderr_fd = child_err.get();

  struct clone_args args = {};
  int pidfd = -1;
  args.flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_PIDFD;
  args.pidfd = reinterpret_cast<uint64_t>(&pidfd);
  args.exit_signal = SIGCHLD;
  long pid = syscall(SYS_clone3, &args, sizeof(args));
  const int clone_errno = errno;
  // The child has its own copies of the plan's descriptors (the bind sources' mount trees), which
  // it closes once its root is built; warden keeps none of them.
  if (pid != 0) spec.plan.CloseDescriptors();
  if (pid < 0) {
    int err = clone_errno;
    if (err == EPERM || err == ENOSPC || err == EUSERS) {
      return Status::Error(std::string("create namespaces: ") + strerror(err) +
                           ": user namespaces are disabled or exhausted here (check sysctl user.max_user_namespaces and kernel.unprivileged_userns_clone, "
                           "or the container's seccomp profile)");
    }
    return Status::FromErrno("clone the sandbox", err);
  }
  if (pid == 0) {
    sync_.reset();
    out_.fd.reset();
    err_.fd.reset();
    stdin_.relay_out.reset();
    stdin_.relay_in.reset();
    contain::RunInitFromChild(spec);
  }
  pid_ = static_cast<pid_t>(pid);
  pidfd_.reset(pidfd);
  start_ms_ = MonotonicMs();
  Status st = user::InitNsFromParent(pid_, spec.ids);
  if (st.ok() && cg_) st = cg_->AddProcessFromParent(pid_);
  // The network's sockets come from init (OnSync), made inside before it drops its capabilities.
  if (st.ok()) st = sync::Send(sync_.get(), sync::kGo);
  if (!st.ok()) {
    syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGKILL, nullptr, 0);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
    return st;
  }
  return Status::Ok();
}

void Supervisor::Kill(Reason why) {
  if (exited_) return;
  if (!killed_for_) killed_for_ = why;
  // Init's death takes the whole PID namespace with it.
  syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGKILL, nullptr, 0);
}

void Supervisor::OnSync() {
  auto m = sync::Receive(sync_.get());
  if (!m) {
    epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, sync_.get(), nullptr);
    sync_.reset();
    return;
  }
  UniqueFd attached(m->fd);
  if (Status admitted = gate_.Admit(m->type); !admitted.ok()) {
    // Init no longer speaks for itself: end the sandbox, and say why in the record.
    if (setup_error_.empty()) setup_error_ = admitted.message();
    result_.notes.push_back(admitted.message());
    Kill(Reason::kSetupError);
    return;
  }
  switch (m->type) {
    case sync::kSetupError: setup_error_ = m->payload; break;
    case sync::kNote: result_.notes.push_back(m->payload); break;
    case sync::kLandlock: result_.landlock_abi = std::atoi(m->payload.c_str()); break;
    case sync::kExecError: exec_errno_ = std::atoi(m->payload.c_str()); break;
    case sync::kExit: wait_status_ = std::atoi(m->payload.c_str()); break;
    case sync::kNotifyFd:
      if (attached.valid()) {
        notify_ = std::move(attached);
        struct epoll_event ev = {EPOLLIN, {.fd = notify_.get()}};
        epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, notify_.get(), &ev);
      }
      break;
    case sync::kSocket: OnSocket(std::move(attached)); break;
    default: break;
  }
}

void Supervisor::OnSocket(UniqueFd socket) {
  if (network_ == nullptr || sockets_.size() >= sockets_wanted_ || !socket.valid()) {
    if (setup_error_.empty()) setup_error_ = "set up the sandbox's network: init sent a socket nobody asked for";
    Kill(Reason::kSetupError);
    return;
  }
  sockets_.push_back(std::move(socket));
  if (sockets_.size() < sockets_wanted_) return;
  if (Status st = network_->Start(std::move(sockets_)); !st.ok()) {
    if (setup_error_.empty()) setup_error_ = st.Wrap("set up the sandbox's network").message();
    Kill(Reason::kSetupError);
  }
}

void Supervisor::OnStream(OutputStream& s, bool* limit_hit) {
  if (PumpOutput(s, opt_.output_limit_bytes, limit_hit)) return;
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, s.fd.get(), nullptr);
  s.open = false;
}

void Supervisor::OnStdinRelay() { RelayStdin(stdin_, epoll_.get()); }

void Supervisor::OnNotify() {
  auto v = seccomp::AnswerOneFromParent(notify_.get());
  if (!v) {
    // The listener is gone (every filtered process exited) or broke: stop watching it.
    epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, notify_.get(), nullptr);
    notify_.reset();
    return;
  }
  if (v->syscall.empty()) return;  // the caller died before we answered
  if (result_.violations.size() < kMaxViolations) {
    result_.violations.push_back({v->syscall, v->errno_returned, v->pid});
  } else {
    ++result_.violations_dropped;
  }
}

void Supervisor::Loop() {
  epoll_.reset(epoll_create1(EPOLL_CLOEXEC));
  auto add = [this](int fd) {
    struct epoll_event ev = {EPOLLIN, {.fd = fd}};
    epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev);
  };
  add(pidfd_.get());
  add(sync_.get());
  add(out_.fd.get());
  add(err_.fd.get());
  if (stdin_.relay_in.valid()) {
    struct epoll_event ev = {EPOLLIN, {.fd = stdin_.relay_in.get()}};
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, stdin_.relay_in.get(), &ev) != 0) {
      stdin_.relay_in.reset();
      stdin_.relay_out.reset();
    }
  }
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
  while (!exited_ || out_.open || err_.open) {
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
      } else if (sync_.valid() && fd == sync_.get()) {
        OnSync();
      } else if (out_.fd.valid() && fd == out_.fd.get()) {
        OnStream(out_, &limit_hit);
      } else if (err_.fd.valid() && fd == err_.fd.get()) {
        OnStream(err_, &limit_hit);
      } else if (stdin_.relay_in.valid() && fd == stdin_.relay_in.get()) {
        OnStdinRelay();
      } else if (notify_.valid() && fd == notify_.get()) {
        OnNotify();
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
  // Messages the child sent just before it died are still queued.
  while (sync_.valid()) {
    struct pollfd p = {sync_.get(), POLLIN, 0};
    if (poll(&p, 1, 0) <= 0 || !(p.revents & POLLIN)) break;
    OnSync();
  }
  while (notify_.valid()) {
    struct pollfd p = {notify_.get(), POLLIN, 0};
    if (poll(&p, 1, 0) <= 0 || !(p.revents & POLLIN)) break;
    OnNotify();
  }
}

RunResult Supervisor::Collect() {
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
  Ending e{.init_status = status,
           .usage = ru,
           .cgroup = cg_ ? &*cg_ : nullptr,
           .setup_error = setup_error_,
           .killed_for = killed_for_,
           .host_signal = host_signal_,
           .wait_status = wait_status_,
           .exec_errno = exec_errno_};
  Conclude(opt_, e, r);
  return r;
}

RunResult Supervisor::Run() {
  // From here on a SIGINT/SIGTERM to warden is read by the loop (signalfd) and kills the sandbox
  // cleanly, however early it arrives. The sandbox's init inherits the mask (it needs none of
  // these); the command resets its mask before exec.
  sigset_t sigs = TerminationSignals();
  sigprocmask(SIG_BLOCK, &sigs, &old_mask_);
  contain::ChildSpec spec;
  Status st = Prepare(&spec);
  if (st.ok()) st = Launch(spec);
  if (!st.ok()) {
    RunResult r = SetupError(st);
    r.degraded = result_.degraded;
    if (janitor_) janitor_->Finish();
    sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
    return r;
  }
  Loop();
  if (!exited_) {
    Kill(Reason::kSignaled);
    end_ms_ = MonotonicMs();
  }
  RunResult r = Collect();
  if (network_ != nullptr && opt_.net == NetMode::kProxy) network_->Finish(&r);
  sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
  if (cg_) cg_.reset();  // kills stragglers (none: the PID namespace is gone) and removes the dirs
  if (janitor_) janitor_->Finish();
  return r;
}

}  // namespace

RunResult RunNative(const Options& options, const Io& io, NetworkProvider* network) {
  Supervisor s(options, io, network);
  return s.Run();
}

RunResult Run(const Options& options, const Io& io, NetworkProvider* network) {
  if (options.backend == "gvisor") return RunGvisor(options, io, network);
  if (options.backend == "microvm") return RunMicrovm(options, io, network);
  return RunNative(options, io, network);
}

}  // namespace warden::sandbox
