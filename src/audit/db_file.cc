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
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno("open " + path, errno);
  close(fd);
  return Status::Ok();
}

}  // namespace warden::audit
