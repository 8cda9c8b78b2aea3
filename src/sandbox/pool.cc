// The pool server: one epoll loop, no threads (every sandbox is a raw clone of this process).
// It builds sandboxes ahead with the same chain as a cold run (contain.cc, with ChildSpec::pooled),
// hands each to one client, supervises it as subproc.cc's Supervisor does (timeout, CPU, seccomp
// notifications, reaping, the reason) and sends the result record back. The client streams the
// output itself (pool_client.cc). Design and isolation argument: docs/pool.md.
#include "sandbox/pool.h"

#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <optional>

#include "common/clock.h"
#include "common/unique_fd.h"
#include "sandbox/cgroup.h"
#include "sandbox/contain.h"
#include "sandbox/host_io.h"
#include "sandbox/landlock.h"
#include "sandbox/outcome.h"
#include "sandbox/pool_protocol.h"
#include "sandbox/profile.h"
#include "sandbox/seccomp.h"
#include "sandbox/sync.h"
#include "sandbox/workspace_dir.h"

namespace warden::sandbox::pool {
namespace {

constexpr size_t kMaxViolations = 100;
constexpr uint64_t kDefaultOutputLimit = 16ull << 20;
constexpr uint64_t kDefaultTmpfs = 64ull << 20;
constexpr uint32_t kDefaultOpenFiles = 1024;
constexpr uint64_t kRefillGraceMs = 50;

void KillPid(int pidfd) { syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0); }

UniqueFd ArmTimer(uint64_t first_ms, uint64_t interval_ms) {
  UniqueFd t(timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC));
  struct itimerspec its = {};
  its.it_value.tv_sec = static_cast<time_t>(first_ms / 1000);
  its.it_value.tv_nsec = static_cast<long>((first_ms % 1000) * 1000000);
  its.it_interval.tv_sec = static_cast<time_t>(interval_ms / 1000);
  its.it_interval.tv_nsec = static_cast<long>((interval_ms % 1000) * 1000000);
  timerfd_settime(t.get(), 0, &its, nullptr);
  return t;
}

// kHeld: assigned to a client that asked for the workspace, waiting for its "start".
enum class SlotState { kStarting, kReady, kHeld, kClaimed };

// One pooled sandbox, from its clone to its reaping.
struct Slot {
  uint64_t id = 0;
  SlotState state = SlotState::kStarting;
  pid_t pid = -1;
  UniqueFd pidfd, sync, notify, timer, cpu_timer;
  std::optional<cgroup::Cgroup> cg;
  std::vector<std::string> writable_inside;
  uint64_t created_ms = 0, ready_ms = 0, claimed_ms = 0, ended_ms = 0;
  RunResult result;  // notes, Landlock ABI, degraded, cgroup version and violations as they come
  std::string setup_error;
  sync::Gate gate;  // what its init may still send (sync.h)
  std::optional<int> wait_status, exec_errno;
  std::optional<Reason> killed_for;
  int host_signal = 0;  // the signal the client received, when it asked us to end the run
  uint64_t client = 0;  // 0: unclaimed, or the client went away
  Options run;          // the claim's effective options
  bool exited = false;
  // Its workspace: the directory's name under the pool's workspace base ("": none, or handed to
  // the client), removed with the slot (the sandbox is dead by then: Drop reaps it first).
  std::string workspace;
  int workspace_base_fd = -1;

  ~Slot() {
    if (!workspace.empty()) workspace::RemoveTree(workspace_base_fd, workspace);
  }
};

struct Client {
  uint64_t id = 0;
  UniqueFd conn;
  Options run;
  std::string term;
  std::vector<UniqueFd> stdio;
  uint64_t slot = 0;  // 0 while waiting
  bool wants_workspace = false;
  // After the result: the sandbox's workspace, kept for the client to read until it disconnects.
  std::string workspace;
  int workspace_base_fd = -1;

  ~Client() {
    if (!workspace.empty()) workspace::RemoveTree(workspace_base_fd, workspace);
  }
};

// What an epoll event belongs to: the kind in the top byte, a slot or client id below.
enum Kind : uint64_t {
  kListen = 1,
  kSignal,
  kTick,
  kPidfd,
  kSync,
  kNotify,
  kTimeout,
  kCpuTick,
  kConn
};
uint64_t Tag(Kind k, uint64_t id = 0) { return (static_cast<uint64_t>(k) << 56) | id; }

class Server {
 public:
  explicit Server(const PoolConfig& config) : config_(config) {}
  ~Server() {
    slots_.clear();  // their workspaces first: they live in the base
    clients_.clear();
    forker_.reset();  // it exits when its socket closes
    if (forker_pid_ > 0) waitpid(forker_pid_, nullptr, 0);
    workspace_base_fd_.reset();
    if (!workspace_base_.empty()) rmdir(workspace_base_.c_str());
  }
  int Serve();

 private:
  Status Listen();
  Status StartForker();
  [[noreturn]] void ForkerLoop(int sock);
  Status CloneSandbox(uint64_t id, bool cgroup, nlohmann::json* reply, std::vector<UniqueFd>* fds);
  Status Launch();
  void Watch(int fd, Kind kind, uint64_t id);
  void Unwatch(int fd);
  void OnSync(Slot& s);
  void OnNotify(Slot& s);
  void OnExit(Slot& s);
  void OnAccept();
  void OnClient(Client& c);
  void OnTick();
  void Dispatch();
  bool ClaimFor(Slot& s, Client& c);
  bool Start(Slot& s, Client& c);
  void Kill(Slot& s, Reason why);
  RunResult Collect(Slot& s, int status, const struct rusage& ru);
  void Answer(Slot& s, int status, const struct rusage& ru);
  void Drop(uint64_t slot_id);
  void DropClient(uint64_t client_id);
  size_t Count(SlotState st) const;
  nlohmann::json StatusJson() const;
  uint64_t RefillDelayMs() const;
  uint64_t RefillNotBeforeMs() const;

