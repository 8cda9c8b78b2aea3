// The microvm backend (backends.h, docs/backends.md "microvm"): the command runs in a QEMU
// `microvm` machine with its own Linux kernel. warden builds the VM's initramfs in memory (its own
// static init, microvm_init/, plus the virtio and 9p modules), shares the host's read-only system
// directories and the --ro/--rw binds over 9p, and talks to the guest over four virtio-console
// ports (stdin, stdout, stderr, control) connected to socketpairs. Limits: memory and pids are a
// cgroup inside the guest (the VM gets the limit plus room for its kernel), the wall clock and the
// output caps are enforced here by killing QEMU.
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <algorithm>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/unique_fd.h"
#include "sandbox/backends.h"
#include "sandbox/host_io.h"
#include "sandbox/microvm_blob.h"
#include "sandbox/microvm_cpio.h"
#include "sandbox/microvm_egress.h"
#include "sandbox/microvm_init/egress_wire.h"

namespace warden::sandbox {
namespace {

constexpr const char* kDefaultDir = "/var/lib/warden/microvm";
constexpr const char* kInstallHint = "install it with scripts/install-microvm.sh (or set WARDEN_MICROVM_DIR)";
constexpr const char* kModules[] = {"virtio_ring", "virtio", "virtio_mmio", "virtio_console", "9pnet",
                                    "9pnet_virtio", "netfs", "fscache", "9p"};
constexpr uint64_t kDefaultVmMemory = 512ull << 20;
constexpr uint64_t kKernelRoom = 192ull << 20;  // guest kernel, init and page cache beside the command

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Installation {
  std::string dir, kernel, qemu;
  std::map<std::string, std::string> modules;  // name -> contents
};

Result<Installation> Locate() {
  Installation inst;
  const char* env = getenv("WARDEN_MICROVM_DIR");
  inst.dir = env != nullptr && *env ? env : kDefaultDir;
  inst.kernel = inst.dir + "/vmlinux";
  if (access(inst.kernel.c_str(), R_OK) != 0) {
    return Status::Error("microvm: no guest kernel at " + inst.kernel + ": " + kInstallHint);
  }
  for (const char* m : kModules) {
    std::string path = inst.dir + "/modules/" + m + ".ko";
    if (access(path.c_str(), R_OK) != 0) return Status::Error("microvm: missing module " + path + ": " + kInstallHint);
    inst.modules[m] = ReadFile(path);
  }
  const char* qemu = getenv("WARDEN_MICROVM_QEMU");
  for (std::string candidate : {std::string(qemu ? qemu : ""), std::string("/usr/bin/qemu-system-x86_64"),
                                std::string("/usr/local/bin/qemu-system-x86_64")}) {
    if (!candidate.empty() && access(candidate.c_str(), X_OK) == 0) {
      inst.qemu = candidate;
      break;
    }
  }
  if (inst.qemu.empty()) {
    return Status::Error("microvm: qemu-system-x86_64 not found: install the Debian package qemu-system-x86 "
                         "(scripts/install-deps.sh)");
  }
  return inst;
}

// One 9p share: a host directory, where the guest mounts it, and whether it may be written.
struct Share {
  std::string host, inside;
  bool writable = false;
  int file_bind = -1;  // >= 0: a single-file bind, index into GuestPlan::files (host is its staging dir)
};

// A --ro/--rw of one file. 9p shares directories, so QEMU gets a private directory holding only a
// bind of the file (StageFileBindsInChild), made in QEMU's own mount namespace.
struct FileBind {
  std::string host;  // canonical path
  UniqueFd pinned;   // O_PATH, opened once and checked: the bind is made from it, never from the path
  bool writable = false;
};

// Where QEMU's mount namespace stages single-file binds (a tmpfs mounted there in that namespace
// only; the host's /run/warden is untouched).
constexpr const char* kFileStage = "/run/warden";

struct GuestPlan {
  std::vector<Share> shares;
  std::vector<std::pair<std::string, std::string>> links;  // guest path -> target
  std::map<std::string, std::string> etc_files;            // guest path (no leading /) -> contents
  std::vector<FileBind> files;
  // Protected paths in --rw shares, in mount order: guest path -> read-only (the path itself) or
  // not (an ancestor made a mount point of itself, so that it cannot be renamed away).
  std::vector<std::pair<std::string, bool>> self_binds;
  std::string workdir;
  uid_t uid = 65534;
  gid_t gid = 65534;
  int egress_port = 0;  // guest 127.0.0.1 port of the egress relays; 0: no egress
  std::map<std::string, std::string> egress_env;  // HTTP_PROXY and friends
};

// Opens a single-file bind's source once, without following a final symlink, and checks it is
// the regular file realpath named; the bind is later made from this descriptor.
Result<FileBind> PinFile(const char* flag, const std::string& given, const char* real) {
  if (geteuid() != 0) {
    return Status::Error(std::string(flag) + " " + given +
                         ": single-file binds with --backend microvm need warden to run as root (a bind mount in "
                         "QEMU's own mount namespace); share the directory that holds it");
  }
  FileBind f{real, UniqueFd(open(real, O_PATH | O_NOFOLLOW | O_CLOEXEC)), false};
  struct stat by_fd, by_path;
  if (!f.pinned.valid() || fstat(f.pinned.get(), &by_fd) != 0) return Status::FromErrno(std::string(flag) + " " + given, errno);
  if (lstat(real, &by_path) != 0 || !S_ISREG(by_fd.st_mode) || by_fd.st_dev != by_path.st_dev ||
      by_fd.st_ino != by_path.st_ino) {
    return Status::Error(std::string(flag) + " " + given + ": changed while warden was opening it");
  }
  return f;
}

// As native and gvisor: every existing protected path below a writable share becomes a read-only
// bind of itself in the guest, its ancestors below the share plain binds of themselves (a mount
// point cannot be renamed or removed). Absent paths and paths through a symlink are skipped.
void PlanProtectedPaths(const std::vector<std::string>& protect, const std::string& host, const std::string& inside,
                        std::vector<std::pair<std::string, bool>>* binds) {
  for (std::string p : protect) {
    while (!p.empty() && p.back() == '/') p.pop_back();
    const std::string path = host + "/" + p;
    struct stat st;
    char real[PATH_MAX];
    if (p.empty() || lstat(path.c_str(), &st) != 0 || realpath(path.c_str(), real) == nullptr || path != real) continue;
    for (size_t pos = p.find('/'); pos != std::string::npos; pos = p.find('/', pos + 1)) {
      std::pair<std::string, bool> anchor{inside + "/" + p.substr(0, pos), false};
      if (std::find(binds->begin(), binds->end(), anchor) == binds->end()) binds->push_back(anchor);
    }
    binds->push_back({inside + "/" + p, true});
  }
}

Result<GuestPlan> PlanGuest(const Options& o) {
  GuestPlan plan;
  // The host's system directories, read-only; merged-usr links stay links.
  for (const char* dir : {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}) {
    struct stat st;
    if (lstat(dir, &st) != 0) continue;
    if (S_ISLNK(st.st_mode)) {
      char target[PATH_MAX];
      ssize_t n = readlink(dir, target, sizeof(target) - 1);
      if (n > 0) plan.links.emplace_back(dir, std::string(target, n));
    } else if (S_ISDIR(st.st_mode)) {
      plan.shares.push_back({dir, dir, false});
    }
  }
  for (const char* dir : {"/etc/ssl/certs", "/etc/alternatives"}) {
    struct stat st;
    if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) plan.shares.push_back({dir, dir, false});
  }
  for (const char* file : {"/etc/ld.so.cache", "/etc/ssl/openssl.cnf"}) {
    if (access(file, R_OK) == 0) plan.etc_files[file + 1] = ReadFile(file);
  }
  // The command runs as the ids QEMU has on the host (as gvisor does): 9p shows the guest the host's
  // owners, so a --rw directory writable by 65534 under native is writable in the VM too.
  plan.uid = geteuid() == 0 ? 65534 : geteuid();
  plan.gid = geteuid() == 0 ? 65534 : getegid();
  const std::string uid = std::to_string(plan.uid), gid = std::to_string(plan.gid);
  plan.etc_files["etc/passwd"] = "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\nsandbox:x:" + uid + ":" + gid +
                                 ":sandbox:/tmp:/bin/sh\n";
  plan.etc_files["etc/group"] = "root:x:0:\nsandbox:x:" + gid + ":\n";
  plan.etc_files["etc/hosts"] = "127.0.0.1\tlocalhost " + o.hostname + "\n::1\tlocalhost ip6-localhost ip6-loopback\n";
  plan.etc_files["etc/resolv.conf"] = "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n";
  plan.etc_files["etc/nsswitch.conf"] = "passwd: files\ngroup: files\nhosts: files dns\n";

