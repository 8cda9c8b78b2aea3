#include "sandbox/user.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>

#include "common/unique_fd.h"

namespace warden::sandbox::user {
namespace {

constexpr uid_t kUnprivilegedHostId = 65534;

Status WriteProcFile(pid_t pid, const char* name, const std::string& content) {
  std::string path = "/proc/" + std::to_string(pid) + "/" + name;
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd.valid()) return Status::FromErrno("open " + path, errno);
  if (write(fd.get(), content.data(), content.size()) != static_cast<ssize_t>(content.size())) {
    return Status::FromErrno("write " + path, errno);
  }
  return Status::Ok();
}

}  // namespace

IdMap ChooseFromParent() {
  IdMap map;
  map.host_is_root = geteuid() == 0;
  map.host_uid = map.host_is_root ? kUnprivilegedHostId : geteuid();
  map.host_gid = map.host_is_root ? kUnprivilegedHostId : getegid();
  return map;
}

Status InitNsFromParent(pid_t child, const IdMap& map) {
  // Unprivileged callers must deny setgroups before writing a gid map (user_namespaces(7)).
  if (!map.host_is_root) WARDEN_RETURN_IF_ERROR(WriteProcFile(child, "setgroups", "deny"));
  WARDEN_RETURN_IF_ERROR(WriteProcFile(child, "uid_map", std::to_string(map.inside_uid) + " " + std::to_string(map.host_uid) + " 1\n"));
  WARDEN_RETURN_IF_ERROR(WriteProcFile(child, "gid_map", std::to_string(map.inside_gid) + " " + std::to_string(map.host_gid) + " 1\n"));
  return Status::Ok();
}

Status SwitchFromChild(const IdMap& map) {
  // Raw system calls, not glibc's wrappers: those change the ids of every thread of the process
  // by signalling the other threads, which a clone of a multi-threaded warden does not have, so
  // the wrapper would wait for them forever. The kernel calls change this thread only, which here
  // is the whole process.
  if (map.host_is_root && syscall(SYS_setgroups, 0, nullptr) != 0) return Status::FromErrno("setgroups", errno);
  if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0) return Status::FromErrno("prctl(PR_SET_KEEPCAPS)", errno);
  if (syscall(SYS_setresgid, map.inside_gid, map.inside_gid, map.inside_gid) != 0) return Status::FromErrno("setresgid", errno);
  if (syscall(SYS_setresuid, map.inside_uid, map.inside_uid, map.inside_uid) != 0) return Status::FromErrno("setresuid", errno);
  // The uid change cleared the effective set; raise it again from the permitted set.
  struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &hdr, data) != 0) return Status::FromErrno("capget", errno);
  data[0].effective = data[0].permitted;
  data[1].effective = data[1].permitted;
  if (syscall(SYS_capset, &hdr, data) != 0) return Status::FromErrno("capset", errno);
  return Status::Ok();
}

}  // namespace warden::sandbox::user
