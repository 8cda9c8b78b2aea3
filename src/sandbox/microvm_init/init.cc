// PID 1 of a warden microVM (docs/backends.md, "microvm"). Built static, carried inside warden and
// written into each VM's initramfs. Runs in the guest only: it loads the virtio/9p modules, builds
// the guest's filesystem from the host's shares, runs the command as an unprivileged user with
// its stdio on virtio-console ports, reports how it ended on the control port and powers off.
// Everything it is told comes from /warden/spec, written by the host (microvm_spec.h).
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "egress_wire.h"

namespace {

namespace wire = warden::sandbox::microvm::wire;

// The egress relays' user: never the command's (the host's 65534 or the caller's uid), so the
// command cannot signal or trace them.
constexpr uid_t kRelayUid = 100;
constexpr const char* kModules[] = {"virtio_ring", "virtio", "virtio_mmio", "virtio_console", "9pnet",
                                    "9pnet_virtio", "netfs", "fscache", "9p"};
constexpr const char* kCgroup = "/sys/fs/cgroup/command";

// Kernel messages and our own failures go to the serial console, which the host keeps for its
// error message when the VM ends without a report.
void Log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void Log(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  int fd = open("/dev/ttyS0", O_WRONLY | O_NOCTTY | O_CLOEXEC);
  if (fd >= 0) {
    (void)!write(fd, "warden-init: ", 13);
    (void)!write(fd, buf, n > 0 && n < (int)sizeof(buf) ? n : (int)strlen(buf));
    (void)!write(fd, "\n", 1);
    close(fd);
  }
}

[[noreturn]] void PowerOff() {
  sync();
  reboot(RB_POWER_OFF);
  _exit(1);
}

[[noreturn]] void Fail(const char* step) {
  Log("%s: %s", step, strerror(errno));
  PowerOff();
}

std::string ReadAll(const char* path) {
  std::string out;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, n);
  close(fd);
  return out;
}

bool WriteString(const char* path, const std::string& s) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = write(fd, s.data(), s.size()) == (ssize_t)s.size();
  close(fd);
  return ok;
}

void MkdirP(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') mkdir(path.substr(0, i).c_str(), 0755);
  }
}

// The spec: NUL-terminated key and value pairs, keys repeated for lists.
struct Spec {
  std::vector<std::string> argv, env;
  std::vector<std::vector<std::string>> shares;  // tag, inside, "ro"|"rw"
  std::vector<std::vector<std::string>> files;   // single-file binds: tag (a share holding "file"), inside, mode
  std::vector<std::pair<std::string, bool>> self_binds;  // protected paths in mount order: path, read-only
  std::vector<std::pair<std::string, std::string>> links;  // name -> target
  std::string workdir = "/tmp", tmpfs_size = "67108864", memory, pids, cpu_ms, hostname = "sandbox";
  int egress_port = 0;  // the guest's 127.0.0.1 port the egress relays listen on (0: no egress)
  uid_t uid = 65534;
  gid_t gid = 65534;
};

Spec ReadSpec() {
  Spec s;
  std::string raw = ReadAll("/warden/spec");
  std::vector<std::string> f;
  size_t pos = 0;
  while (pos < raw.size()) {
    size_t end = raw.find('\0', pos);
    if (end == std::string::npos) break;
    f.push_back(raw.substr(pos, end - pos));
    pos = end + 1;
  }
  for (size_t i = 0; i + 1 < f.size(); i += 2) {
    const std::string& k = f[i];
    const std::string& v = f[i + 1];
    if (k == "arg") s.argv.push_back(v);
    else if (k == "env") s.env.push_back(v);
    else if (k == "workdir") s.workdir = v;
    else if (k == "tmpfs_size") s.tmpfs_size = v;
    else if (k == "memory") s.memory = v;
    else if (k == "pids") s.pids = v;
    else if (k == "cpu_ms") s.cpu_ms = v;
    else if (k == "hostname") s.hostname = v;
    else if (k == "egress_port") s.egress_port = atoi(v.c_str());
    else if (k == "uid") s.uid = static_cast<uid_t>(strtoul(v.c_str(), nullptr, 10));
    else if (k == "gid") s.gid = static_cast<gid_t>(strtoul(v.c_str(), nullptr, 10));
    else if (k == "self_bind") s.self_binds.emplace_back(v.substr(3), v.rfind("ro:", 0) == 0);
    else if (k == "link") {
      size_t eq = v.find('=');
      s.links.emplace_back(v.substr(0, eq), v.substr(eq + 1));
    } else if (k == "share" || k == "file") {
      // tag:mode:inside (inside may hold ':').
      size_t a = v.find(':'), b = v.find(':', a + 1);
      (k == "share" ? s.shares : s.files).push_back({v.substr(0, a), v.substr(b + 1), v.substr(a + 1, b - a - 1)});
    }
  }
  return s;
}

