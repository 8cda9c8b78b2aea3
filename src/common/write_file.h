// Creating a file that must be new, with its whole contents: a key, a checkpoint's temporary
// file, a sandbox's trust bundle; and replacing one whole (a checkpoint). O_EXCL and O_NOFOLLOW, so that nothing planted at the path
// (a file, a symbolic link to one elsewhere) is written through.
#pragma once

#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <string_view>

#include "common/status.h"
#include "common/unique_fd.h"

namespace warden {

// Creates `path` with `mode` (it must not exist) and writes all of `data`, then fsync(2) when
// `sync`. On failure the partial file is removed. Errors name the path.
inline Status CreateFileWith(const std::string& path, std::string_view data, mode_t mode, bool sync) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
  if (!fd.valid()) return Status::FromErrno("create " + path, errno);
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd.get(), data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::unlink(path.c_str());
      return Status::FromErrno("write " + path, err);
    }
    done += static_cast<size_t>(n);
  }
  if (sync && ::fsync(fd.get()) != 0) {
    const int err = errno;
    ::unlink(path.c_str());
    return Status::FromErrno("fsync " + path, err);
  }
  return Status::Ok();
}

// Replaces `path` with a file of `data`: written to a temporary file beside it (mode `mode`,
// fsync'd when `sync`), then rename(2)d over it, so that a reader sees the old file or the new
// one, whole. Errors name the path.
inline Status ReplaceFileWith(const std::string& path, std::string_view data, mode_t mode,
                              bool sync) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  ::unlink(tmp.c_str());  // a leftover of a crashed writer with the same pid
  WARDEN_RETURN_IF_ERROR(CreateFileWith(tmp, data, mode, sync));
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return Status::FromErrno("replace " + path, err);
  }
  return Status::Ok();
}

}  // namespace warden
