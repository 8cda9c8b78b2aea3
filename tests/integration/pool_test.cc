// Pre-warmed pools (docs/pool.md): a pooled run keeps `warden run`'s contract (exit statuses,
// streams, output cap, result record), each sandbox serves one command and is replaced, and the
// pool survives exhaustion, crashes of waiting sandboxes and idle expiry.
#include <gtest/gtest.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <cstring>
#include <fstream>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include "harness.h"
#include "pool_fixture.h"

namespace warden::testing {
namespace {

std::set<std::string> Keys(const nlohmann::json& j) {
  std::set<std::string> keys;
  if (j.is_object())
    for (const auto& [k, v] : j.items()) keys.insert(k);
  return keys;
}

class Pool : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!IsRoot()) GTEST_SKIP() << "pool tests run as root (cgroups, uid maps to 65534)";
    ASSERT_TRUE(pool_.WaitReady()) << pool_.Log();
  }
  PoolProcess pool_;
};

TEST_F(Pool, ExitStatusesMatchAColdRun) {
  struct Case {
    std::string script;
    std::vector<std::string> flags;
    int exit_code;
    std::string reason;
  };
  std::vector<Case> cases = {{"exit 0", {}, 0, "exited"},
                             {"exit 3", {}, 3, "exited"},
                             {"kill -TERM $$", {}, 143, "signaled"},
                             {"sleep 5", {"--timeout", "300ms"}, 124, "timeout"}};
  for (const auto& c : cases) {
    auto cold = RunSh(c.script, c.flags);
    auto pooled = RunPooledSh(pool_, c.script, c.flags);
    EXPECT_EQ(cold.exit_code, c.exit_code) << c.script << cold.err;
    EXPECT_EQ(pooled.exit_code, c.exit_code) << c.script << pooled.err;
    EXPECT_EQ(pooled.record["reason"], c.reason) << pooled.record.dump();
    EXPECT_EQ(Keys(pooled.record), Keys(cold.record)) << pooled.record.dump() << "\n"
                                                      << cold.record.dump();
  }
  Invocation missing;
  missing.args = {"run", "--pool", pool_.socket(), "--", "no-such-command-here"};
  auto r = RunWarden(missing);
  EXPECT_EQ(r.exit_code, 127) << r.err;
  EXPECT_NE(r.err.find("command not found: no-such-command-here"), std::string::npos) << r.err;
  Invocation not_exec;
  not_exec.args = {"run", "--pool", pool_.socket(), "--", "/etc/passwd"};
  EXPECT_EQ(RunWarden(not_exec).exit_code, 126);
}

