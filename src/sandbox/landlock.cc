#include "sandbox/landlock.h"

#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <string>

#include "common/unique_fd.h"

#if __has_include(<linux/landlock.h>)
#include <linux/landlock.h>
#define WARDEN_HAVE_LANDLOCK_H 1
#endif

// Debian 12's uapi header stops at ABI 2 and there are no libc wrappers, so the ABI (stable by
// the kernel's promise) is spelled out here and checked against the header where it overlaps.
#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#endif
#ifndef __NR_landlock_add_rule
#define __NR_landlock_add_rule 445
#endif
#ifndef __NR_landlock_restrict_self
#define __NR_landlock_restrict_self 446
#endif

namespace warden::sandbox::landlock {
namespace {

// struct landlock_ruleset_attr. The kernel accepts a prefix: 8 bytes up to ABI 3, 16 up to 5.
struct RulesetAttr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;  // ABI 4
  uint64_t scoped;              // ABI 6
};
struct PathBeneathAttr {
  uint64_t allowed_access;
  int32_t parent_fd;
} __attribute__((packed));
struct NetPortAttr {  // ABI 4
  uint64_t allowed_access;
  uint64_t port;
};

constexpr uint32_t kCreateRulesetVersion = 1u << 0;
constexpr int kRulePathBeneath = 1;
constexpr int kRuleNetPort = 2;

constexpr uint64_t kFsExecute = 1ull << 0;
constexpr uint64_t kFsWriteFile = 1ull << 1;
constexpr uint64_t kFsReadFile = 1ull << 2;
constexpr uint64_t kFsReadDir = 1ull << 3;
constexpr uint64_t kFsMakeSym = 1ull << 12;   // bits 4..12: remove and make rights (ABI 1)
constexpr uint64_t kFsRefer = 1ull << 13;     // ABI 2
constexpr uint64_t kFsTruncate = 1ull << 14;  // ABI 3
constexpr uint64_t kFsIoctlDev = 1ull << 15;  // ABI 5
constexpr uint64_t kNetBindTcp = 1ull << 0;
constexpr uint64_t kNetConnectTcp = 1ull << 1;
constexpr uint64_t kScopeAbstractUnixSocket = 1ull << 0;
constexpr uint64_t kScopeSignal = 1ull << 1;

#ifdef WARDEN_HAVE_LANDLOCK_H
static_assert(kCreateRulesetVersion == LANDLOCK_CREATE_RULESET_VERSION);
static_assert(kRulePathBeneath == LANDLOCK_RULE_PATH_BENEATH);
static_assert(kFsExecute == LANDLOCK_ACCESS_FS_EXECUTE);
static_assert(kFsReadDir == LANDLOCK_ACCESS_FS_READ_DIR);
static_assert(kFsMakeSym == LANDLOCK_ACCESS_FS_MAKE_SYM);
static_assert(sizeof(PathBeneathAttr) == sizeof(landlock_path_beneath_attr));
#ifdef LANDLOCK_ACCESS_FS_REFER
static_assert(kFsRefer == LANDLOCK_ACCESS_FS_REFER);
#endif
#ifdef LANDLOCK_ACCESS_FS_TRUNCATE
static_assert(kFsTruncate == LANDLOCK_ACCESS_FS_TRUNCATE);
#endif
#ifdef LANDLOCK_ACCESS_FS_IOCTL_DEV
static_assert(kFsIoctlDev == LANDLOCK_ACCESS_FS_IOCTL_DEV);
#endif
#ifdef LANDLOCK_ACCESS_NET_CONNECT_TCP
static_assert(kNetBindTcp == LANDLOCK_ACCESS_NET_BIND_TCP);
static_assert(kNetConnectTcp == LANDLOCK_ACCESS_NET_CONNECT_TCP);
static_assert(sizeof(NetPortAttr) == sizeof(landlock_net_port_attr));
#endif
#ifdef LANDLOCK_SCOPE_SIGNAL
static_assert(kScopeAbstractUnixSocket == LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET);
static_assert(kScopeSignal == LANDLOCK_SCOPE_SIGNAL);
#endif
#endif

// Every filesystem right the running ABI knows. Handling a right the kernel does not know is
// EINVAL, and leaving a known one unhandled leaves it allowed, so this must match exactly.
uint64_t FsRights(int abi) {
  uint64_t rights = (kFsMakeSym << 1) - 1;  // ABI 1: bits 0..12
  if (abi >= 2) rights |= kFsRefer;
  if (abi >= 3) rights |= kFsTruncate;
  if (abi >= 5) rights |= kFsIoctlDev;
  return rights;
}

// The rights that make sense on a non-directory; anything more is EINVAL for a file rule.
constexpr uint64_t kFileRights =
    kFsExecute | kFsWriteFile | kFsReadFile | kFsTruncate | kFsIoctlDev;
constexpr uint64_t kReadOnlyRights = kFsExecute | kFsReadFile | kFsReadDir;

size_t RulesetAttrSize(int abi) {
  if (abi >= 6) return sizeof(RulesetAttr);
  if (abi >= 4) return offsetof(RulesetAttr, scoped);
  return offsetof(RulesetAttr, handled_access_net);
}

Status AddPathRules(int ruleset_fd, const std::vector<PathRule>& paths, uint64_t handled) {
  for (const PathRule& rule : paths) {
    struct stat st {};
    if (::fstat(rule.fd, &st) != 0) {
      return Status::FromErrno("landlock: fstat rule fd " + std::to_string(rule.fd), errno);
    }
    uint64_t allowed = (rule.writable ? handled : kReadOnlyRights) & handled;
    if (!S_ISDIR(st.st_mode)) allowed &= kFileRights;
    PathBeneathAttr attr{allowed, rule.fd};
    if (::syscall(__NR_landlock_add_rule, ruleset_fd, kRulePathBeneath, &attr, 0) != 0) {
      return Status::FromErrno("landlock_add_rule (path fd " + std::to_string(rule.fd) + ")",
                               errno);
    }
  }
  return Status::Ok();
}

Status AddConnectRules(int ruleset_fd, const std::vector<uint16_t>& ports) {
  for (uint16_t port : ports) {
    NetPortAttr attr{kNetConnectTcp, port};
    if (::syscall(__NR_landlock_add_rule, ruleset_fd, kRuleNetPort, &attr, 0) != 0) {
      return Status::FromErrno("landlock_add_rule (tcp connect port " + std::to_string(port) + ")",
                               errno);
    }
  }
  return Status::Ok();
}

}  // namespace