  std::string first_writable;
  for (const Bind& b : o.binds) {
    const char* flag = b.writable ? "--rw" : "--ro";
    char real[PATH_MAX];
    if (realpath(b.host.c_str(), real) == nullptr) {
      return Status::FromErrno(std::string(flag) + " " + b.host, errno);
    }
    struct stat st;
    if (stat(real, &st) != 0 || (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))) {
      return Status::Error(std::string(flag) + " " + b.host + ": the microvm backend binds directories and regular files only");
    }
    std::string inside = NormalInsidePath(b.inside.empty() ? std::string(real) : b.inside);
    if (inside == "/" || inside == "/proc" || inside == "/sys" || inside == "/dev" || inside == "/warden" || inside.rfind("/warden/", 0) == 0 ||
        inside == "/init") {
      return Status::Error(std::string(flag) + " " + b.host + ":" + inside + ": " + inside + " is managed by warden");
    }
    if (S_ISREG(st.st_mode)) {
      auto file = PinFile(flag, b.host, real);
      if (!file.ok()) return file.status();
      file->writable = b.writable;
      plan.shares.push_back({std::string(kFileStage) + "/f" + std::to_string(plan.files.size()), inside, b.writable,
                             static_cast<int>(plan.files.size())});
      plan.files.push_back(std::move(*file));
      continue;
    }
    if (std::string(real).rfind(std::string(kFileStage) + "/", 0) == 0 || real == std::string(kFileStage)) {
      // QEMU's staging tmpfs would hide it (only when file binds are staged; refused always, for one rule).
      return Status::Error(std::string(flag) + " " + b.host + ": directories under " + kFileStage +
                           " cannot be shared with --backend microvm");
    }
    plan.shares.push_back({real, inside, b.writable});
    if (b.writable) PlanProtectedPaths(o.protect, real, inside, &plan.self_binds);
    if (b.writable && first_writable.empty()) first_writable = inside;  // directories only: a file is no workdir
  }
  plan.workdir = !o.workdir.empty() ? o.workdir : (!first_writable.empty() ? first_writable : "/tmp");
  return plan;
}

