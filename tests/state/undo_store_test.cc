// state::UndoStore: the plans of compensating calls, keyed by the original call's audit id; a
// plan is claimed by one undo at a time and done once.
#include "state/undo_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "test_support.h"

namespace warden::state {
namespace {

using nlohmann::json;
using testing::TempDb;

UndoRecord Plan(uint64_t call_id) {
  UndoRecord r;
  r.call_id = call_id;
  r.tenant = "acme";
  r.user = "bob";
  r.agent = "mailer";
  r.scope = "triage";
  r.session = "s-1";
  r.tool = "mail__send";
  r.undo_tool = "mail__recall";
  r.undo_args = {{"id", "m-7"}, {"b", 1}};
  return r;
}

TEST(UndoStoreTest, RecordedPlanIsDurableAcrossReopen) {
  TempDb tmp;
  {
    auto store = UndoStore::Open({.path = tmp.path()});
    ASSERT_TRUE(store) << store.status().message();
    ASSERT_TRUE((*store)->Record(Plan(42)).ok());
  }
  auto reopened = UndoStore::Open({.path = tmp.path(), .create = false});
  ASSERT_TRUE(reopened) << reopened.status().message();
  auto found = (*reopened)->Find(42);
  ASSERT_TRUE(found) << found.status().message();
  ASSERT_TRUE(found->has_value());
  const UndoRecord& r = **found;
  EXPECT_EQ(r.call_id, 42u);
  EXPECT_EQ(r.tenant, "acme");
  EXPECT_EQ(r.user, "bob");
  EXPECT_EQ(r.agent, "mailer");
  EXPECT_EQ(r.scope, "triage");
  EXPECT_EQ(r.session, "s-1");
  EXPECT_EQ(r.tool, "mail__send");
  EXPECT_EQ(r.undo_tool, "mail__recall");
  EXPECT_EQ(r.undo_args, (json{{"b", 1}, {"id", "m-7"}}));
  EXPECT_EQ(r.status, UndoStatus::kAvailable);
  EXPECT_EQ(r.time.size(), 27u);
  EXPECT_TRUE(r.undone_by.empty());
  EXPECT_EQ(r.undo_call_id, 0u);
}

TEST(UndoStoreTest, UnknownCallIsNotFound) {
  TempDb tmp;
  auto store = UndoStore::Open({.path = tmp.path()});
  ASSERT_TRUE(store);
  auto found = (*store)->Find(7);
  ASSERT_TRUE(found);
  EXPECT_FALSE(found->has_value());
  auto claim = (*store)->Claim(7, "alice");
  ASSERT_TRUE(claim);
  EXPECT_FALSE(claim->claimed);
  EXPECT_EQ(claim->record.call_id, 0u);
}

TEST(UndoStoreTest, ACallIdIsRecordedOnce) {
  TempDb tmp;
  auto store = UndoStore::Open({.path = tmp.path()});
  ASSERT_TRUE(store);
  ASSERT_TRUE((*store)->Record(Plan(1)).ok());
  EXPECT_FALSE((*store)->Record(Plan(1)).ok());
}

TEST(UndoStoreTest, ANewPlanIsAvailableOrUnavailableOnly) {
  TempDb tmp;
  auto store = UndoStore::Open({.path = tmp.path()});
  ASSERT_TRUE(store);
  UndoRecord done = Plan(1);
  done.status = UndoStatus::kDone;
  EXPECT_FALSE((*store)->Record(done).ok());
}

TEST(UndoStoreTest, ClaimThenFinishMarksDoneWithTheCompensatingCall) {
  TempDb tmp;
  auto store = UndoStore::Open({.path = tmp.path()});
  ASSERT_TRUE(store);
  ASSERT_TRUE((*store)->Record(Plan(5)).ok());
  auto claim = (*store)->Claim(5, "alice (api)");
  ASSERT_TRUE(claim) << claim.status().message();
  EXPECT_TRUE(claim->claimed);
  EXPECT_EQ(claim->record.status, UndoStatus::kAvailable);
  auto finished = (*store)->Finish(5, true, "", 9);
  ASSERT_TRUE(finished);
  EXPECT_TRUE(*finished);
  auto r = (*store)->Find(5);
  ASSERT_TRUE(r && r->has_value());
  EXPECT_EQ((*r)->status, UndoStatus::kDone);
  EXPECT_EQ((*r)->undone_by, "alice (api)");
  EXPECT_EQ((*r)->undo_call_id, 9u);
  EXPECT_FALSE((*r)->undone_at.empty());
  // Done is final: no second claim, no second finish.
  auto again = (*store)->Claim(5, "bob");
  ASSERT_TRUE(again);
  EXPECT_FALSE(again->claimed);
  EXPECT_EQ(again->record.status, UndoStatus::kDone);
  EXPECT_EQ(again->record.undone_by, "alice (api)");
  auto second = (*store)->Finish(5, false, "late", 10);
  ASSERT_TRUE(second);
  EXPECT_FALSE(*second);
}

TEST(UndoStoreTest, AFailedUndoMayBeTriedAgain) {
  TempDb tmp;
  auto store = UndoStore::Open({.path = tmp.path()});
  ASSERT_TRUE(store);
  ASSERT_TRUE((*store)->Record(Plan(5)).ok());
  ASSERT_TRUE((*store)->Claim(5, "alice")->claimed);
  ASSERT_TRUE(*(*store)->Finish(5, false, "denied by policy", 6));
  auto r = (*store)->Find(5);
  EXPECT_EQ((*r)->status, UndoStatus::kFailed);
  EXPECT_EQ((*r)->reason, "denied by policy");
  EXPECT_TRUE((*store)->Claim(5, "bob")->claimed);
}

TEST(UndoStoreTest, AnUnavailablePlanIsNeverClaimed) {
  TempDb tmp;
  auto store = UndoStore::Open({.path = tmp.path()});
  ASSERT_TRUE(store);
  UndoRecord r = Plan(3);
  r.status = UndoStatus::kUnavailable;
  r.reason = "'$result/id' finds nothing";
  ASSERT_TRUE((*store)->Record(r).ok());
  auto claim = (*store)->Claim(3, "alice");
  ASSERT_TRUE(claim);
  EXPECT_FALSE(claim->claimed);
  EXPECT_EQ(claim->record.status, UndoStatus::kUnavailable);
  EXPECT_EQ(claim->record.reason, "'$result/id' finds nothing");
}

// Two undos racing (two processes: `warden undo` and the API): exactly one runs the
// compensating call.
TEST(UndoStoreTest, TwoUndosRacingOneWins) {
  TempDb tmp;
  {
    auto store = UndoStore::Open({.path = tmp.path()});
    ASSERT_TRUE(store);
    for (uint64_t id = 1; id <= 20; ++id) ASSERT_TRUE((*store)->Record(Plan(id)).ok());
  }
  auto a = UndoStore::Open({.path = tmp.path()});
  auto b = UndoStore::Open({.path = tmp.path()});
  ASSERT_TRUE(a && b);
  for (uint64_t id = 1; id <= 20; ++id) {
    std::atomic<int> wins{0};
    std::vector<std::thread> threads;
    for (UndoStore* s : {a->get(), b->get()}) {
      threads.emplace_back([s, id, &wins] {
        auto claim = s->Claim(id, "racer");
        ASSERT_TRUE(claim) << claim.status().message();
        if (claim->claimed && *s->Finish(id, true, "", 100 + id)) ++wins;
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(wins.load(), 1) << "call " << id;
  }
}

TEST(UndoStoreTest, ReadOnlyStoreRefusesWrites) {
  TempDb tmp;
  ASSERT_TRUE(UndoStore::Open({.path = tmp.path()}));
  auto ro = UndoStore::Open({.path = tmp.path(), .create = false});
  ASSERT_TRUE(ro);
  EXPECT_FALSE((*ro)->Record(Plan(1)).ok());
  EXPECT_FALSE((*ro)->Claim(1, "alice"));
}

TEST(UndoStoreTest, StatusNamesRoundTrip) {
  for (UndoStatus s : {UndoStatus::kAvailable, UndoStatus::kUnavailable, UndoStatus::kRunning,
                       UndoStatus::kDone, UndoStatus::kFailed}) {
    auto parsed = ParseUndoStatus(ToString(s));
    ASSERT_TRUE(parsed);
    EXPECT_EQ(*parsed, s);
  }
  EXPECT_FALSE(ParseUndoStatus("undone"));
}

}  // namespace
}  // namespace warden::state
