// warden run by an ordinary user (unprivileged user namespaces): the same sandbox, mapped to the
// caller, and fail-closed where a feature (cgroups) is out of reach.
#include <gtest/gtest.h>
#include <unistd.h>

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

}  // namespace
}  // namespace warden::testing