void AddField(std::string* spec, const std::string& key, const std::string& value) {
  spec->append(key);
  spec->push_back('\0');
  spec->append(value);
  spec->push_back('\0');
}

// The spec init reads (microvm_init/init.cc, ReadSpec): NUL-separated keys and values.
std::string BuildSpec(const Options& o, const GuestPlan& plan) {
  std::string spec;
  for (const auto& a : o.argv) AddField(&spec, "arg", a);
  const char* term = getenv("TERM");
  std::map<std::string, std::string> env = CleanEnv(term != nullptr ? term : "");
  for (const auto& [k, v] : plan.egress_env) env[k] = v;
  for (const auto& [k, v] : o.env) env[k] = v;
  for (const auto& [k, v] : env) AddField(&spec, "env", k + "=" + v);
  if (plan.egress_port) AddField(&spec, "egress_port", std::to_string(plan.egress_port));
  for (const auto& [path, read_only] : plan.self_binds) AddField(&spec, "self_bind", (read_only ? "ro:" : "rw:") + path);
  AddField(&spec, "workdir", plan.workdir);
  AddField(&spec, "uid", std::to_string(plan.uid));
  AddField(&spec, "gid", std::to_string(plan.gid));
  AddField(&spec, "tmpfs_size", std::to_string(o.tmpfs_bytes));
  AddField(&spec, "hostname", o.hostname);
  if (o.memory_bytes) AddField(&spec, "memory", std::to_string(o.memory_bytes));
  if (o.pids) AddField(&spec, "pids", std::to_string(o.pids));
  if (o.cpu_ms) AddField(&spec, "cpu_ms", std::to_string(o.cpu_ms));
  for (const auto& [name, target] : plan.links) AddField(&spec, "link", name + "=" + target);
  for (size_t i = 0; i < plan.shares.size(); ++i) {
    const Share& s = plan.shares[i];
    AddField(&spec, s.file_bind >= 0 ? "file" : "share",
             "w" + std::to_string(i) + ":" + (s.writable ? "rw" : "ro") + ":" + s.inside);
  }
  return spec;
}

std::string BuildInitramfs(const Installation& inst, const GuestPlan& plan, const std::string& spec) {
  microvm::CpioWriter cpio;
  // Not lib/modules: /lib becomes the host's (a link to usr/lib, or a share).
  for (const char* dir : {"dev", "proc", "sys", "tmp", "etc", "etc/ssl", "warden", "warden/modules"}) {
    cpio.AddDirectory(dir);
  }
  cpio.AddFile("init", microvm::InitBinary(), 0755);
  for (const auto& [name, content] : inst.modules) cpio.AddFile("warden/modules/" + name + ".ko", content);
  for (const auto& [path, content] : plan.etc_files) cpio.AddFile(path, content);
  cpio.AddFile("warden/spec", spec, 0444);
  return cpio.Finish();
}

// The host's TSC rate: under TCG the guest's TSC runs at it, and telling the guest kernel spares
// it a calibration against a PIT that TCG emulates too slowly under load (it can hang there).
uint64_t HostTscKhz() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("cpu MHz", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) return static_cast<uint64_t>(std::atof(line.c_str() + colon + 1) * 1000);
    }
  }
  return 2000000;
}

// The guest's four ports, each a socketpair: [0] stays here, [1] goes to QEMU.
enum Port { kStdin, kStdout, kStderr, kControl, kSerial, kPortCount };
constexpr const char* kPortNames[] = {"warden.stdin", "warden.stdout", "warden.stderr", "warden.control", nullptr};

struct Launch {
  std::string accel;  // "kvm" or "tcg"
  std::string initramfs;
  const Installation* inst = nullptr;
  const GuestPlan* plan = nullptr;
  uint64_t vm_memory = kDefaultVmMemory;
  microvm::EgressBridge* egress = nullptr;  // set: the guest gets the egress ports
};

