// Reading a small file whole with open(2)/read(2), failures as values. std::ifstream with
// std::istreambuf_iterator throws std::ios_failure in libstdc++ when read(2) fails (a
// /proc/PID/stat whose process was reaped after the open reads ESRCH), whatever the stream's
// exception mask: on a worker thread that is std::terminate. Use these instead on any path a
// thread of the gateway runs.
#pragma once

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <string>

#include "common/status.h"
#include "common/unique_fd.h"

namespace warden {

// Reads `fd` from its current offset to end of file, or until `limit` bytes are in (a caller that
// needs to know whether there was more passes its maximum plus one). `what` names the file in the
// error, which is Status::FromErrno (so err() is the errno: ESRCH for a vanished process).
inline Result<std::string> ReadFdUpTo(int fd, std::size_t limit, const std::string& what) {
  std::string out;
  char buffer[8192];
  while (out.size() < limit) {
    const std::size_t want = std::min(sizeof buffer, limit - out.size());
    const ssize_t n = ::read(fd, buffer, want);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("read " + what, errno);
    }
    if (n == 0) break;
    out.append(buffer, static_cast<std::size_t>(n));
  }
  return out;
}

// Opens `path` (O_RDONLY | O_CLOEXEC) and reads it as ReadFdUpTo does. Errors name the path.
inline Result<std::string> ReadFileUpTo(const std::string& path, std::size_t limit) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return Status::FromErrno("open " + path, errno);
  return ReadFdUpTo(fd.get(), limit, path);
}

// Reads a file only its owner may read (a key), as ReadFdUpTo does. `where` names the file in
// errors, `noun` what it holds ("the master key"). Refused, before anything is read: a symbolic
// link at the path (it could point at a file someone else controls), anything but a regular file
// (a FIFO does not block the open), a mode with any group or other bits, more than `limit` bytes.
// The caller cleanses what it got once done with it.
inline Result<std::string> ReadOwnerOnlyFile(const std::string& path, const std::string& where,
                                             const std::string& noun, std::size_t limit) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY));
  if (!fd.valid()) {
    const int err = errno;
    if (err == ELOOP) return Status::Error(where + " is a symbolic link; name the key file itself");
    return Status::FromErrno("open " + noun + " " + where, err);
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Status::FromErrno("stat " + noun + " " + where, errno);
  if (!S_ISREG(st.st_mode)) return Status::Error(where + " is not a regular file");
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Status::Error(where + " has mode " + mode + ", which lets group or others at " + noun +
                         ": it must be 0600 or 0400 (chmod 600 " + path + ")");
  }
  auto text = ReadFdUpTo(fd.get(), limit + 1, where);
  if (!text) return text.status();
  if (text->size() > limit) {
    ::explicit_bzero(text->data(), text->size());
    return Status::Error(where + " is larger than " + std::to_string(limit) + " bytes: not " + noun);
  }
  return text;
}

}  // namespace warden