TEST_F(Pool, StreamsStdinStdoutStderrAndTheOutputCap) {
  Invocation inv;
  inv.args = {"run",
              "--pool",
              pool_.socket(),
              "--",
              "sh",
              "-c",
              "tr a-z A-Z; echo to-err >&2; echo $TERM $HOME; pwd"};
  inv.stdin_data = "hello pool\n";
  auto r = RunWarden(inv);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("HELLO POOL\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("/tmp\n/tmp\n"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("to-err"), std::string::npos) << r.err;
  EXPECT_EQ(r.record["stdout_bytes"], r.out.size());

  auto capped = RunPooledSh(pool_, "yes pool-output", {"--output-limit", "1k"});
  EXPECT_EQ(capped.exit_code, 137) << capped.err;
  EXPECT_EQ(capped.record["reason"], "output_limit") << capped.record.dump();
  EXPECT_EQ(capped.record["stdout_truncated"], true);
  EXPECT_EQ(capped.out.size(), 1024u);
}

TEST_F(Pool, NoStateIsCarriedFromOneCommandToTheNext) {
  auto first = RunPooledSh(
      pool_, "echo secret > /tmp/left-behind; echo x > /dev/shm/shm-left; sleep 30 & echo started");
  EXPECT_EQ(first.exit_code, 0) << first.err;
  for (int i = 0; i < 4; ++i) {  // every sandbox of the pool, and their replacements
    auto next = RunPooledSh(pool_, "ls -A /tmp /dev/shm; ps -e -o comm= | grep -c sleep; true");
    EXPECT_EQ(next.exit_code, 0) << next.err;
    EXPECT_EQ(next.out.find("left-behind"), std::string::npos) << next.out;
    EXPECT_EQ(next.out.find("shm-left"), std::string::npos) << next.out;
    EXPECT_NE(next.out.find("\n0\n"), std::string::npos)
        << "a process of an earlier command survived:\n"
        << next.out;
  }
}

TEST_F(Pool, MoreTakersThanSandboxesAllGetServed) {
  constexpr int kTakers = 6;  // the pool holds 2
  std::vector<Outcome> results(kTakers);
  std::vector<std::thread> threads;
  for (int i = 0; i < kTakers; ++i) {
    threads.emplace_back(
        [&, i] { results[i] = RunPooledSh(pool_, "sleep 0.3; echo taker-" + std::to_string(i)); });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kTakers; ++i) {
    EXPECT_EQ(results[i].exit_code, 0) << i << results[i].err;
    EXPECT_EQ(results[i].out, "taker-" + std::to_string(i) + "\n");
  }
  ASSERT_TRUE(pool_.WaitReady());
  auto s = pool_.Status();
  EXPECT_EQ(s["served"], kTakers) << s.dump();
  EXPECT_GE(s["refills"].get<int>(), kTakers) << s.dump();
  EXPECT_EQ(s["failed"], 0) << s.dump() << pool_.Log();
}

TEST_F(Pool, EachSandboxIsUsedOnceAndReplaced) {
  // Every sandbox's init as the host sees it: a sandbox handed out twice would show a pid twice.
  std::set<int> inits;
  auto record = [&] {
    nlohmann::json s = pool_.Status();
    for (const auto& sb : s["sandboxes"]) inits.insert(sb["pid"].get<int>());
  };
  record();
  for (int i = 0; i < 3; ++i) {
    auto r = RunPooledSh(pool_, "true");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    ASSERT_TRUE(pool_.WaitReady());
    record();
  }
  auto s = pool_.Status();
  EXPECT_EQ(s["served"], 3);
  EXPECT_EQ(s["refills"], 3) << s.dump();
  EXPECT_EQ(s["started"], 5) << s.dump();
  EXPECT_EQ(inits.size(), 5u) << "a sandbox was handed out twice";
}

TEST_F(Pool, ACrashedWaitingSandboxIsReplacedAndCounted) {
  auto s = pool_.Status();
  ASSERT_EQ(s["sandboxes"].size(), 2u) << s.dump();
  pid_t victim = s["sandboxes"][0]["pid"].get<int>();
  ASSERT_GT(victim, 0);
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  for (int i = 0; i < 200; ++i) {
    s = pool_.Status();
    if (s["failed"] == 1 && s["ready"] == 2) break;
    usleep(20 * 1000);
  }
  EXPECT_EQ(s["failed"], 1) << s.dump();
  EXPECT_EQ(s["ready"], 2) << s.dump();
  for (const auto& sb : s["sandboxes"]) EXPECT_NE(sb["pid"].get<int>(), victim);
  EXPECT_NE(pool_.Log().find("SIGKILL"), std::string::npos) << pool_.Log();
  auto r = RunPooledSh(pool_, "echo still-serving");
  EXPECT_EQ(r.out, "still-serving\n") << r.err;
}

TEST_F(Pool, AWaitingSandboxHoldsNothingOfTheServer) {
  // The init is a clone of the server: the listening socket, clients' streams and the other
  // sandboxes' channels and seccomp listeners must be gone before it builds anything. Left: 0, 1,
  // 2 on the host's /dev/null (shown as "/null": its mount is not in the sandbox) and its sync
  // socket.
  nlohmann::json s = pool_.Status();
  ASSERT_FALSE(s["sandboxes"].empty()) << s.dump();
  for (const auto& sb : s["sandboxes"]) {
    std::string dir = "/proc/" + std::to_string(sb["pid"].get<int>()) + "/fd";
    std::map<int, std::string> fds;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      fds[std::stoi(e.path().filename().string())] =
          std::filesystem::read_symlink(e.path()).string();
    }
    ASSERT_EQ(fds.size(), 4u) << s.dump();
    for (int fd : {0, 1, 2}) EXPECT_TRUE(fds[fd].ends_with("null")) << fd << " -> " << fds[fd];
    EXPECT_EQ(fds.rbegin()->second.rfind("socket:", 0), 0u) << fds.rbegin()->second;
  }
}

