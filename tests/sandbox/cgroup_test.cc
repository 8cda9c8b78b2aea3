#include "sandbox/cgroup.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace warden::sandbox::cgroup {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::string Basename(const std::string& path) { return path.substr(path.rfind('/') + 1); }
std::string Dirname(const std::string& path) { return path.substr(0, path.rfind('/')); }

// The directory among `cg.paths()` that has `file` (which hierarchy holds which controller).
std::string DirWith(const Cgroup& cg, const std::string& file) {
  for (const auto& dir : cg.paths()) {
    if (Exists(dir + "/" + file)) return dir;
  }
  return "";
}

// A forked process that waits for Release() before running `body`, so the test can put it in a
// cgroup first. `body` gets a descriptor on which it may report readiness (one byte) and returns
// the exit code.
class Child {
 public:
  explicit Child(const std::function<int(int ready_fd)>& body) {
    int go[2], ready[2];
    if (::pipe2(go, O_CLOEXEC) != 0 || ::pipe2(ready, O_CLOEXEC) != 0) std::abort();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(go[1]);
      ::close(ready[0]);
      char byte;
      if (::read(go[0], &byte, 1) != 1) ::_exit(100);
      ::_exit(body(ready[1]));
    }
    ::close(go[0]);
    ::close(ready[1]);
    go_fd_ = go[1];
    ready_fd_ = ready[0];
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      Wait();
    }
    ::close(go_fd_);
    ::close(ready_fd_);
  }

  pid_t pid() const { return pid_; }
  void Release() { ASSERT_EQ(::write(go_fd_, "g", 1), 1); }
  bool WaitReady() {
    char byte;
    return ::read(ready_fd_, &byte, 1) == 1;
  }
  // The raw wait status.
  int Wait() {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
  int go_fd_ = -1;
  int ready_fd_ = -1;
};

void Signal(int fd) { (void)!::write(fd, "r", 1); }

[[noreturn]] void SleepForever() {
  for (;;) ::pause();
}

// Tests that create real cgroups: root (or a delegated subtree) and a usable hierarchy.
class CgroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root: creates cgroups under the caller's own";
    Status available = Available();
    if (!available.ok()) GTEST_SKIP() << "cgroups unavailable: " << available.message();
  }

  Cgroup Create(const Limits& limits) {
    auto cg = Cgroup::CreateFromParent(limits);
    EXPECT_TRUE(cg.ok()) << cg.status().message();
    if (!cg.ok()) std::abort();
    return std::move(cg).value();
  }
};

TEST(CgroupAvailableTest, AvailableOnThisHostWhenRoot) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  Status available = Available();
  EXPECT_TRUE(available.ok()) << available.message();
}

TEST_F(CgroupTest, CreateWritesTheLimitsToTheControlFiles) {
  Cgroup cg = Create({.memory_bytes = 64 * kMiB, .pids = 16});
  auto layout = DetectLayout();
  ASSERT_TRUE(layout.ok());
  ASSERT_FALSE(cg.paths().empty());
  for (const auto& dir : cg.paths()) {
    EXPECT_TRUE(Exists(dir)) << dir;
    EXPECT_EQ(Basename(dir).rfind("warden-" + std::to_string(::getpid()) + "-", 0), 0u) << dir;
    const std::string parent = Dirname(dir);
    EXPECT_TRUE(parent == layout->unified || parent == layout->memory || parent == layout->pids ||
                parent == layout->cpuacct)
        << dir << " is not a child of the caller's own cgroup";
  }
  if (cg.is_v2()) {
    EXPECT_EQ(Trimmed(Slurp(cg.paths()[0] + "/memory.max")), std::to_string(64 * kMiB));
    EXPECT_EQ(Trimmed(Slurp(cg.paths()[0] + "/pids.max")), "16");
    if (Exists(cg.paths()[0] + "/memory.swap.max")) {
      EXPECT_EQ(Trimmed(Slurp(cg.paths()[0] + "/memory.swap.max")), "0");
    }
  } else {
    const std::string memory = DirWith(cg, "memory.limit_in_bytes");
    ASSERT_FALSE(memory.empty());
    EXPECT_EQ(Trimmed(Slurp(memory + "/memory.limit_in_bytes")), std::to_string(64 * kMiB));
    if (Exists(memory + "/memory.memsw.limit_in_bytes")) {
      EXPECT_EQ(Trimmed(Slurp(memory + "/memory.memsw.limit_in_bytes")), std::to_string(64 * kMiB));
    }
    EXPECT_NE(Slurp(memory + "/memory.oom_control").find("oom_kill_disable 0"), std::string::npos);
    const std::string pids = DirWith(cg, "pids.max");
    ASSERT_FALSE(pids.empty());
    EXPECT_EQ(Trimmed(Slurp(pids + "/pids.max")), "16");
    EXPECT_FALSE(DirWith(cg, "cpuacct.usage").empty());
  }
}