  const PoolConfig& config_;
  Options profile_;
  bool profile_cgroup_ = false;  // sandboxes get a cgroup (memory, pids or cpu limits)
  std::vector<std::string> degraded_;
  UniqueFd listen_, epoll_, sigfd_, tick_;
  UniqueFd forker_;  // the forker's end (StartForker); invalid once it is gone
  pid_t forker_pid_ = -1;
  std::string forker_error_;
  std::string workspace_base_;  // private parent of the sandboxes' workspaces (config_.workspace)
  UniqueFd workspace_base_fd_;
  std::map<uint64_t, std::unique_ptr<Slot>> slots_;
  std::map<uint64_t, std::unique_ptr<Client>> clients_;
  std::deque<uint64_t> waiting_;
  uint64_t next_id_ = 1;
  bool stop_ = false;
  bool ever_ready_ = false;
  uint32_t consecutive_failures_ = 0;
  uint64_t next_launch_ms_ = 0;
  std::string last_error_;
  // Counters for `warden pool status`.
  uint64_t started_ = 0, failed_ = 0, refills_ = 0, expired_ = 0, served_ = 0, refused_ = 0;
};

void Server::Watch(int fd, Kind kind, uint64_t id) {
  struct epoll_event ev = {};
  ev.events = EPOLLIN;
  ev.data.u64 = Tag(kind, id);
  epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev);
}

void Server::Unwatch(int fd) {
  if (fd >= 0) epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
}

size_t Server::Count(SlotState st) const {
  return static_cast<size_t>(std::count_if(
      slots_.begin(), slots_.end(), [st](const auto& kv) { return kv.second->state == st; }));
}