// A claim's data in the memory of sandboxes built after it (issue 10): an init is a copy of the
// memory of whoever cloned it. Cloned by the server, which had parsed an earlier client's request,
// it would carry that client's argv and --env secret into a later claimant's sandbox. Looked for
// from the host (root may read any process's memory): in every waiting init, after a claim with a
// secret was served and the pool refilled.
TEST_F(Pool, AWaitingSandboxHoldsNoOtherClaimsData) {
  const std::string secret = "claim-secret-" + std::to_string(getpid()) + "-Zq7x";
  // One claim served, and one still running while the pool refills: the server holds its request
  // (options, environment) while it builds the replacements.
  auto served = RunPooledSh(pool_, "true", {"--env", "API_TOKEN=" + secret});
  ASSERT_EQ(served.exit_code, 0) << served.err;
  ASSERT_TRUE(pool_.WaitReady()) << pool_.Log();
  Outcome running;
  std::thread claim([&] { running = RunPooledSh(pool_, "sleep 3", {"--env", "API_TOKEN=" + secret}); });
  bool refilled = false;
  for (int i = 0; i < 100 && !refilled; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    nlohmann::json st = pool_.Status();
    refilled = st.is_object() && st["in_use"] == 1 && st["ready"] == st["size"];
  }
  EXPECT_TRUE(refilled) << pool_.Status().dump();
  nlohmann::json s = pool_.Status();
  ASSERT_FALSE(s["sandboxes"].empty()) << s.dump();
  size_t scanned_bytes = 0;
  for (const auto& sb : s["sandboxes"]) {
    if (sb["state"] != "ready") continue;  // the claimed one holds its own claim, rightly
    const std::string proc = "/proc/" + std::to_string(sb["pid"].get<int>());
    std::ifstream maps(proc + "/maps");
    int mem = open((proc + "/mem").c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(mem, 0) << "root reads " << proc << "/mem: " << strerror(errno);
    std::string line;
    while (std::getline(maps, line)) {
      unsigned long long from = 0, to = 0;
      char perms[5] = {};
      if (std::sscanf(line.c_str(), "%llx-%llx %4s", &from, &to, perms) != 3 || perms[0] != 'r') continue;
      if (line.find("[vvar") != std::string::npos || line.find("[vsyscall]") != std::string::npos) continue;
      // In chunks that overlap by the secret's length; sanitizer builds map terabytes of shadow
      // (readable, never touched): regions that large hold no heap and are skipped.
      if (to - from > (1ull << 32)) continue;
      constexpr size_t kChunk = 1 << 20;
      std::string chunk(kChunk + secret.size(), '\0');
      for (unsigned long long at = from; at < to; at += kChunk) {
        const size_t want = static_cast<size_t>(std::min<unsigned long long>(chunk.size(), to - at));
        ssize_t n = pread(mem, chunk.data(), want, static_cast<off_t>(at));
        if (n <= 0) break;
        scanned_bytes += static_cast<size_t>(std::min<ssize_t>(n, kChunk));
        EXPECT_EQ(std::string_view(chunk.data(), static_cast<size_t>(n)).find(secret), std::string_view::npos)
            << "a waiting sandbox's init holds an earlier claim's secret, in " << line;
      }
    }
    close(mem);
  }
  EXPECT_GT(scanned_bytes, 1u << 20) << "the scan read almost nothing: it proves nothing";
  claim.join();
  EXPECT_EQ(running.exit_code, 0) << running.err;
}

TEST_F(Pool, OptionsThePoolCannotSatisfyAreRefused) {
  TempDir dir;
  struct Case {
    std::vector<std::string> flags;
    std::string names;
  };
  for (const Case& c : std::vector<Case>{{{"--memory", "1G"}, "--memory"},
                                         {{"--pids", "50"}, "--pids"},
                                         {{"--rw", dir.path()}, "--rw " + dir.path()},
                                         {{"--ro", dir.path() + ":/data"}, "--ro"},
                                         {{"--allow", "example.com"}, "--net proxy"},
                                         {{"--tmpfs-size", "1G"}, "--tmpfs-size"},
                                         {{"--backend", "gvisor"}, "--backend gvisor"},
                                         {{"--cpu", "5s"}, "--cpu"}}) {
    auto r = RunPooledSh(pool_, "echo RAN", c.flags);
    EXPECT_EQ(r.exit_code, 125) << c.names << r.err;
    EXPECT_EQ(r.out.find("RAN"), std::string::npos);
    EXPECT_NE(r.err.find(c.names), std::string::npos) << r.err;
    EXPECT_EQ(r.record["reason"], "setup_error");
  }
  EXPECT_EQ(pool_.Status()["refused"], 8);
}

TEST_F(Pool, StopsCleanlyLeavingNothingBehind) {
  auto r = RunPooledSh(pool_, "true");
  EXPECT_EQ(r.exit_code, 0);
  auto s = pool_.Status();
  std::vector<int> pids;
  for (const auto& sb : s["sandboxes"]) pids.push_back(sb["pid"].get<int>());
  EXPECT_EQ(pool_.Stop(), 0) << pool_.Log();
  for (int pid : pids) EXPECT_NE(kill(pid, 0), 0) << "sandbox init " << pid << " outlived the pool";
  EXPECT_NE(access(pool_.socket().c_str(), F_OK), 0) << "socket left behind";
  auto after = RunPooledSh(pool_, "true");
  EXPECT_EQ(after.exit_code, 125);
  EXPECT_NE(after.err.find("connect"), std::string::npos) << after.err;
}

TEST(PoolLimits, MemoryAndPidsReasonsAndCgroupsRemoved) {
  if (!IsRoot()) GTEST_SKIP() << "needs root for cgroups";
  PoolProcess pool({"--size", "1", "--memory", "64M", "--pids", "32"});
  ASSERT_TRUE(pool.WaitReady()) << pool.Log();
  auto mem = RunWarden({{"run", "--pool", pool.socket(), "--timeout", "30s", "--", "python3", "-c",
                         "chunks=[]\nwhile True: chunks.append(b'x' * (8 << 20))"}});
  EXPECT_EQ(mem.exit_code, 137) << mem.err;
  EXPECT_EQ(mem.record["reason"], "memory") << mem.record.dump();
  EXPECT_EQ(mem.record["cgroup"].get<std::string>().empty(), false);
  auto pids = RunWarden(
      {{"run", "--pool", pool.socket(), "--timeout", "20s", "--", "python3", "-c",
        "import os, sys, time\nkids=[]\ntry:\n  while True:\n    p=os.fork()\n    if p==0:\n      "
        "time.sleep(30)\n      os._exit(0)\n    kids.append(p)\n"
        "except OSError as e:\n  print('fork failed', e.errno, len(kids)); sys.exit(3)"}});
  EXPECT_EQ(pids.exit_code, 3) << pids.err;
  EXPECT_NE(pids.out.find("fork failed 11"), std::string::npos) << pids.out;
  EXPECT_EQ(pids.record["reason"], "pids") << pids.record.dump();
  auto same = RunPooledSh(pool, "echo ok", {"--memory", "64M", "--pids", "32"});
  EXPECT_EQ(same.exit_code, 0) << same.err;
  EXPECT_EQ(pool.Stop(), 0);
  auto dirs = WardenCgroupDirs();
  for (const auto& d : dirs)
    EXPECT_EQ(d.find("warden-" + std::to_string(pool.pid()) + "-"), std::string::npos) << d;
}

// escape_test.cc's ReadRootOnlyFileBeneathPrivateDirectoryThroughBind for a pool's bind: the
// server opens the source (beneath a 0700 root-owned directory) for each sandbox it builds, a
// root-only file in it stays unreadable, and neither the server nor a waiting sandbox keeps a
// descriptor of the source once the sandbox is built.
TEST(PoolBinds, ReadRootOnlyFileBeneathPrivateDirectoryThroughPooledBind) {
  if (!IsRoot()) GTEST_SKIP() << "pool tests run as root";
  TempDir priv;
  ASSERT_EQ(chmod(priv.path().c_str(), 0700), 0);
  priv.Write("data/public.txt", "PUBLIC", 0644);
  priv.Write("data/secret.txt", "TOPSECRET", 0600);
  const std::string data = priv.path() + "/data";
  ASSERT_EQ(chmod(data.c_str(), 0755), 0);
  PoolProcess pool({"--size", "2", "--ro", data + ":/data"});
  ASSERT_TRUE(pool.WaitReady()) << pool.Log();
  auto r = RunPooledSh(pool, "cat /data/public.txt; echo; cat /data/secret.txt");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.out, "PUBLIC\n") << r.err;
  EXPECT_NE(r.err.find("/data/secret.txt: Permission denied"), std::string::npos) << r.err;
  ASSERT_TRUE(pool.WaitReady()) << pool.Log();
  struct stat src;
  ASSERT_EQ(stat(data.c_str(), &src), 0);
  std::vector<int> pids = {pool.pid()};
  const nlohmann::json status = pool.Status();
  for (const auto& sb : status["sandboxes"]) pids.push_back(sb["pid"].get<int>());
  ASSERT_GE(pids.size(), 3u) << status.dump();
  for (int pid : pids) {
    for (const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
      struct stat st;
      if (stat(e.path().c_str(), &st) != 0) continue;
      EXPECT_FALSE(st.st_dev == src.st_dev && st.st_ino == src.st_ino)
          << "pid " << pid << " (server " << pool.pid() << ") holds " << e.path() << " on the bind source";
    }
  }
}

