// gateway::KillSwitches: the in-memory snapshot the gateway checks on every call, written through
// to the durable store and refreshed from it when other processes pull switches.
#include "gateway/stages/kill_switches.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "state/kill_store.h"
#include "test_support.h"

namespace warden::gateway {
namespace {

using namespace std::chrono_literals;
using state::testing::TempDb;

// Polls `done` every 10 ms for up to `limit`; returns how long it took, or nullopt.
template <typename F>
std::optional<std::chrono::milliseconds> WaitFor(F done, std::chrono::milliseconds limit = 1500ms) {
  auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < limit) {
    if (done()) {
      return std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - start);
    }
    std::this_thread::sleep_for(10ms);
  }
  return std::nullopt;
}

TEST(KillSwitchesTest, InMemoryKillDeniesAndUnkillReleases) {
  KillSwitches kills;
  EXPECT_FALSE(kills.Check("acme", "coder", "files__write_file"));
  ASSERT_TRUE(kills.Kill(KillScope::kTool, "files__write_file", "incident 42").ok());
  auto pulled = kills.Check("acme", "coder", "files__write_file");
  ASSERT_TRUE(pulled);
  EXPECT_EQ(pulled->first, "tool:files__write_file");
  EXPECT_EQ(pulled->second, "incident 42");
  EXPECT_FALSE(kills.Check("acme", "coder", "files__read_file"));
  ASSERT_TRUE(kills.Unkill(KillScope::kTool, "files__write_file").ok());
  EXPECT_FALSE(kills.Check("acme", "coder", "files__write_file"));
}

TEST(KillSwitchesTest, ChecksGlobalThenTenantThenAgentThenTool) {
  KillSwitches kills;
  ASSERT_TRUE(kills.Kill(KillScope::kTool, "t", "tool").ok());
  ASSERT_TRUE(kills.Kill(KillScope::kAgent, "a", "agent").ok());
  ASSERT_TRUE(kills.Kill(KillScope::kTenant, "acme", "tenant").ok());
  EXPECT_EQ(kills.Check("acme", "a", "t")->first, "tenant:acme");
  EXPECT_EQ(kills.Check("other", "a", "t")->first, "agent:a");
  EXPECT_EQ(kills.Check("other", "b", "t")->first, "tool:t");
  // Empty caller fields match no switch, even an (impossible) empty-named one.
  EXPECT_FALSE(kills.Check("", "", ""));
  ASSERT_TRUE(kills.Kill(KillScope::kGlobal, "", "everything").ok());
  EXPECT_EQ(kills.Check("", "", ""),
            std::make_pair(std::string("global"), std::string("everything")));
  EXPECT_EQ(kills.Check("acme", "a", "t")->first, "global");
}

TEST(KillSwitchesTest, AUserOrSessionSwitchStopsThatUserOrSessionOnly) {
  KillSwitches kills;
  ASSERT_TRUE(kills.Kill(KillScope::kUser, "alice", "account compromised").ok());
  ASSERT_TRUE(kills.Kill(KillScope::kSession, "s-42", "injected session").ok());
  using S = KillSwitches::Subject;
  EXPECT_EQ(kills.Check(S{"acme", "alice", "coder", "s-1", "t"})->first, "user:alice");
  EXPECT_EQ(kills.Check(S{"acme", "alice", "coder", "s-1", "t"})->second, "account compromised");
  EXPECT_EQ(kills.Check(S{"acme", "bob", "coder", "s-42", "t"})->first, "session:s-42");
  EXPECT_FALSE(kills.Check(S{"acme", "bob", "coder", "s-1", "t"}));
  // The three-field form has no user or session: those switches cannot match it.
  EXPECT_FALSE(kills.Check("acme", "coder", "t"));
  // Broad before narrow: the user's switch is named before the session's.
  EXPECT_EQ(kills.Check(S{"acme", "alice", "coder", "s-42", "t"})->first, "user:alice");
  ASSERT_TRUE(kills.Kill(KillScope::kTenant, "acme", "tenant").ok());
  EXPECT_EQ(kills.Check(S{"acme", "alice", "coder", "s-42", "t"})->first, "tenant:acme");
}

TEST(KillSwitchesTest, RefusesAWildcardToolNameRatherThanMatchingNothing) {
  KillSwitches kills;
  Status st = kills.Kill(KillScope::kTool, "files__*", "");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("wildcard"), std::string::npos);
  EXPECT_TRUE(kills.Active().empty());
}

TEST(KillSwitchesTest, DurableKillIsInForceAfterRestart) {
  TempDb tmp;
  {
    auto kills = KillSwitches::Open({.path = tmp.path()});
    ASSERT_TRUE(kills) << kills.status().message();
    ASSERT_TRUE((*kills)->Kill(KillScope::kAgent, "coder", "runaway", "alice").ok());
    EXPECT_TRUE((*kills)->Check("acme", "coder", "x"));
  }
  auto restarted = KillSwitches::Open({.path = tmp.path()});
  ASSERT_TRUE(restarted) << restarted.status().message();
  auto pulled = (*restarted)->Check("acme", "coder", "x");
  ASSERT_TRUE(pulled);
  EXPECT_EQ(pulled->first, "agent:coder");
  EXPECT_EQ(pulled->second, "runaway");
  ASSERT_EQ((*restarted)->Active().size(), 1u);
  EXPECT_EQ((*restarted)->Active()[0].who, "alice");
}

