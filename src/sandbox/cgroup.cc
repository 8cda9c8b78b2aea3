#include "sandbox/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>
#include <utility>

#include "common/unique_fd.h"

namespace warden::sandbox::cgroup {
namespace {

constexpr std::string_view kNamePrefix = "warden-";
constexpr int kRemoveTimeoutMs = 2000;
constexpr int kKillRounds = 200;  // x kKillRoundSleepNs: about a second
constexpr long kKillRoundSleepNs = 5'000'000;
constexpr const char* kHowToEnable =
    "run warden as root, or delegate a cgroup v2 subtree with the memory and pids controllers "
    "to its user (systemd: Delegate=yes)";

// The <n> of the next `warden-<pid>-<n>`: unique within this process, and the pid makes it unique
// across processes. 0 is reserved for the v2 supervisor leaf.
std::atomic<unsigned> g_next_index{1};

std::string Join(std::string_view dir, std::string_view file) {
  std::string path(dir);
  path += '/';
  path += file;
  return path;
}

std::string CgroupName(pid_t pid, unsigned index) {
  return std::string(kNamePrefix) + std::to_string(pid) + "-" + std::to_string(index);
}

// `warden-<pid>-<n>` with both numbers plain decimal; sets *pid.
bool ParseCgroupName(std::string_view name, pid_t* pid) {
  if (name.substr(0, kNamePrefix.size()) != kNamePrefix) return false;
  name.remove_prefix(kNamePrefix.size());
  const size_t dash = name.find('-');
  if (dash == std::string_view::npos || dash == 0 || dash + 1 == name.size()) return false;
  auto all_digits = [](std::string_view s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (!all_digits(name.substr(0, dash)) || !all_digits(name.substr(dash + 1))) return false;
  int value = 0;
  auto [end, ec] = std::from_chars(name.data(), name.data() + dash, value);
  if (ec != std::errc() || value <= 0) return false;
  *pid = value;
  return true;
}

Result<std::string> ReadFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return Status::FromErrno("open " + path, errno);
  std::string text;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno("read " + path, errno);
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  return text;
}

// cgroupfs takes each value in a single write.
Status WriteFile(const std::string& path, std::string_view value) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd.valid()) return Status::FromErrno("open " + path + " for writing", errno);
  ssize_t n;
  do {
    n = ::write(fd.get(), value.data(), value.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0) return Status::FromErrno("write '" + std::string(value) + "' to " + path, errno);
  return Status::Ok();
}

uint64_t ParseUint(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() ? value : 0;
}

// The value of `key` in a flat-keyed file ("key value" per line), or 0.
uint64_t KeyedValue(std::string_view text, std::string_view key) {
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ' ') {
      return ParseUint(line.substr(key.size() + 1));
    }
  }
  return 0;
}

uint64_t ReadUint(const std::string& path) {
  auto text = ReadFile(path);
  return text.ok() ? ParseUint(*text) : 0;
}

uint64_t ReadKeyed(const std::string& path, std::string_view key) {
  auto text = ReadFile(path);
  return text.ok() ? KeyedValue(*text, key) : 0;
}

std::vector<std::string_view> Split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  while (true) {
    size_t at = text.find(sep);
    parts.push_back(text.substr(0, at));
    if (at == std::string_view::npos) return parts;
    text.remove_prefix(at + 1);
  }
}

bool HasWord(std::string_view text, std::string_view word) {
  for (auto line : Split(text, '\n')) {
    for (auto token : Split(line, ' ')) {
      if (token == word) return true;
    }
  }
  return false;
}

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string UnescapeMountField(std::string_view field) {
  auto octal = [](char c) { return c >= '0' && c <= '7'; };
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() && octal(field[i + 1]) && octal(field[i + 2]) &&
        octal(field[i + 3])) {
      out += static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 +
                               (field[i + 3] - '0'));
      i += 3;
    } else {
      out += field[i];
    }
  }
  return out;
}

struct Mount {
  std::string root;        // the path inside the hierarchy that is mounted
  std::string mountpoint;  // where
};

