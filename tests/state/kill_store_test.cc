// state::KillStore: the durable table of switches and its history.
#include "state/kill_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
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

TEST(KillStoreTest, UserAndSessionSwitchesAreStoredAndListedBroadToNarrow) {
  TempDb tmp;
  auto store = KillStore::Open({.path = tmp.path()});
  ASSERT_TRUE(store);
  ASSERT_TRUE((*store)->Kill(KillScope::kTool, "files__write_file", "t", "op"));
  ASSERT_TRUE((*store)->Kill(KillScope::kSession, "3f2a9c", "s", "op"));
  ASSERT_TRUE((*store)->Kill(KillScope::kAgent, "coder", "a", "op"));
  ASSERT_TRUE((*store)->Kill(KillScope::kUser, "alice", "u", "op"));
  auto active = (*store)->Active();
  ASSERT_TRUE(active) << active.status().message();
  ASSERT_EQ(active->size(), 4u);
  EXPECT_EQ(KillKey((*active)[0].scope, (*active)[0].name), "user:alice");
  EXPECT_EQ(KillKey((*active)[1].scope, (*active)[1].name), "agent:coder");
  EXPECT_EQ(KillKey((*active)[2].scope, (*active)[2].name), "session:3f2a9c");
  EXPECT_EQ(KillKey((*active)[3].scope, (*active)[3].name), "tool:files__write_file");
  EXPECT_EQ(*ParseKillScope("user"), KillScope::kUser);
  EXPECT_EQ(*ParseKillScope("session"), KillScope::kSession);
  EXPECT_NE(ParseKillScope("sessions").status().message().find("user, agent, session"), std::string::npos);
  EXPECT_NE(ValidateKill(KillScope::kSession, "").message().find("a session kill switch needs a session name"),
            std::string::npos);
}

// A file from before the user and session scopes: its table's CHECK refuses them. Opening it for
// writing rebuilds the table with the new CHECK and keeps the switches in force.
TEST(KillStoreTest, AFileFromBeforeUserAndSessionScopesIsUpgradedKeepingItsSwitches) {
  TempDb tmp;
  {
    std::filesystem::create_directories(tmp.dir() + "/var/warden");
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(tmp.path().c_str(), &db), SQLITE_OK);
    chmod(tmp.path().c_str(), 0600);
    const char* old_schema = R"sql(
CREATE TABLE state_kill_switches (
  scope TEXT NOT NULL CHECK (scope IN ('global', 'tenant', 'agent', 'tool')),
  name TEXT NOT NULL CHECK ((scope = 'global') = (name = '')),
  reason TEXT NOT NULL, who TEXT NOT NULL, since TEXT NOT NULL,
  PRIMARY KEY (scope, name)) STRICT;
CREATE TABLE state_kill_history (id INTEGER PRIMARY KEY, time TEXT NOT NULL,
  action TEXT NOT NULL CHECK (action IN ('kill', 'unkill')), scope TEXT NOT NULL,
  name TEXT NOT NULL, reason TEXT NOT NULL, who TEXT NOT NULL) STRICT;
INSERT INTO state_kill_switches VALUES ('agent', 'coder', 'old reason', 'bob', '2025-01-02T03:04:05.000000Z');
)sql";
    char* error = nullptr;
    ASSERT_EQ(sqlite3_exec(db, old_schema, nullptr, nullptr, &error), SQLITE_OK) << (error ? error : "");
    EXPECT_NE(sqlite3_exec(db, "INSERT INTO state_kill_switches VALUES ('user', 'alice', '', '', '')",
                           nullptr, nullptr, nullptr),
              SQLITE_OK)
        << "the old CHECK refuses the new scope";
    sqlite3_close(db);
  }
  // A reader does not change the file, and reads it.
  auto reader = KillStore::Open({.path = tmp.path(), .create = false});
  ASSERT_TRUE(reader) << reader.status().message();
  ASSERT_EQ((*reader)->Active()->size(), 1u);
  auto store = KillStore::Open({.path = tmp.path()});
  ASSERT_TRUE(store) << store.status().message();
  auto killed = (*store)->Kill(KillScope::kUser, "alice", "new", "op");
  ASSERT_TRUE(killed) << killed.status().message();
  auto active = (*store)->Active();
  ASSERT_EQ(active->size(), 2u);
  EXPECT_EQ(KillKey((*active)[0].scope, (*active)[0].name), "user:alice");
  EXPECT_EQ((*active)[1].name, "coder");
  EXPECT_EQ((*active)[1].reason, "old reason");
  EXPECT_EQ((*active)[1].since, "2025-01-02T03:04:05.000000Z");
  // Opening again finds nothing left to upgrade.
  auto again = KillStore::Open({.path = tmp.path()});
  ASSERT_TRUE(again) << again.status().message();
  EXPECT_EQ((*again)->Active()->size(), 2u);
}

}  // namespace
}  // namespace warden::state