void LoadModules() {
  for (const char* m : kModules) {
    std::string path = std::string("/warden/modules/") + m + ".ko";
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) Fail(path.c_str());
    if (syscall(SYS_finit_module, fd, "", 0) != 0 && errno != EEXIST) Fail(path.c_str());
    close(fd);
  }
}

void MountShares(const Spec& spec) {
  for (const auto& sh : spec.shares) {
    MkdirP(sh[1]);
    unsigned long flags = MS_NOSUID | MS_NODEV | (sh[2] == "ro" ? MS_RDONLY : 0);
    if (mount(sh[0].c_str(), sh[1].c_str(), "9p", flags, "trans=virtio,version=9p2000.L,msize=262144,cache=loose") != 0) {
      Fail(("mount share " + sh[0] + " on " + sh[1]).c_str());
    }
  }
}

// A single-file bind: the host shares a private directory holding only that file (microvm.cc,
// StageFileBindsInChild); it is mounted aside, the file bound onto its place, and the share let go.
void BindFiles(const Spec& spec) {
  for (const auto& f : spec.files) {
    const std::string aside = "/warden/files/" + f[0], inside = f[1];
    MkdirP(aside);
    unsigned long ro = f[2] == "ro" ? MS_RDONLY : 0;
    if (mount(f[0].c_str(), aside.c_str(), "9p", MS_NOSUID | MS_NODEV | ro, "trans=virtio,version=9p2000.L,msize=262144,cache=loose") != 0) {
      Fail(("mount file share " + f[0]).c_str());
    }
    size_t slash = inside.rfind('/');
    if (slash != std::string::npos && slash > 0) MkdirP(inside.substr(0, slash));
    struct stat st;
    if (stat(inside.c_str(), &st) != 0) {
      int fd = open(inside.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0) Fail(("create the mount point " + inside).c_str());
      close(fd);
    }
    if (mount((aside + "/file").c_str(), inside.c_str(), nullptr, MS_BIND, nullptr) != 0) Fail(("bind " + inside).c_str());
    if (mount(nullptr, inside.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | ro, nullptr) != 0) {
      Fail(("remount " + inside).c_str());
    }
    if (umount2(aside.c_str(), MNT_DETACH) != 0) Fail(("let go of " + aside).c_str());
  }
}

// Protected paths of --rw shares, each a bind of itself (read-only for the path, writable for
// its ancestors, which only need to be mount points): the host chose them and their order
// (microvm.cc, PlanProtectedPaths).
void ProtectPaths(const Spec& spec) {
  for (const auto& [path, read_only] : spec.self_binds) {
    if (mount(path.c_str(), path.c_str(), nullptr, MS_BIND, nullptr) != 0) Fail(("protect " + path).c_str());
    unsigned long ro = read_only ? MS_RDONLY : 0;
    if (mount(nullptr, path.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | ro, nullptr) != 0) {
      Fail(("protect " + path).c_str());
    }
  }
}

