#include "sandbox/workspace_dir.h"

#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <vector>

namespace warden::sandbox::workspace {
namespace {

constexpr int kMaxRemoveDepth = 128;

// Opens directory `name` under `dirfd`; when the command left it without search permission (the
// caller, unprivileged, owns it through the id map), grants that first.
UniqueFd OpenDirForRemoval(int dirfd, const char* name) {
  UniqueFd fd(openat(dirfd, name, kDirOpenFlags));
  if (!fd.valid() && errno == EACCES && fchmodat(dirfd, name, 0700, 0) == 0)
    fd.reset(openat(dirfd, name, kDirOpenFlags));
  // Write permission to unlink its entries (a command may have made it read-only).
  if (fd.valid()) (void)fchmod(fd.get(), 0700);
  return fd;
}

// Removes everything below `dirfd`. Directories deeper than kMaxRemoveDepth are moved up to
// `root_fd` (same file system) and removed by a later pass, so depth never exhausts the stack or
// the descriptor table. Returns how many were moved up.
size_t RemoveChildren(int dirfd, int root_fd, int depth, size_t& moved_total) {
  size_t moved = 0;
  UniqueFd listing(OpenForListing(dirfd));
  if (!listing.valid()) return 0;
  DIR* dir = fdopendir(listing.release());
  if (dir == nullptr) return 0;
  std::vector<std::string> names;
  while (dirent* e = readdir(dir)) {
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) names.push_back(e->d_name);
  }
  closedir(dir);
  for (const std::string& name : names) {
    if (unlinkat(dirfd, name.c_str(), 0) == 0 || errno != EISDIR) continue;
    if (depth >= kMaxRemoveDepth) {
      std::string up = ".warden-deep-" + std::to_string(moved_total++);
      if (renameat(dirfd, name.c_str(), root_fd, up.c_str()) == 0) ++moved;
      continue;
    }
    UniqueFd child = OpenDirForRemoval(dirfd, name.c_str());
    if (!child.valid()) continue;
    moved += RemoveChildren(child.get(), root_fd, depth + 1, moved_total);
    unlinkat(dirfd, name.c_str(), AT_REMOVEDIR);
  }
  return moved;
}

}  // namespace

std::string TempBase() {
  const char* env = getenv("TMPDIR");
  return env && *env == '/' ? env : "/tmp";
}

Status CheckSearchable(const std::string& base) {
  for (std::filesystem::path p = base;; p = p.parent_path()) {
    struct stat st;
    if (stat(p.c_str(), &st) != 0) return Status::FromErrno("stat " + p.string(), errno);
    if (!(st.st_mode & S_IXOTH))
      return Status::Error(p.string() + " (on the way to " + base +
                           ") is not searchable by the sandbox's user (uid 65534): make it "
                           "o+x or set TMPDIR to a directory that is");
    if (p == p.parent_path()) break;
  }
  return Status::Ok();
}

Result<std::string> MakePrivateParent(const std::string& base, const std::string& prefix,
                                      const user::IdMap& ids, UniqueFd* fd) {
  if (ids.host_is_root) WARDEN_RETURN_IF_ERROR(CheckSearchable(base));
  std::string tmpl = base + "/" + prefix + "XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) return Status::FromErrno("mkdtemp " + tmpl, errno);
  fd->reset(open(tmpl.c_str(), kDirOpenFlags));
  if (!fd->valid()) return Status::FromErrno("open " + tmpl, errno);
  if (ids.host_is_root && fchmod(fd->get(), 0711) != 0)
    return Status::FromErrno("chmod " + tmpl, errno);
  return tmpl;
}

Result<UniqueFd> MakeOwnedDir(int parent_fd, const std::string& name, const user::IdMap& ids) {
  if (mkdirat(parent_fd, name.c_str(), 0700) != 0) return Status::FromErrno("mkdir " + name, errno);
  UniqueFd fd(openat(parent_fd, name.c_str(), kDirOpenFlags));
  if (!fd.valid()) return Status::FromErrno("open " + name, errno);
  WARDEN_RETURN_IF_ERROR(Own(fd.get(), ids, name));
  return fd;
}

Status Own(int fd, const user::IdMap& ids, const std::string& what) {
  if (ids.host_is_root && fchown(fd, ids.host_uid, ids.host_gid) != 0)
    return Status::FromErrno("chown " + what, errno);
  return Status::Ok();
}

int OpenForListing(int dirfd) { return openat(dirfd, ".", kDirOpenFlags); }

void RemoveContents(int dirfd) {
  (void)fchmod(dirfd, 0700);  // the command owns it and may have locked it
  size_t moved_total = 0;
  // Each pass removes what it can; directories moved up from too deep go in the next one.
  for (int pass = 0; pass < 1000; ++pass) {
    if (RemoveChildren(dirfd, dirfd, 0, moved_total) == 0) break;
  }
}

void RemoveTree(int parent_fd, const std::string& name) {
  UniqueFd fd(openat(parent_fd, name.c_str(), kDirOpenFlags));
  if (fd.valid()) RemoveContents(fd.get());
  unlinkat(parent_fd, name.c_str(), AT_REMOVEDIR);
}

}  // namespace warden::sandbox::workspace
