// warden run by an ordinary user (unprivileged user namespaces): the same sandbox, mapped to the
// caller, and fail-closed where a feature (cgroups) is out of reach.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "harness.h"

namespace warden::testing {
namespace {

constexpr uid_t kNobody = 65534;

// The build tree may sit where an ordinary user cannot reach it (a 0700 checkout): then there is
// nothing to test here, and the test says so instead of failing.
bool NobodyCanRunWarden() {
  Invocation inv;
  inv.args = {"--version"};
  inv.json = false;
  inv.uid = kNobody;
  return RunWarden(inv).exit_code == 0;
}

#define REQUIRE_NOBODY()                                                                 \
  if (!IsRoot()) GTEST_SKIP() << "needs root to switch to another user";                  \
  if (!NobodyCanRunWarden()) GTEST_SKIP() << "uid 65534 cannot execute " << WARDEN_BIN \
                                          << " (a parent directory is not searchable)"

Outcome RunAsNobody(std::vector<std::string> args) {
  Invocation inv;
  inv.args = std::move(args);
  inv.uid = kNobody;
  return RunWarden(inv);
}

TEST(Unprivileged, SandboxWorksForAnOrdinaryUser) {
  REQUIRE_NOBODY();
  auto r = RunAsNobody({"run", "--", "sh", "-c", "id -u; echo ok > /tmp/f && cat /tmp/f; grep CapEff /proc/self/status"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "1000\nok\nCapEff:\t0000000000000000\n");
}

TEST(Unprivileged, EscapeBasicsHoldForAnOrdinaryUser) {
  REQUIRE_NOBODY();
  auto r = RunAsNobody({"run", "--", "sh", "-c", "unshare -Ur true 2>&1; echo u=$?; touch /usr/x 2>&1; echo t=$?; ls /proc | grep -cE '^[0-9]+$'"});
  EXPECT_NE(r.out.find("u=1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("t=1"), std::string::npos) << r.out;
}

TEST(Unprivileged, LimitsWithoutCgroupsFailClosed) {
  REQUIRE_NOBODY();
  auto r = RunAsNobody({"run", "--memory", "100M", "--", "true"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("need cgroups"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("accept_missing"), std::string::npos) << r.err;
  // It says how to get them: delegation of a cgroup subtree, or root.
  EXPECT_NE(r.err.find("delegate"), std::string::npos) << r.err;
  EXPECT_EQ(r.record["reason"], "setup_error") << r.record.dump();
}

TEST(Unprivileged, AcceptedFallbackUsesRlimitsAndSaysSo) {
  REQUIRE_NOBODY();
  auto r = RunAsNobody({"run", "--memory", "64M", "--accept-missing", "cgroups", "--", "python3", "-c",
                        "try:\n  b = bytearray(256 << 20)\n  print('ALLOCATED')\nexcept MemoryError:\n  print('refused')"});
  EXPECT_EQ(r.out, "refused\n") << r.err;
  EXPECT_EQ(r.record["degraded"], nlohmann::json::array({"cgroups"}));
}

// escape_test.cc's attack of the same name, by an ordinary user: the link planted by run 1 must
// not steer run 2's nested mount point onto the host (the caller's own directories there).
TEST(Unprivileged, PlantedSymlinkRedirectsNestedMountPointOntoHost) {
  REQUIRE_NOBODY();
  TempDir ws, other;
  TempDir target("/var/tmp");  // not under /tmp, where the new root sits while it is built
  ASSERT_EQ(chown(ws.path().c_str(), kNobody, kNobody), 0);
  ASSERT_EQ(chown(target.path().c_str(), kNobody, kNobody), 0);
  ASSERT_EQ(chmod(other.path().c_str(), 0755), 0);
  auto plant = RunAsNobody({"run", "--rw", ws.path() + ":/work", "--", "ln", "-s", target.path(), "/work/sub"});
  ASSERT_EQ(plant.exit_code, 0) << plant.err;
  auto r = RunAsNobody({"run", "--rw", ws.path() + ":/work", "--ro", other.path() + ":/work/sub/deeper", "--",
                        "echo", "RAN"});
  EXPECT_TRUE(std::filesystem::is_empty(target.path())) << "created through the planted link: " << target.path();
  EXPECT_EQ(r.exit_code, 125) << r.out << r.err;
  EXPECT_EQ(r.out.find("RAN"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("/work/sub is a symbolic link"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace warden::testing