// The guest's root is the initramfs: once populated it becomes read-only, so that only /tmp,
// /dev/shm and --rw shares are writable, as in the native sandbox.
void BuildFilesystem(const Spec& spec) {
  for (const auto& [name, target] : spec.links) {
    if (symlink(target.c_str(), name.c_str()) != 0 && errno != EEXIST) Fail(("link " + name).c_str());
  }
  // The tmpfs first, as native: a bind whose inside path lies under /tmp lands on it, not under it.
  MkdirP("/tmp");
  std::string tmp_opts = "size=" + spec.tmpfs_size + ",mode=1777";
  if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, tmp_opts.c_str()) != 0) Fail("mount /tmp");
  MkdirP("/dev/shm");
  if (mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, tmp_opts.c_str()) != 0) Fail("mount /dev/shm");
  MountShares(spec);
  BindFiles(spec);
  ProtectPaths(spec);
  // /proc/sys read-only, as native: the guest kernel's tunables are not the command's.
  if (mount("/proc/sys", "/proc/sys", nullptr, MS_BIND, nullptr) != 0 ||
      mount(nullptr, "/proc/sys", nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
    Fail("make /proc/sys read-only");
  }
  if (mount(nullptr, "/", nullptr, MS_REMOUNT | MS_RDONLY, nullptr) != 0) Fail("remount / read-only");
}

// A cgroup for the command: memory and pids limits, and the figures for the record.
bool SetupCgroup(const Spec& spec) {
  if (mount("cgroup2", "/sys/fs/cgroup", "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) return false;
  WriteString("/sys/fs/cgroup/cgroup.subtree_control", "+memory +pids +cpu");
  if (mkdir(kCgroup, 0755) != 0) return false;
  if (!spec.memory.empty()) {
    WriteString("/sys/fs/cgroup/command/memory.max", spec.memory);
    WriteString("/sys/fs/cgroup/command/memory.swap.max", "0");
  }
  if (!spec.pids.empty()) WriteString("/sys/fs/cgroup/command/pids.max", spec.pids);
  return true;
}

uint64_t CgroupValue(const char* file, const char* key) {
  std::string text = ReadAll((std::string(kCgroup) + "/" + file).c_str());
  if (key == nullptr) return strtoull(text.c_str(), nullptr, 10);
  std::string k = std::string(key) + " ";
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    if (text.compare(pos, k.size(), k) == 0) return strtoull(text.c_str() + pos + k.size(), nullptr, 10);
    pos = end + 1;
  }
  return 0;
}

// The device node of the virtio-console port the host named `name`.
std::string PortPath(const char* name) {
  DIR* d = opendir("/sys/class/virtio-ports");
  if (d == nullptr) return "";
  std::string found;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::string n = ReadAll(("/sys/class/virtio-ports/" + std::string(e->d_name) + "/name").c_str());
    while (!n.empty() && n.back() == '\n') n.pop_back();
    if (n == name) found = "/dev/" + std::string(e->d_name);
  }
  closedir(d);
  return found;
}

int OpenPort(const char* name, int flags) {
  // The ports appear once virtio_console has probed them; that is asynchronous to module load.
  for (int i = 0; i < 500; ++i) {
    std::string path = PortPath(name);
    if (!path.empty()) {
      int fd = open(path.c_str(), flags | O_CLOEXEC);
      if (fd >= 0) return fd;
    }
    usleep(2000);
  }
  Fail((std::string("open port ") + name).c_str());
}

[[noreturn]] void ExecCommand(const Spec& spec, int in, int out, int err, int report) {
  WriteString("/sys/fs/cgroup/command/cgroup.procs", "0");
  setsid();
  if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) _exit(125);
  // No capability can come back: an empty bounding set, no ambient ones, no_new_privs (setuid
  // files are on nosuid mounts anyway).
  for (int cap = 0; cap <= 63; ++cap) prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  if (spec.uid == 0 || spec.uid == kRelayUid || setgroups(0, nullptr) != 0 ||
      setresgid(spec.gid, spec.gid, spec.gid) != 0 || setresuid(spec.uid, spec.uid, spec.uid) != 0 ||
      prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    int e = errno;
    (void)!write(report, &e, sizeof(e));
    _exit(125);
  }
  if (chdir(spec.workdir.c_str()) != 0) {
    int e = errno;
    (void)!write(report, &e, sizeof(e));
    _exit(125);
  }
  std::vector<char*> argv, envp;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  // execvpe searches the PATH of the command's environment, not init's.
  for (const auto& e : spec.env) {
    if (e.rfind("PATH=", 0) == 0) setenv("PATH", e.c_str() + 5, 1);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execvpe(argv[0], argv.data(), envp.data());
  int e = errno;
  (void)!write(report, &e, sizeof(e));
  _exit(e == ENOENT ? 127 : 126);
}