// The CLI is another process with its own connection; a second KillSwitches on the same file is
// the same thing as far as SQLite is concerned.
TEST(KillSwitchesTest, KillFromAnotherConnectionIsInForceWithinOneSecond) {
  TempDb tmp;
  auto gateway = KillSwitches::Open({.path = tmp.path()});
  auto operator_side = KillSwitches::Open({.path = tmp.path()});
  ASSERT_TRUE(gateway && operator_side);
  ASSERT_FALSE((*gateway)->Check("acme", "coder", "files__read"));
  ASSERT_TRUE((*operator_side)->Kill(KillScope::kAgent, "coder", "stop now").ok());
  auto took =
      WaitFor([&] { return (*gateway)->Check("acme", "coder", "files__read").has_value(); });
  ASSERT_TRUE(took) << "the kill was not seen within 1.5 s";
  EXPECT_LT(*took, 1000ms);
  EXPECT_EQ((*gateway)->Check("acme", "coder", "files__read")->second, "stop now");

  ASSERT_TRUE((*operator_side)->Unkill(KillScope::kAgent, "coder").ok());
  auto released =
      WaitFor([&] { return !(*gateway)->Check("acme", "coder", "files__read").has_value(); });
  ASSERT_TRUE(released) << "the unkill was not seen within 1.5 s";
  EXPECT_LT(*released, 1000ms);
}

TEST(KillSwitchesTest, SubscribersHearOfNewSwitchesOnlyOnce) {
  KillSwitches kills;
  std::vector<std::string> heard;
  kills.Subscribe([&](KillScope scope, const std::string& name, const std::string& reason) {
    heard.push_back(state::KillKey(scope, name) + " " + reason);
  });
  ASSERT_TRUE(kills.Kill(KillScope::kTenant, "acme", "breach").ok());
  ASSERT_TRUE(kills.Kill(KillScope::kTenant, "acme", "breach, again").ok());  // already in force
  ASSERT_TRUE(kills.Unkill(KillScope::kTenant, "acme").ok());
  ASSERT_TRUE(kills.Kill(KillScope::kTenant, "acme", "third").ok());
  EXPECT_EQ(heard, (std::vector<std::string>{"tenant:acme breach", "tenant:acme third"}));
}

TEST(KillSwitchesTest, SubscribersHearOfSwitchesPulledByAnotherProcess) {
  TempDb tmp;
  auto gateway = KillSwitches::Open({.path = tmp.path()});
  ASSERT_TRUE(gateway);
  std::mutex mu;
  std::vector<std::string> heard;
  (*gateway)->Subscribe([&](KillScope scope, const std::string& name, const std::string&) {
    // The snapshot holds the switch by the time listeners run: a cancelled call that
    // re-checks is refused.
    EXPECT_TRUE((*gateway)->Check("", name, "").has_value());
    std::lock_guard lock(mu);
    heard.push_back(state::KillKey(scope, name));
  });
  auto cli = state::KillStore::Open({.path = tmp.path()});
  ASSERT_TRUE(cli);
  ASSERT_TRUE((*cli)->Kill(KillScope::kAgent, "coder", "", "bob"));
  auto took = WaitFor([&] {
    std::lock_guard lock(mu);
    return !heard.empty();
  });
  ASSERT_TRUE(took);
  EXPECT_LT(*took, 1000ms);
  std::this_thread::sleep_for(500ms);  // more refreshes must not repeat it
  std::lock_guard lock(mu);
  EXPECT_EQ(heard, std::vector<std::string>{"agent:coder"});
}

TEST(KillSwitchesTest, FailsClosedWhenTheStoreCannotBeRead) {
  TempDb tmp;
  auto gateway =
      KillSwitches::Open({.path = tmp.path()}, {.poll_interval = 50ms, .fail_closed_after = 300ms});
  ASSERT_TRUE(gateway);
  EXPECT_FALSE((*gateway)->Check("acme", "coder", "t"));
  // Someone breaks the table under the running gateway: its switches can no longer be known.
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(tmp.path().c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw, "DROP TABLE state_kill_switches", nullptr, nullptr, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(raw);
  sqlite3_close(raw);
  auto took = WaitFor([&] { return (*gateway)->Check("acme", "coder", "t").has_value(); });
  ASSERT_TRUE(took) << "calls went on while the switches were unreadable";
  auto pulled = (*gateway)->Check("acme", "coder", "t");
  EXPECT_EQ(pulled->first, "store");
  EXPECT_NE(pulled->second.find("state_kill_switches"), std::string::npos) << pulled->second;
  EXPECT_FALSE((*gateway)->RefreshStatus().ok());
}

TEST(KillSwitchesTest, CheckIsCheapEnoughForEveryCall) {
  KillSwitches kills;
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(kills.Kill(KillScope::kAgent, "agent" + std::to_string(i), "").ok());
  }
  const std::string tenant = "acme", agent = "someone-not-killed-with-a-long-name",
                    tool = "files__read_file_with_a_long_name";
  auto start = std::chrono::steady_clock::now();
  constexpr int kCalls = 200000;
  int denied = 0;
  for (int i = 0; i < kCalls; ++i) denied += kills.Check(tenant, agent, tool).has_value();
  auto per_call = (std::chrono::steady_clock::now() - start) / kCalls;
  EXPECT_EQ(denied, 0);
  // A few hundred nanoseconds in practice; 10 us leaves room for a loaded machine.
  EXPECT_LT(per_call, 10us);
}

}  // namespace
}  // namespace warden::gateway
