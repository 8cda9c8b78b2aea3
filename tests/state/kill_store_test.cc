// state::KillStore: the durable table of switches and its history.
#include "state/kill_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "test_support.h"

namespace warden::state {
namespace {

using testing::TempDb;

TEST(KillStoreTest, KillIsDurableAcrossReopen) {
  TempDb tmp;
  {
    auto store = KillStore::Open({.path = tmp.path()});
    ASSERT_TRUE(store) << store.status().message();
    auto changed = (*store)->Kill(KillScope::kAgent, "coder", "runaway loop", "alice");
    ASSERT_TRUE(changed) << changed.status().message();
    EXPECT_TRUE(*changed);
  }
  auto reopened = KillStore::Open({.path = tmp.path(), .create = false});
  ASSERT_TRUE(reopened) << reopened.status().message();
  auto active = (*reopened)->Active();
  ASSERT_TRUE(active);
  ASSERT_EQ(active->size(), 1u);
  EXPECT_EQ((*active)[0].scope, KillScope::kAgent);
  EXPECT_EQ((*active)[0].name, "coder");
  EXPECT_EQ((*active)[0].reason, "runaway loop");
  EXPECT_EQ((*active)[0].who, "alice");
  EXPECT_EQ((*active)[0].since.size(), 27u);  // 2025-01-02T03:04:05.123456Z
}

TEST(KillStoreTest, DatabaseFileIsPrivate) {
  TempDb tmp;
  ASSERT_TRUE(KillStore::Open({.path = tmp.path()}));
  struct stat st;
  ASSERT_EQ(stat(tmp.path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(KillStoreTest, KillAgainUpdatesReasonAndSaysItWasActive) {
  TempDb tmp;
  auto store = KillStore::Open({.path = tmp.path()});
  ASSERT_TRUE(store);
  EXPECT_TRUE(*(*store)->Kill(KillScope::kTool, "files__write_file", "first", "a"));
  EXPECT_FALSE(*(*store)->Kill(KillScope::kTool, "files__write_file", "second", "b"));
  auto active = (*store)->Active();
  ASSERT_EQ(active->size(), 1u);
  EXPECT_EQ((*active)[0].reason, "second");
  EXPECT_EQ((*active)[0].who, "b");
}

TEST(KillStoreTest, UnkillReleasesAndHistoryKeepsEveryChange) {
  TempDb tmp;
  auto store = KillStore::Open({.path = tmp.path()});
  ASSERT_TRUE(store);
  ASSERT_TRUE((*store)->Kill(KillScope::kGlobal, "", "incident 7", "alice"));
  auto released = (*store)->Unkill(KillScope::kGlobal, "", "bob");
  ASSERT_TRUE(released);
  EXPECT_TRUE(*released);
  auto again = (*store)->Unkill(KillScope::kGlobal, "", "bob");
  ASSERT_TRUE(again);
  EXPECT_FALSE(*again);
  EXPECT_TRUE((*store)->Active()->empty());

  auto history = (*store)->History();
  ASSERT_TRUE(history) << history.status().message();
  ASSERT_EQ(history->size(), 3u);
  EXPECT_EQ((*history)[0].action, "kill");
  EXPECT_EQ((*history)[0].who, "alice");
  EXPECT_EQ((*history)[0].reason, "incident 7");
  EXPECT_EQ((*history)[1].action, "unkill");
  EXPECT_EQ((*history)[1].who, "bob");
  EXPECT_EQ((*history)[2].action, "unkill");
  EXPECT_LE((*history)[0].time, (*history)[1].time);
  auto last = (*store)->History(1);
  ASSERT_EQ(last->size(), 1u);
  EXPECT_EQ((*last)[0].id, (*history)[2].id);
}

TEST(KillStoreTest, RefusesNamesThatAreNotOneExactTarget) {
  TempDb tmp;
  auto store = KillStore::Open({.path = tmp.path()});
  ASSERT_TRUE(store);
  auto wildcard = (*store)->Kill(KillScope::kTool, "files__*", "", "");
  ASSERT_FALSE(wildcard);
  EXPECT_NE(wildcard.status().message().find("wildcard"), std::string::npos);
  auto unnamed = (*store)->Kill(KillScope::kAgent, "", "", "");
  ASSERT_FALSE(unnamed);
  EXPECT_NE(unnamed.status().message().find("needs an agent name"), std::string::npos);
  EXPECT_FALSE((*store)->Kill(KillScope::kGlobal, "x", "", ""));
  EXPECT_FALSE((*store)->Kill(KillScope::kTenant, "a\nb", "", ""));
  EXPECT_FALSE((*store)->Kill(KillScope::kTenant, std::string(257, 'a'), "", ""));
  EXPECT_FALSE((*store)->Kill(KillScope::kTenant, "acme", std::string(1025, 'r'), ""));
  EXPECT_TRUE((*store)->Active()->empty());
  EXPECT_TRUE((*store)->History()->empty());
}

TEST(KillStoreTest, ParsesTheCliScopes) {
  EXPECT_EQ(*ParseKillScope("all"), KillScope::kGlobal);
  EXPECT_EQ(*ParseKillScope("global"), KillScope::kGlobal);
  EXPECT_EQ(*ParseKillScope("tenant"), KillScope::kTenant);
  EXPECT_EQ(*ParseKillScope("agent"), KillScope::kAgent);
  EXPECT_EQ(*ParseKillScope("tool"), KillScope::kTool);
  auto bad = ParseKillScope("server");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("'server'"), std::string::npos);
  EXPECT_EQ(KillKey(KillScope::kGlobal, ""), "global");
  EXPECT_EQ(KillKey(KillScope::kTool, "files__read"), "tool:files__read");
}

TEST(KillStoreTest, ReadOnlyStoreNeedsTheFileAndNeverWrites) {
  TempDb tmp;
  auto missing = KillStore::Open({.path = tmp.path(), .create = false});
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.status().message().find(tmp.path()), std::string::npos);
  struct stat st;
  EXPECT_NE(stat(tmp.path().c_str(), &st), 0);

  ASSERT_TRUE(KillStore::Open({.path = tmp.path()}));
  auto reader = KillStore::Open({.path = tmp.path(), .create = false});
  ASSERT_TRUE(reader);
  EXPECT_FALSE((*reader)->Kill(KillScope::kAgent, "coder", "", ""));
}

TEST(KillStoreTest, DataVersionMovesWhenAnotherConnectionCommits) {
  TempDb tmp;
  auto watcher = KillStore::Open({.path = tmp.path()});
  auto writer = KillStore::Open({.path = tmp.path()});
  ASSERT_TRUE(watcher && writer);
  auto before = (*watcher)->DataVersion();
  ASSERT_TRUE(before);
  EXPECT_EQ(*(*watcher)->DataVersion(), *before);
  ASSERT_TRUE((*writer)->Kill(KillScope::kTenant, "acme", "", ""));
  EXPECT_NE(*(*watcher)->DataVersion(), *before);
}

}  // namespace
}  // namespace warden::state
