// The gateway's own checkpoints (audit_checkpoints.h) on a real audit log: after N new entries
// the thread signs one, writes it whole, and it verifies with the log's public key and covers the
// whole tree; nothing is signed about a chain someone edited in the database; no schedule, no
// checkpoint.
#include "gateway/audit_checkpoints.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "monitor/families.h"
#include "testing.h"

namespace warden::gateway {
namespace {

using namespace std::chrono_literals;
using testing::OpenAudit;
using testing::PolicyFromText;
using testing::TempDir;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds within = 10s) {
  const auto end = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return done();
}

void Append(audit::AuditLog& log, int n) {
  for (int i = 0; i < n; ++i) {
    audit::AuditEntry e;
    e.tenant = "acme";
    e.tool = "mail__send";
    e.decision = "allow";
    e.arguments = {{"n", i}};
    ASSERT_TRUE(log.Append(std::move(e)).ok());
  }
}

class AuditCheckpointsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = dir_.File("warden.db");
    out_ = dir_.File("checkpoint.note");
    log_ = OpenAudit(db_);
    ASSERT_NE(log_, nullptr);
    holder_.Set(PolicyFromText("version: 1\nstorage:\n  checkpoints:\n    every_entries: 3\n"
                               "    every: 1h\n    out: " + out_ + "\n"));
  }
  std::string PublicKey() {
    auto key = audit::CheckpointKey::Load(dir_.File("audit-checkpoint.key"), false);
    EXPECT_TRUE(key.ok()) << key.status().message();
    return key.ok() ? key->PublicKeyPem() : "";
  }

  TempDir dir_;
  std::string db_, out_;
  std::unique_ptr<audit::AuditLog> log_;
  policy::PolicyHolder holder_;
};

TEST_F(AuditCheckpointsTest, AfterNNewEntriesTheThreadSignsOneThatVerifies) {
  const double ok_before = monitor::Metrics().checkpoints.Value({"ok"});
  AuditCheckpointer checkpointer(*log_, holder_, {.database = db_, .tick = 20ms});
  Append(*log_, 2);
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(std::filesystem::exists(out_)) << "two entries are fewer than every_entries";
  Append(*log_, 2);
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(out_); })) << checkpointer.stats().last_error;
  auto cp = audit::VerifyCheckpoint(ReadAll(out_), PublicKey());
  ASSERT_TRUE(cp.ok()) << cp.status().message();
  EXPECT_EQ(cp->origin, "warden-audit");
  // The thread may have looked between the two appends: 3 or 4 entries, and the root is that
  // of the tree of exactly that many.
  EXPECT_GE(cp->size, 3u);
  EXPECT_LE(cp->size, 4u);
  auto tree = log_->ReadTree();
  ASSERT_TRUE(tree.ok());
  tree->leaves.resize(cp->size);
  EXPECT_EQ(cp->root, audit::MerkleRoot(tree->leaves));
  EXPECT_GE(checkpointer.stats().taken, 1u);
  EXPECT_GE(monitor::Metrics().checkpoints.Value({"ok"}) - ok_before, 1);
  // Three more: a new one, of the bigger tree, replacing the file whole.
  const uint64_t first = cp->size;
  Append(*log_, 3);
  ASSERT_TRUE(WaitFor([&] { return checkpointer.stats().taken >= 2; }))
      << checkpointer.stats().last_error;
  auto next = audit::VerifyCheckpoint(ReadAll(out_), PublicKey());
  ASSERT_TRUE(next.ok()) << next.status().message();
  EXPECT_GT(next->size, first);
  auto grown = log_->ReadTree();
  ASSERT_TRUE(grown.ok());
  grown->leaves.resize(next->size);
  EXPECT_EQ(next->root, audit::MerkleRoot(grown->leaves));
  EXPECT_EQ(checkpointer.stats().failed, 0u);
}

TEST_F(AuditCheckpointsTest, NothingIsSignedAboutAnEditedChain) {
  Append(*log_, 3);
  // Someone with the database rewrites an entry's reason in place.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "UPDATE audit_entries SET reason = 'nothing to see' WHERE id = 2",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  AuditCheckpointer checkpointer(*log_, holder_, {.database = db_, .tick = 1h});
  auto taken = checkpointer.Take(*holder_.Current()->storage.checkpoints);
  ASSERT_FALSE(taken.ok());
  EXPECT_NE(taken.status().message().find("the chain is broken at entry 2"), std::string::npos)
      << taken.status().message();
  EXPECT_FALSE(std::filesystem::exists(out_));
  EXPECT_EQ(checkpointer.stats().failed, 1u);
}

TEST_F(AuditCheckpointsTest, WithoutAScheduleNoCheckpointIsTaken) {
  holder_.Set(PolicyFromText("version: 1\n"));
  AuditCheckpointer checkpointer(*log_, holder_, {.database = db_, .tick = 10ms});
  Append(*log_, 20);
  std::this_thread::sleep_for(150ms);
  EXPECT_EQ(checkpointer.stats().taken + checkpointer.stats().failed, 0u);
  EXPECT_FALSE(std::filesystem::exists(dir_.File("audit-checkpoint.key")));
}

}  // namespace
}  // namespace warden::gateway