// `first_egress_fd`: the first of wire::kEgressPorts descriptors, when l.egress is set.
std::vector<std::string> QemuArgs(const Launch& l, int first_fd, int initrd_fd, int first_egress_fd) {
  // The name ties the QEMU process to the warden that started it (ps, leftover checks).
  std::vector<std::string> a = {l.inst->qemu, "-name", "warden-microvm-" + std::to_string(getpid()),
                                "-M", "microvm,pit=on,pic=on,rtc=on,isa-serial=on", "-accel", l.accel};
  if (l.accel == "kvm") a.insert(a.end(), {"-cpu", "host"});
  a.insert(a.end(), {"-m", std::to_string(l.vm_memory >> 20) + "M", "-smp", "1", "-nodefaults", "-no-user-config",
                     "-display", "none", "-no-reboot", "-kernel", l.inst->kernel, "-initrd",
                     "/proc/self/fd/" + std::to_string(initrd_fd)});
  std::string cmdline = "console=ttyS0 quiet panic=-1 rdinit=/init";
  if (l.accel == "tcg") cmdline += " tsc_early_khz=" + std::to_string(HostTscKhz());
  a.insert(a.end(), {"-append", cmdline});
  a.insert(a.end(), {"-chardev", "socket,id=serial,fd=" + std::to_string(first_fd + kSerial), "-serial", "chardev:serial"});
  const int egress_ports = l.egress ? microvm::wire::kEgressPorts : 0;
  a.insert(a.end(), {"-device", "virtio-serial-device,max_ports=" + std::to_string(5 + egress_ports)});
  for (int p = kStdin; p <= kControl; ++p) {
    std::string id = "port" + std::to_string(p);
    a.insert(a.end(), {"-chardev", "socket,id=" + id + ",fd=" + std::to_string(first_fd + p), "-device",
                       "virtserialport,chardev=" + id + ",name=" + kPortNames[p]});
  }
  // Egress: no network device at all; connections travel as frames on these ports (egress_wire.h).
  for (int e = 0; e < egress_ports; ++e) {
    std::string id = "egress" + std::to_string(e);
    a.insert(a.end(), {"-chardev", "socket,id=" + id + ",fd=" + std::to_string(first_egress_fd + e), "-device",
                       "virtserialport,chardev=" + id + ",name=" + microvm::wire::kEgressPortPrefix + std::to_string(e)});
  }
  for (size_t i = 0; i < l.plan->shares.size(); ++i) {
    const Share& s = l.plan->shares[i];
    std::string id = "fs" + std::to_string(i);
    a.insert(a.end(), {"-fsdev", "local,id=" + id + ",path=" + s.host + ",security_model=none" +
                                     (s.writable ? "" : ",readonly=on"),
                       "-device", "virtio-9p-device,fsdev=" + id + ",mount_tag=w" + std::to_string(i)});
  }
  // QEMU's own seccomp filter; it already runs unprivileged (DropPrivilegesForQemu): a QEMU
  // escape lands in an unprivileged, filtered process.
  a.insert(a.end(), {"-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"});
  return a;
}