Status Server::Listen() {
  const std::string& path = config_.socket_path;
  struct sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return Status::Error("--socket " + path + ": a Unix socket path must be 1 to " +
                         std::to_string(sizeof(addr.sun_path) - 1) + " bytes");
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  listen_.reset(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!listen_.valid()) return Status::FromErrno("socket", errno);
  struct stat st;
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      return Status::Error("--socket " + path + ": exists and is not a socket");
    UniqueFd probe(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    if (connect(probe.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
      return Status::Error("--socket " + path + ": another pool is serving it");
    }
    unlink(path.c_str());  // stale: its server is gone
  }
  mode_t old = umask(077);
  int rc = bind(listen_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  int err = errno;
  umask(old);
  if (rc != 0) return Status::FromErrno("bind " + path, err);
  if (listen(listen_.get(), 128) != 0) return Status::FromErrno("listen on " + path, errno);
  return Status::Ok();
}

// The forker (docs/pool.md, "Isolation between claims"): a process forked from the server before
// it accepts any client, which clones every waiting sandbox. A sandbox's init is a copy of the
// memory of whoever cloned it; the server's holds other clients' requests (argv, environment),
// the forker's never does. The inits are the server's children (CLONE_PARENT), so the server
// supervises and reaps them as before.
Status Server::StartForker() {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    return Status::FromErrno("socketpair for the pool's forker", errno);
  pid_t pid = fork();
  if (pid < 0) {
    close(sv[0]);
    close(sv[1]);
    return Status::FromErrno("fork the pool's forker", errno);
  }
  if (pid == 0) {
    close(sv[0]);
    ForkerLoop(sv[1]);  // never returns
  }
  close(sv[1]);
  forker_.reset(sv[0]);
  forker_pid_ = pid;
  return Status::Ok();
}

[[noreturn]] void Server::ForkerLoop(int sock) {
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (getppid() == 1) _exit(0);
  for (;;) {
    auto request = Receive(sock);
    if (!request) _exit(0);  // the server is gone
    nlohmann::json reply;
    std::vector<UniqueFd> fds;
    Status st = Status::Ok();
    if (!request->body.contains("slot") || !request->body["slot"].is_number_unsigned()) {
      st = Status::Error("forker: request without a slot id");
    } else {
      st = CloneSandbox(request->body["slot"].get<uint64_t>(), request->body.value("cgroup", false),
                        &reply, &fds);
    }
    if (!st.ok()) reply = {{"error", st.message()}};
    std::vector<int> raw;
    for (const auto& fd : fds) raw.push_back(fd.get());
    if (!Send(sock, reply, raw).ok()) _exit(0);
  }
}

// In the forker: builds slot `id`'s sandbox up to the point where it waits for its go. The
// parent's half of Supervisor::Prepare/Launch (subproc.cc) for the pool's profile; the server
// writes the id maps, moves it into its cgroup and says go.
Status Server::CloneSandbox(uint64_t id, bool cgroup, nlohmann::json* reply, std::vector<UniqueFd>* fds) {
  contain::ChildSpec spec;
  spec.pooled = true;
  spec.ids = user::ChooseFromParent();
  Options built = profile_;
  if (config_.workspace) {
    auto dir = workspace::MakeOwnedDir(workspace_base_fd_.get(), std::to_string(id), spec.ids);
    if (!dir) return dir.status().Wrap("the sandbox's workspace in " + workspace_base_);
    built.binds.push_back({.host = workspace_base_ + "/" + std::to_string(id),
                           .inside = kWorkspaceInside,
                           .writable = true});
  }
  auto plan = mnt::PlanFromParent(built, spec.ids.inside_uid, spec.ids.inside_gid);
  if (!plan) return plan.status();
  spec.plan = std::move(*plan);
  spec.landlock = landlock::AbiVersion() > 0;  // Serve refused a pool that needs it and lacks it
  spec.limits.file_size_bytes = profile_.file_size_bytes;
  spec.limits.open_files = profile_.open_files;
  if (cgroup) {
    spec.new_cgroup_ns = true;
  } else if (profile_cgroup_) {  // the server could not make one and the profile accepts that
    spec.limits.address_space_bytes = profile_.memory_bytes;
    spec.limits.processes = profile_.pids;
  }
  spec.hostname = profile_.hostname;
  for (const auto& b : spec.plan.user) {
    if (b.writable && b.is_dir) spec.writable_inside.push_back(b.inside);
  }
  spec.seccomp_notify = true;
  spec.text = contain::ProcessTextFromParent();

  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    return Status::FromErrno("socketpair", errno);
  UniqueFd server_sync(sv[0]), child_sync(sv[1]);
  spec.sync_fd = child_sync.get();

  struct clone_args args = {};
  int pidfd = -1;
  args.flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC |
               CLONE_NEWUTS | CLONE_PIDFD | CLONE_PARENT;
  args.pidfd = reinterpret_cast<uint64_t>(&pidfd);
  args.exit_signal = 0;  // with CLONE_PARENT the kernel uses the forker's own (SIGCHLD)
  long pid = syscall(SYS_clone3, &args, sizeof(args));
  const int clone_errno = errno;
  if (pid == 0) {
    // The clone holds every descriptor of the forker: init keeps only its sync socket and its
    // plan's bind sources, with /dev/null as stdio.
    contain::RunInitFromChild(spec);
  }
  // The forker keeps no descriptor of a sandbox's binds: the clone has its own.
  spec.plan.CloseDescriptors();
  if (pid < 0)
    return Status::FromErrno("clone the sandbox (user namespaces disabled or exhausted?)", clone_errno);
  fds->emplace_back(pidfd);
  fds->push_back(std::move(server_sync));
  *reply = {{"pid", pid}, {"writable_inside", spec.writable_inside}};
  return Status::Ok();
}

// Builds one sandbox up to the point where it waits for a command: the forker clones it, the
// server connects it.
Status Server::Launch() {
  auto slot = std::make_unique<Slot>();
  slot->id = next_id_++;
  const user::IdMap ids = user::ChooseFromParent();
  if (config_.workspace) {
    slot->workspace = std::to_string(slot->id);  // the forker makes it; removed with the slot
    slot->workspace_base_fd = workspace_base_fd_.get();
  }
  if (landlock::AbiVersion() <= 0) {
    if (!profile_.degrade.allow_no_landlock) {
      return Status::Error(
          "Landlock is not available in this kernel; a pool accepts that only with "
          "'accept_missing: [landlock]'");
    }
    slot->result.degraded.push_back("landlock");
  }
  if (profile_cgroup_) {
    auto cg = cgroup::Cgroup::CreateFromParent(
        {profile_.memory_bytes, profile_.pids ? profile_.pids + 1 : 0});
    if (cg) {
      slot->cg = std::move(*cg);
      slot->result.cgroup = slot->cg->is_v2() ? "v2" : "v1";
    } else if (profile_.degrade.allow_no_cgroups) {
      slot->result.degraded.push_back("cgroups");
      slot->result.notes.push_back("cgroups unavailable (" + cg.status().message() +
                                   "): limits enforced per process with rlimits");
    } else {
      return cg.status().Wrap(
          "--memory/--pids/--cpu need cgroups (or a profile with 'accept_missing: [cgroups]')");
    }
  }
  if (!forker_.valid()) return Status::Error("the pool's forker is gone: " + forker_error_);
  Status sent = Send(forker_.get(), {{"slot", slot->id}, {"cgroup", slot->cg.has_value()}});
  auto reply = sent.ok() ? Receive(forker_.get()) : Result<Message>(sent);
  if (!reply) {
    // Without its forker the pool cannot build sandboxes that are clean of claims: it builds none.
    forker_error_ = reply.status().message();
    forker_.reset();
    return Status::Error("the pool's forker is gone: " + forker_error_);
  }
  if (reply->body.contains("error")) return Status::Error(reply->body.value("error", "forker error"));
  if (reply->fds.size() != 2 || !reply->body.contains("pid"))
    return Status::Error("the pool's forker answered without the sandbox's pidfd and channel");
  slot->pid = reply->body["pid"].get<pid_t>();
  slot->pidfd = std::move(reply->fds[0]);
  slot->sync = std::move(reply->fds[1]);
  slot->writable_inside = reply->body.value("writable_inside", std::vector<std::string>{});
  slot->created_ms = MonotonicMs();
  ++started_;
  Status st = user::InitNsFromParent(slot->pid, ids);
  if (st.ok() && slot->cg) st = slot->cg->AddProcessFromParent(slot->pid);
  if (st.ok()) st = sync::Send(slot->sync.get(), sync::kGo);
  if (!st.ok()) {
    KillPid(slot->pidfd.get());
    waitpid(slot->pid, nullptr, __WALL);
    return st;
  }
  Watch(slot->pidfd.get(), kPidfd, slot->id);
  Watch(slot->sync.get(), kSync, slot->id);
  slots_[slot->id] = std::move(slot);
  return Status::Ok();
}

void Server::OnSync(Slot& s) {
  auto m = sync::Receive(s.sync.get());
  if (!m) {
    Unwatch(s.sync.get());
    s.sync.reset();
    return;
  }
  if (Status admitted = s.gate.Admit(m->type); !admitted.ok()) {
    // Init no longer speaks for itself: end the sandbox, and say why in the record.
    if (m->fd >= 0) close(m->fd);
    if (s.setup_error.empty()) s.setup_error = admitted.message();
    s.result.notes.push_back(admitted.message());
    Kill(s, Reason::kSetupError);
    return;
  }
  switch (m->type) {
    case sync::kSetupError:
      s.setup_error = m->payload;
      break;
    case sync::kNote:
      s.result.notes.push_back(m->payload);
      break;
    case sync::kLandlock:
      s.result.landlock_abi = std::atoi(m->payload.c_str());
      break;
    case sync::kExecError:
      s.exec_errno = std::atoi(m->payload.c_str());
      break;
    case sync::kExit: {
      // The command ended and everything it started is reaped: answer now, not after the init's
      // own exit and its namespaces' teardown (the reaping of the init follows).
      unsigned long long cpu_us = 0;
      long maxrss_kb = 0;
      int ws = 0;
      if (std::sscanf(m->payload.c_str(), "%d %llu %ld", &ws, &cpu_us, &maxrss_kb) < 1) break;
      s.wait_status = ws;
      if (s.state == SlotState::kClaimed && s.client != 0) {
        s.ended_ms = MonotonicMs();
        struct rusage ru = {};
        ru.ru_utime.tv_sec = static_cast<time_t>(cpu_us / 1000000);
        ru.ru_utime.tv_usec = static_cast<suseconds_t>(cpu_us % 1000000);
        ru.ru_maxrss = maxrss_kb;
        Answer(s, 0, ru);
      }
      break;
    }
    case sync::kNotifyFd:
      if (m->fd >= 0) {
        s.notify.reset(m->fd);
        m->fd = -1;
        Watch(s.notify.get(), kNotify, s.id);
      }
      break;
    case sync::kReady:
      if (s.state == SlotState::kStarting) {
        s.state = SlotState::kReady;
        s.ready_ms = MonotonicMs();
        ever_ready_ = true;
        consecutive_failures_ = 0;
        Dispatch();
      }
      break;
    default:
      break;
  }
  if (m->fd >= 0) close(m->fd);
}

void Server::OnNotify(Slot& s) {
  auto v = seccomp::AnswerOneFromParent(s.notify.get());
  if (!v) {
    Unwatch(s.notify.get());
    s.notify.reset();
    return;
  }
  if (v->syscall.empty()) return;
  if (s.result.violations.size() < kMaxViolations) {
    s.result.violations.push_back({v->syscall, v->errno_returned, v->pid});
  } else {
    ++s.result.violations_dropped;
  }
}

void Server::Kill(Slot& s, Reason why) {
  if (s.exited) return;
  if (!s.killed_for) s.killed_for = why;
  KillPid(s.pidfd.get());
}

// Hands ready sandboxes to waiting clients, oldest first on both sides.
void Server::Dispatch() {
  while (!waiting_.empty()) {
    Slot* ready = nullptr;
    for (auto& [id, s] : slots_) {
      if (s->state == SlotState::kReady && (ready == nullptr || s->ready_ms < ready->ready_ms))
        ready = s.get();
    }
    if (ready == nullptr) return;
    uint64_t cid = waiting_.front();
    waiting_.pop_front();
    auto it = clients_.find(cid);
    if (it == clients_.end()) continue;
    if (!ClaimFor(*ready, *it->second))
      waiting_.push_front(cid);  // that sandbox died: try the next
  }
}

// Gives ready sandbox `s` to client `c`: at once, or, when the client wants the workspace, after
// it has filled it (its "start"). False when the sandbox turned out to be dead.
bool Server::ClaimFor(Slot& s, Client& c) {
  if (!c.wants_workspace) return Start(s, c);
  s.state = SlotState::kHeld;
  s.client = c.id;
  s.run = c.run;
  c.slot = s.id;
  // A client gone meanwhile is seen at its hang-up, which ends the sandbox.
  Send(c.conn.get(), {{"workspace", workspace_base_ + "/" + s.workspace}});
  return true;
}

// Sends the command to sandbox `s` and starts its clocks.
bool Server::Start(Slot& s, Client& c) {
  const Options& run = c.run;
  contain::ChildSpec cmd;
  cmd.argv = run.argv;
  cmd.env = BuildEnv(run, c.term, &cmd.path);
  cmd.workdir = !run.workdir.empty() ? run.workdir
                                     : (!s.writable_inside.empty() ? s.writable_inside[0] : "/tmp");
  cmd.limits.file_size_bytes = run.file_size_bytes;
  cmd.limits.open_files = run.open_files;
  if (run.cpu_ms) cmd.limits.cpu_seconds = (run.cpu_ms + 999) / 1000 + 1;
  std::vector<int> fds;
  for (const auto& fd : c.stdio) fds.push_back(fd.get());
  if (!s.sync.valid() || !Send(s.sync.get(), Claim(cmd), fds).ok()) {
    Kill(s, Reason::kSetupError);
    s.state = SlotState::kClaimed;  // its exit is reaped as a failure, not handed out again
    s.client = 0;
    return false;
  }
  c.stdio.clear();  // the sandbox holds them now
  s.state = SlotState::kClaimed;
  s.claimed_ms = MonotonicMs();
  s.client = c.id;
  s.run = run;
  c.slot = s.id;
  if (run.timeout_ms) {
    s.timer = ArmTimer(run.timeout_ms, 0);
    Watch(s.timer.get(), kTimeout, s.id);
  }
  if (run.cpu_ms && s.cg) {
    s.cpu_timer = ArmTimer(50, 50);
    Watch(s.cpu_timer.get(), kCpuTick, s.id);
  }
  ++served_;
  return true;
}

// The result of a claimed sandbox, by the cold run's rules (outcome.h).
RunResult Server::Collect(Slot& s, int status, const struct rusage& ru) {
  RunResult r = s.result;
  r.wall_ms = s.claimed_ms ? s.ended_ms - s.claimed_ms : 0;
  Ending e{.init_status = status,
           .usage = ru,
           .cgroup = s.cg ? &*s.cg : nullptr,
           .setup_error = s.setup_error,
           .killed_for = s.killed_for,
           .host_signal = s.host_signal,
           .wait_status = s.wait_status,
           .exec_errno = s.exec_errno};
  Conclude(s.run, e, r);
  return r;
}

// Sends the run's result to the slot's client (once: the slot has no client after it).
void Server::Answer(Slot& s, int status, const struct rusage& ru) {
  RunResult r = Collect(s, status, ru);
  auto it = clients_.find(s.client);
  s.client = 0;
  if (it == clients_.end()) return;
  Client& c = *it->second;
  Send(c.conn.get(), {{"result", nlohmann::json::parse(ToJson(r))}});
  if (s.workspace.empty()) {
    DropClient(c.id);
  } else {
    // The client reads what the command wrote, then hangs up: the workspace goes then.
    c.workspace = std::move(s.workspace);
    c.workspace_base_fd = s.workspace_base_fd;
    s.workspace.clear();
  }
}

// The sandbox's init is gone: reap it, answer its client (when that has not happened at the
// command's end), destroy it.
void Server::OnExit(Slot& s) {
  s.exited = true;
  s.ended_ms = MonotonicMs();
  Unwatch(s.pidfd.get());
  // Messages and notifications sent just before the end are still queued.
  while (s.sync.valid()) {
    struct pollfd p = {s.sync.get(), POLLIN, 0};
    if (poll(&p, 1, 0) <= 0 || !(p.revents & POLLIN)) break;
    OnSync(s);
  }
  while (s.notify.valid()) {
    struct pollfd p = {s.notify.get(), POLLIN, 0};
    if (poll(&p, 1, 0) <= 0 || !(p.revents & POLLIN)) break;
    OnNotify(s);
  }
  int status = 0;
  struct rusage ru = {};
  wait4(s.pid, &status, __WALL, &ru);
  s.pid = -1;
  if ((s.state == SlotState::kClaimed || s.state == SlotState::kHeld) && s.client != 0) {
    if (s.state == SlotState::kHeld && s.setup_error.empty() && s.host_signal == 0) {
      ++failed_;
      s.setup_error = "the pooled sandbox was lost before its command started";
    }
    Answer(s, status, ru);
  } else if (s.state == SlotState::kClaimed && s.claimed_ms == 0) {
    ++failed_;  // died as it was being handed out; its client was given another
  } else if (s.state == SlotState::kHeld) {
    // Its client left (or failed to fill the workspace) before starting it: killed, not lost.
  } else if (s.state != SlotState::kClaimed) {
    // Died while waiting: a crash (or a kill from outside), or a sandbox that could not be built.
    ++failed_;
    std::string why = !s.setup_error.empty() ? s.setup_error
                      : WIFSIGNALED(status)
                          ? std::string("killed by SIG") + sigabbrev_np(WTERMSIG(status))
                          : "exited with status " + std::to_string(WEXITSTATUS(status));
    last_error_ = why;
    if (s.state == SlotState::kStarting) {
      ++consecutive_failures_;
      next_launch_ms_ = MonotonicMs() + RefillDelayMs();
    }
    std::fprintf(stderr, "warden pool: a %s sandbox was lost (%s); replacing it\n",
                 s.state == SlotState::kReady ? "waiting" : "starting", why.c_str());
  }
  Drop(s.id);
}

void Server::Drop(uint64_t slot_id) {
  auto it = slots_.find(slot_id);
  if (it == slots_.end()) return;
  Slot& s = *it->second;
  for (int fd : {s.pidfd.get(), s.sync.get(), s.notify.get(), s.timer.get(), s.cpu_timer.get()})
    Unwatch(fd);
  if (s.pid > 0) {
    KillPid(s.pidfd.get());
    waitpid(s.pid, nullptr, __WALL);
  }
  slots_.erase(it);  // the Cgroup's destructor removes its directories
}

void Server::DropClient(uint64_t client_id) {
  auto it = clients_.find(client_id);
  if (it == clients_.end()) return;
  Unwatch(it->second->conn.get());
  clients_.erase(it);
}

nlohmann::json Server::StatusJson() const {
  nlohmann::json j = {{"socket", config_.socket_path},
                      {"size", config_.size},
                      {"ready", Count(SlotState::kReady)},
                      {"starting", Count(SlotState::kStarting)},
                      {"in_use", Count(SlotState::kClaimed) + Count(SlotState::kHeld)},
                      {"waiting", waiting_.size()},
                      {"started", started_},
                      {"failed", failed_},
                      {"refills", refills_},
                      {"expired", expired_},
                      {"served", served_},
                      {"refused", refused_},
                      {"idle_timeout_ms", config_.idle_timeout_ms},
                      {"pid", getpid()}};
  if (!last_error_.empty()) j["last_error"] = last_error_;
  auto& list = j["sandboxes"] = nlohmann::json::array();
  const uint64_t now = MonotonicMs();
  for (const auto& [id, s] : slots_) {
    const char* state = s->state == SlotState::kReady      ? "ready"
                        : s->state == SlotState::kStarting ? "starting"
                        : s->state == SlotState::kHeld     ? "held"
                                                           : "in_use";
    list.push_back({{"pid", s->pid}, {"state", state}, {"age_ms", now - s->created_ms}});
  }
  return j;
}

void Server::OnAccept() {
  for (;;) {
    int fd = accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    auto c = std::make_unique<Client>();
    c->id = next_id_++;
    c->conn.reset(fd);
    Watch(fd, kConn, c->id);
    clients_[c->id] = std::move(c);
  }
}

void Server::OnClient(Client& c) {
  auto m = Receive(c.conn.get());
  if (!m) {
    // The client went away: end its sandbox (nobody is left to read the output) or its wait.
    if (c.slot != 0) {
      auto it = slots_.find(c.slot);
      if (it != slots_.end()) {
        it->second->client = 0;
        Kill(*it->second, Reason::kSignaled);
      }
    }
    waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), c.id), waiting_.end());
    DropClient(c.id);
    return;
  }
  const nlohmann::json& body = m->body;
  if (body.value("op", "") == "status") {
    Send(c.conn.get(), StatusJson());
    DropClient(c.id);
    return;
  }
  if (body.contains("kill")) {
    const std::string what = body.value("kill", "");
    int sig = body.value("signal", 0);
    if (c.slot != 0) {
      auto it = slots_.find(c.slot);
      if (it == slots_.end()) return;
      if (what == "output_limit")
        Kill(*it->second, Reason::kOutputLimit);
      else {
        if (it->second->host_signal == 0)
          it->second->host_signal = sig > 0 && sig < 65 ? sig : SIGTERM;
        Kill(*it->second, Reason::kSignaled);
      }
    } else {
      // Still waiting for a sandbox: nothing ran.
      waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), c.id), waiting_.end());
      RunResult r;
      r.signal = sig > 0 && sig < 65 ? sig : SIGTERM;
      r.exit_code = 128 + r.signal;
      r.reason = Reason::kSignaled;
      r.error = std::string("warden received ") + sigabbrev_np(r.signal) +
                " while waiting for a pooled sandbox";
      Send(c.conn.get(), {{"result", nlohmann::json::parse(ToJson(r))}});
      DropClient(c.id);
    }
    return;
  }
  if (body.value("op", "") == "start") {
    auto it = c.slot ? slots_.find(c.slot) : slots_.end();
    // Not held any more: it ended meanwhile, and its result was sent or is coming.
    if (it == slots_.end() || it->second->state != SlotState::kHeld) return;
    if (!Start(*it->second, c)) {
      RunResult r;
      r.exit_code = 125;
      r.reason = Reason::kSetupError;
      r.error = "the pooled sandbox was lost before its command started";
      Send(c.conn.get(), {{"result", nlohmann::json::parse(ToJson(r))}});
      DropClient(c.id);
    }
    return;
  }
  if (body.value("op", "") != "run" || c.slot != 0 || !c.stdio.empty()) {
    Send(c.conn.get(), {{"refused", "pool: unexpected message"}});
    DropClient(c.id);
    return;
  }
  auto requested = OptionsFromRequest(body);
  Result<Options> effective = requested.ok()
                                  ? Effective(profile_, *requested, profile_cgroup_, degraded_)
                                  : requested.status();
  if (effective.ok() && m->fds.size() != 3)
    effective = Status::Error("pool request without the three standard streams");
  const bool wants_workspace = body.value("workspace", false);
  if (effective.ok() && wants_workspace && !config_.workspace)
    effective = Status::Error("this pool's sandboxes have no workspace (start it with --workspace)");
  if (!effective.ok()) {
    ++refused_;
    Send(c.conn.get(), {{"refused", effective.status().message()}});
    DropClient(c.id);
    return;
  }
  c.run = std::move(*effective);
  c.term = body.value("term", "");
  c.stdio = std::move(m->fds);
  c.wants_workspace = wants_workspace;
  Send(c.conn.get(), {{"accepted", true}, {"output_limit_bytes", c.run.output_limit_bytes}});
  waiting_.push_back(c.id);
  Dispatch();
}

