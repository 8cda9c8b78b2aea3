// IdMapper: forwarded requests get fresh upstream ids, replies find their way back with the
// original id, and the table is bounded.
#include "mcp/id_map.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "mcp/jsonrpc.h"

namespace warden::mcp {
namespace {

TEST(IdMapper, TwoSessionsUsingTheSameIdGetDistinctUpstreamIds) {
  IdMapper m;
  auto a = m.Forward("session-a", Id(1));
  auto b = m.Forward("session-b", Id(1));
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());
  EXPECT_NE(*a, *b);
  EXPECT_EQ(m.in_flight(), 2u);
  EXPECT_EQ(m.Resolve(*b), (DownstreamRoute{"session-b", Id(1)}));
  EXPECT_EQ(m.Resolve(*a), (DownstreamRoute{"session-a", Id(1)}));
  EXPECT_EQ(m.in_flight(), 0u);
}

TEST(IdMapper, OriginalIdTypeAndValueComeBackExactly) {
  IdMapper m;
  auto s = m.Forward("s", Id("1"));
  auto n = m.Forward("s", Id(1));  // "1" and 1 are different ids: both may be in flight
  auto big = m.Forward("s", Id::Unsigned(18446744073709551615ull));
  auto neg = m.Forward("s", Id(-9007199254740993));
  ASSERT_TRUE(s.ok() && n.ok() && big.ok() && neg.ok());
  auto rs = m.Resolve(*s);
  ASSERT_TRUE(rs);
  EXPECT_TRUE(rs->id.is_string());
  EXPECT_EQ(rs->id, Id("1"));
  EXPECT_EQ(m.Resolve(*n)->id, Id(1));
  EXPECT_EQ(m.Resolve(*big)->id.ToString(), "18446744073709551615");
  EXPECT_EQ(m.Resolve(*neg)->id.ToString(), "-9007199254740993");
}

TEST(IdMapper, UpstreamIdsAreNeverReused) {
  IdMapper m(2);
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    auto up = m.Forward("s", Id(i));
    ASSERT_TRUE(up.ok());
    EXPECT_TRUE(seen.insert(up->ToString()).second);
    ASSERT_TRUE(m.Resolve(*up));
  }
}

TEST(IdMapper, AReplyResolvesOnlyOnce) {
  IdMapper m;
  auto up = m.Forward("s", Id(5));
  ASSERT_TRUE(m.Resolve(*up));
  EXPECT_FALSE(m.Resolve(*up));  // a duplicated upstream reply is dropped
}

TEST(IdMapper, UpstreamCannotAnswerWithIdsItWasNeverGiven) {
  IdMapper m;
  auto up = m.Forward("s", Id(5));
  ASSERT_TRUE(up.ok());
  EXPECT_FALSE(m.Resolve(Id(up->ToString())));  // the string form of an issued integer
  EXPECT_FALSE(m.Resolve(Id(12345)));
  EXPECT_FALSE(m.Resolve(Id::Unsigned(18446744073709551615ull)));
  EXPECT_EQ(m.in_flight(), 1u);
}

TEST(IdMapper, ReusingALiveIdInOneSessionIsRefused) {
  IdMapper m;
  ASSERT_TRUE(m.Forward("s", Id(1)).ok());
  auto again = m.Forward("s", Id(1));
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("already in flight"), std::string::npos);
  EXPECT_EQ(m.in_flight(), 1u);
}

TEST(IdMapper, CancelReturnsTheUpstreamIdAndForgetsTheEntry) {
  IdMapper m;
  auto up = m.Forward("s", Id("req-9"));
  ASSERT_TRUE(up.ok());
  EXPECT_EQ(m.UpstreamIdFor("s", Id("req-9")), *up);
  auto cancelled = m.Cancel("s", Id("req-9"));
  ASSERT_TRUE(cancelled);
  EXPECT_EQ(*cancelled, *up);
  EXPECT_EQ(m.in_flight(), 0u);
  EXPECT_FALSE(m.Resolve(*up));  // a late reply after cancellation goes nowhere
  EXPECT_FALSE(m.Cancel("s", Id("req-9")));
  EXPECT_TRUE(m.Forward("s", Id("req-9")).ok());  // the id may be used again after cancellation
}

TEST(IdMapper, ASessionCannotCancelAnotherSessionsRequest) {
  IdMapper m;
  auto up = m.Forward("victim", Id(1));
  EXPECT_FALSE(m.Cancel("attacker", Id(1)));
  EXPECT_TRUE(m.Resolve(*up));
}

TEST(IdMapper, ForgetSessionDropsOnlyThatSession) {
  IdMapper m;
  auto a1 = m.Forward("a", Id(1));
  auto a2 = m.Forward("a", Id(2));
  auto b1 = m.Forward("b", Id(1));
  auto dropped = m.ForgetSession("a");
  ASSERT_EQ(dropped.size(), 2u);
  EXPECT_TRUE(std::find(dropped.begin(), dropped.end(), *a1) != dropped.end());
  EXPECT_TRUE(std::find(dropped.begin(), dropped.end(), *a2) != dropped.end());
  EXPECT_EQ(m.in_flight(), 1u);
  EXPECT_FALSE(m.Resolve(*a1));
  EXPECT_TRUE(m.Resolve(*b1));
}

TEST(IdMapper, FullTableRefusesNewRequestsUntilOneCompletes) {
  IdMapper m(3);
  std::vector<Id> ups;
  for (int i = 0; i < 3; ++i) ups.push_back(*m.Forward("s", Id(i)));
  auto full = m.Forward("s", Id(99));
  ASSERT_FALSE(full.ok());
  EXPECT_NE(full.status().message().find("limit 3"), std::string::npos);
  EXPECT_EQ(m.in_flight(), 3u);
  ASSERT_TRUE(m.Resolve(ups[0]));
  EXPECT_TRUE(m.Forward("s", Id(99)).ok());
  ASSERT_TRUE(m.Cancel("s", Id(1)));
  EXPECT_TRUE(m.Forward("other", Id(1)).ok());
  EXPECT_FALSE(m.Forward("other", Id(2)).ok());
}

TEST(IdMapper, ZeroCapacityRefusesEverything) {
  IdMapper m(0);
  EXPECT_FALSE(m.Forward("s", Id(1)).ok());
}

}  // namespace
}  // namespace warden::mcp
