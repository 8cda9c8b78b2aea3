// Reading /proc while processes come and go (upstream/process_tree.h, common/read_file.h).
// Issue 10 item 9: `warden serve` with 500 idle sessions died of an uncaught std::ios_failure
// ("basic_filebuf::underflow error reading the file: No such process") thrown by
// std::istreambuf_iterator over a /proc/PID/stat whose process was reaped after the open.
#include "upstream/process_tree.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <iterator>
#include <thread>

#include "common/read_file.h"

namespace warden::upstream {
namespace {

// A child that waits to be killed.
pid_t SleepingChild() {
  const pid_t pid = fork();
  if (pid == 0) {
    pause();
    _exit(0);
  }
  return pid;
}

void KillAndReap(pid_t pid) {
  kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

TEST(ReadFileTest, StatOfAProcessReapedAfterTheOpenIsAnErrorNotAnException) {
  const pid_t pid = SleepingChild();
  ASSERT_GT(pid, 0);
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(fd.valid());
  KillAndReap(pid);
  auto text = ReadFdUpTo(fd.get(), 4096, path);
  ASSERT_FALSE(text.ok()) << "read " << text->size() << " bytes of a reaped process's stat";
  EXPECT_EQ(text.status().err(), ESRCH) << text.status().message();
  EXPECT_NE(text.status().message().find(path), std::string::npos) << text.status().message();
  // And a path that is gone by the time it is opened.
  auto gone = ReadFileUpTo(path, 4096);
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().err(), ENOENT);
}

// Why the helper exists: the same read through a stream throws, whatever its exception mask.
TEST(ReadFileTest, TheStreamReadItReplacesThrowsOnTheSameRead) {
  const pid_t pid = SleepingChild();
  ASSERT_GT(pid, 0);
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  ASSERT_TRUE(stat.is_open());
  KillAndReap(pid);
  EXPECT_THROW(std::string((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>()),
               std::ios_base::failure);
}

TEST(ProcessTreeTest, ParentFromStatReadsPastACommandNameWithSpacesAndParens) {
  EXPECT_EQ(ParentFromStat("42 (a b) c) S 7 42 42 0 -1"), 7);
  EXPECT_EQ(ParentFromStat("1 (init) S 0 1 1"), 0);
  EXPECT_EQ(ParentFromStat("42 (x"), std::nullopt);
  EXPECT_EQ(ParentFromStat("42 (x) S"), std::nullopt);
  EXPECT_EQ(ParentFromStat(""), std::nullopt);
}

TEST(ProcessTreeTest, PinsChildrenAndGrandchildren) {
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  if (child == 0) {
    const pid_t grandchild = fork();
    if (grandchild == 0) {
      pause();
      _exit(0);
    }
    (void)write(ready[1], "x", 1);
    pause();
    _exit(0);
  }
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  close(ready[0]);
  close(ready[1]);
  EXPECT_EQ(PinDescendants(child).size(), 1u) << "the grandchild";
  EXPECT_GE(PinDescendants(getpid()).size(), 2u) << "the child and the grandchild";
  for (auto& fd : PinDescendants(child)) syscall(SYS_pidfd_send_signal, fd.get(), SIGKILL, nullptr, 0);
  KillAndReap(child);
}

// The scan runs while processes of ours start, exit and are reaped as fast as they can: every
// scan completes (none throws), in a bounded number of rounds.
TEST(ProcessTreeTest, ScanSurvivesProcessesExitingConcurrently) {
  std::atomic<bool> stop{false};
  std::atomic<int> churned{0};
  std::thread churn([&] {
    while (!stop.load()) {
      pid_t batch[16];
      int n = 0;
      for (; n < 16; ++n) {
        batch[n] = fork();
        if (batch[n] == 0) _exit(0);
        if (batch[n] < 0) break;
      }
      for (int i = 0; i < n; ++i) {
        int status = 0;
        while (waitpid(batch[i], &status, 0) < 0 && errno == EINTR) {
        }
      }
      churned += n;
    }
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  int scans = 0;
  for (; scans < 2000 && std::chrono::steady_clock::now() < deadline; ++scans) {
    EXPECT_NO_THROW(PinDescendants(getpid())) << "scan " << scans;
  }
  stop = true;
  churn.join();
  EXPECT_GT(scans, 0);
  EXPECT_GT(churned.load(), 0);
}

}  // namespace
}  // namespace warden::upstream
