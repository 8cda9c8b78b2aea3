// Nothing of a sandbox may outlive it: no process, no cgroup, no mount, no temp directory, after
// a normal exit, a timeout, or a SIGKILL of the warden process itself.
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "harness.h"

namespace warden::testing {
namespace {

std::vector<std::string> CgroupsOf(pid_t warden) {
  std::vector<std::string> mine;
  for (const auto& d : WardenCgroupDirs()) {
    if (d.find("/warden-" + std::to_string(warden) + "-") != std::string::npos) mine.push_back(d);
  }
  return mine;
}

std::vector<std::string> TmpEntries() {
  std::vector<std::string> names;
  DIR* d = opendir("/tmp");
  while (struct dirent* e = readdir(d)) {
    std::string n = e->d_name;
    // warden itself never creates host temp files; other test binaries running at the same time
    // (ctest -j) make their own fixtures, named warden-test-* or warden-egress-*.
    if (n.find("warden") != std::string::npos && n.find("warden-test") == std::string::npos &&
        n.find("warden-egress") == std::string::npos) {
      names.push_back(n);
    }
  }
  closedir(d);
  return names;
}

// `marker` must appear only in the sandboxed processes' command lines, not in warden's own
// arguments (the scripts below build it from a variable for that reason).
void ExpectNothingLeft(const Outcome& r, const std::string& marker, int mounts_before) {
  // After a SIGKILL of warden the kernel tears the PID namespace down and the janitor removes
  // the cgroups: allow that a moment, but no more than two seconds.
  for (int i = 0; i < 20 && (!CgroupsOf(r.pid).empty() || !PidsWithCmdline(marker).empty()); ++i) usleep(100 * 1000);
  EXPECT_TRUE(PidsWithCmdline(marker).empty()) << "a sandbox process survived";
  EXPECT_TRUE(CgroupsOf(r.pid).empty()) << CgroupsOf(r.pid)[0];
  EXPECT_EQ(MountCount(), mounts_before);
  EXPECT_TRUE(TmpEntries().empty()) << TmpEntries()[0];
}

TEST(Leftovers, NoneAfterNormalExitWithDaemon) {
  int mounts = MountCount();
  auto r = RunSh("s=777; (setsid sleep $s.1 &); sleep $s.2 & echo started", {"--memory", "256M", "--pids", "64"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "started\n");
  ExpectNothingLeft(r, "sleep 777.", mounts);
}

TEST(Leftovers, NoneAfterTimeout) {
  int mounts = MountCount();
  auto r = RunSh("s=778; (setsid sleep $s.1 &); sleep $s.2", {"--memory", "256M", "--timeout", "300ms"});
  EXPECT_EQ(r.exit_code, 124);
  ExpectNothingLeft(r, "sleep 778.", mounts);
}

TEST(Leftovers, NoneAfterWardenIsKilled) {
  int mounts = MountCount();
  Invocation inv;
  inv.json = false;
  inv.args = {"run", "--memory", "256M", "--pids", "64", "--", "sh", "-c", "s=779; (setsid sleep $s.1 &); sleep $s.2"};
  inv.kill_after_ms = 500;
  auto r = RunWarden(inv);
  EXPECT_EQ(r.exit_code, 128 + 9);
  ExpectNothingLeft(r, "sleep 779.", mounts);
}

}  // namespace
}  // namespace warden::testing