TEST_F(CgroupTest, NoLimitsLeavesTheDefaultsInPlace) {
  Cgroup cg = Create({});
  if (cg.is_v2()) {
    EXPECT_EQ(Trimmed(Slurp(cg.paths()[0] + "/pids.max")), "max");
  } else {
    EXPECT_EQ(Trimmed(Slurp(DirWith(cg, "pids.max") + "/pids.max")), "max");
  }
}

TEST_F(CgroupTest, EachCgroupGetsItsOwnName) {
  Cgroup a = Create({});
  Cgroup b = Create({});
  EXPECT_NE(a.paths(), b.paths());
}

TEST_F(CgroupTest, MovedFromCgroupOwnsNothing) {
  Cgroup a = Create({});
  const auto dirs = a.paths();
  Cgroup b = std::move(a);
  EXPECT_TRUE(a.paths().empty());  // NOLINT(bugprone-use-after-move): the contract under test
  EXPECT_EQ(b.paths(), dirs);
  for (const auto& dir : dirs) EXPECT_TRUE(Exists(dir));
}

TEST_F(CgroupTest, ChildAllocatingPastTheMemoryLimitIsOomKilled) {
  constexpr uint64_t kLimit = 32 * kMiB;
  Cgroup cg = Create({.memory_bytes = kLimit});
  Child child([](int) {
    constexpr size_t kSize = 256 * kMiB;
    void* mem = ::mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return 2;
    auto* bytes = static_cast<volatile char*>(mem);
    for (size_t i = 0; i < kSize; i += 4096) bytes[i] = 1;  // each page becomes resident
    return 0;                                               // the limit did not hold
  });
  ASSERT_TRUE(cg.AddProcessFromParent(child.pid()).ok());
  child.Release();
  const int status = child.Wait();
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit code " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  const Usage usage = cg.ReadUsage();
  EXPECT_TRUE(usage.oom_killed);
  EXPECT_GE(usage.peak_memory_bytes, kLimit * 3 / 4);
  EXPECT_LE(usage.peak_memory_bytes, kLimit + kMiB);
}

TEST_F(CgroupTest, ForkBeyondPidsMaxFailsWithEagain) {
  Cgroup cg = Create({.pids = 4});
  Child child([](int) {
    std::vector<pid_t> sleepers;
    int fork_errno = 0;
    for (int i = 0; i < 16 && fork_errno == 0; ++i) {
      pid_t pid = ::fork();
      if (pid == 0) SleepForever();
      if (pid < 0)
        fork_errno = errno;
      else
        sleepers.push_back(pid);
    }
    for (pid_t pid : sleepers) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    if (fork_errno == 0) return 3;       // never hit the limit
    if (sleepers.size() != 3) return 4;  // the limit counts the child itself: 1 + 3 = 4
    return fork_errno == EAGAIN ? 0 : 5;
  });
  ASSERT_TRUE(cg.AddProcessFromParent(child.pid()).ok());
  child.Release();
  const int status = child.Wait();
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(cg.ReadUsage().pids_limit_hit);
}

TEST_F(CgroupTest, PidsLimitIsNotReportedWhenNotHit) {
  Cgroup cg = Create({.pids = 4});
  Child child([](int) { return 0; });
  ASSERT_TRUE(cg.AddProcessFromParent(child.pid()).ok());
  child.Release();
  child.Wait();
  const Usage usage = cg.ReadUsage();
  EXPECT_FALSE(usage.pids_limit_hit);
  EXPECT_FALSE(usage.oom_killed);
}

TEST_F(CgroupTest, CpuTimeOfABusyChildIsCounted) {
  Cgroup cg = Create({});
  const uint64_t before = cg.ReadUsage().cpu_ns;
  Child child([](int) {
    timespec used{};
    do {
      ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &used);
    } while (used.tv_sec == 0 && used.tv_nsec < 300'000'000);
    return 0;
  });
  ASSERT_TRUE(cg.AddProcessFromParent(child.pid()).ok());
  child.Release();
  child.Wait();
  const Usage usage = cg.ReadUsage();
  EXPECT_LT(before, 50'000'000u);
  EXPECT_GE(usage.cpu_ns, 250'000'000u);
  EXPECT_LT(usage.cpu_ns, 30'000'000'000u);
  EXPECT_GT(usage.peak_memory_bytes, 0u);
}