// In QEMU's process before exec, when warden is root: become nobody (65534), keeping /dev/kvm's
// group when that group may use it. Done here rather than with QEMU's -runas because a change of
// credentials clears the parent-death signal, which must stay set so that QEMU dies with warden.
// In QEMU's process before exec (root): a private mount namespace in which kFileStage is a small
// tmpfs holding, per single-file bind, a directory with one entry, "file", bound from the pinned
// descriptor (read-only for --ro). QEMU shares those directories; the host sees none of it, and
// nothing is left behind when QEMU ends, however it ends.
bool StageFileBindsInChild(const std::vector<FileBind>& files) {
  if (files.empty()) return true;
  if (unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return false;
  if (mount("tmpfs", kFileStage, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=1m") != 0) return false;
  for (size_t i = 0; i < files.size(); ++i) {
    std::string dir = std::string(kFileStage) + "/f" + std::to_string(i), file = dir + "/file";
    // The pinned descriptor's mount belongs to the namespace left behind, which a bind cannot take
    // from: open the path again here and require the very file that was pinned.
    struct stat pinned, again;
    UniqueFd here(open(files[i].host.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (!here.valid() || fstat(here.get(), &again) != 0 || fstat(files[i].pinned.get(), &pinned) != 0) return false;
    if (pinned.st_dev != again.st_dev || pinned.st_ino != again.st_ino) {
      errno = ESTALE;
      return false;
    }
    std::string source = "/proc/self/fd/" + std::to_string(here.get());
    if (mkdir(dir.c_str(), 0755) != 0) return false;
    int fd = open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return false;
    close(fd);
    if (mount(source.c_str(), file.c_str(), nullptr, MS_BIND, nullptr) != 0) return false;
    unsigned long ro = files[i].writable ? 0 : MS_RDONLY;
    if (mount(nullptr, file.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | ro, nullptr) != 0) return false;
  }
  return true;
}

bool DropPrivilegesForQemu() {
  if (geteuid() != 0) return true;
  struct stat kvm;
  std::vector<gid_t> groups;
  if (stat("/dev/kvm", &kvm) == 0 && kvm.st_gid != 0 && (kvm.st_mode & S_IRGRP) && (kvm.st_mode & S_IWGRP)) {
    groups.push_back(kvm.st_gid);
  }
  return setgroups(groups.size(), groups.data()) == 0 && setresgid(65534, 65534, 65534) == 0 &&
         setresuid(65534, 65534, 65534) == 0;
}

// What the guest's init reported (microvm_init/init.cc, the line it writes on the control port).
struct Report {
  int status = 0, exec_errno = 0;
  uint64_t oom_kill = 0, pids_max_hit = 0, peak = 0, cpu_us = 0;
  bool cpu_killed = false;
};

std::optional<Report> ParseReport(const std::string& line) {
  std::map<std::string, std::string> kv;
  std::istringstream in(line);
  std::string word;
  while (in >> word) {
    size_t eq = word.find('=');
    if (eq != std::string::npos) kv[word.substr(0, eq)] = word.substr(eq + 1);
  }
  if (!kv.count("status")) return std::nullopt;
  Report r;
  r.status = std::atoi(kv["status"].c_str());
  r.exec_errno = std::atoi(kv["exec_errno"].c_str());
  r.oom_kill = std::strtoull(kv["oom_kill"].c_str(), nullptr, 10);
  r.pids_max_hit = std::strtoull(kv["pids_max_hit"].c_str(), nullptr, 10);
  r.peak = std::strtoull(kv["peak"].c_str(), nullptr, 10);
  r.cpu_us = std::strtoull(kv["cpu_us"].c_str(), nullptr, 10);
  r.cpu_killed = kv["cpu_killed"] == "1";
  return r;
}

RunResult SetupError(const std::string& message) {
  RunResult r;
  r.backend = "microvm";
  r.exit_code = 125;
  r.reason = Reason::kSetupError;
  r.error = message;
  return r;
}

bool WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= w;
  }
  return true;
}

// One VM from start to end: QEMU as a child, the relay of the streams, the limits.
class VmRun {
 public:
  VmRun(const Options& o, const Io& io, const Launch& l) : opt_(o), io_(io), launch_(l) {}

  RunResult Run() {
    result_.backend = "microvm";
    const uint64_t start = MonotonicMs();
    // A SIGINT/TERM/HUP/QUIT to warden stops the VM and is reported, as native does; QEMU
    // itself starts with an empty mask.
    sigset_t sigs, old;
    sigemptyset(&sigs);
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&sigs, s);
    sigprocmask(SIG_BLOCK, &sigs, &old);
    signals_.reset(signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK));
    Status st = Start();
    if (st.ok()) Supervise();
    signals_.reset();
    sigprocmask(SIG_SETMASK, &old, nullptr);
    if (!st.ok()) return SetupError(st.message());
    result_.wall_ms = MonotonicMs() - start;
    return Finish();
  }

 private:
  Status Start() {
    UniqueFd guest_ends[kPortCount];
    for (int p = 0; p < kPortCount; ++p) {
      int sv[2];
      if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return Status::FromErrno("socketpair", errno);
      host_[p].reset(sv[0]);
      guest_ends[p].reset(sv[1]);
    }
    const int egress_ports = launch_.egress ? microvm::wire::kEgressPorts : 0;
    std::vector<UniqueFd> egress_guest_ends;
    for (int e = 0; e < egress_ports; ++e) {
      int sv[2];
      if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return Status::FromErrno("socketpair", errno);
      launch_.egress->AddPort(UniqueFd(sv[0]));
      egress_guest_ends.emplace_back(sv[1]);
    }
    UniqueFd initrd(memfd_create("warden-microvm-initramfs", MFD_CLOEXEC));
    if (!initrd.valid() || !WriteAll(initrd.get(), launch_.initramfs.data(), launch_.initramfs.size())) {
      return Status::FromErrno("write the initramfs", errno);
    }
    int diag[2];
    if (pipe2(diag, O_CLOEXEC) != 0) return Status::FromErrno("pipe", errno);
    diag_.reset(diag[0]);
    UniqueFd diag_w(diag[1]);
    // The child's descriptors: ports at 3..7, the initramfs at 8, the egress ports from 9.
    constexpr int kFirst = 3, kInitrd = 3 + kPortCount, kFirstEgress = kInitrd + 1;
    std::vector<std::string> args = QemuArgs(launch_, kFirst, kInitrd, kFirstEgress);
    std::vector<char*> argv;
    for (auto& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);
    char env_path[] = "PATH=/usr/bin:/bin";
    char* envp[] = {env_path, nullptr};
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) return Status::FromErrno("fork qemu", errno);
    if (pid == 0) {
      if (!StageFileBindsInChild(launch_.plan->files)) {
        dprintf(diag_w.get(), "warden: stage the single-file binds for QEMU: %s\n", strerror(errno));
        _exit(125);
      }
      if (!DropPrivilegesForQemu()) _exit(125);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
      if (getppid() != parent) _exit(125);
      int devnull = open("/dev/null", O_RDONLY);
      // Move every descriptor above the target range first, then into place.
      std::vector<int> moved;
      for (int p = 0; p < kPortCount; ++p) moved.push_back(fcntl(guest_ends[p].get(), F_DUPFD, 64));
      moved.push_back(fcntl(initrd.get(), F_DUPFD, 64));
      for (const UniqueFd& e : egress_guest_ends) moved.push_back(fcntl(e.get(), F_DUPFD, 64));
      int diag_fd = fcntl(diag_w.get(), F_DUPFD, 64);
      dup2(devnull, 0);
      dup2(diag_fd, 1);
      dup2(diag_fd, 2);
      for (size_t i = 0; i < moved.size(); ++i) dup2(moved[i], kFirst + static_cast<int>(i));
      closefrom(kFirst + static_cast<int>(moved.size()));
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      execve(argv[0], argv.data(), envp);
      _exit(127);
    }
    qemu_pid_ = pid;
    qemu_fd_.reset(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
    if (!qemu_fd_.valid()) return Status::FromErrno("pidfd_open qemu", errno);
    if (opt_.timeout_ms) {
      timer_.reset(timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC));
      itimerspec its{};
      its.it_value.tv_sec = opt_.timeout_ms / 1000;
      its.it_value.tv_nsec = (opt_.timeout_ms % 1000) * 1000000;
      timerfd_settime(timer_.get(), 0, &its, nullptr);
    }
    // Writes to the guest's stdin never block the loop.
    fcntl(host_[kStdin].get(), F_SETFL, O_NONBLOCK);
    return Status::Ok();
  }

  void Kill(Reason why) {
    if (!killed_) {
      killed_ = true;
      kill_reason_ = why;
      kill(qemu_pid_, SIGKILL);
    }
  }

  // Appends what a stream delivered to its destination, cut at the output limit.
  void Deliver(Port p, const char* data, size_t n) {
    uint64_t& count = p == kStdout ? result_.stdout_bytes : result_.stderr_bytes;
    const uint64_t limit = opt_.output_limit_bytes;
    size_t keep = n;
    if (limit && count + n > limit) keep = limit - count;
    WriteAll(p == kStdout ? io_.stdout_fd : io_.stderr_fd, data, keep);
    count += keep;
    if (keep < n) {
      (p == kStdout ? result_.stdout_truncated : result_.stderr_truncated) = true;
      Kill(Reason::kOutputLimit);
    }
  }

  void KeepDiagnostics(const char* data, size_t n) {
    diagnostics_.append(data, n);
    if (diagnostics_.size() > 8192) diagnostics_.erase(0, diagnostics_.size() - 8192);
  }

  void Supervise() {
    char buf[65536];
    bool stdin_open = true;
    std::string stdin_pending;
    bool qemu_done = false;
    uint64_t grace_deadline = 0;
    while (true) {
      std::vector<pollfd> fds;
      std::vector<int> roles;  // port number, 100 qemu, 101 timer, 102 host stdin, 103 diag, 104 signals
      auto add = [&](int fd, short events, int role) {
        fds.push_back({fd, events, 0});
        roles.push_back(role);
      };
      for (Port p : {kStdout, kStderr, kControl, kSerial}) {
        if (host_[p].valid()) add(host_[p].get(), POLLIN, p);
      }
      if (diag_.valid()) add(diag_.get(), POLLIN, 103);
      if (!qemu_done) add(qemu_fd_.get(), POLLIN, 100);
      if (timer_.valid()) add(timer_.get(), POLLIN, 101);
      if (signals_.valid()) add(signals_.get(), POLLIN, 104);
      if (host_[kStdin].valid() && stdin_open) {
        if (!stdin_pending.empty()) add(host_[kStdin].get(), POLLOUT, kStdin);
        else add(io_.stdin_fd, POLLIN, 102);
      }
      const size_t egress_first = fds.size();
      if (launch_.egress) {
        launch_.egress->AddToPoll(&fds);
        roles.resize(fds.size(), 105);
      }
      // Done when QEMU has exited and every stream it held has reached its end.
      bool streams_open = host_[kStdout].valid() || host_[kStderr].valid() || host_[kControl].valid();
      if (qemu_done && !streams_open) break;
      int timeout = -1;
      if (report_ && !qemu_done) {
        // The guest powers off right after its report; a guest that does not is stopped.
        const uint64_t now = MonotonicMs();
        if (grace_deadline == 0) grace_deadline = now + 3000;
        timeout = grace_deadline > now ? static_cast<int>(grace_deadline - now) : 0;
        if (timeout == 0) kill(qemu_pid_, SIGKILL);
      }
      if (qemu_done) timeout = 2000;  // the sockets' peers are gone: only buffered data is left
      int n = poll(fds.data(), fds.size(), timeout);
      if (n < 0 && errno == EINTR) continue;
      if (n == 0 && qemu_done) break;
      if (n > 0 && launch_.egress) launch_.egress->OnPoll(fds);
      for (size_t i = 0; i < fds.size(); ++i) {
        if (fds[i].revents == 0 || i >= egress_first) continue;
        int role = roles[i];
        if (role == 100) {
          int status = 0;
          waitpid(qemu_pid_, &status, 0);
          qemu_status_ = status;
          qemu_done = true;
          host_[kStdin].reset();
        } else if (role == 101) {
          Kill(Reason::kTimeout);
          timer_.reset();
        } else if (role == 102) {
          ssize_t r = read(io_.stdin_fd, buf, sizeof(buf));
          if (r > 0) stdin_pending.assign(buf, r);
          else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
            stdin_open = false;
            // Half-close: QEMU still reads what is buffered, then sees end of file and tells the
            // guest. A full close would hang up at once and drop data QEMU has not read yet.
            shutdown(host_[kStdin].get(), SHUT_WR);
          }
        } else if (role == kStdin) {
          ssize_t w = send(host_[kStdin].get(), stdin_pending.data(), stdin_pending.size(), MSG_NOSIGNAL);
          if (w > 0) stdin_pending.erase(0, w);
          else if (w < 0 && errno != EAGAIN && errno != EINTR) host_[kStdin].reset();
        } else if (role == 104) {
          signalfd_siginfo info{};
          if (read(signals_.get(), &info, sizeof(info)) == sizeof(info) && host_signal_ == 0) {
            host_signal_ = static_cast<int>(info.ssi_signo);
            Kill(Reason::kSignaled);
          }
        } else if (role == 103) {
          ssize_t r = read(diag_.get(), buf, sizeof(buf));
          if (r > 0) KeepDiagnostics(buf, r);
          else diag_.reset();
        } else {
          Port p = static_cast<Port>(role);
          ssize_t r = read(host_[p].get(), buf, sizeof(buf));
          if (r <= 0) {
            if (r < 0 && errno == EINTR) continue;
            host_[p].reset();
            continue;
          }
          if (p == kStdout || p == kStderr) {
            if (!killed_ || kill_reason_ != Reason::kOutputLimit) Deliver(p, buf, r);
          } else if (p == kSerial) {
            KeepDiagnostics(buf, r);
          } else {
            control_.append(buf, r);
            if (!report_ && control_.find('\n') != std::string::npos) report_ = ParseReport(control_);
          }
        }
      }
    }
    if (!qemu_done) {
      kill(qemu_pid_, SIGKILL);
      waitpid(qemu_pid_, nullptr, 0);
    }
  }

  RunResult Finish() {
    RunResult& r = result_;
    if (killed_ && kill_reason_ == Reason::kTimeout && !report_) {
      r.reason = Reason::kTimeout;
      r.exit_code = 124;
      r.signal = SIGKILL;
      return r;
    }
    if (killed_ && kill_reason_ == Reason::kSignaled && !report_) {
      r.reason = Reason::kSignaled;
      r.signal = host_signal_;
      r.exit_code = 128 + host_signal_;
      r.error = std::string("warden received ") + sigabbrev_np(host_signal_) + ": the VM was stopped";
      return r;
    }
    if (killed_ && kill_reason_ == Reason::kOutputLimit) {
      r.reason = Reason::kOutputLimit;
      r.signal = SIGKILL;
      r.exit_code = 128 + SIGKILL;
      return r;
    }
    if (!report_) {
      std::string tail = diagnostics_;
      if (tail.size() > 1500) tail = "..." + tail.substr(tail.size() - 1500);
      RunResult e = SetupError("microvm: the VM ended without reporting the command's end (qemu status " +
                               std::to_string(qemu_status_) + "); its console said: " + tail);
      e.wall_ms = r.wall_ms;
      e.notes = r.notes;
      e.stdout_bytes = r.stdout_bytes;
      e.stderr_bytes = r.stderr_bytes;
      return e;
    }
    const Report& rep = *report_;
    r.cpu_ms = rep.cpu_us / 1000;
    r.peak_memory_bytes = rep.peak;
    if (rep.exec_errno) {
      r.exit_code = rep.exec_errno == ENOENT ? 127 : 126;
      r.reason = Reason::kExited;
      r.error = (rep.exec_errno == ENOENT ? "command not found: " : "command not executable: ") + opt_.argv[0] + " (" +
                strerror(rep.exec_errno) + ")";
      return r;
    }
    int ws = rep.status;
    if (WIFSIGNALED(ws)) {
      r.signal = WTERMSIG(ws);
      r.exit_code = 128 + r.signal;
      r.reason = Reason::kSignaled;
      if (r.signal == SIGKILL && rep.oom_kill > 0) r.reason = Reason::kMemory;
      else if (r.signal == SIGKILL && rep.cpu_killed) r.reason = Reason::kCpu;
    } else {
      r.exit_code = WEXITSTATUS(ws);
      r.reason = Reason::kExited;
      if (rep.oom_kill > 0 && r.exit_code != 0) r.reason = Reason::kMemory;
      else if (rep.pids_max_hit > 0 && r.exit_code != 0) r.reason = Reason::kPids;
    }
    return r;
  }

  const Options& opt_;
  const Io& io_;
  const Launch& launch_;
  RunResult result_;
  UniqueFd host_[kPortCount];
  UniqueFd qemu_fd_, timer_, diag_, signals_;
  int host_signal_ = 0;
  pid_t qemu_pid_ = -1;
  int qemu_status_ = 0;
  bool killed_ = false;
  Reason kill_reason_ = Reason::kExited;
  std::string control_, diagnostics_;
  std::optional<Report> report_;
};