// The guest's loopback: up, as in a native sandbox (the command's own servers, the egress relays).
void LoopbackUp() {
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ifreq ifr = {};
  strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) != 0) Fail("read loopback flags");
  ifr.ifr_flags |= IFF_UP;
  if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0) Fail("bring loopback up");
  close(s);
}

void AppendFrame(std::string* out, char type, const char* data, size_t n) {
  char header[wire::kHeaderBytes];
  wire::AppendHeader(header, type, n);
  out->append(header, sizeof(header));
  out->append(data, n);
}

// Carries one accepted connection over `port` (egress_wire.h) until both directions have ended.
void RelayConnection(int conn, int port) {
  constexpr size_t kLimit = 256 * 1024;
  std::string to_port, from_port, to_conn;
  AppendFrame(&to_port, wire::kOpen, nullptr, 0);
  bool conn_ended = false, host_ended = false, conn_broken = false, shut = false;
  fcntl(conn, F_SETFL, O_NONBLOCK);
  while (!(conn_ended && host_ended && to_port.empty())) {
    pollfd p[2] = {{conn, 0, 0}, {port, 0, 0}};
    if (!conn_ended && to_port.size() < kLimit) p[0].events |= POLLIN;
    if (!to_conn.empty()) p[0].events |= POLLOUT;
    if (!host_ended && to_conn.size() < kLimit) p[1].events |= POLLIN;
    if (!to_port.empty()) p[1].events |= POLLOUT;
    for (auto& e : p) {
      if (e.events == 0) e.fd = -1;  // nothing wanted: a hang-up must not spin the loop
    }
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (p[0].revents & POLLOUT) {
      ssize_t w = send(conn, to_conn.data(), to_conn.size(), MSG_NOSIGNAL);
      if (w > 0) to_conn.erase(0, w);
      else if (w < 0 && errno != EAGAIN && errno != EINTR) conn_broken = true;
    }
    if ((p[0].events & POLLIN) && (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
      char buf[16384];
      ssize_t r = recv(conn, buf, sizeof(buf), 0);
      if (r > 0) AppendFrame(&to_port, wire::kData, buf, r);
      else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
        AppendFrame(&to_port, wire::kEnd, nullptr, 0);
        conn_ended = true;
      }
    }
    if (p[1].revents & POLLOUT) {
      ssize_t w = write(port, to_port.data(), to_port.size());
      if (w > 0) to_port.erase(0, w);
      else if (w < 0 && errno != EAGAIN && errno != EINTR) _exit(1);  // the host is gone
    }
    if ((p[1].events & POLLIN) && (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
      char buf[65536];
      ssize_t r = read(port, buf, sizeof(buf));
      if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) _exit(1);
      if (r > 0) from_port.append(buf, r);
      size_t pos = 0;
      while (from_port.size() - pos >= wire::kHeaderBytes) {
        size_t len = wire::PayloadLength(from_port.data() + pos);
        if (from_port.size() - pos < wire::kHeaderBytes + len) break;
        char type = from_port[pos];
        if (type == wire::kData && !conn_broken) to_conn.append(from_port, pos + wire::kHeaderBytes, len);
        if (type == wire::kEnd) host_ended = true;
        pos += wire::kHeaderBytes + len;
      }
      from_port.erase(0, pos);
    }
    if (conn_broken) to_conn.clear();
    if (host_ended && to_conn.empty() && !shut) {
      shutdown(conn, SHUT_WR);
      shut = true;
    }
  }
}

