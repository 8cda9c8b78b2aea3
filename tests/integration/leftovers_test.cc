// Nothing of a sandbox may outlive it: no process, no cgroup, no mount, no temp directory, after
// a normal exit, a timeout, or a SIGKILL of the warden process itself.
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <set>

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

std::set<std::string> TmpEntries() {
  std::set<std::string> names;
  DIR* d = opendir("/tmp");
  while (struct dirent* e = readdir(d)) names.insert(e->d_name);
  closedir(d);
  return names;
}

// Entries that appeared in /tmp since `before`. `warden run` itself never creates host temp
// files; other test binaries running at the same time (ctest -j) do, under these prefixes, none of
// which a cold run uses: their fixtures (the audit, notify, credentials and end-to-end suites'
// too), and the gateway's sandbox__exec workspaces and exec pool (warden-exec-*, warden-serve-*,
// warden-pool-*).
std::vector<std::string> NewTmpEntries(const std::set<std::string>& before) {
  static const char* const kOthers[] = {
      "warden-test",  "warden-egress",          "warden-gw",          "warden-state-",
      "warden-tls-",  "warden-upstream-secret", "warden-cgroup-test", "warden-landlock-test",
      "warden-exec-", "warden-serve-",          "warden-pool-",       "warden-audit-",
      "warden-notify-", "warden-secret-store-", "warden-master-key-", "warden-e2e-"};
  std::vector<std::string> added;
  for (const auto& n : TmpEntries()) {
    if (before.count(n)) continue;
    bool other = false;
    for (const char* prefix : kOthers) other |= n.rfind(prefix, 0) == 0;
    if (!other) added.push_back(n);
  }
  return added;
}

// `marker` must appear only in the sandboxed processes' command lines, not in warden's own
// arguments (the scripts below build it from a variable for that reason).
void ExpectNothingLeft(const Outcome& r, const std::string& marker, int mounts_before,
                       const std::set<std::string>& tmp_before) {
  // After a SIGKILL of warden the kernel tears the PID namespace down and the janitor removes
  // the cgroups: allow that a moment, but no more than two seconds.
  for (int i = 0; i < 20 && (!CgroupsOf(r.pid).empty() || !PidsWithCmdline(marker).empty()); ++i) usleep(100 * 1000);
  EXPECT_TRUE(PidsWithCmdline(marker).empty()) << "a sandbox process survived";
  EXPECT_TRUE(CgroupsOf(r.pid).empty()) << CgroupsOf(r.pid)[0];
  // Another test binary (ctest -j) may hold a mount of its own for a moment (the gVisor escape
  // tests do): a leak stays, so wait up to two seconds for the count to come back.
  for (int i = 0; i < 20 && MountCount() != mounts_before; ++i) usleep(100 * 1000);
  EXPECT_EQ(MountCount(), mounts_before);
  auto added = NewTmpEntries(tmp_before);
  EXPECT_TRUE(added.empty()) << added[0];
}

TEST(Leftovers, NoneAfterNormalExitWithDaemon) {
  int mounts = MountCount();
  auto tmp = TmpEntries();
  auto r = RunSh("s=777; (setsid sleep $s.1 &); sleep $s.2 & echo started", {"--memory", "256M", "--pids", "64"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "started\n");
  ExpectNothingLeft(r, "sleep 777.", mounts, tmp);
}

TEST(Leftovers, NoneAfterTimeout) {
  int mounts = MountCount();
  auto tmp = TmpEntries();
  auto r = RunSh("s=778; (setsid sleep $s.1 &); sleep $s.2", {"--memory", "256M", "--timeout", "300ms"});
  EXPECT_EQ(r.exit_code, 124);
  ExpectNothingLeft(r, "sleep 778.", mounts, tmp);
}

TEST(Leftovers, NoneAfterWardenIsKilled) {
  int mounts = MountCount();
  auto tmp = TmpEntries();
  Invocation inv;
  inv.json = false;
  inv.args = {"run", "--memory", "256M", "--pids", "64", "--", "sh", "-c", "s=779; (setsid sleep $s.1 &); sleep $s.2"};
  inv.kill_after_ms = 500;
  auto r = RunWarden(inv);
  EXPECT_EQ(r.exit_code, 128 + 9);
  ExpectNothingLeft(r, "sleep 779.", mounts, tmp);
}

}  // namespace
}  // namespace warden::testing
