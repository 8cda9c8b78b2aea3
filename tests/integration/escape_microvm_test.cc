// The escape tests of escape_test.cc, each run in a microVM: the harness sends every `warden run`
// to `--backend microvm` (WARDEN_TEST_BACKEND). A VM must hold as a native sandbox does; the few
// tests that check how native refuses (its seccomp record, its errno) rather than whether the
// attack worked are left out, each with the reason, printed when the binary starts.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>

namespace warden::testing {

struct NotApplicable {
  const char* test;
  const char* reason;
};

// The guest has its own kernel and no seccomp filter: the attack is tried against the guest
// kernel, which holds (microvm_test.cc checks each outcome), but the native assertions about the
// seccomp refusal and its `violations` record cannot apply.
constexpr NotApplicable kNotApplicable[] = {
    {"EscapeMicrovm.PtraceIsRefused",
     "no seccomp in the guest: PTRACE_TRACEME on itself succeeds and nothing is recorded in `violations`; "
     "attaching to init is refused (EPERM) by the guest kernel"},
    {"EscapeMicrovm.UnshareUserNamespaceThenMountIsRefused",
     "the guest refuses user namespaces with max_user_namespaces=0 (ENOSPC, not seccomp's EPERM) and records no "
     "`violations`; the mount is still refused (microvm_test.cc, UserNamespacesAndMountAreRefused)"},
    {"EscapeMicrovm.SetuidEscalationFails",
     "checks `Seccomp: 2`; in the guest the command has no capabilities, an empty bounding set, no_new_privs and "
     "nosuid mounts, but no seccomp filter (the VM is the boundary)"},
    {"EscapeMicrovm.TiocstiInjectionIsRefused",
     "stdin is a virtio-console port, never a host terminal: TIOCSTI fails with ENOTTY, not seccomp's EPERM, and "
     "is not recorded in `violations`"},
    {"EscapeMicrovm.InitMemoryDescriptorsAndEnvironmentAreOutOfReach",
     "asserts what warden's native init is; the guest's PID 1 is warden's own static init in the guest kernel "
     "(root-owned, so its /proc files are closed to the command too, but its name is /init)"},
    {"EscapeMicrovm.InitHoldsNoVariableOfTheCallersEnvironment",
     "looks on the host for warden's native init; a microVM's host side is QEMU, started with a clean environment"},
    {"EscapeMicrovm.PlantedSymlinkRedirectsNestedMountPointOntoHost",
     "asserts the native walk's refusal (exit 125 naming the link); the guest mounts its 9p shares inside the VM, "
     "where the planted link is the guest's path, so nothing is created on the host, and the run is not refused"},
    {"EscapeMicrovm.ReadRootOnlyFileBeneathPrivateDirectoryThroughBind",
     "known limit: QEMU runs as nobody and serves 9p shares by path, so a source beneath a 0700 directory is "
     "unreachable for it (docs/backends.md); the native backends open bind sources before the clone"},
    {"EscapeMicrovm.ListmountAndStatmountAreRefused",
     "no seccomp in the guest; the guest's 6.1 kernel has no listmount/statmount (ENOSYS)"},
};

std::string MicrovmDir() {
  const char* dir = getenv("WARDEN_MICROVM_DIR");
  return dir && *dir ? dir : "/var/lib/warden/microvm";
}

// The negative filter leaving out kNotApplicable (CMakeLists.txt passes the same list to ctest's
// discovery, so that ctest never runs them either).
std::string NotApplicableFilter() {
  std::string filter;
  for (const auto& n : kNotApplicable) filter += std::string(filter.empty() ? "" : ":") + n.test;
  return filter;
}

class MicrovmEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    for (const auto& n : kNotApplicable) std::printf("[ microvm  ] left out %s: %s\n", n.test, n.reason);
    if (access("/usr/bin/qemu-system-x86_64", X_OK) != 0) {
      GTEST_SKIP() << "qemu-system-x86_64 is not installed (scripts/install-deps.sh installs qemu-system-x86)";
    }
    if (access((MicrovmDir() + "/vmlinux").c_str(), R_OK) != 0) {
      GTEST_SKIP() << "no microvm guest kernel in " << MicrovmDir() << " (scripts/install-microvm.sh installs it)";
    }
    setenv("WARDEN_TEST_BACKEND", "microvm", 1);
  }
  void TearDown() override { unsetenv("WARDEN_TEST_BACKEND"); }
};

}  // namespace warden::testing

// Our own main (it takes precedence over gtest_main's): leaves out what cannot apply, and sends
// every run to the microvm backend (or skips everything, saying why, when no VM can boot here).
int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::string filter = ::testing::GTEST_FLAG(filter);
  filter += (filter.find('-') == std::string::npos ? "-" : ":") + warden::testing::NotApplicableFilter();
  ::testing::GTEST_FLAG(filter) = filter;
  ::testing::AddGlobalTestEnvironment(new warden::testing::MicrovmEnvironment);
  return RUN_ALL_TESTS();
}

// The same tests under their own suite name (ctest names must be unique across binaries).
#define Escape EscapeMicrovm
#include "escape_test.cc"
#undef Escape
