// Durability: an entry whose Append returned survives kill -9 of the process that wrote it.
// (A power loss is the sync=full promise; no test here can pull the plug.)
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "audit/audit_log.h"
#include "test_support.h"

namespace warden::audit {
namespace {

using testing::SampleEntry;
using testing::TempDir;

// In the child: appends from `threads` threads, writing each acknowledged id to `ack_fd` as
// soon as Append returns; stops after `total` entries (0: never) and kills itself.
[[noreturn]] void AppendInChild(const std::string& db, SyncLevel sync, int threads, int total,
                                int ack_fd) {
  AuditOptions options;
  options.path = db;
  options.sync = sync;
  auto log = AuditLog::Open(options);
  if (!log) _exit(3);
  std::atomic<int> next{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      for (;;) {
        int i = next.fetch_add(1);
        if (total > 0 && i >= total) return;
        auto r = (*log)->Append(SampleEntry(i));
        if (!r) _exit(4);
        uint64_t id = r->id;
        if (write(ack_fd, &id, sizeof id) != sizeof id) _exit(5);
      }
    });
  }
  for (auto& w : workers) w.join();
  kill(getpid(), SIGKILL);
  _exit(6);
}

std::vector<uint64_t> ReadAcks(int fd, size_t stop_after, pid_t child) {
  std::vector<uint64_t> acks;
  uint64_t id;
  while (read(fd, &id, sizeof id) == sizeof id) {
    acks.push_back(id);
    if (stop_after > 0 && acks.size() == stop_after) kill(child, SIGKILL);  // mid-append
  }
  return acks;
}

class AuditDurability : public ::testing::TestWithParam<SyncLevel> {};

TEST_P(AuditDurability, EveryAcknowledgedEntrySurvivesTheWriterKillingItself) {
  TempDir dir;
  constexpr int kEntries = 200;
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    AppendInChild(dir.db(), GetParam(), 1, kEntries, fds[1]);
  }
  close(fds[1]);
  std::vector<uint64_t> acks = ReadAcks(fds[0], 0, child);
  close(fds[0]);
  int status;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "child status " << status;
  ASSERT_EQ(acks.size(), static_cast<size_t>(kEntries));

  auto log = testing::OpenLog(dir.db());
  auto report = log->Verify();
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok()) << report->detail;
  EXPECT_EQ(report->entries, static_cast<uint64_t>(kEntries));
  auto stored = log->Query({});
  ASSERT_EQ(stored->size(), static_cast<size_t>(kEntries));
  for (int i = 0; i < kEntries; ++i) EXPECT_EQ((*stored)[i].arguments["n"], i);
}

TEST_P(AuditDurability, EveryAcknowledgedEntrySurvivesSigkillInTheMiddleOfAppends) {
  TempDir dir;
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    AppendInChild(dir.db(), GetParam(), 4, 0, fds[1]);
  }
  close(fds[1]);
  std::vector<uint64_t> acks = ReadAcks(fds[0], 300, child);
  close(fds[0]);
  int status;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  ASSERT_GE(acks.size(), 300u);

  auto log = testing::OpenLog(dir.db());
  auto report = log->Verify();
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok()) << report->detail;
  uint64_t highest = *std::max_element(acks.begin(), acks.end());
  EXPECT_GE(report->entries, highest);  // entries committed but not yet acknowledged may exist too
  // And the log goes on from where it was cut.
  auto next = log->Append(SampleEntry(0));
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->id, report->entries + 1);
  EXPECT_TRUE(log->Verify()->ok());
}

INSTANTIATE_TEST_SUITE_P(SyncLevels, AuditDurability,
                         ::testing::Values(SyncLevel::kNormal, SyncLevel::kFull),
                         [](const auto& info) { return std::string(ToString(info.param)); });

}  // namespace
}  // namespace warden::audit