// The directory of cgroup `path` (as in /proc/self/cgroup) under `mount`, or "" when the mount
// does not show it.
std::string DirUnder(const Mount& mount, std::string_view path) {
  std::string_view rel = path;
  if (mount.root != "/") {
    if (path == mount.root) {
      rel = "";
    } else if (path.size() > mount.root.size() && path.substr(0, mount.root.size()) == mount.root &&
               path[mount.root.size()] == '/') {
      rel = path.substr(mount.root.size());
    } else {
      return "";
    }
  }
  while (!rel.empty() && rel.back() == '/') rel.remove_suffix(1);
  return mount.mountpoint + std::string(rel);
}

std::vector<pid_t> ReadPids(const std::string& procs_file) {
  std::vector<pid_t> pids;
  auto text = ReadFile(procs_file);
  if (!text.ok()) return pids;
  for (auto line : Split(*text, '\n')) {
    int pid = 0;
    auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), pid);
    if (ec == std::errc() && pid > 0) pids.push_back(pid);
  }
  return pids;
}

bool ProcessExists(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

void SleepNs(long ns) {
  timespec ts{0, ns};
  while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

// The controllers of `base` (a v2 cgroup) that sandboxes need and whether a limit requires them.
Status CheckV2Controllers(const std::string& base, const Limits& limits, std::string* to_enable) {
  auto offered = ReadFile(Join(base, "cgroup.controllers"));
  if (!offered.ok()) return offered.status().Wrap("cgroup v2");
  auto enabled = ReadFile(Join(base, "cgroup.subtree_control"));
  if (!enabled.ok()) return enabled.status().Wrap("cgroup v2");
  for (const char* controller : {"memory", "pids"}) {
    const bool needed =
        std::string_view(controller) == "memory" ? limits.memory_bytes != 0 : limits.pids != 0;
    if (!HasWord(*offered, controller)) {
      if (needed) {
        return Status::Error(std::string(controller) + " controller not available in " + base +
                             "/cgroup.controllers: " + kHowToEnable);
      }
      continue;  // accounting only: do without
    }
    if (!HasWord(*enabled, controller)) {
      if (!to_enable->empty()) *to_enable += ' ';
      *to_enable += std::string("+") + controller;
    }
  }
  return Status::Ok();
}

// v2 forbids enabling domain controllers for the children of a cgroup that holds processes
// itself (except at the root). When the only such process is warden, it moves into a leaf of its
// own, as systemd expects of a delegated service; other processes there are not ours to move.
Status MoveSelfIntoLeaf(const std::string& base) {
  const pid_t self = ::getpid();
  for (pid_t pid : ReadPids(Join(base, "cgroup.procs"))) {
    if (pid != self) {
      return Status::Error(
          "cgroup v2: " + base +
          " holds other processes, so its children cannot get the memory and pids controllers "
          "(the 'no internal processes' rule); start warden in a cgroup of its own: " +
          kHowToEnable);
    }
  }
  const std::string leaf = Join(base, CgroupName(self, 0));
  if (::mkdir(leaf.c_str(), 0755) != 0 && errno != EEXIST) {
    return Status::FromErrno("mkdir " + leaf, errno).Wrap("cgroup v2: move warden into a leaf");
  }
  return WriteFile(Join(leaf, "cgroup.procs"), std::to_string(self))
      .Wrap("cgroup v2: move warden into a leaf");
}

Status EnableV2Controllers(const std::string& base, const Limits& limits) {
  std::string to_enable;
  WARDEN_RETURN_IF_ERROR(CheckV2Controllers(base, limits, &to_enable));
  if (to_enable.empty()) return Status::Ok();
  const std::string control = Join(base, "cgroup.subtree_control");
  Status st = WriteFile(control, to_enable);
  if (st.ok() || st.err() != EBUSY) return st.Wrap("cgroup v2: enable controllers");
  WARDEN_RETURN_IF_ERROR(MoveSelfIntoLeaf(base));
  return WriteFile(control, to_enable).Wrap("cgroup v2: enable controllers");
}

// Prefixes a permission failure with how to get the permission.
Status WithHint(Status st, std::string_view controller) {
  if (st.ok()) return st;
  if (st.err() == EACCES || st.err() == EPERM || st.err() == EROFS) {
    return st.Wrap(std::string(controller) + " controller not writable (" + kHowToEnable + ")");
  }
  return st.Wrap(std::string(controller) + " controller");
}

Status ApplyV2Limits(const std::string& dir, const Limits& limits) {
  if (limits.memory_bytes != 0) {
    WARDEN_RETURN_IF_ERROR(WithHint(
        WriteFile(Join(dir, "memory.max"), std::to_string(limits.memory_bytes)), "memory"));
    // Absent without swap support; then there is no swap to dodge the limit through.
    Status swap = WriteFile(Join(dir, "memory.swap.max"), "0");
    if (!swap.ok() && swap.err() != ENOENT) return WithHint(swap, "memory");
  }
  if (limits.pids != 0) {
    WARDEN_RETURN_IF_ERROR(
        WithHint(WriteFile(Join(dir, "pids.max"), std::to_string(limits.pids)), "pids"));
  }
  return Status::Ok();
}

Status ApplyV1MemoryLimit(const std::string& dir, uint64_t bytes) {
  // A new v1 memcg inherits oom_kill_disable from its parent; a sandbox must be killed, not hang.
  WARDEN_RETURN_IF_ERROR(WithHint(WriteFile(Join(dir, "memory.oom_control"), "0"), "memory"));
  if (bytes == 0) return Status::Ok();
  const std::string value = std::to_string(bytes);
  WARDEN_RETURN_IF_ERROR(WithHint(WriteFile(Join(dir, "memory.limit_in_bytes"), value), "memory"));
  // memsw limits memory + swap, so setting it equal to the limit leaves no swap to use. Without
  // swap accounting the file is absent; then swappiness 0 keeps the cgroup's pages out of swap.
  Status memsw = WriteFile(Join(dir, "memory.memsw.limit_in_bytes"), value);
  if (memsw.ok()) return memsw;
  if (memsw.err() != ENOENT) return WithHint(memsw, "memory");
  Status swappiness = WriteFile(Join(dir, "memory.swappiness"), "0");
  if (!swappiness.ok() && swappiness.err() != ENOENT) return WithHint(swappiness, "memory");
  return Status::Ok();
}

}  // namespace

Layout ParseLayout(std::string_view mountinfo, std::string_view proc_self_cgroup, pid_t self_pid) {
  std::optional<Mount> unified_mount;
  std::optional<Mount> v1_mounts[3];  // memory, pids, cpuacct
  constexpr std::string_view kV1Names[3] = {"memory", "pids", "cpuacct"};

  for (auto line : Split(mountinfo, '\n')) {
    // id parent major:minor root mountpoint options [optional...] - fstype source superoptions
    auto fields = Split(line, ' ');
    auto sep = std::find(fields.begin(), fields.end(), std::string_view("-"));
    if (fields.size() < 5 || sep == fields.end() || fields.end() - sep < 4) continue;
    Mount mount{UnescapeMountField(fields[3]), UnescapeMountField(fields[4])};
    const std::string_view fstype = sep[1];
    if (fstype == "cgroup2") {
      if (!unified_mount) unified_mount = mount;
    } else if (fstype == "cgroup") {
      for (auto option : Split(sep[3], ',')) {
        for (int i = 0; i < 3; ++i) {
          if (option == kV1Names[i] && !v1_mounts[i]) v1_mounts[i] = mount;
        }
      }
    }
  }

  Layout layout;
  std::string* v1_dirs[3] = {&layout.memory, &layout.pids, &layout.cpuacct};
  for (auto line : Split(proc_self_cgroup, '\n')) {
    // hierarchy-id:controller-list:path
    const size_t first = line.find(':');
    const size_t second = first == std::string_view::npos ? first : line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    const std::string_view id = line.substr(0, first);
    const std::string_view controllers = line.substr(first + 1, second - first - 1);
    const std::string_view path = line.substr(second + 1);
    if (id == "0" && controllers.empty()) {
      if (unified_mount) layout.unified = DirUnder(*unified_mount, path);
      continue;
    }
    for (auto controller : Split(controllers, ',')) {
      for (int i = 0; i < 3; ++i) {
        if (controller == kV1Names[i] && v1_mounts[i]) *v1_dirs[i] = DirUnder(*v1_mounts[i], path);
      }
    }
  }

  // Once warden has moved itself into its supervisor leaf, sandboxes go next to that leaf.
  const std::string leaf = "/" + CgroupName(self_pid, 0);
  if (layout.unified.size() > leaf.size() &&
      layout.unified.compare(layout.unified.size() - leaf.size(), leaf.size(), leaf) == 0) {
    layout.unified.resize(layout.unified.size() - leaf.size());
  }
  return layout;
}

Result<Layout> DetectLayout() {
  auto mountinfo = ReadFile("/proc/self/mountinfo");
  if (!mountinfo.ok()) return mountinfo.status().Wrap("cgroup: find mounts");
  auto own = ReadFile("/proc/self/cgroup");
  if (!own.ok()) return own.status().Wrap("cgroup: find own cgroup");
  Layout found = ParseLayout(*mountinfo, *own, ::getpid());

  std::string v2_problem = "cgroup v2: not mounted";
  if (!found.unified.empty()) {
    auto offered = ReadFile(Join(found.unified, "cgroup.controllers"));
    if (!offered.ok()) {
      v2_problem = "cgroup v2: " + offered.status().message();
    } else if (!HasWord(*offered, "memory") || !HasWord(*offered, "pids")) {
      v2_problem = "cgroup v2 at " + found.unified +
                   ": memory and pids controllers not delegated to it (cgroup.controllers: '" +
                   std::string(Split(*offered, '\n')[0]) + "')";
    } else if (::access(found.unified.c_str(), W_OK) != 0) {
      v2_problem =
          "cgroup v2: " + Status::FromErrno(found.unified + " not writable", errno).message();
    } else {
      return Layout{.v2 = true, .unified = found.unified};
    }
  }

  std::string v1_missing;
  if (found.memory.empty()) v1_missing += " memory";
  if (found.pids.empty()) v1_missing += " pids";
  if (found.cpuacct.empty()) v1_missing += " cpuacct";
  if (v1_missing.empty()) {
    return Layout{.memory = found.memory, .pids = found.pids, .cpuacct = found.cpuacct};
  }
  return Status::Error("no usable cgroups: " + v2_problem + "; cgroup v1: controller(s)" +
                       v1_missing + " not mounted; " + kHowToEnable);
}

Result<Cgroup> Cgroup::CreateFromParent(const Limits& limits) {
  auto layout = DetectLayout();
  if (!layout.ok()) return layout.status();
  return CreateIn(*layout, limits);
}

Result<Cgroup> Cgroup::CreateIn(const Layout& layout, const Limits& limits) {
  Cgroup cg;
  cg.v2_ = layout.v2;
  std::vector<std::pair<const std::string*, std::string*>> dirs;  // parent -> our member
  if (layout.v2) {
    if (layout.unified.empty()) return Status::Error("cgroup v2: no cgroup directory given");
    WARDEN_RETURN_IF_ERROR(EnableV2Controllers(layout.unified, limits));
    dirs = {{&layout.unified, &cg.unified_}};
  } else {
    if (limits.memory_bytes != 0 && layout.memory.empty()) {
      return Status::Error("memory controller not mounted: " + std::string(kHowToEnable));
    }
    if (limits.pids != 0 && layout.pids.empty()) {
      return Status::Error("pids controller not mounted: " + std::string(kHowToEnable));
    }
    for (auto [parent, member] :
         {std::pair{&layout.memory, &cg.memory_}, std::pair{&layout.pids, &cg.pids_},
          std::pair{&layout.cpuacct, &cg.cpuacct_}}) {
      if (!parent->empty()) dirs.emplace_back(parent, member);
    }
  }
  if (dirs.empty()) return Status::Error("cgroup: no hierarchy to create the sandbox cgroup in");

  // The same name in every hierarchy. EEXIST means a dead warden with our pid left one behind.
  for (int attempt = 0;; ++attempt) {
    const std::string name = CgroupName(::getpid(), g_next_index.fetch_add(1));
    Status made;
    for (auto [parent, member] : dirs) {
      std::string dir = Join(*parent, name);
      if (::mkdir(dir.c_str(), 0755) != 0) {
        made = WithHint(Status::FromErrno("mkdir " + dir, errno), "cgroup");
        break;
      }
      *member = std::move(dir);
    }
    if (made.ok()) break;
    cg.Destroy();
    if (made.err() != EEXIST || attempt == 16) return made;
  }

  if (layout.v2) {
    WARDEN_RETURN_IF_ERROR(ApplyV2Limits(cg.unified_, limits));
  } else {
    if (!cg.memory_.empty()) {
      WARDEN_RETURN_IF_ERROR(ApplyV1MemoryLimit(cg.memory_, limits.memory_bytes));
    }
    if (limits.pids != 0) {
      WARDEN_RETURN_IF_ERROR(
          WithHint(WriteFile(Join(cg.pids_, "pids.max"), std::to_string(limits.pids)), "pids"));
    }
  }
  return cg;
}

Cgroup::Cgroup(Cgroup&& other) noexcept
    : v2_(other.v2_),
      unified_(std::exchange(other.unified_, {})),
      memory_(std::exchange(other.memory_, {})),
      pids_(std::exchange(other.pids_, {})),
      cpuacct_(std::exchange(other.cpuacct_, {})) {}

Cgroup& Cgroup::operator=(Cgroup&& other) noexcept {
  if (this != &other) {
    Destroy();
    v2_ = other.v2_;
    unified_ = std::exchange(other.unified_, {});
    memory_ = std::exchange(other.memory_, {});
    pids_ = std::exchange(other.pids_, {});
    cpuacct_ = std::exchange(other.cpuacct_, {});
  }
  return *this;
}

Cgroup::~Cgroup() { Destroy(); }

void Cgroup::Destroy() {
  const std::vector<std::string> dirs = paths();
  if (dirs.empty()) return;
  (void)KillAll();  // best effort: RemoveWhenEmpty below waits for the stragglers
  std::vector<const char*> c_paths;
  for (const auto& dir : dirs) c_paths.push_back(dir.c_str());
  RemoveWhenEmpty(c_paths.data(), static_cast<int>(c_paths.size()), kRemoveTimeoutMs);
  unified_.clear();
  memory_.clear();
  pids_.clear();
  cpuacct_.clear();
}

std::vector<std::string> Cgroup::paths() const {
  std::vector<std::string> out;
  for (const std::string* dir : {&unified_, &memory_, &pids_, &cpuacct_}) {
    if (!dir->empty()) out.push_back(*dir);
  }
  return out;
}

std::vector<std::string> Cgroup::ProcsFiles() const {
  std::vector<std::string> files;
  for (const auto& dir : paths()) files.push_back(Join(dir, "cgroup.procs"));
  return files;
}

Status Cgroup::AddProcessFromParent(pid_t pid) {
  const std::string value = std::to_string(pid);
  for (const auto& file : ProcsFiles()) {
    WARDEN_RETURN_IF_ERROR(WriteFile(file, value).Wrap("cgroup: add process " + value));
  }
  return Status::Ok();
}

Usage Cgroup::ReadUsage() const {
  Usage usage;
  if (v2_) {
    usage.peak_memory_bytes = ReadUint(Join(unified_, "memory.peak"));
    usage.oom_killed = ReadKeyed(Join(unified_, "memory.events"), "oom_kill") > 0;
    usage.cpu_ns = ReadKeyed(Join(unified_, "cpu.stat"), "usage_usec") * 1000;
    usage.pids_limit_hit = ReadKeyed(Join(unified_, "pids.events"), "max") > 0;
    return usage;
  }
  if (!memory_.empty()) {
    usage.peak_memory_bytes = ReadUint(Join(memory_, "memory.max_usage_in_bytes"));
    usage.oom_killed = ReadKeyed(Join(memory_, "memory.oom_control"), "oom_kill") > 0;
  }
  if (!cpuacct_.empty()) usage.cpu_ns = ReadUint(Join(cpuacct_, "cpuacct.usage"));
  if (!pids_.empty()) usage.pids_limit_hit = ReadKeyed(Join(pids_, "pids.events"), "max") > 0;
  return usage;
}

Status Cgroup::KillAll() {
  const std::vector<std::string> procs_files = ProcsFiles();
  if (procs_files.empty()) return Status::Ok();
  auto members = [&procs_files] {
    std::vector<pid_t> pids;
    for (const auto& file : procs_files) {
      for (pid_t pid : ReadPids(file)) pids.push_back(pid);
    }
    std::sort(pids.begin(), pids.end());
    pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
    return pids;
  };
  // cgroup.kill (5.14+) kills the whole tree atomically, forks in flight included; the loop
  // below then only waits. Without it, the loop kills round by round until nothing is left.
  if (v2_) (void)WriteFile(Join(unified_, "cgroup.kill"), "1");

  std::vector<pid_t> pids;
  for (int round = 0; round < kKillRounds; ++round) {
    pids = members();
    if (pids.empty()) return Status::Ok();
    // A pid read from cgroup.procs may be recycled before we signal it. A pidfd pins the
    // process; if its pid is still listed afterwards, the pinned process is the member (a pid
    // cannot be reused while its process is still listed).
    std::vector<std::pair<pid_t, UniqueFd>> pinned;
    for (pid_t pid : pids) {
      UniqueFd fd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
      if (!fd.valid() && errno == ENOSYS) {
        ::kill(pid, SIGKILL);  // kernel before 5.3: accept the small race
        continue;
      }
      if (fd.valid()) pinned.emplace_back(pid, std::move(fd));
    }
    const std::vector<pid_t> still = members();
    for (auto& [pid, fd] : pinned) {
      if (std::binary_search(still.begin(), still.end(), pid)) {
        ::syscall(SYS_pidfd_send_signal, fd.get(), SIGKILL, nullptr, 0);
      }
    }
    SleepNs(kKillRoundSleepNs);
  }
  return Status::Error("cgroup: " + std::to_string(pids.size()) + " process(es) still in " +
                       paths().front() + " after SIGKILL");
}

Status Available() {
  auto layout = DetectLayout();
  if (!layout.ok()) return layout.status();
  for (const std::string* dir :
       {&layout->unified, &layout->memory, &layout->pids, &layout->cpuacct}) {
    if (!dir->empty() && ::access(dir->c_str(), W_OK) != 0) {
      return Status::FromErrno("cgroup directory " + *dir + " not writable", errno)
          .Wrap(std::string("cgroups unavailable (") + kHowToEnable + ")");
    }
  }
  return Status::Ok();
}

int SweepStale() {
  auto layout = DetectLayout();
  if (!layout.ok()) return 0;
  int removed = 0;
  for (const std::string* base :
       {&layout->unified, &layout->memory, &layout->pids, &layout->cpuacct}) {
    if (base->empty()) continue;
    DIR* dir = ::opendir(base->c_str());
    if (dir == nullptr) continue;
    std::vector<std::string> stale;
    while (dirent* entry = ::readdir(dir)) {
      pid_t pid = 0;
      if (entry->d_type == DT_DIR && ParseCgroupName(entry->d_name, &pid) && !ProcessExists(pid)) {
        stale.push_back(Join(*base, entry->d_name));
      }
    }
    ::closedir(dir);
    for (const auto& path : stale) {
      if (::rmdir(path.c_str()) == 0) ++removed;  // EBUSY: still has processes; leave it
    }
  }
  return removed;
}

void RemoveWhenEmpty(const char* const* paths, int count, int timeout_ms) {
  constexpr int kChunk = 64;
  constexpr long kPollNs = 10'000'000;
  timespec start{};
  ::clock_gettime(CLOCK_MONOTONIC, &start);
  auto elapsed_ms = [&start] {
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1'000'000;
  };
  for (int first = 0; first < count; first += kChunk) {
    const int n = std::min(kChunk, count - first);
    bool done[kChunk];
    for (int i = 0; i < n; ++i) done[i] = false;
    int left = n;
    while (left > 0) {
      for (int i = 0; i < n; ++i) {
        if (done[i]) continue;
        const char* path = paths[first + i];
        // Anything but EBUSY (still populated) is final: removed, gone, or not ours to remove.
        if (path == nullptr || ::rmdir(path) == 0 || (errno != EBUSY && errno != EINTR)) {
          done[i] = true;
          --left;
        }
      }
      if (left == 0) break;
      if (elapsed_ms() >= timeout_ms) return;
      timespec pause{0, kPollNs};
      ::nanosleep(&pause, nullptr);
    }
  }
}

}  // namespace warden::sandbox::cgroup