// A child and a grandchild, both asleep in the cgroup. The test process is their subreaper so
// the grandchild does not become someone else's zombie.
class SleepingTree {
 public:
  explicit SleepingTree(Cgroup& cg)
      : child_([](int ready) -> int {
          if (::fork() == 0) SleepForever();
          Signal(ready);
          SleepForever();
        }) {
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    EXPECT_TRUE(cg.AddProcessFromParent(child_.pid()).ok());
    child_.Release();
    EXPECT_TRUE(child_.WaitReady());
  }
  ~SleepingTree() {
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    ::prctl(PR_SET_CHILD_SUBREAPER, 0);
  }
  Child& child() { return child_; }

 private:
  Child child_;
};

std::vector<std::string> Procs(const std::string& dir) {
  std::vector<std::string> pids;
  std::istringstream in(Slurp(dir + "/cgroup.procs"));
  for (std::string pid; in >> pid;) pids.push_back(pid);
  return pids;
}

TEST_F(CgroupTest, KillAllLeavesTheCgroupEmpty) {
  Cgroup cg = Create({});
  SleepingTree tree(cg);
  EXPECT_EQ(Procs(cg.paths()[0]).size(), 2u);
  ASSERT_TRUE(cg.KillAll().ok());
  for (const auto& dir : cg.paths()) EXPECT_TRUE(Procs(dir).empty()) << dir;
  const int status = tree.child().Wait();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

TEST_F(CgroupTest, DestructorKillsWhatIsLeftAndRemovesTheDirectories) {
  std::vector<std::string> dirs;
  std::optional<SleepingTree> tree;
  {
    Cgroup cg = Create({.memory_bytes = 64 * kMiB, .pids = 8});
    dirs = cg.paths();
    tree.emplace(cg);
  }
  for (const auto& dir : dirs) EXPECT_FALSE(Exists(dir)) << dir << " still exists";
  const int status = tree->child().Wait();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

TEST_F(CgroupTest, AddProcessNamesTheFileAndErrnoOnFailure) {
  Cgroup cg = Create({});
  Child child([](int) { return 0; });
  const pid_t gone = child.pid();
  child.Release();
  child.Wait();  // reaped: its pid no longer exists
  Status st = cg.AddProcessFromParent(gone);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cgroup.procs"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("errno"), std::string::npos) << st.message();
}

// A warden that was SIGKILLed after creating its cgroups; returns their paths.
std::vector<std::string> CgroupsOfAKilledWarden(pid_t sleeper_to_add) {
  int report[2];
  EXPECT_EQ(::pipe(report), 0);
  pid_t warden = ::fork();
  if (warden == 0) {
    ::close(report[0]);
    auto cg = Cgroup::CreateFromParent({.pids = 8});
    if (!cg.ok()) ::_exit(1);
    if (sleeper_to_add > 0 && !cg->AddProcessFromParent(sleeper_to_add).ok()) ::_exit(2);
    std::string text;
    for (const auto& dir : cg->paths()) text += dir + "\n";
    (void)!::write(report[1], text.data(), text.size());
    ::close(report[1]);
    ::raise(SIGKILL);  // no destructor runs
  }
  ::close(report[1]);
  std::string text;
  char buf[512];
  for (ssize_t n; (n = ::read(report[0], buf, sizeof buf)) > 0;) text.append(buf, n);
  ::close(report[0]);
  int status = 0;
  ::waitpid(warden, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  std::vector<std::string> dirs;
  std::istringstream in(text);
  for (std::string dir; std::getline(in, dir);) dirs.push_back(dir);
  return dirs;
}

TEST_F(CgroupTest, SweepStaleRemovesEmptyCgroupsOfADeadWardenAndKeepsLiveOnes) {
  const std::vector<std::string> stale = CgroupsOfAKilledWarden(0);
  ASSERT_FALSE(stale.empty());
  for (const auto& dir : stale) ASSERT_TRUE(Exists(dir)) << dir;
  Cgroup live = Create({});

  EXPECT_GE(SweepStale(), static_cast<int>(stale.size()));
  for (const auto& dir : stale) EXPECT_FALSE(Exists(dir)) << dir << " was not swept";
  for (const auto& dir : live.paths()) EXPECT_TRUE(Exists(dir)) << dir << " of a live warden swept";
}

TEST_F(CgroupTest, SweepStaleLeavesACgroupThatStillHasProcesses) {
  Child sleeper([](int) -> int { SleepForever(); });
  const std::vector<std::string> stale = CgroupsOfAKilledWarden(sleeper.pid());
  ASSERT_FALSE(stale.empty());
  SweepStale();
  for (const auto& dir : stale) EXPECT_TRUE(Exists(dir)) << dir;
  ::kill(sleeper.pid(), SIGKILL);
  sleeper.Wait();
  SweepStale();
  for (const auto& dir : stale) EXPECT_FALSE(Exists(dir)) << dir;
}

TEST_F(CgroupTest, JanitorRemovesTheCgroupsOfAKilledWardenOnceTheyEmpty) {
  Child sleeper([](int) -> int { SleepForever(); });
  const std::vector<std::string> dirs = CgroupsOfAKilledWarden(sleeper.pid());
  ASSERT_FALSE(dirs.empty());
  std::vector<const char*> c_paths;
  for (const auto& dir : dirs) c_paths.push_back(dir.c_str());

  timespec start{}, end{};
  ::clock_gettime(CLOCK_MONOTONIC, &start);
  pid_t janitor = ::fork();
  if (janitor == 0) {
    RemoveWhenEmpty(c_paths.data(), static_cast<int>(c_paths.size()), 5000);
    ::_exit(0);
  }
  ::usleep(200'000);
  for (const auto& dir : dirs) EXPECT_TRUE(Exists(dir)) << dir << " removed while populated";
  ::kill(sleeper.pid(), SIGKILL);
  sleeper.Wait();
  ::waitpid(janitor, nullptr, 0);
  ::clock_gettime(CLOCK_MONOTONIC, &end);
  for (const auto& dir : dirs) EXPECT_FALSE(Exists(dir)) << dir;
  EXPECT_LT(end.tv_sec - start.tv_sec, 4) << "janitor waited for its timeout, not for the cgroup";
}

TEST_F(CgroupTest, RemoveWhenEmptyGivesUpAfterTheTimeout) {
  Cgroup cg = Create({});
  Child sleeper([](int) -> int { SleepForever(); });
  ASSERT_TRUE(cg.AddProcessFromParent(sleeper.pid()).ok());
  const std::string dir = cg.paths()[0];
  const char* path = dir.c_str();
  timespec start{}, end{};
  ::clock_gettime(CLOCK_MONOTONIC, &start);
  RemoveWhenEmpty(&path, 1, 100);
  ::clock_gettime(CLOCK_MONOTONIC, &end);
  EXPECT_TRUE(Exists(dir));
  const long elapsed_ms =
      (end.tv_sec - start.tv_sec) * 1000 + (end.tv_nsec - start.tv_nsec) / 1000000;
  EXPECT_GE(elapsed_ms, 100);
  EXPECT_LT(elapsed_ms, 1000);
}

// The v2 code path, exercised in the cgroup2 hierarchy of a hybrid host: it has no memory or pids
// controller there, but creation, joining, cpu.stat and cgroup.kill work the same.
TEST(CgroupV2Test, UnifiedHierarchyCreatesJoinsCountsAndKills) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  Layout found = ParseLayout(Slurp("/proc/self/mountinfo"), Slurp("/proc/self/cgroup"), ::getpid());
  if (found.unified.empty() || !Exists(found.unified + "/cgroup.procs")) {
    GTEST_SKIP() << "no cgroup2 hierarchy here";
  }
  auto created = Cgroup::CreateIn({.v2 = true, .unified = found.unified}, {});
  if (!created.ok()) GTEST_SKIP() << "cgroup2 not usable here: " << created.status().message();
  std::string dir;
  {
    Cgroup cg = std::move(created).value();
    ASSERT_TRUE(cg.is_v2());
    ASSERT_EQ(cg.paths().size(), 1u);
    dir = cg.paths()[0];
    Child busy([](int ready) {
      Signal(ready);
      volatile uint64_t spins = 0;
      for (;;) spins = spins + 1;
      return 0;
    });
    ASSERT_TRUE(cg.AddProcessFromParent(busy.pid()).ok());
    busy.Release();
    ASSERT_TRUE(busy.WaitReady());
    ::usleep(100'000);
    EXPECT_GT(cg.ReadUsage().cpu_ns, 0u);
    ASSERT_TRUE(cg.KillAll().ok());
    EXPECT_TRUE(Procs(dir).empty());
    const int status = busy.Wait();
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  }
  EXPECT_FALSE(Exists(dir));
}

// Errors name the file and the errno; no root needed: a plain directory stands in for a
// hierarchy that lacks the controller's files.
TEST(CgroupErrorTest, CreateNamesTheMissingFileAndErrnoAndCleansUp) {
  char tmpl[] = "/tmp/warden-cgroup-test-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string base = tmpl;
  auto cg = Cgroup::CreateIn({.memory = base}, {.memory_bytes = 64 * kMiB});
  ASSERT_FALSE(cg.ok());
  EXPECT_NE(cg.status().message().find(base), std::string::npos) << cg.status().message();
  EXPECT_NE(cg.status().message().find("memory.oom_control"), std::string::npos)
      << cg.status().message();
  EXPECT_NE(cg.status().message().find("errno 2"), std::string::npos) << cg.status().message();
  EXPECT_EQ(::rmdir(base.c_str()), 0) << "the half-made cgroup directories were not removed";
}

TEST(CgroupErrorTest, CreateSaysHowToEnableAMissingController) {
  auto cg = Cgroup::CreateIn({.memory = "", .pids = "/nonexistent"}, {.memory_bytes = kMiB});
  ASSERT_FALSE(cg.ok());
  EXPECT_NE(cg.status().message().find("memory controller not mounted"), std::string::npos)
      << cg.status().message();
  EXPECT_NE(cg.status().message().find("delegate"), std::string::npos) << cg.status().message();
}

// ParseLayout, from the text of /proc/self/{mountinfo,cgroup}.
constexpr const char* kHybridMountinfo =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
constexpr const char* kHybridCgroup =
    "8:pids:/\n4:memory:/process_api/c465\n2:cpuacct:/\n1:cpu:/\n0::/\n";

TEST(ParseLayoutTest, HybridHostGivesEachControllersOwnCgroup) {
  Layout layout = ParseLayout(kHybridMountinfo, kHybridCgroup, 42);
  EXPECT_FALSE(layout.v2);
  EXPECT_EQ(layout.unified, "/sys/fs/cgroup/unified");
  EXPECT_EQ(layout.memory, "/sys/fs/cgroup/memory/process_api/c465");
  EXPECT_EQ(layout.pids, "/sys/fs/cgroup/pids");
  EXPECT_EQ(layout.cpuacct, "/sys/fs/cgroup/cpuacct");
}

TEST(ParseLayoutTest, PureV2Host) {
  Layout layout = ParseLayout(
      "30 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n",
      "0::/system.slice/warden.service\n", 42);
  EXPECT_EQ(layout.unified, "/sys/fs/cgroup/system.slice/warden.service");
  EXPECT_EQ(layout.memory, "");
  EXPECT_EQ(layout.pids, "");
}

TEST(ParseLayoutTest, CoMountedCpuAndCpuacct) {
  Layout layout =
      ParseLayout("32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n",
                  "3:cpu,cpuacct:/user.slice\n", 42);
  EXPECT_EQ(layout.cpuacct, "/sys/fs/cgroup/cpu,cpuacct/user.slice");
}

TEST(ParseLayoutTest, MountOfASubtreeIsResolvedRelativeToItsRoot) {
  const char* mountinfo =
      "41 31 0:38 /docker/abc /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";
  EXPECT_EQ(ParseLayout(mountinfo, "4:memory:/docker/abc/job\n", 42).memory,
            "/sys/fs/cgroup/memory/job");
  EXPECT_EQ(ParseLayout(mountinfo, "4:memory:/docker/abc\n", 42).memory, "/sys/fs/cgroup/memory");
  EXPECT_EQ(ParseLayout(mountinfo, "4:memory:/docker/other\n", 42).memory, "")
      << "a cgroup outside the mounted subtree is not reachable";
}

TEST(ParseLayoutTest, EscapedMountpoint) {
  Layout layout =
      ParseLayout("41 31 0:38 / /mnt/my\\040cgroups rw - cgroup2 cgroup2 rw\n", "0::/a\n", 42);
  EXPECT_EQ(layout.unified, "/mnt/my cgroups/a");
}

TEST(ParseLayoutTest, SupervisorLeafMeansSandboxesGoNextToIt) {
  const char* mountinfo = "30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
  EXPECT_EQ(ParseLayout(mountinfo, "0::/svc/warden-42-0\n", 42).unified, "/sys/fs/cgroup/svc");
  EXPECT_EQ(ParseLayout(mountinfo, "0::/svc/warden-41-0\n", 42).unified,
            "/sys/fs/cgroup/svc/warden-41-0")
      << "another warden's leaf is not ours";
}

TEST(ParseLayoutTest, MissingHierarchiesStayEmpty) {
  Layout layout = ParseLayout("", "", 42);
  EXPECT_EQ(layout.unified, "");
  EXPECT_EQ(layout.memory, "");
}

}  // namespace
}  // namespace warden::sandbox::cgroup