// The egress relays: one process per port, each taking the next connection to 127.0.0.1:PORT
// when its port is free. They run as nobody, outside the command's cgroup.
void StartEgressRelays(const Spec& spec, const std::vector<int>& keep_closed) {
  if (spec.egress_port == 0) return;
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(spec.egress_port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (listener < 0 || bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(listener, 64) != 0) {
    Fail("egress listener");
  }
  for (int i = 0; i < wire::kEgressPorts; ++i) {
    int port = OpenPort((wire::kEgressPortPrefix + std::to_string(i)).c_str(), O_RDWR | O_NONBLOCK);
    pid_t pid = fork();
    if (pid < 0) Fail("fork an egress relay");
    if (pid > 0) {
      close(port);
      continue;
    }
    for (int fd : keep_closed) close(fd);
    signal(SIGPIPE, SIG_IGN);
    if (setgroups(0, nullptr) != 0 || setresgid(kRelayUid, kRelayUid, kRelayUid) != 0 ||
        setresuid(kRelayUid, kRelayUid, kRelayUid) != 0) {
      _exit(1);
    }
    for (;;) {
      int conn = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (conn < 0) continue;
      RelayConnection(conn, port);
      close(conn);
    }
  }
  close(listener);
}

uint64_t MonotonicMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000ull + ts.tv_nsec / 1000000;
}

// Reaps every process until the command has ended; kills the cgroup when its CPU time is spent.
int WaitCommand(pid_t command, uint64_t cpu_limit_ms, bool* cpu_killed) {
  for (;;) {
    int status = 0;
    pid_t p = waitpid(-1, &status, cpu_limit_ms ? WNOHANG : 0);
    if (p == command) return status;
    if (p > 0) continue;
    if (p < 0 && errno != EINTR && errno != ECHILD) return status;
    if (cpu_limit_ms && CgroupValue("cpu.stat", "usage_usec") / 1000 >= cpu_limit_ms) {
      *cpu_killed = true;
      WriteString("/sys/fs/cgroup/command/cgroup.kill", "1");
    }
    if (cpu_limit_ms) usleep(20000);
  }
}

}  // namespace

int main() {
  mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, nullptr);
  // No user namespaces in the guest: the command has no way to a mount or a capability of its own.
  WriteString("/proc/sys/user/max_user_namespaces", "0");
  LoadModules();
  Spec spec = ReadSpec();
  if (spec.argv.empty()) {
    errno = EINVAL;
    Fail("/warden/spec has no command");
  }
  sethostname(spec.hostname.data(), spec.hostname.size());
  LoopbackUp();
  const bool cgroup = SetupCgroup(spec);
  int control = OpenPort("warden.control", O_WRONLY);
  int in = OpenPort("warden.stdin", O_RDONLY);
  int out = OpenPort("warden.stdout", O_WRONLY);
  int err = OpenPort("warden.stderr", O_WRONLY);
  BuildFilesystem(spec);
  StartEgressRelays(spec, {control, in, out, err});
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) Fail("pipe");
  const uint64_t start = MonotonicMs();
  pid_t command = fork();
  if (command < 0) Fail("fork");
  if (command == 0) ExecCommand(spec, in, out, err, report[1]);
  close(report[1]);
  close(in);
  close(out);
  close(err);
  bool cpu_killed = false;
  int status = WaitCommand(command, spec.cpu_ms.empty() ? 0 : strtoull(spec.cpu_ms.c_str(), nullptr, 10), &cpu_killed);
  int exec_errno = 0;
  if (read(report[0], &exec_errno, sizeof(exec_errno)) != sizeof(exec_errno)) exec_errno = 0;
  // One line the host parses (microvm.cc, ParseReport).
  char line[512];
  int n = snprintf(line, sizeof(line),
                   "status=%d exec_errno=%d oom_kill=%llu pids_max_hit=%llu peak=%llu cpu_us=%llu cpu_killed=%d "
                   "cgroup=%d run_ms=%llu\n",
                   status, exec_errno, (unsigned long long)(cgroup ? CgroupValue("memory.events", "oom_kill") : 0),
                   (unsigned long long)(cgroup ? CgroupValue("pids.events", "max") : 0),
                   (unsigned long long)(cgroup ? CgroupValue("memory.peak", nullptr) : 0),
                   (unsigned long long)(cgroup ? CgroupValue("cpu.stat", "usage_usec") : 0), cpu_killed ? 1 : 0,
                   cgroup ? 1 : 0, (unsigned long long)(MonotonicMs() - start));
  (void)!write(control, line, n);
  PowerOff();
}