std::string CachePath() {
  if (geteuid() == 0) return "/run/warden/microvm-accel";
  return "/tmp/warden-" + std::to_string(geteuid()) + "-microvm-accel";
}

std::string BootId() {
  std::string id = ReadFile("/proc/sys/kernel/random/boot_id");
  while (!id.empty() && id.back() == '\n') id.pop_back();
  return id;
}

// KVM when it works, else TCG. /dev/kvm can exist and yet not run a stock kernel (a nested PVM
// device, say), so the test is a real boot with a short deadline; its answer is kept until the
// host reboots. WARDEN_MICROVM_ACCEL=kvm|tcg skips the test.
std::pair<std::string, std::string> ChooseAccelerator(const Installation& inst, const GuestPlan& plan,
                                                      std::optional<RunResult>* interrupted) {
  if (const char* forced = getenv("WARDEN_MICROVM_ACCEL"); forced && (!strcmp(forced, "kvm") || !strcmp(forced, "tcg"))) {
    return {forced, std::string("accelerator forced by WARDEN_MICROVM_ACCEL=") + forced};
  }
  int kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
  if (kvm < 0) return {"tcg", std::string("KVM unavailable (/dev/kvm: ") + strerror(errno) + "): running under TCG, much slower"};
  close(kvm);
  const std::string boot = BootId();
  std::istringstream cached(ReadFile(CachePath()));
  std::string cached_boot, cached_accel;
  cached >> cached_boot >> cached_accel;
  if (cached_boot == boot && (cached_accel == "kvm" || cached_accel == "tcg")) {
    return {cached_accel, cached_accel == "kvm" ? "KVM" : "KVM did not boot the guest (tested once per host boot): running under TCG, much slower"};
  }
  Options probe;
  probe.argv = {"/bin/true"};
  probe.timeout_ms = 5000;
  GuestPlan probe_plan;
  probe_plan.links = plan.links;
  probe_plan.etc_files = plan.etc_files;
  probe_plan.workdir = "/tmp";
  if (!plan.shares.empty() && plan.shares[0].file_bind < 0) probe_plan.shares.push_back(plan.shares[0]);
  Launch l{"kvm", BuildInitramfs(inst, probe_plan, BuildSpec(probe, probe_plan)), &inst, &probe_plan, 256ull << 20};
  int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  Io io{null_fd, null_fd, null_fd};
  RunResult r = VmRun(probe, io, l).Run();
  close(null_fd);
  if (r.reason == Reason::kSignaled && r.exit_code > 128 && r.error.rfind("warden received", 0) == 0) {
    // warden itself was told to stop during the probe: no answer to keep, and no run to start.
    *interrupted = r;
    return {"", ""};
  }
  const std::string accel = r.exit_code == 0 ? "kvm" : "tcg";
  if (geteuid() == 0) mkdir("/run/warden", 0755);
  std::ofstream(CachePath()) << boot << " " << accel << "\n";
  return {accel, accel == "kvm" ? "KVM" : "KVM did not boot the guest (tested once per host boot): running under TCG, much slower"};
}

}  // namespace

