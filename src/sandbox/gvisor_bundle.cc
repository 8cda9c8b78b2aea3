#include "sandbox/gvisor_bundle.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <set>

namespace warden::sandbox::gvisor {
namespace {

nlohmann::json BindMount(const std::string& inside, const std::string& host, bool writable) {
  // nosuid/nodev as native; gVisor's own kernel interprets them.
  return {{"destination", inside}, {"type", "bind"}, {"source", host},
          {"options", {"rbind", writable ? "rw" : "ro", "nosuid", "nodev"}}};
}

// Protected paths below each writable directory bind, as read-only binds of themselves (and their
// ancestors below the bind as plain mount points, so they cannot be renamed away), in mount order.
void AddProtectedMounts(const mnt::Plan& plan, nlohmann::json* mounts) {
  std::set<std::string> anchored;
  for (const auto& b : plan.user) {
    if (!b.writable || !b.is_dir) continue;
    for (std::string p : plan.protect) {
      while (!p.empty() && p.back() == '/') p.pop_back();
      const std::string host = b.host + "/" + p;
      struct stat st;
      // Absent: nothing to protect; a symlink anywhere on the way is not followed (as native).
      char real[PATH_MAX];
      if (lstat(host.c_str(), &st) != 0 || realpath(host.c_str(), real) == nullptr || host != real) continue;
      for (size_t pos = p.find('/'); pos != std::string::npos; pos = p.find('/', pos + 1)) {
        std::string ancestor = p.substr(0, pos);
        if (anchored.insert(b.inside + "/" + ancestor).second) {
          mounts->push_back(BindMount(b.inside + "/" + ancestor, b.host + "/" + ancestor, true));
        }
      }
      mounts->push_back(BindMount(b.inside + "/" + p, host, false));
    }
  }
}

Status WriteText(const std::string& path, const std::string& text, mode_t mode) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return Status::FromErrno("write " + path, errno);
  size_t off = 0;
  while (off < text.size()) {
    ssize_t n = write(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      close(fd);
      return Status::FromErrno("write " + path, err);
    }
    off += static_cast<size_t>(n);
  }
  if (close(fd) != 0) return Status::FromErrno("write " + path, errno);
  return Status::Ok();
}

// Creates `inside` (absolute) under `rootfs` as an empty mount point: parents as directories, the
// last component a directory or an empty file. Existing entries are kept.
Status MakeMountPoint(const std::string& rootfs, const std::string& inside, bool is_dir) {
  std::string path = rootfs;
  size_t pos = 1;
  while (pos <= inside.size()) {
    size_t next = inside.find('/', pos);
    if (next == std::string::npos) next = inside.size();
    path += "/" + inside.substr(pos, next - pos);
    const bool last = next == inside.size();
    struct stat st;
    if (lstat(path.c_str(), &st) == 0) {
      if (S_ISLNK(st.st_mode)) return Status::Error("mount point " + inside + " crosses a link of the sandbox's root (" + path + ")");
    } else if (last && !is_dir) {
      WARDEN_RETURN_IF_ERROR(WriteText(path, "", 0644));
    } else if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
      return Status::FromErrno("mkdir " + path, errno);
    }
    pos = next + 1;
  }
  return Status::Ok();
}

bool IsExecutableFile(const std::string& host_path, int* err) {
  struct stat st;
  if (host_path.empty() || stat(host_path.c_str(), &st) != 0) {
    *err = ENOENT;
    return false;
  }
  if (S_ISDIR(st.st_mode) || (st.st_mode & 0111) == 0) {
    *err = EACCES;
    return false;
  }
  return true;
}

}  // namespace

nlohmann::json MakeConfig(const Options& options, const mnt::Plan& plan, const ProcessSpec& process) {
  nlohmann::json rlimits = nlohmann::json::array();
  rlimits.push_back({{"type", "RLIMIT_NOFILE"}, {"hard", options.open_files}, {"soft", options.open_files}});
  if (options.file_size_bytes) {
    rlimits.push_back({{"type", "RLIMIT_FSIZE"}, {"hard", options.file_size_bytes}, {"soft", options.file_size_bytes}});
  }
  rlimits.push_back({{"type", "RLIMIT_CORE"}, {"hard", 0}, {"soft", 0}});
  if (options.pids) {
    // gVisor's kernel counts the command's tasks itself: the only process limit that sees the
    // command's processes rather than the Sentry's host threads. The command is the container's
    // init (PID 1 inside), so the limit is --pids exactly, init included.
    rlimits.push_back({{"type", "RLIMIT_NPROC"}, {"hard", options.pids}, {"soft", options.pids}});
  }

  nlohmann::json mounts = nlohmann::json::array();
  mounts.push_back({{"destination", "/proc"}, {"type", "proc"}, {"source", "proc"}, {"options", {"nosuid", "nodev", "noexec"}}});
  for (const auto& b : plan.system) mounts.push_back(BindMount(b.inside, b.host, false));
  mounts.push_back({{"destination", "/tmp"}, {"type", "tmpfs"}, {"source", "tmpfs"},
                    {"options", {"nosuid", "nodev", "mode=1777", "size=" + std::to_string(plan.tmpfs_bytes)}}});
  for (const auto& b : plan.user) mounts.push_back(BindMount(b.inside, b.host, b.writable));
  AddProtectedMounts(plan, &mounts);

  // With --net proxy runsc gets no network namespace of its own and uses the host network stack
  // (--network=host) of the private namespace warden created for it, which holds only loopback
  // and the egress proxy's sockets (gvisor.cc, docs/backends.md).
  nlohmann::json namespaces = {{{"type", "pid"}}, {{"type", "ipc"}}, {{"type", "uts"}}, {{"type", "mount"}}};
  if (options.net != NetMode::kProxy) namespaces.push_back({{"type", "network"}});

  nlohmann::json config = {
      {"ociVersion", "1.0.2"},
      {"process",
       {{"terminal", false},
        {"user", {{"uid", process.uid}, {"gid", process.gid}}},
        {"args", process.argv},
        {"env", process.env},
        {"cwd", process.workdir},
        // No capabilities in any set: the command is an ordinary user of gVisor's kernel.
        {"capabilities", {{"bounding", nlohmann::json::array()}, {"effective", nlohmann::json::array()},
                          {"inheritable", nlohmann::json::array()}, {"permitted", nlohmann::json::array()},
                          {"ambient", nlohmann::json::array()}}},
        {"rlimits", rlimits},
        {"noNewPrivileges", true}}},
      {"root", {{"path", "rootfs"}, {"readonly", true}}},
      {"hostname", options.hostname},
      {"mounts", mounts},
      {"linux",
       {{"namespaces", namespaces},
        {"maskedPaths", {"/proc/kcore", "/proc/keys", "/proc/timer_list", "/sys/firmware"}},
        {"readonlyPaths", {"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"}}}},
  };
  return config;
}