void Server::OnTick() {
  uint64_t ticks;
  (void)!read(tick_.get(), &ticks, sizeof(ticks));
  if (config_.idle_timeout_ms == 0) return;
  const uint64_t now = MonotonicMs();
  std::vector<uint64_t> old;
  for (const auto& [id, s] : slots_) {
    if (s->state == SlotState::kReady && now - s->ready_ms >= config_.idle_timeout_ms)
      old.push_back(id);
  }
  for (uint64_t id : old) {
    ++expired_;
    Drop(id);
  }
}

// Building a replacement costs CPU (the new init's mounts) that a just-claimed command would
// compete for: wait until the youngest claim is kRefillGraceMs old (or has ended), unless a
// client is waiting with no sandbox ready.
uint64_t Server::RefillNotBeforeMs() const {
  if (!waiting_.empty() && Count(SlotState::kReady) == 0) return 0;
  uint64_t not_before = 0;
  for (const auto& [id, s] : slots_) {
    if (s->state == SlotState::kClaimed && !s->exited)
      not_before = std::max(not_before, s->claimed_ms + kRefillGraceMs);
  }
  return not_before;
}

uint64_t Server::RefillDelayMs() const {
  if (consecutive_failures_ == 0) return 0;
  return std::min<uint64_t>(5000, 50ull << std::min<uint32_t>(consecutive_failures_, 7));
}