RunResult RunMicrovm(const Options& options, const Io& io, NetworkProvider* network) {
  if (options.argv.empty()) return SetupError("no command given");
  if (Status st = Validate(options); !st.ok()) return SetupError(st.message());
  const bool egress = options.net == NetMode::kProxy;
  if (egress && network == nullptr) return SetupError("--net proxy: no egress proxy is available to this caller");
  auto inst = Locate();
  if (!inst.ok()) return SetupError(inst.status().message());
  auto plan = PlanGuest(options);
  if (!plan.ok()) return SetupError(plan.status().message());
  if (!plan->files.empty() && geteuid() == 0) mkdir(kFileStage, 0755);  // the mount point in QEMU's namespace
  std::optional<RunResult> interrupted;
  auto [accel, why] = ChooseAccelerator(*inst, *plan, &interrupted);
  if (interrupted) return *interrupted;
  // Egress: the proxy serves a listener in a private network namespace; the guest reaches it only
  // through its egress ports (microvm_egress.h), as the same 127.0.0.1:PORT native commands use.
  std::unique_ptr<microvm::EgressBridge> bridge;
  if (egress) {
    auto b = microvm::EgressBridge::Create(network);
    if (!b.ok()) return SetupError(b.status().Wrap("set up the VM's network").message());
    bridge = std::move(*b);
    plan->egress_port = network->AllowedTcpPorts()[0];
    plan->egress_env = network->Environment();
  }
  Launch l{accel, BuildInitramfs(*inst, *plan, BuildSpec(options, *plan)), &*inst, &*plan,
           options.memory_bytes ? options.memory_bytes + kKernelRoom : kDefaultVmMemory, bridge.get()};
  RunResult r = VmRun(options, io, l).Run();
  r.notes.push_back("microvm: " + accel + (accel == "kvm" ? "" : " (" + why + ")"));
  if (egress) {
    r.notes.push_back("microvm: egress through warden's proxy only (" + std::to_string(bridge->connections()) +
                      " connections; the guest has no network device)");
    bridge.reset();
    network->Finish(&r);
  }
  return r;
}

}  // namespace warden::sandbox