Status WriteBundle(const std::string& dir, const Options& options, const mnt::Plan& plan, const ProcessSpec& process) {
  const std::string rootfs = dir + "/rootfs";
  if (mkdir(rootfs.c_str(), 0755) != 0) return Status::FromErrno("mkdir " + rootfs, errno);
  for (const char* d : {"etc", "tmp", "home", "run", "var", "var/tmp", "proc", "dev", "sys"}) {
    if (mkdir((rootfs + "/" + d).c_str(), 0755) != 0) return Status::FromErrno("mkdir " + rootfs + "/" + d, errno);
  }
  for (const auto& [path, target] : plan.symlinks) {
    if (symlink(target.c_str(), (rootfs + path).c_str()) != 0) return Status::FromErrno("symlink " + rootfs + path, errno);
  }
  WARDEN_RETURN_IF_ERROR(WriteText(rootfs + "/etc/passwd", plan.passwd, 0644));
  WARDEN_RETURN_IF_ERROR(WriteText(rootfs + "/etc/group", plan.group, 0644));
  WARDEN_RETURN_IF_ERROR(WriteText(rootfs + "/etc/hosts", plan.hosts, 0644));
  WARDEN_RETURN_IF_ERROR(WriteText(rootfs + "/etc/resolv.conf", plan.resolv, 0644));
  WARDEN_RETURN_IF_ERROR(WriteText(rootfs + "/etc/nsswitch.conf", "passwd: files\ngroup: files\nhosts: files dns\n", 0644));
  for (const auto& b : plan.system) WARDEN_RETURN_IF_ERROR(MakeMountPoint(rootfs, b.inside, b.is_dir));
  for (const auto& b : plan.user) WARDEN_RETURN_IF_ERROR(MakeMountPoint(rootfs, b.inside, b.is_dir));
  if (!process.workdir.empty()) {
    // The working directory must exist before runsc starts the command; on the read-only root it
    // is created empty (as native creates it in its tmpfs root).
    std::string host = HostPathFor(plan, process.workdir);
    if (host.empty() && process.workdir.rfind("/tmp", 0) != 0) WARDEN_RETURN_IF_ERROR(MakeMountPoint(rootfs, process.workdir, true));
  }
  std::string text = MakeConfig(options, plan, process).dump(1);
  return WriteText(dir + "/config.json", text, 0600);
}

std::string HostPathFor(const mnt::Plan& plan, const std::string& inside) {
  std::string path = inside;
  // The merged-/usr links: /bin/sh is /usr/bin/sh.
  for (int hops = 0; hops < 8; ++hops) {
    bool changed = false;
    for (const auto& [link, target] : plan.symlinks) {
      if (path == link || path.rfind(link + "/", 0) == 0) {
        std::string dest = target.front() == '/' ? target : link.substr(0, link.rfind('/') + 1) + target;
        path = dest + path.substr(link.size());
        changed = true;
      }
    }
    if (!changed) break;
  }
  const mnt::BindEntry* best = nullptr;
  auto consider = [&](const mnt::BindEntry& b) {
    if (path == b.inside || path.rfind(b.inside + "/", 0) == 0) {
      if (best == nullptr || b.inside.size() >= best->inside.size()) best = &b;
    }
  };
  for (const auto& b : plan.system) consider(b);
  for (const auto& b : plan.user) consider(b);
  if (best == nullptr) return "";
  return best->host + path.substr(best->inside.size());
}

int CheckCommand(const mnt::Plan& plan, const std::string& argv0, const std::string& path_env) {
  int err = ENOENT;
  if (argv0.find('/') != std::string::npos) {
    if (argv0.front() != '/') return 0;  // relative to the workdir: let runsc decide
    return IsExecutableFile(HostPathFor(plan, argv0), &err) ? 0 : err;
  }
  int result = ENOENT;
  size_t start = 0;
  while (start <= path_env.size()) {
    size_t end = path_env.find(':', start);
    if (end == std::string::npos) end = path_env.size();
    std::string dir = path_env.substr(start, end - start);
    if (!dir.empty() && dir.front() == '/') {
      if (IsExecutableFile(HostPathFor(plan, dir + "/" + argv0), &err)) return 0;
      if (err == EACCES) result = EACCES;
    }
    start = end + 1;
  }
  return result;
}

}  // namespace warden::sandbox::gvisor