int Server::Serve() {
  profile_ = config_.profile;
  profile_.argv = {"/bin/true"};
  profile_.binds = NormalizeBinds(profile_.binds);
  auto fail = [](const std::string& why) {
    std::fprintf(stderr, "warden pool: %s\n", why.c_str());
    return 125;
  };
  if (config_.size == 0) return fail("--size must be at least 1");
  if (profile_.backend != "native")
    return fail("--backend " + profile_.backend + ": pools hold native sandboxes only");
  if (profile_.net != NetMode::kNone || !profile_.allow.empty()) {
    return fail("--net proxy/--allow: pooled sandboxes have no network (run those without --pool)");
  }
  if (Status st = Validate(profile_); !st.ok()) return fail(st.message());
  if (config_.workspace) {
    for (const Bind& b : profile_.binds) {
      const std::string& inside = b.inside.empty() ? b.host : b.inside;
      if (inside == kWorkspaceInside || inside.starts_with(std::string(kWorkspaceInside) + "/"))
        return fail("--workspace: the profile already binds " + inside + ", where it goes");
    }
    auto base = workspace::MakePrivateParent(workspace::TempBase(), "warden-pool-",
                                             user::ChooseFromParent(), &workspace_base_fd_);
    if (!base) return fail("--workspace: " + base.status().message());
    workspace_base_ = *base;
  }
  profile_cgroup_ = profile_.memory_bytes || profile_.pids || profile_.cpu_ms;
  if (profile_cgroup_) {
    cgroup::SweepStale();
    if (!cgroup::Available().ok() && profile_.degrade.allow_no_cgroups) {
      profile_cgroup_ = false;
      degraded_.push_back("cgroups");
    }
  }
  if (landlock::AbiVersion() <= 0 && profile_.degrade.allow_no_landlock)
    degraded_.push_back("landlock");

  sigset_t sigs;
  sigemptyset(&sigs);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&sigs, sig);
  sigset_t old_mask;
  sigprocmask(SIG_BLOCK, &sigs, &old_mask);
  signal(SIGPIPE, SIG_IGN);
  // Before the first client: the forker's memory holds no request, ever.
  if (Status st = StartForker(); !st.ok()) return fail(st.message());
  if (Status st = Listen(); !st.ok()) return fail(st.message());
  epoll_.reset(epoll_create1(EPOLL_CLOEXEC));
  sigfd_.reset(signalfd(-1, &sigs, SFD_CLOEXEC));
  Watch(listen_.get(), kListen, 0);
  Watch(sigfd_.get(), kSignal, 0);
  const uint64_t tick =
      config_.idle_timeout_ms ? std::clamp<uint64_t>(config_.idle_timeout_ms / 4, 10, 1000) : 1000;
  tick_ = ArmTimer(tick, tick);
  Watch(tick_.get(), kTick, 0);
  std::fprintf(stderr, "warden pool: serving %s with %u sandboxes\n", config_.socket_path.c_str(),
               config_.size);

  int rc = 0;
  while (!stop_) {
    // Refill only when nothing else is waiting to be handled: a claimed sandbox's events come
    // first.
    const size_t live = Count(SlotState::kStarting) + Count(SlotState::kReady);
    const bool refill = live < config_.size;
    int timeout = -1;
    uint64_t launch_at = 0;
    if (refill) {
      launch_at = std::max(next_launch_ms_, RefillNotBeforeMs());
      uint64_t now = MonotonicMs();
      timeout = launch_at > now ? static_cast<int>(launch_at - now) : 0;
    }
    struct epoll_event events[32];
    int n = epoll_wait(epoll_.get(), events, 32, timeout);
    if (n < 0 && errno != EINTR) break;
    if (n <= 0 && refill && MonotonicMs() >= launch_at) {
      if (started_ >= config_.size) ++refills_;
      if (Status st = Launch(); !st.ok()) {
        ++failed_;
        ++consecutive_failures_;
        last_error_ = st.message();
        next_launch_ms_ = MonotonicMs() + RefillDelayMs();
        std::fprintf(stderr, "warden pool: could not build a sandbox: %s\n", st.message().c_str());
      }
      // A pool whose sandboxes cannot be built at all is a configuration error: say so and stop.
      if (!ever_ready_ && consecutive_failures_ >= 3) {
        rc = fail("no sandbox could be built: " + last_error_);
        break;
      }
      continue;
    }
    for (int i = 0; i < n; ++i) {
      const uint64_t tag = events[i].data.u64;
      const Kind kind = static_cast<Kind>(tag >> 56);
      const uint64_t id = tag & ((1ull << 56) - 1);
      if (kind == kListen) {
        OnAccept();
        continue;
      }
      if (kind == kSignal) {
        struct signalfd_siginfo si;
        (void)!read(sigfd_.get(), &si,
                    sizeof(si));  // consumed, so that it is not delivered when the mask is restored
        stop_ = true;
        continue;
      }
      if (kind == kTick) {
        OnTick();
        continue;
      }
      if (kind == kConn) {
        auto it = clients_.find(id);
        if (it != clients_.end()) OnClient(*it->second);
        continue;
      }
      auto it = slots_.find(id);
      if (it == slots_.end()) continue;
      Slot& s = *it->second;
      switch (kind) {
        case kPidfd:
          OnExit(s);
          break;
        case kSync:
          if (s.sync.valid()) OnSync(s);
          break;
        case kNotify:
          if (s.notify.valid()) OnNotify(s);
          break;
        case kTimeout: {
          uint64_t t;
          (void)!read(s.timer.get(), &t, sizeof(t));
          Kill(s, Reason::kTimeout);
          break;
        }
        case kCpuTick: {
          uint64_t t;
          (void)!read(s.cpu_timer.get(), &t, sizeof(t));
          if (s.cg && s.cg->ReadUsage().cpu_ns / 1000000 >= s.run.cpu_ms) Kill(s, Reason::kCpu);
          break;
        }
        default:
          break;
      }
    }
  }
  // Shutting down: every sandbox dies with us (their init also has PR_SET_PDEATHSIG).
  std::vector<uint64_t> ids;
  for (const auto& [id, s] : slots_) ids.push_back(id);
  for (uint64_t id : ids) Drop(id);
  clients_.clear();
  unlink(config_.socket_path.c_str());
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  return rc;
}