TEST(PoolIdle, SandboxesOlderThanTheIdleTimeoutAreReplaced) {
  if (!IsRoot()) GTEST_SKIP() << "pool tests run as root";
  PoolProcess pool({"--size", "2", "--idle-timeout", "300ms"});
  ASSERT_TRUE(pool.WaitReady()) << pool.Log();
  usleep(1200 * 1000);
  auto s = pool.Status();
  EXPECT_GE(s["expired"].get<int>(), 2) << s.dump();
  EXPECT_EQ(s["failed"], 0) << s.dump();
  for (const auto& sb : s["sandboxes"]) EXPECT_LT(sb["age_ms"].get<int>(), 1000) << s.dump();
  auto r = RunPooledSh(pool, "echo fresh");
  EXPECT_EQ(r.out, "fresh\n") << r.err;
}

TEST(PoolStart, BadProfileOrSocketIsRefused) {
  Invocation net;
  net.json = false;
  net.args = {"pool", "start", "--socket", "/tmp/warden-test-pool-never.sock", "--size", "0"};
  auto r = RunWarden(net);
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("--size"), std::string::npos) << r.err;
  Invocation missing;
  missing.json = false;
  missing.args = {"pool", "start",       "--socket", "/tmp/warden-test-pool-never.sock",
                  "--ro", "/no/such/dir"};
  r = RunWarden(missing);
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("/no/such/dir"), std::string::npos) << r.err;
  Invocation status;
  status.json = false;
  status.args = {"pool", "status", "--socket", "/tmp/warden-test-pool-never.sock"};
  r = RunWarden(status);
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("connect"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace warden::testing
