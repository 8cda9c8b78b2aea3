#include "sandbox/rlimits.h"

#include <sys/resource.h>

#include <string>

namespace warden::sandbox::rlimits {
namespace {

Status Set(int resource, const char* name, rlim_t soft, rlim_t hard) {
  struct rlimit rl = {soft, hard};
  if (setrlimit(resource, &rl) != 0) return Status::FromErrno(std::string("setrlimit ") + name, errno);
  return Status::Ok();
}

}  // namespace

Status ApplyFromChild(const Spec& s) {
  WARDEN_RETURN_IF_ERROR(Set(RLIMIT_CORE, "RLIMIT_CORE", 0, 0));
  WARDEN_RETURN_IF_ERROR(Set(RLIMIT_NOFILE, "RLIMIT_NOFILE", s.open_files, s.open_files));
  if (s.file_size_bytes) WARDEN_RETURN_IF_ERROR(Set(RLIMIT_FSIZE, "RLIMIT_FSIZE", s.file_size_bytes, s.file_size_bytes));
  if (s.address_space_bytes) WARDEN_RETURN_IF_ERROR(Set(RLIMIT_AS, "RLIMIT_AS", s.address_space_bytes, s.address_space_bytes));
  if (s.processes) WARDEN_RETURN_IF_ERROR(Set(RLIMIT_NPROC, "RLIMIT_NPROC", s.processes, s.processes));
  // SIGXCPU at the limit, SIGKILL a second later if it is caught.
  if (s.cpu_seconds) WARDEN_RETURN_IF_ERROR(Set(RLIMIT_CPU, "RLIMIT_CPU", s.cpu_seconds, s.cpu_seconds + 1));
  return Status::Ok();
}

}  // namespace warden::sandbox::rlimits