bool SameBinds(std::vector<Bind> a, std::vector<Bind> b) {
  auto key = [](const Bind& x) { return std::make_tuple(x.inside, x.host, x.writable); };
  auto less = [&](const Bind& x, const Bind& y) { return key(x) < key(y); };
  std::sort(a.begin(), a.end(), less);
  std::sort(b.begin(), b.end(), less);
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (key(a[i]) != key(b[i])) return false;
  }
  return true;
}

std::string Size(uint64_t bytes) { return bytes ? std::to_string(bytes) + " bytes" : "none"; }

}  // namespace

std::vector<Bind> NormalizeBinds(const std::vector<Bind>& binds) {
  std::vector<Bind> out;
  for (Bind b : binds) {
    char buf[PATH_MAX];
    if (realpath(b.host.c_str(), buf) != nullptr) b.host = buf;
    if (b.inside.empty()) b.inside = b.host;
    out.push_back(b);
  }
  return out;
}

Result<Options> Effective(const Options& pool, const Options& run, bool pool_has_cgroup,
                          const std::vector<std::string>& pool_degraded) {
  auto refuse = [](const std::string& option, const std::string& why) {
    return Status::Error(option + ": " + why +
                         " (options a pool's sandboxes are built with cannot change per command; "
                         "run without --pool, or use a pool started with them)");
  };
  if (!run.backend.empty() && run.backend != "native")
    return refuse("--backend " + run.backend, "pools hold native sandboxes only");
  if (run.net != NetMode::kNone || !run.allow.empty() || !run.resolve.empty()) {
    return refuse("--net proxy/--allow/--resolve", "pooled sandboxes have no network");
  }
  if (run.memory_bytes && run.memory_bytes != pool.memory_bytes) {
    return refuse("--memory " + std::to_string(run.memory_bytes),
                  "this pool's memory limit is " + Size(pool.memory_bytes));
  }
  if (run.pids && run.pids != pool.pids) {
    return refuse("--pids " + std::to_string(run.pids),
                  "this pool's pids limit is " + (pool.pids ? std::to_string(pool.pids) : "none"));
  }
  if (run.tmpfs_bytes != kDefaultTmpfs && run.tmpfs_bytes != pool.tmpfs_bytes) {
    return refuse("--tmpfs-size " + std::to_string(run.tmpfs_bytes),
                  "this pool's /tmp is " + Size(pool.tmpfs_bytes));
  }
  if (!run.binds.empty() && !SameBinds(NormalizeBinds(run.binds), NormalizeBinds(pool.binds))) {
    std::string which;
    for (const Bind& b : run.binds)
      which += std::string(which.empty() ? "" : " ") + (b.writable ? "--rw " : "--ro ") + b.host +
               (b.inside.empty() ? "" : ":" + b.inside);
    return refuse(which, "this pool's sandboxes have other binds");
  }
  if (run.protect != DefaultProtectedPaths() && run.protect != pool.protect) {
    return refuse("--protect/--no-protect", "this pool protects other paths");
  }
  if (run.hostname != "sandbox" && run.hostname != pool.hostname)
    return refuse("hostname " + run.hostname, "this pool's hostname is " + pool.hostname);
  for (const auto& missing : pool_degraded) {
    bool accepted = (missing == "landlock" && run.degrade.allow_no_landlock) ||
                    (missing == "cgroups" && run.degrade.allow_no_cgroups);
    if (!accepted)
      return refuse("--accept-missing " + missing, "this pool's sandboxes run without " + missing +
                                                       " and the command did not accept that");
  }
  Options e = pool;
  e.argv = run.argv;
  if (!run.workdir.empty()) e.workdir = run.workdir;
  for (const auto& [k, v] : run.env) e.env[k] = v;
  if (run.timeout_ms) e.timeout_ms = run.timeout_ms;
  if (run.output_limit_bytes != kDefaultOutputLimit) e.output_limit_bytes = run.output_limit_bytes;
  if (run.file_size_bytes) e.file_size_bytes = run.file_size_bytes;
  if (run.open_files != kDefaultOpenFiles) e.open_files = run.open_files;
  if (run.cpu_ms) {
    if (!pool_has_cgroup)
      return refuse("--cpu",
                    "this pool's sandboxes have no cgroup to account CPU in (start the pool with "
                    "--cpu, --memory or --pids)");
    e.cpu_ms = run.cpu_ms;
  }
  e.degrade = run.degrade;
  WARDEN_RETURN_IF_ERROR(Validate(e));
  return e;
}

int Serve(const PoolConfig& config) {
  Server server(config);
  return server.Serve();
}

}  // namespace warden::sandbox::pool
