#include "sandbox/mnt.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <set>

#include "common/unique_fd.h"

namespace warden::sandbox::mnt {
namespace {

constexpr uint64_t kNoFollow = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;

int OpenAt2(int dirfd, const std::string& path, int flags, uint64_t resolve, mode_t mode = 0) {
  struct open_how how = {};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
  how.mode = mode;
  how.resolve = resolve;
  return static_cast<int>(syscall(SYS_openat2, dirfd, path.c_str(), &how, sizeof(how)));
}

// Path relative to the new root ("/usr/bin" -> "usr/bin"; "/" -> ".").
std::string Rel(const std::string& inside) {
  size_t i = inside.find_first_not_of('/');
  return i == std::string::npos ? "." : inside.substr(i);
}

// A fresh filesystem (tmpfs, proc) as a detached mount.
Result<UniqueFd> NewFs(const char* type, const std::vector<std::pair<std::string, std::string>>& params,
                       unsigned attrs) {
  UniqueFd fs(fsopen(type, FSOPEN_CLOEXEC));
  if (!fs.valid()) return Status::FromErrno(std::string("fsopen ") + type, errno);
  for (const auto& [k, v] : params) {
    if (fsconfig(fs.get(), FSCONFIG_SET_STRING, k.c_str(), v.c_str(), 0) != 0) {
      return Status::FromErrno(std::string("fsconfig ") + type + " " + k + "=" + v, errno);
    }
  }
  if (fsconfig(fs.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0) {
    return Status::FromErrno(std::string("create ") + type, errno);
  }
  UniqueFd mnt(fsmount(fs.get(), FSMOUNT_CLOEXEC, attrs));
  if (!mnt.valid()) return Status::FromErrno(std::string("fsmount ") + type, errno);
  return mnt;
}

Status Attach(int mountfd, int targetfd, const std::string& what) {
  if (move_mount(mountfd, "", targetfd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0) {
    return Status::FromErrno("attach mount at " + what, errno);
  }
  return Status::Ok();
}

// Clones the mount tree at `srcfd` (recursively), sets `attrs` on every mount of the clone, and
// attaches it on `targetfd`. Binding by descriptor: no path is resolved again.
Status BindFd(int srcfd, int targetfd, uint64_t attrs, const std::string& what) {
  UniqueFd tree(open_tree(srcfd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE));
  if (!tree.valid()) return Status::FromErrno("clone mount for " + what, errno);
  if (attrs != 0) {
    struct mount_attr attr = {};
    attr.attr_set = attrs;
    if (mount_setattr(tree.get(), "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) != 0) {
      return Status::FromErrno("set mount flags for " + what, errno);
    }
  }
  return Attach(tree.get(), targetfd, what);
}

// Creates the directories of `inside` under `rootfd` and the last component as a directory or an
// empty file, one component at a time: each is opened relative to its parent's descriptor with
// RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, and a missing one is made with mkdirat (or an O_EXCL
// create) on that descriptor, then opened the same way. No path is walked from the root twice, so
// a symlink anywhere on the way (one an earlier run planted in its --rw workspace) is refused
// before anything is created through it: before pivot_root an absolute link points into the host.
// Returns an O_PATH descriptor of the last component.
Result<UniqueFd> MakeMountPoint(int rootfd, const std::string& inside, bool is_dir) {
  std::vector<std::string> comps;
  const std::string rel = Rel(inside);
  for (size_t start = 0; start <= rel.size();) {
    size_t slash = rel.find('/', start);
    std::string comp = rel.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    start = slash == std::string::npos ? rel.size() + 1 : slash + 1;
    if (comp == "..") return Status::Error("mount point " + inside + ": '..' is not allowed");
    if (!comp.empty() && comp != ".") comps.push_back(std::move(comp));
  }
  UniqueFd here(OpenAt2(rootfd, ".", O_PATH | O_DIRECTORY, RESOLVE_BENEATH | kNoFollow));
  if (!here.valid()) return Status::FromErrno("open the new root", errno);
  std::string partial;
  for (size_t i = 0; i < comps.size(); ++i) {
    const std::string& comp = comps[i];
    const bool dir = i + 1 < comps.size() || is_dir;
    partial += "/" + comp;
    const int flags = O_PATH | (dir ? O_DIRECTORY : 0);
    int fd = OpenAt2(here.get(), comp, flags, RESOLVE_BENEATH | kNoFollow);
    if (fd < 0 && errno == ENOENT) {
      if (dir) {
        if (mkdirat(here.get(), comp.c_str(), 0755) != 0 && errno != EEXIST) {
          return Status::FromErrno("create mount point " + partial, errno);
        }
      } else {
        int created = OpenAt2(here.get(), comp, O_CREAT | O_EXCL | O_WRONLY, RESOLVE_BENEATH | kNoFollow, 0644);
        if (created < 0 && errno != EEXIST) return Status::FromErrno("create mount point " + partial, errno);
        if (created >= 0) close(created);
      }
      fd = OpenAt2(here.get(), comp, flags, RESOLVE_BENEATH | kNoFollow);
    }
    if (fd < 0) {
      if (errno == ELOOP) {
        return Status::Error("mount point " + inside + ": " + partial +
                             " is a symbolic link inside the sandbox (nothing is created through one): use the real path");
      }
      return Status::FromErrno("open mount point " + partial + (partial == inside ? "" : " (for " + inside + ")"), errno);
    }
    here.reset(fd);
  }
  return here;
}

Status WriteFile(int rootfd, const std::string& inside, const std::string& content, mode_t mode) {
  int fd = OpenAt2(rootfd, Rel(inside), O_CREAT | O_WRONLY | O_TRUNC, RESOLVE_BENEATH | kNoFollow);
  if (fd < 0) return Status::FromErrno("write " + inside, errno);
  UniqueFd owned(fd);
  const char* p = content.data();
  size_t left = content.size();
  while (left > 0) {
    ssize_t n = write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("write " + inside, errno);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (fchmod(fd, mode) != 0) return Status::FromErrno("chmod " + inside, errno);
  return Status::Ok();
}

// Opens a bind source (O_PATH, no symlink followed anywhere in the path) and checks it is the very
// object the path resolved to when the plan was made: the parent for every source, the child for
// a source the parent could not clone (BindEntry::tree). No O_NOFOLLOW: with O_PATH it would make
// openat2 return the link itself instead of refusing it.
Result<UniqueFd> OpenSource(const BindEntry& b) {
  int fd = OpenAt2(AT_FDCWD, b.host, O_PATH, kNoFollow);
  if (fd < 0) {
    if (errno == ELOOP) return Status::Error("bind source " + b.host + " changed into a symbolic link after it was checked");
    return Status::FromErrno("open bind source " + b.host, errno);
  }
  UniqueFd owned(fd);
  struct stat st;
  if (fstat(fd, &st) != 0) return Status::FromErrno("stat bind source " + b.host, errno);
  if ((b.dev != 0 || b.ino != 0) && (st.st_dev != b.dev || st.st_ino != b.ino)) {
    return Status::Error("bind source " + b.host + " was replaced after it was checked");
  }
  if (S_ISDIR(st.st_mode) != b.is_dir) return Status::Error("bind source " + b.host + " changed type after it was checked");
  return owned;
}

uint64_t BindAttrs(const BindEntry& b) {
  return MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (b.writable ? 0 : MOUNT_ATTR_RDONLY);
}

// `sources[i]`: the child's own descriptor of entry i's source, for an entry without a tree.
Status BindEntries(int rootfd, const std::vector<BindEntry>& entries, const std::vector<UniqueFd>& sources) {
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& b = entries[i];
    auto target = MakeMountPoint(rootfd, b.inside, b.is_dir);
    if (!target) return target.status();
    if (b.tree) {
      // The parent's clone, flags already set: attached as it is.
      if (!b.tree->valid()) return Status::Error("the mount of " + b.host + " was closed before the sandbox was built");
      WARDEN_RETURN_IF_ERROR(Attach(b.tree->get(), target->get(), b.inside));
    } else {
      WARDEN_RETURN_IF_ERROR(BindFd(sources[i].get(), target->get(), BindAttrs(b), b.inside));
    }
  }
  return Status::Ok();
}

// Makes `rel` (relative to the root) a mount point of itself, optionally read-only. A mount
// point cannot be renamed, unlinked or replaced from inside, which is what protection needs.
Status SelfBind(int rootfd, const std::string& rel, bool readonly) {
  int fd = OpenAt2(rootfd, rel, O_PATH, RESOLVE_BENEATH | kNoFollow);
  if (fd < 0) return Status::FromErrno("open /" + rel, errno);
  UniqueFd src(fd);
  uint64_t attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (readonly ? MOUNT_ATTR_RDONLY : 0);
  return BindFd(src.get(), src.get(), attrs, "/" + rel);
}

// Protected paths: every existing `protect` path below each writable bind becomes a read-only
// mount of itself; its ancestors below the bind become mount points too, so that renaming
// `.git` away and recreating it is refused (EBUSY).
Status ProtectPaths(int rootfd, const Plan& plan, std::vector<std::string>* notes) {
  std::set<std::string> anchored;
  for (const auto& b : plan.user) {
    if (!b.writable || !b.is_dir) continue;
    for (const auto& p : plan.protect) {
      std::string rel = Rel(b.inside) + "/" + p;
      while (!rel.empty() && rel.back() == '/') rel.pop_back();
      int fd = OpenAt2(rootfd, rel, O_PATH, RESOLVE_BENEATH | kNoFollow);
      if (fd < 0) {
        if (errno == ENOENT) continue;  // absent: nothing to protect (see docs/sandbox.md)
        if (errno == ELOOP) {
          notes->push_back("protected path " + b.inside + "/" + p + " is or crosses a symbolic link: not protected");
          continue;
        }
        return Status::FromErrno("open protected path " + b.inside + "/" + p, errno);
      }
      close(fd);
      std::string base = Rel(b.inside);
      for (size_t pos = rel.find('/', base.size() + 1); pos != std::string::npos; pos = rel.find('/', pos + 1)) {
        std::string ancestor = rel.substr(0, pos);
        if (anchored.insert(ancestor).second) WARDEN_RETURN_IF_ERROR(SelfBind(rootfd, ancestor, false));
      }
      WARDEN_RETURN_IF_ERROR(SelfBind(rootfd, rel, true));
    }
  }
  return Status::Ok();
}

Status BuildDev(int rootfd, const Plan& plan) {
  auto target = MakeMountPoint(rootfd, "/dev", true);
  if (!target) return target.status();
  auto dev = NewFs("tmpfs", {{"size", "64k"}, {"mode", "0755"}, {"nr_inodes", "64"}},
                   MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
  if (!dev) return dev.status();
  const char* nodes[] = {"null", "zero", "full", "random", "urandom"};
  for (const char* node : nodes) {
    std::string host = std::string("/dev/") + node;
    int src = OpenAt2(AT_FDCWD, host, O_PATH, kNoFollow);
    if (src < 0) return Status::FromErrno("open " + host, errno);
    UniqueFd s(src);
    int fd = openat(dev->get(), node, O_CREAT | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd < 0) return Status::FromErrno("create /dev/" + std::string(node), errno);
    close(fd);
    int t = OpenAt2(dev->get(), node, O_PATH, RESOLVE_BENEATH | kNoFollow);
    if (t < 0) return Status::FromErrno("open /dev/" + std::string(node), errno);
    UniqueFd tf(t);
    WARDEN_RETURN_IF_ERROR(BindFd(s.get(), tf.get(), MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, host));
  }
  const std::pair<const char*, const char*> links[] = {
      {"fd", "/proc/self/fd"}, {"stdin", "/proc/self/fd/0"}, {"stdout", "/proc/self/fd/1"},
      {"stderr", "/proc/self/fd/2"}};
  for (const auto& [name, to] : links) {
    if (symlinkat(to, dev->get(), name) != 0) return Status::FromErrno(std::string("symlink /dev/") + name, errno);
  }
  if (mkdirat(dev->get(), "shm", 0755) != 0) return Status::FromErrno("mkdir /dev/shm", errno);
  if (mkdirat(dev->get(), "pts", 0755) != 0) return Status::FromErrno("mkdir /dev/pts", errno);
  WARDEN_RETURN_IF_ERROR(Attach(dev->get(), target->get(), "/dev"));
  // /dev/shm shares /tmp's budget in spirit: its own small tmpfs, same size limit.
  auto shm_target = MakeMountPoint(rootfd, "/dev/shm", true);
  if (!shm_target) return shm_target.status();
  auto shm = NewFs("tmpfs", {{"size", std::to_string(plan.tmpfs_bytes)}, {"mode", "1777"}},
                   MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
  if (!shm) return shm.status();
  WARDEN_RETURN_IF_ERROR(Attach(shm->get(), shm_target->get(), "/dev/shm"));
  // The /dev tmpfs itself is read-only once populated.
  struct mount_attr ro = {};
  ro.attr_set = MOUNT_ATTR_RDONLY;
  if (mount_setattr(rootfd, "dev", 0, &ro, sizeof(ro)) != 0) return Status::FromErrno("make /dev read-only", errno);
  return Status::Ok();
}

Status BuildProc(int rootfd) {
  auto target = MakeMountPoint(rootfd, "/proc", true);
  if (!target) return target.status();
  auto proc = NewFs("proc", {}, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
  if (!proc) {
    return proc.status().Wrap("mount a fresh /proc (the host's /proc must not have paths masked by over-mounts, as some container runtimes do)");
  }
  WARDEN_RETURN_IF_ERROR(Attach(proc->get(), target->get(), "/proc"));
  // Kernel tunables and triggers stay read-only even where permissions would allow a write.
  for (const char* p : {"proc/sys", "proc/sysrq-trigger", "proc/irq", "proc/bus"}) {
    int fd = OpenAt2(rootfd, p, O_PATH, RESOLVE_BENEATH | kNoFollow);
    if (fd < 0) continue;
    UniqueFd f(fd);
    WARDEN_RETURN_IF_ERROR(BindFd(f.get(), f.get(), MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, std::string("/") + p));
  }
  return Status::Ok();
}

Status PivotInto(int rootfd) {
  if (fchdir(rootfd) != 0) return Status::FromErrno("enter new root", errno);
  if (syscall(SYS_pivot_root, ".", ".") != 0) return Status::FromErrno("pivot_root", errno);
  if (umount2(".", MNT_DETACH) != 0) return Status::FromErrno("detach the host's root", errno);
  if (chdir("/") != 0) return Status::FromErrno("chdir /", errno);
  return Status::Ok();
}

Result<BindEntry> Resolve(const std::string& given, const std::string& inside, bool writable, const char* flag) {
  char buf[PATH_MAX];
  if (realpath(given.c_str(), buf) == nullptr) {
    int err = errno;
    if (err == ENOENT) return Status::Error(std::string(flag) + " " + given + ": no such file or directory on the host: create it or fix the path");
    return Status::FromErrno(std::string(flag) + " " + given, err);
  }
  struct stat st;
  if (stat(buf, &st) != 0) return Status::FromErrno(std::string(flag) + " " + given, errno);
  if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
    return Status::Error(std::string(flag) + " " + given + ": only directories and regular files can be bound");
  }
  BindEntry b;
  b.host = buf;
  b.inside = NormalInsidePath(inside.empty() ? b.host : inside);
  b.writable = writable;
  b.is_dir = S_ISDIR(st.st_mode);
  b.dev = st.st_dev;
  b.ino = st.st_ino;
  return b;
}

// Moves `fd` above the standard streams: a warden started with one of them closed would get it as
// 0, 1 or 2, which a clone replaces with its own stdio (the pool's, the command's).
int AboveStdio(int fd) {
  if (fd < 0 || fd > 2) return fd;
  int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  int err = errno;
  close(fd);
  errno = err;
  return moved;
}

// Parent side: opens `b`'s source with the parent's own access to its path and clones its mount
// tree for the child (BindEntry::tree). The clone is made private, so that nothing mounted on or
// under it in the sandbox propagates to the host's peers of the source's mount (a clone of a
// shared mount would join its peer group), and gets the bind's flags. Without the privilege to
// clone mounts (EPERM: an ordinary user) the entry keeps no tree and the child opens the path.
Status OpenSourceFromParent(BindEntry* b, const std::string& what) {
  auto src = OpenSource(*b);
  if (!src) return src.status().Wrap(what);
  int fd = open_tree(src->get(), "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
  if (fd < 0) {
    if (errno == EPERM) return Status::Ok();
    return Status::FromErrno(what + ": clone the mount of " + b->host, errno);
  }
  auto tree = std::make_shared<UniqueFd>(AboveStdio(fd));
  if (!tree->valid()) return Status::FromErrno(what + ": keep the mount of " + b->host, errno);
  struct mount_attr attr = {};
  attr.attr_set = BindAttrs(*b);
  attr.propagation = MS_PRIVATE;
  if (mount_setattr(tree->get(), "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) != 0) {
    return Status::FromErrno(what + ": set mount flags for " + b->host, errno);
  }
  b->tree = std::move(tree);
  return Status::Ok();
}

}  // namespace

std::vector<int> Plan::Descriptors() const {
  std::vector<int> fds;
  for (const auto* entries : {&system, &user}) {
    for (const auto& b : *entries) {
      if (b.tree && b.tree->valid()) fds.push_back(b.tree->get());
    }
  }
  return fds;
}

void Plan::CloseDescriptors() const {
  for (const auto* entries : {&system, &user}) {
    for (const auto& b : *entries) {
      if (b.tree) b.tree->reset();
    }
  }
}

Result<Plan> PlanFromParent(const Options& options, uid_t inside_uid, gid_t inside_gid) {
  Plan plan;
  plan.tmpfs_bytes = options.tmpfs_bytes;
  plan.protect = options.protect;
  // System directories: merged-/usr links are recreated as links, real directories bound.
  for (const char* dir : {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}) {
    struct stat st;
    if (lstat(dir, &st) != 0) continue;
    if (S_ISLNK(st.st_mode)) {
      char target[PATH_MAX];
      ssize_t n = readlink(dir, target, sizeof(target) - 1);
      if (n <= 0) continue;
      target[n] = '\0';
      plan.symlinks.emplace_back(dir, target);
    } else if (S_ISDIR(st.st_mode)) {
      plan.system.push_back({dir, dir, false, true, st.st_dev, st.st_ino});
    }
  }
  // The only host files in /etc: the loader cache, CA certificates, OpenSSL's config and the
  // alternatives links (commands like awk resolve through them). None holds a secret.
  for (const char* path : {"/etc/ld.so.cache", "/etc/ssl/certs", "/etc/ssl/openssl.cnf", "/etc/alternatives"}) {
    struct stat st;
    if (stat(path, &st) != 0) continue;
    char real[PATH_MAX];
    if (realpath(path, real) == nullptr) continue;
    plan.system.push_back({real, path, false, S_ISDIR(st.st_mode), st.st_dev, st.st_ino});
  }
  for (const auto& b : options.binds) {
    auto entry = Resolve(b.host, b.inside, b.writable, b.writable ? "--rw" : "--ro");
    if (!entry) return entry.status();
    plan.user.push_back(*entry);
  }
  std::stable_sort(plan.user.begin(), plan.user.end(),
                   [](const BindEntry& a, const BindEntry& b) { return a.inside < b.inside; });
  // Every source is opened here, as whoever runs warden (root reaches through directories the
  // sandbox user cannot search): inside, only the bound files' own permissions count.
  for (auto& b : plan.system) WARDEN_RETURN_IF_ERROR(OpenSourceFromParent(&b, "system directory " + b.inside));
  for (auto& b : plan.user) {
    WARDEN_RETURN_IF_ERROR(OpenSourceFromParent(&b, std::string(b.writable ? "--rw " : "--ro ") + b.host));
  }
  std::string uid = std::to_string(inside_uid), gid = std::to_string(inside_gid);
  plan.passwd = "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n"
                "sandbox:x:" + uid + ":" + gid + ":sandbox:/tmp:/bin/sh\n"
                "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
  plan.group = "root:x:0:\nsandbox:x:" + gid + ":\nnogroup:x:65534:\n";
  plan.hosts = "127.0.0.1\tlocalhost " + options.hostname + "\n::1\tlocalhost ip6-localhost ip6-loopback\n";
  plan.resolv = "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n";
  return plan;
}

Status BuildRootFromChild(const Plan& plan, std::vector<std::string>* notes) {
  // The parent's descriptors are not needed once the trees are attached, nor on a failure.
  struct CloseOnReturn {
    const Plan& plan;
    ~CloseOnReturn() { plan.CloseDescriptors(); }
  } close_on_return{plan};
  // Sources the parent could not clone are opened first, while the host's tree is still what this
  // namespace sees.
  std::vector<UniqueFd> system_src(plan.system.size()), user_src(plan.user.size());
  for (size_t i = 0; i < plan.system.size(); ++i) {
    if (plan.system[i].tree) continue;
    auto fd = OpenSource(plan.system[i]);
    if (!fd) return fd.status();
    system_src[i] = std::move(*fd);
  }
  for (size_t i = 0; i < plan.user.size(); ++i) {
    if (plan.user[i].tree) continue;
    auto fd = OpenSource(plan.user[i]);
    if (!fd) return fd.status();
    user_src[i] = std::move(*fd);
  }
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return Status::FromErrno("make mounts private", errno);
  }
  auto root = NewFs("tmpfs", {{"size", "1m"}, {"mode", "0755"}, {"nr_inodes", "4096"}},
                    MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
  if (!root) return root.status();
  // The root needs a place in this namespace for pivot_root; the host's /tmp is hidden by it here
  // only (sources above are already open).
  int anchor = OpenAt2(AT_FDCWD, "/tmp", O_PATH | O_DIRECTORY, kNoFollow);
  if (anchor < 0) anchor = OpenAt2(AT_FDCWD, "/mnt", O_PATH | O_DIRECTORY, kNoFollow);
  if (anchor < 0) return Status::FromErrno("find a directory to build the root on (/tmp or /mnt)", errno);
  UniqueFd anchor_fd(anchor);
  WARDEN_RETURN_IF_ERROR(Attach(root->get(), anchor_fd.get(), "new root"));
  const int rootfd = root->get();

  for (const char* dir : {"etc", "tmp", "home", "run", "var", "var/tmp"}) {
    if (mkdirat(rootfd, dir, 0755) != 0 && errno != EEXIST) return Status::FromErrno(std::string("mkdir /") + dir, errno);
  }
  for (const auto& [path, target] : plan.symlinks) {
    if (symlinkat(target.c_str(), rootfd, Rel(path).c_str()) != 0) return Status::FromErrno("symlink " + path, errno);
  }
  WARDEN_RETURN_IF_ERROR(WriteFile(rootfd, "/etc/passwd", plan.passwd, 0644));
  WARDEN_RETURN_IF_ERROR(WriteFile(rootfd, "/etc/group", plan.group, 0644));
  WARDEN_RETURN_IF_ERROR(WriteFile(rootfd, "/etc/hosts", plan.hosts, 0644));
  WARDEN_RETURN_IF_ERROR(WriteFile(rootfd, "/etc/resolv.conf", plan.resolv, 0644));
  WARDEN_RETURN_IF_ERROR(WriteFile(rootfd, "/etc/nsswitch.conf", "passwd: files\ngroup: files\nhosts: files dns\n", 0644));
  WARDEN_RETURN_IF_ERROR(BindEntries(rootfd, plan.system, system_src));
  WARDEN_RETURN_IF_ERROR(BuildProc(rootfd));
  WARDEN_RETURN_IF_ERROR(BuildDev(rootfd, plan));
  {
    auto tmp_target = MakeMountPoint(rootfd, "/tmp", true);
    if (!tmp_target) return tmp_target.status();
    auto tmp = NewFs("tmpfs", {{"size", std::to_string(plan.tmpfs_bytes)}, {"mode", "1777"}},
                     MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
    if (!tmp) return tmp.status();
    WARDEN_RETURN_IF_ERROR(Attach(tmp->get(), tmp_target->get(), "/tmp"));
  }
  WARDEN_RETURN_IF_ERROR(BindEntries(rootfd, plan.user, user_src));
  WARDEN_RETURN_IF_ERROR(ProtectPaths(rootfd, plan, notes));
  // Everything is in place: the root itself becomes read-only (its submounts keep their own flags).
  struct mount_attr ro = {};
  ro.attr_set = MOUNT_ATTR_RDONLY;
  if (mount_setattr(rootfd, "", AT_EMPTY_PATH, &ro, sizeof(ro)) != 0) return Status::FromErrno("make / read-only", errno);
  return PivotInto(rootfd);
}

}  // namespace warden::sandbox::mnt
