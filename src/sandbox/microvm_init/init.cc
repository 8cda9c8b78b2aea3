// PID 1 of a warden microVM (docs/backends.md, "microvm"). Built static, carried inside warden and
// written into each VM's initramfs. Runs in the guest only: it loads the virtio/9p modules, builds
// the guest's filesystem from the host's shares, runs the command as an unprivileged user with
// its stdio on virtio-console ports, reports how it ended on the control port and powers off.
// Everything it is told comes from /warden/spec, written by the host (microvm_spec.h).
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/reboot.h>
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

namespace {

constexpr uid_t kSandboxUid = 1000;
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
  std::vector<std::pair<std::string, std::string>> links;  // name -> target
  std::string workdir = "/tmp", tmpfs_size = "67108864", memory, pids, cpu_ms, hostname = "sandbox";
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
    else if (k == "link") {
      size_t eq = v.find('=');
      s.links.emplace_back(v.substr(0, eq), v.substr(eq + 1));
    } else if (k == "share") {
      // tag:mode:inside (inside may hold ':').
      size_t a = v.find(':'), b = v.find(':', a + 1);
      s.shares.push_back({v.substr(0, a), v.substr(b + 1), v.substr(a + 1, b - a - 1)});
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

// The guest's root is the initramfs: once populated it becomes read-only, so that only /tmp,
// /dev/shm and --rw shares are writable, as in the native sandbox.
void BuildFilesystem(const Spec& spec) {
  for (const auto& [name, target] : spec.links) {
    if (symlink(target.c_str(), name.c_str()) != 0 && errno != EEXIST) Fail(("link " + name).c_str());
  }
  MountShares(spec);
  MkdirP("/tmp");
  std::string tmp_opts = "size=" + spec.tmpfs_size + ",mode=1777";
  if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, tmp_opts.c_str()) != 0) Fail("mount /tmp");
  MkdirP("/dev/shm");
  if (mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, tmp_opts.c_str()) != 0) Fail("mount /dev/shm");
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
  if (setgroups(0, nullptr) != 0 || setresgid(kSandboxUid, kSandboxUid, kSandboxUid) != 0 ||
      setresuid(kSandboxUid, kSandboxUid, kSandboxUid) != 0) {
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
  LoadModules();
  Spec spec = ReadSpec();
  if (spec.argv.empty()) {
    errno = EINVAL;
    Fail("/warden/spec has no command");
  }
  sethostname(spec.hostname.data(), spec.hostname.size());
  const bool cgroup = SetupCgroup(spec);
  int control = OpenPort("warden.control", O_WRONLY);
  int in = OpenPort("warden.stdin", O_RDONLY);
  int out = OpenPort("warden.stdout", O_WRONLY);
  int err = OpenPort("warden.stderr", O_WRONLY);
  BuildFilesystem(spec);
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
