// Reading a small file whole with open(2)/read(2), failures as values. std::ifstream with
// std::istreambuf_iterator throws std::ios_failure in libstdc++ when read(2) fails (a
// /proc/PID/stat whose process was reaped after the open reads ESRCH), whatever the stream's
// exception mask: on a worker thread that is std::terminate. Use these instead on any path a
// thread of the gateway runs.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
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

}  // namespace warden
