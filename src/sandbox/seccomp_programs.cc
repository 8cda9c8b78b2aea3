#include "sandbox/seccomp_programs.h"

namespace warden::sandbox::seccomp {
namespace {
#include "seccomp_programs.inc"
}  // namespace

const std::vector<sock_filter>& PrecompiledProgram(bool notify) {
  static const std::vector<sock_filter> with_notify(std::begin(kNotifyProgram), std::end(kNotifyProgram));
  static const std::vector<sock_filter> with_errno(std::begin(kErrnoProgram), std::end(kErrnoProgram));
  return notify ? with_notify : with_errno;
}

}  // namespace warden::sandbox::seccomp