int AbiVersion() {
  long abi = ::syscall(__NR_landlock_create_ruleset, nullptr, 0, kCreateRulesetVersion);
  return abi > 0 ? static_cast<int>(abi) : 0;  // ENOSYS: not built; EOPNOTSUPP: disabled at boot
}

Status ApplyFromChild(const Ruleset& rules, bool* applied) {
  *applied = false;
  const int abi = AbiVersion();
  if (abi == 0) return Status::Ok();

  RulesetAttr attr{};
  attr.handled_access_fs = FsRights(abi);
  const bool restrict_net = rules.restrict_net && abi >= 4;
  if (restrict_net) attr.handled_access_net = kNetBindTcp | kNetConnectTcp;
  if (abi >= 6) attr.scoped = kScopeAbstractUnixSocket | kScopeSignal;

  UniqueFd ruleset(
      static_cast<int>(::syscall(__NR_landlock_create_ruleset, &attr, RulesetAttrSize(abi), 0)));
  if (!ruleset.valid()) {
    return Status::FromErrno("landlock_create_ruleset (ABI " + std::to_string(abi) + ")", errno);
  }
  WARDEN_RETURN_IF_ERROR(AddPathRules(ruleset.get(), rules.paths, attr.handled_access_fs));
  if (restrict_net) WARDEN_RETURN_IF_ERROR(AddConnectRules(ruleset.get(), rules.connect_tcp_ports));

  // Required unless the caller has CAP_SYS_ADMIN; the sandbox sets it anyway, so set it here too
  // rather than depend on the order of steps.
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    return Status::FromErrno("landlock: prctl(PR_SET_NO_NEW_PRIVS)", errno);
  }
  if (::syscall(__NR_landlock_restrict_self, ruleset.get(), 0) != 0) {
    return Status::FromErrno("landlock_restrict_self", errno);
  }
  *applied = true;
  return Status::Ok();
}

}  // namespace warden::sandbox::landlock
