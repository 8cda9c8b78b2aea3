#include "audit/db_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

namespace warden::audit {

Status CreateDatabaseFile(const std::string& path) {
  std::filesystem::path partial;
  for (const auto& part : std::filesystem::path(path).parent_path()) {
    partial /= part;
    if (mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST)
      return Status::FromErrno("create directory " + partial.string(), errno);
  }
  // An existing file is left untouched, and above all not opened: closing any descriptor of a
  // file drops every POSIX lock this process holds on it, SQLite's included (fcntl locks belong
  // to the process, not the descriptor). A gateway opens its stores one after another on one
  // file; a close here would strip the locks of the connections already open, and the next
  // process to close its last connection would then believe itself alone, checkpoint and
  // delete the write-ahead log those connections still write to: their commits would vanish.
  struct stat st;
  if (lstat(path.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode))
      return Status::Error(path + " is a symbolic link; refusing to open it");
    return Status::Ok();
  }
  if (errno != ENOENT) return Status::FromErrno("stat " + path, errno);
  // Missing: created exclusively (no connection of ours can be open on a file that did not
  // exist), so that its mode is 0600 whatever the umask.
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0 && errno == EEXIST) return Status::Ok();  // another process made it meanwhile
  if (fd < 0) return Status::FromErrno("create " + path, errno);
  close(fd);
  return Status::Ok();
}

}  // namespace warden::audit
