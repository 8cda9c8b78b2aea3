#include "sandbox/caps.h"

#include <linux/capability.h>
#include <linux/securebits.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace warden::sandbox::caps {

Status DropAllFromChild() {
  // Bounding set first: dropping it needs CAP_SETPCAP, which goes last.
  for (int cap = 0; cap <= 63; ++cap) {
    if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) < 0) break;  // past the kernel's last capability
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) return Status::FromErrno("drop bounding capability " + std::to_string(cap), errno);
  }
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) return Status::FromErrno("clear ambient capabilities", errno);
  // Lock the securebits: uid 0 never regains capabilities, and keep-caps cannot be turned on.
  unsigned long bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED |
                       SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
  if (prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) != 0) return Status::FromErrno("set securebits", errno);
  struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capset, &hdr, data) != 0) return Status::FromErrno("clear capabilities", errno);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return Status::FromErrno("set no_new_privs", errno);
  return Status::Ok();
}

}  // namespace warden::sandbox::caps
