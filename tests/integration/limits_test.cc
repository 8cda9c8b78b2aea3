// Resource attacks under limits: each runs the bomb for real and asserts that warden stopped it,
// reported the right reason, and came back promptly.
#include <gtest/gtest.h>

#include "harness.h"

namespace warden::testing {
namespace {

TEST(Limits, BusyLoopIsKilledAtTimeout) {
  auto r = RunWarden({{"run", "--timeout", "1s", "--", "python3", "-c", "while True: pass"}});
  EXPECT_EQ(r.exit_code, 124);
  EXPECT_EQ(r.record["reason"], "timeout");
  EXPECT_GE(r.record["wall_ms"].get<int>(), 1000);
  EXPECT_LT(r.record["wall_ms"].get<int>(), 3000);
}

TEST(Limits, TimeoutKillsTheWholeTreeIncludingDetachedChildren) {
  auto r = RunSh("(setsid sleep 1000 &) ; sleep 1000", {"--timeout", "500ms"});
  EXPECT_EQ(r.exit_code, 124);
  EXPECT_TRUE(PidsWithCmdline("sleep 1000").empty());
}

TEST(Limits, ForkBombIsContainedByPids) {
  if (!IsRoot()) GTEST_SKIP() << "cgroups need root here";
  auto r = RunSh("bomb() { bomb | bomb & }; bomb; sleep 1; exit 1", {"--pids", "32", "--timeout", "20s"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(r.record["reason"] == "pids" || r.record["reason"] == "timeout") << r.record.dump();
  EXPECT_EQ(r.record["cgroup"], "v1");
}

TEST(Limits, ForkLoopReportsPidsReason) {
  if (!IsRoot()) GTEST_SKIP() << "cgroups need root here";
  auto r = RunWarden({{"run", "--pids", "16", "--timeout", "20s", "--", "python3", "-c",
                       "import os, sys, time\nkids=[]\ntry:\n  while True:\n    p=os.fork()\n    if p==0:\n      time.sleep(30)\n      os._exit(0)\n    kids.append(p)\n"
                       "except OSError as e:\n  print('fork failed', e.errno, len(kids)); sys.exit(3)"}});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.out.find("fork failed 11"), std::string::npos) << r.out;  // EAGAIN
  EXPECT_EQ(r.record["reason"], "pids");
}

TEST(Limits, MemoryBombIsKilled) {
  if (!IsRoot()) GTEST_SKIP() << "cgroups need root here";
  auto r = RunWarden({{"run", "--memory", "64M", "--timeout", "30s", "--", "python3", "-c",
                       "chunks=[]\nwhile True: chunks.append(b'x' * (8 << 20))"}});
  EXPECT_EQ(r.exit_code, 137) << r.err;
  EXPECT_EQ(r.record["reason"], "memory") << r.record.dump();
  EXPECT_LE(r.record["peak_memory_bytes"].get<uint64_t>(), 64ull << 20);
  EXPECT_GE(r.record["peak_memory_bytes"].get<uint64_t>(), 32ull << 20);
}

TEST(Limits, CpuTimeLimitStopsTheTree) {
  if (!IsRoot()) GTEST_SKIP() << "cgroups need root here";
  auto r = RunWarden({{"run", "--cpu", "1s", "--timeout", "20s", "--", "python3", "-c", "while True: pass"}});
  EXPECT_EQ(r.record["reason"], "cpu") << r.record.dump();
  EXPECT_NE(r.exit_code, 0);
  EXPECT_GE(r.record["cpu_ms"].get<int>(), 900);
}

TEST(Limits, GigabyteOfOutputIsCutAtTheLimit) {
  auto r = RunWarden({{"run", "--output-limit", "1M", "--timeout", "60s", "--", "head", "-c", "1G", "/dev/zero"}});
  EXPECT_EQ(r.out.size(), 1u << 20);
  EXPECT_EQ(r.record["reason"], "output_limit");
  EXPECT_EQ(r.record["stdout_truncated"], true);
  EXPECT_EQ(r.record["stderr_truncated"], false);
  EXPECT_LT(r.record["wall_ms"].get<int>(), 10000);
}

TEST(Limits, FillingTmpHitsItsSize) {
  auto r = RunSh("dd if=/dev/zero of=/tmp/fill bs=1M count=100 2>&1; ls -l /tmp/fill | awk '{print $5}'",
                 {"--tmpfs-size", "8M"});
  EXPECT_NE(r.out.find("No space left on device"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("8388608"), std::string::npos) << r.out;
}

TEST(Limits, FileSizeLimit) {
  auto r = RunSh("dd if=/dev/zero of=/tmp/big bs=1k count=100 2>&1; ls -l /tmp/big | awk '{print $5}'",
                 {"--file-size", "10k"});
  EXPECT_NE(r.out.find("10240"), std::string::npos) << r.out;
}

TEST(Limits, OpenFilesLimit) {
  auto r = RunSh("ulimit -n", {"--open-files", "64"});
  EXPECT_EQ(r.out, "64\n");
}

}  // namespace
}  // namespace warden::testing
