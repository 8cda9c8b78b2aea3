// state::ApprovalStore: every transition of an approval, once each, also when two connections
// (two processes' worth) and several threads decide at the same moment.
#include "state/approval_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "audit/time_format.h"
#include "state/kill_store.h"
#include "test_support.h"

namespace warden::state {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::TempDb;

// A call bob's agent made that the policy sent to a person, waiting ten minutes.
ApprovalRecord MailCall(int votes_needed = 1, const std::string& retry_key = std::string(64, 'c')) {
  ApprovalRecord r;
  r.tenant = "acme";
  r.user = "bob";
  r.agent = "mailer";
  r.session = "session-1";
  r.tool = "mail__send_email";
  r.server = "mail";
  r.arguments = R"({"body":"hello","to":"x@example.com"})";
  r.risk = "high";
  r.rule = "tools[0] {tool: mail__send_*}";
  r.reason = "mail leaves the company";
  r.reasons = {"reads untrusted content", "can send data out"};
  r.binding = std::string(64, 'b');
  r.retry_key = retry_key;
  r.definition_hash = std::string(64, 'd');
  r.created = Now();
  r.expires = audit::FormatTime(std::chrono::system_clock::now() + 10min);
  r.votes_needed = votes_needed;
  return r;
}

std::unique_ptr<ApprovalStore> OpenApprovals(const std::string& path, bool create = true) {
  auto store = ApprovalStore::Open({.path = path, .create = create});
  EXPECT_TRUE(store) << store.status().message();
  return store ? std::move(*store) : nullptr;
}

ApprovalRecord Created(ApprovalStore& store, ApprovalRecord record) {
  auto created = store.Create(std::move(record));
  EXPECT_TRUE(created) << created.status().message();
  return created ? *created : ApprovalRecord{};
}

ApprovalRecord Fetched(ApprovalStore& store, const std::string& id) {
  auto got = store.Get(id);
  EXPECT_TRUE(got && *got) << (got ? "not found" : got.status().message());
  return got && *got ? **got : ApprovalRecord{};
}

TEST(ApprovalStoreTest, CreateAssignsARandomIdAndKeepsEveryField) {
  TempDb tmp;
  auto store = OpenApprovals(tmp.path());
  ASSERT_TRUE(store);
  ApprovalRecord a = Created(*store, MailCall());
  ApprovalRecord b = Created(*store, MailCall());
  ASSERT_EQ(a.id.size(), 36u);
  EXPECT_EQ(a.id.substr(0, 4), "apr_");
  EXPECT_EQ(a.id.find_first_not_of("0123456789abcdef", 4), std::string::npos) << a.id;
  EXPECT_NE(a.id, b.id);

  ApprovalRecord got = Fetched(*store, a.id);
  ApprovalRecord want = MailCall();
  EXPECT_EQ(got.tenant, "acme");
  EXPECT_EQ(got.user, "bob");
  EXPECT_EQ(got.agent, "mailer");
  EXPECT_EQ(got.session, "session-1");
  EXPECT_EQ(got.tool, "mail__send_email");
  EXPECT_EQ(got.server, "mail");
  EXPECT_EQ(got.arguments, want.arguments);
  EXPECT_EQ(got.risk, "high");
  EXPECT_EQ(got.rule, want.rule);
  EXPECT_EQ(got.reason, want.reason);
  EXPECT_EQ(got.reasons, want.reasons);
  EXPECT_EQ(got.binding, want.binding);
  EXPECT_EQ(got.retry_key, want.retry_key);
  EXPECT_EQ(got.definition_hash, want.definition_hash);
  EXPECT_EQ(got.created, a.created);
  EXPECT_EQ(got.expires, a.expires);
  EXPECT_EQ(got.status, ApprovalStatus::kPending);
  EXPECT_EQ(got.decided_by, "");
  EXPECT_EQ(got.decided_at, "");
  EXPECT_EQ(got.votes_needed, 1);
  EXPECT_TRUE(got.votes.empty());
  EXPECT_EQ(got.consumed_at, "");
  EXPECT_FALSE(got.retry_told);

  auto missing = store->Get("apr_" + std::string(32, '0'));
  ASSERT_TRUE(missing);
  EXPECT_FALSE(*missing);
}

TEST(ApprovalStoreTest, CreateKeepsAGivenIdAndResetsTheDecisionFields) {
  TempDb tmp;
  auto store = OpenApprovals(tmp.path());
  ApprovalRecord call = MailCall();
  call.id = "apr_" + std::string(32, 'a');
  call.status = ApprovalStatus::kApproved;
  call.decided_by = "mallory";
  call.votes = {{"mallory", Now(), ""}};
  call.consumed_at = Now();
  ApprovalRecord stored = Created(*store, call);
  EXPECT_EQ(stored.id, call.id);
  ApprovalRecord got = Fetched(*store, call.id);
  EXPECT_EQ(got.status, ApprovalStatus::kPending);
  EXPECT_EQ(got.decided_by, "");
  EXPECT_TRUE(got.votes.empty());
  EXPECT_EQ(got.consumed_at, "");
  EXPECT_FALSE(store->Create(call)) << "the same id twice";
}

TEST(ApprovalStoreTest, CreateRefusesRecordsTheTableCouldNotMeanAnythingBy) {
  TempDb tmp;
  auto store = OpenApprovals(tmp.path());
  auto refused = [&](void (*edit)(ApprovalRecord&), const std::string& words) {
    ApprovalRecord r = MailCall();
    edit(r);
    auto created = store->Create(r);
    ASSERT_FALSE(created) << words;
    EXPECT_NE(created.status().message().find(words), std::string::npos)
        << created.status().message();
  };
  refused([](ApprovalRecord& r) { r.id = "apr_XYZ"; }, "not apr_");
  refused([](ApprovalRecord& r) { r.tool = ""; }, "no tool");
  refused([](ApprovalRecord& r) { r.arguments = "{\"to\":"; }, "not JSON");
  refused([](ApprovalRecord& r) { r.risk = "extreme"; }, "risk 'extreme'");
  refused([](ApprovalRecord& r) { r.binding = "abc"; }, "binding");
  refused([](ApprovalRecord& r) { r.binding = std::string(64, 'B'); }, "binding");
  refused([](ApprovalRecord& r) { r.retry_key = ""; }, "retry_key");
  refused([](ApprovalRecord& r) { r.definition_hash = "xyz"; }, "definition_hash");
  refused([](ApprovalRecord& r) { r.created = "yesterday"; }, "RFC 3339");
  refused([](ApprovalRecord& r) { r.expires = "2020-01-01T00:00:00.000000Z"; }, "expires before");
  refused([](ApprovalRecord& r) { r.votes_needed = 3; }, "1 or 2 votes");
  refused([](ApprovalRecord& r) { r.tenant = std::string(1025, 't'); }, "tenant is longer");
  refused([](ApprovalRecord& r) { r.reasons = {std::string(4097, 'r')}; }, "reasons line");
  auto all = store->List(true);
  ASSERT_TRUE(all);
  EXPECT_TRUE(all->empty());
}

TEST(ApprovalStoreTest, ApproveEndsThePendingStateOnceAndASecondDecisionIsAlreadyDecided) {
  TempDb tmp;
  auto store = OpenApprovals(tmp.path());
  ApprovalRecord call = Created(*store, MailCall());
  auto approved = store->Approve(call.id, Person("", "alice"), "looks right");
  ASSERT_TRUE(approved) << approved.status().message();
  EXPECT_EQ(approved->error, DecideError::kNone);
  EXPECT_TRUE(approved->decided);
  EXPECT_EQ(approved->record.status, ApprovalStatus::kApproved);
  EXPECT_EQ(approved->record.decided_by, "alice");
  EXPECT_EQ(approved->record.comment, "looks right");
  EXPECT_FALSE(approved->record.decided_at.empty());
  ASSERT_EQ(approved->record.votes.size(), 1u);
  EXPECT_EQ(approved->record.votes[0].who, "alice");
  EXPECT_EQ(approved->record.votes[0].comment, "looks right");

  for (bool approve : {true, false}) {
    auto again = approve ? store->Approve(call.id, Person("", "carol"), "") : store->Deny(call.id, Person("", "carol"), "");
    ASSERT_TRUE(again);
    EXPECT_EQ(again->error, DecideError::kAlreadyDecided);
    EXPECT_FALSE(again->decided);
    EXPECT_EQ(again->record.status, ApprovalStatus::kApproved);
    EXPECT_EQ(again->record.decided_by, "alice");
  }
  EXPECT_EQ(Fetched(*store, call.id).status, ApprovalStatus::kApproved);
}

TEST(ApprovalStoreTest, DenyEndsItAtOnceAndTheRecordSaysWhoAndWhy) {
  TempDb tmp;
  auto store = OpenApprovals(tmp.path());
  ApprovalRecord call = Created(*store, MailCall());
  auto denied = store->Deny(call.id, Person("", "alice"), "wrong recipient");
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->error, DecideError::kNone);
  EXPECT_TRUE(denied->decided);
  ApprovalRecord got = Fetched(*store, call.id);
  EXPECT_EQ(got.status, ApprovalStatus::kDenied);
  EXPECT_EQ(got.decided_by, "alice");
  EXPECT_EQ(got.comment, "wrong recipient");
  EXPECT_TRUE(got.votes.empty());
  auto late = store->Approve(call.id, Person("", "carol"), "");
  ASSERT_TRUE(late);
  EXPECT_EQ(late->error, DecideError::kAlreadyDecided);
  EXPECT_EQ(late->record.status, ApprovalStatus::kDenied);
  auto consumed = store->Consume(call.id);
  ASSERT_TRUE(consumed);
  EXPECT_FALSE(*consumed);
}

TEST(ApprovalStoreTest, TwoPersonNeedsASecondDifferentApprover) {
  TempDb tmp;
  auto store = OpenApprovals(tmp.path());
  ApprovalRecord call = Created(*store, MailCall(2));
  auto first = store->Approve(call.id, Person("", "alice"), "fine by me");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->error, DecideError::kNone);
  EXPECT_FALSE(first->decided);
  EXPECT_EQ(first->record.status, ApprovalStatus::kPending);
  EXPECT_EQ(first->record.decided_by, "");
  ASSERT_EQ(first->record.votes.size(), 1u);

  auto same = store->Approve(call.id, Person("", "alice"), "really fine");
  ASSERT_TRUE(same);
  EXPECT_EQ(same->error, DecideError::kSameApprover);
  EXPECT_FALSE(same->decided);
  EXPECT_EQ(same->record.votes.size(), 1u);
  EXPECT_EQ(Fetched(*store, call.id).status, ApprovalStatus::kPending);
  auto consumed = store->Consume(call.id);
  ASSERT_TRUE(consumed);
  EXPECT_FALSE(*consumed) << "one vote of two released the call";

  auto second = store->Approve(call.id, Person("", "carol"), "ok");
  ASSERT_TRUE(second);
  EXPECT_EQ(second->error, DecideError::kNone);
  EXPECT_TRUE(second->decided);
  ApprovalRecord got = Fetched(*store, call.id);
  EXPECT_EQ(got.status, ApprovalStatus::kApproved);
  EXPECT_EQ(got.decided_by, "alice, carol");
  EXPECT_EQ(got.comment, "ok");
  ASSERT_EQ(got.votes.size(), 2u);
  EXPECT_EQ(got.votes[0].who, "alice");
  EXPECT_EQ(got.votes[0].comment, "fine by me");
  EXPECT_EQ(got.votes[1].who, "carol");
  EXPECT_LE(got.votes[0].at, got.votes[1].at);
}

TEST(ApprovalStoreTest, DenyAfterOneVoteOfTwoEndsIt) {
  TempDb tmp;
  auto store = OpenApprovals(tmp.path());
  ApprovalRecord call = Created(*store, MailCall(2));
  ASSERT_TRUE(store->Approve(call.id, Person("", "alice"), ""));
  auto denied = store->Deny(call.id, Person("", "carol"), "no");
  ASSERT_TRUE(denied);
  EXPECT_TRUE(denied->decided);
  ApprovalRecord got = Fetched(*store, call.id);
  EXPECT_EQ(got.status, ApprovalStatus::kDenied);
  EXPECT_EQ(got.decided_by, "carol");
  EXPECT_EQ(got.votes.size(), 1u);  // alice's yes stays on the record
  auto late = store->Approve(call.id, Person("", "dave"), "");
  ASSERT_TRUE(late);
  EXPECT_EQ(late->error, DecideError::kAlreadyDecided);
}

TEST(ApprovalStoreTest, ExpireAndCancelLoseToADecisionAndEndOnlyPendingRows) {
  TempDb tmp;
  auto store = OpenApprovals(tmp.path());
  ApprovalRecord decided = Created(*store, MailCall());
  ASSERT_TRUE(store->Approve(decided.id, Person("", "alice"), ""));
  EXPECT_FALSE(*store->Expire(decided.id, "approval expired after 10m"));
  EXPECT_FALSE(*store->Cancel(decided.id, "session closed"));
  EXPECT_EQ(Fetched(*store, decided.id).status, ApprovalStatus::kApproved);
  EXPECT_EQ(Fetched(*store, decided.id).decided_by, "alice");

  ApprovalRecord waiting = Created(*store, MailCall());
  EXPECT_TRUE(*store->Expire(waiting.id, "approval expired after 10m"));
  ApprovalRecord expired = Fetched(*store, waiting.id);
  EXPECT_EQ(expired.status, ApprovalStatus::kExpired);
  EXPECT_EQ(expired.decided_by, "warden");
  EXPECT_EQ(expired.comment, "approval expired after 10m");
  EXPECT_FALSE(expired.decided_at.empty());
  auto late = store->Approve(waiting.id, Person("", "alice"), "");
  ASSERT_TRUE(late);
  EXPECT_EQ(late->error, DecideError::kAlreadyDecided);
  EXPECT_EQ(late->record.status, ApprovalStatus::kExpired);
  EXPECT_FALSE(*store->Cancel(waiting.id, "session closed"));

  ApprovalRecord cancelled = Created(*store, MailCall());
  EXPECT_TRUE(*store->Cancel(cancelled.id, "tool definition changed"));
  EXPECT_EQ(Fetched(*store, cancelled.id).status, ApprovalStatus::kCancelled);
  EXPECT_FALSE(*store->Expire(cancelled.id, "late"));
  EXPECT_FALSE(*store->Consume(cancelled.id));
  EXPECT_FALSE(*store->Expire("apr_" + std::string(32, '0'), "nothing"));
}

TEST(ApprovalStoreTest, AnApprovalPastItsExpiryIsNotApprovedLate) {
  TempDb tmp;
  auto store = OpenApprovals(tmp.path());
  ApprovalRecord call = MailCall();
  const auto now = std::chrono::system_clock::now();
  call.created = audit::FormatTime(now - 20min);
  call.expires = audit::FormatTime(now - 10min);
  call = Created(*store, call);
  auto late = store->Approve(call.id, Person("", "alice"), "");
  ASSERT_TRUE(late);
  EXPECT_EQ(late->error, DecideError::kAlreadyDecided);
  EXPECT_FALSE(late->decided);
  EXPECT_EQ(late->record.status, ApprovalStatus::kExpired);
  EXPECT_EQ(late->record.decided_by, "warden");
  EXPECT_FALSE(*store->Consume(call.id));
}

TEST(ApprovalStoreTest, UnknownIdsAreNotFound) {
  TempDb tmp;
  auto store = OpenApprovals(tmp.path());
  const std::string nobody = "apr_" + std::string(32, 'f');
  auto approve = store->Approve(nobody, Person("", "alice"), "");
  ASSERT_TRUE(approve);
  EXPECT_EQ(approve->error, DecideError::kNotFound);
  auto deny = store->Deny(nobody, Person("", "alice"), "");
  ASSERT_TRUE(deny);
  EXPECT_EQ(deny->error, DecideError::kNotFound);
  EXPECT_FALSE(*store->Consume(nobody));
  EXPECT_FALSE(*store->Cancel(nobody, "x"));
}

TEST(ApprovalStoreTest, ConsumeReleasesAnApprovedCallExactlyOnce) {
  TempDb tmp;
  auto store = OpenApprovals(tmp.path());
  ApprovalRecord call = Created(*store, MailCall());
  EXPECT_FALSE(*store->Consume(call.id)) << "a pending call was released";
  ASSERT_TRUE(store->Approve(call.id, Person("", "alice"), ""));
  EXPECT_TRUE(*store->Consume(call.id));
  EXPECT_FALSE(*store->Consume(call.id));
  ApprovalRecord got = Fetched(*store, call.id);
  EXPECT_FALSE(got.consumed_at.empty());
  EXPECT_EQ(ToJson(got)["consumed_at"], got.consumed_at);
}

TEST(ApprovalStoreTest, ConsumeFromTwoThreadsOnTwoConnectionsSucceedsOnce) {
  TempDb tmp;
  auto a = OpenApprovals(tmp.path());
  auto b = OpenApprovals(tmp.path());
  ASSERT_TRUE(a && b);
  for (int round = 0; round < 20; ++round) {
    ApprovalRecord call = Created(*a, MailCall());
    ASSERT_TRUE(a->Approve(call.id, Person("", "alice"), ""));
    std::atomic<int> released{0};
    std::atomic<bool> go{false};
    auto consume = [&](ApprovalStore* store) {
      while (!go) std::this_thread::yield();
      auto ok = store->Consume(call.id);
      ASSERT_TRUE(ok) << ok.status().message();
      if (*ok) ++released;
    };
    std::thread t1(consume, a.get()), t2(consume, b.get()), t3(consume, b.get());
    go = true;
    t1.join(), t2.join(), t3.join();
    EXPECT_EQ(released.load(), 1) << "round " << round;
  }
}

// Each thread of `deciders` decides on `id` through one of the stores; returns the results.
std::vector<DecideResult> DecideAtOnce(const std::vector<ApprovalStore*>& stores,
                                       const std::string& id, int deciders, bool (*approves)(int)) {
  std::vector<DecideResult> results(static_cast<size_t>(deciders));
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < deciders; ++i) {
    threads.emplace_back([&, i] {
      ApprovalStore* store = stores[static_cast<size_t>(i) % stores.size()];
      while (!go) std::this_thread::yield();
      const std::string who = "approver-" + std::to_string(i);
      auto r = approves(i) ? store->Approve(id, Person("", who), "") : store->Deny(id, Person("", who), "");
      ASSERT_TRUE(r) << r.status().message();
      results[static_cast<size_t>(i)] = *r;
    });
  }
  go = true;
  for (std::thread& t : threads) t.join();
  return results;
}

TEST(ApprovalStoreTest, DecisionsAtTheSameMomentFromTwoConnectionsHaveExactlyOneWinner) {
  TempDb tmp;
  auto a = OpenApprovals(tmp.path());
  auto b = OpenApprovals(tmp.path());
  ASSERT_TRUE(a && b);
  for (int round = 0; round < 10; ++round) {
    ApprovalRecord call = Created(*a, MailCall());
    auto results = DecideAtOnce({a.get(), b.get()}, call.id, 6, [](int i) { return i % 2 == 0; });
    int winners = 0;
    std::string winner;
    for (size_t i = 0; i < results.size(); ++i) {
      if (results[i].decided) {
        ++winners;
        winner = "approver-" + std::to_string(i);
        EXPECT_EQ(results[i].error, DecideError::kNone);
      } else {
        EXPECT_EQ(results[i].error, DecideError::kAlreadyDecided);
      }
    }
    ASSERT_EQ(winners, 1) << "round " << round;
    ApprovalRecord got = Fetched(*b, call.id);
    EXPECT_EQ(got.decided_by, winner);
    // Everyone who lost was told how it ended: the winner's decision.
    for (const DecideResult& r : results) EXPECT_EQ(r.record.decided_by, winner);
  }
}

TEST(ApprovalStoreTest, TwoPersonVotesAtTheSameMomentApproveOnceWithTwoVotes) {
  TempDb tmp;
  auto a = OpenApprovals(tmp.path());
  auto b = OpenApprovals(tmp.path());
  ASSERT_TRUE(a && b);
  for (int round = 0; round < 10; ++round) {
    ApprovalRecord call = Created(*a, MailCall(2));
    auto results = DecideAtOnce({a.get(), b.get()}, call.id, 4, [](int) { return true; });
    int decided = 0, first_votes = 0, late = 0;
    for (const DecideResult& r : results) {
      if (r.decided)
        ++decided;
      else if (r.error == DecideError::kNone)
        ++first_votes;
      else if (r.error == DecideError::kAlreadyDecided)
        ++late;
    }
    EXPECT_EQ(decided, 1);
    EXPECT_EQ(first_votes, 1);
    EXPECT_EQ(late, 2);
    ApprovalRecord got = Fetched(*a, call.id);
    EXPECT_EQ(got.status, ApprovalStatus::kApproved);
    EXPECT_EQ(got.votes.size(), 2u);
    EXPECT_EQ(got.decided_by, got.votes[0].who + ", " + got.votes[1].who);
  }
}

TEST(ApprovalStoreTest, CancelAllPendingEndsOnlyPendingRowsAndARetryIsToldOnce) {
  TempDb tmp;
  auto store = OpenApprovals(tmp.path());
  const std::string first_key(64, '1'), second_key(64, '2'), approved_key(64, '3'),
      cancelled_key(64, '4');
  ApprovalRecord first = Created(*store, MailCall(1, first_key));
  ApprovalRecord second = Created(*store, MailCall(1, second_key));
  ApprovalRecord approved = Created(*store, MailCall(1, approved_key));
  ApprovalRecord cancelled = Created(*store, MailCall(1, cancelled_key));
  ASSERT_TRUE(store->Approve(approved.id, Person("", "alice"), ""));
  ASSERT_TRUE(*store->Cancel(cancelled.id, "session closed"));

  auto count = store->CancelAllPending("gateway restarted");
  ASSERT_TRUE(count) << count.status().message();
  EXPECT_EQ(*count, 2u);
  EXPECT_EQ(Fetched(*store, first.id).status, ApprovalStatus::kCancelled);
  EXPECT_EQ(Fetched(*store, first.id).comment, "gateway restarted");
  EXPECT_EQ(Fetched(*store, approved.id).status, ApprovalStatus::kApproved);
  EXPECT_EQ(*store->CancelAllPending("gateway restarted"), 0u);

  auto told = store->TakeRestartCancelled(first_key);
  ASSERT_TRUE(told) << told.status().message();
  ASSERT_TRUE(*told);
  EXPECT_EQ((*told)->id, first.id);
  EXPECT_EQ((*told)->comment, "gateway restarted");
  EXPECT_TRUE((*told)->retry_told);
  EXPECT_TRUE(Fetched(*store, first.id).retry_told);
  auto again = store->TakeRestartCancelled(first_key);
  ASSERT_TRUE(again);
  EXPECT_FALSE(*again) << "a retry was told twice";
  EXPECT_TRUE(*store->TakeRestartCancelled(second_key));
  EXPECT_FALSE(*store->TakeRestartCancelled(approved_key));
  EXPECT_FALSE(*store->TakeRestartCancelled(cancelled_key)) << "not cancelled by a restart";
  EXPECT_FALSE(*store->TakeRestartCancelled(std::string(64, '9')));
}

TEST(ApprovalStoreTest, CancelOrphanedEndsOnlyPendingRowsOfProcessesThatAreGone) {
  TempDb tmp;
  auto store = OpenApprovals(tmp.path());
  ApprovalRecord mine = MailCall(1, std::string(64, '1'));
  mine.owner = "100:5";
  mine = Created(*store, mine);
  ApprovalRecord crashed = MailCall(1, std::string(64, '2'));
  crashed.owner = "200:7";
  crashed = Created(*store, crashed);
  ApprovalRecord nobodys = Created(*store, MailCall(1, std::string(64, '3')));
  ApprovalRecord decided = MailCall(1, std::string(64, '4'));
  decided.owner = "200:7";
  decided = Created(*store, decided);
  ASSERT_TRUE(store->Approve(decided.id, Person("", "alice"), ""));
  EXPECT_EQ(Fetched(*store, mine.id).owner, "100:5");

  std::vector<std::string> asked;
  auto cancelled = store->CancelOrphaned("gateway restarted", [&](const std::string& owner) {
    asked.push_back(owner);
    return owner != "100:5";
  });
  ASSERT_TRUE(cancelled) << cancelled.status().message();
  ASSERT_EQ(cancelled->size(), 2u);
  EXPECT_EQ((*cancelled)[0].id, crashed.id);
  EXPECT_EQ((*cancelled)[1].id, nobodys.id);
  EXPECT_EQ((*cancelled)[0].status, ApprovalStatus::kCancelled);
  EXPECT_EQ((*cancelled)[0].comment, "gateway restarted");
  EXPECT_EQ(asked.size(), 3u) << "only pending rows are asked about";
  EXPECT_EQ(Fetched(*store, mine.id).status, ApprovalStatus::kPending);
  EXPECT_EQ(Fetched(*store, crashed.id).status, ApprovalStatus::kCancelled);
  EXPECT_EQ(Fetched(*store, decided.id).status, ApprovalStatus::kApproved);
  // Cancelled by a restart: the first retry is told.
  EXPECT_EQ((*store->TakeRestartCancelled(std::string(64, '2')))->id, crashed.id);
  EXPECT_FALSE(*store->TakeRestartCancelled(std::string(64, '1')));
  EXPECT_FALSE(ToJson(Fetched(*store, mine.id)).contains("owner"));
}

TEST(ApprovalStoreTest, DecidedSinceGivesWhatEndedAtOrAfterATimeOldestFirst) {
  TempDb tmp;
  auto gateway = OpenApprovals(tmp.path());
  auto cli = OpenApprovals(tmp.path());
  ApprovalRecord early = Created(*gateway, MailCall());
  ASSERT_TRUE(cli->Deny(early.id, Person("", "alice"), ""));
  std::this_thread::sleep_for(2ms);
  const std::string since = Now();
  ApprovalRecord approved = Created(*gateway, MailCall());
  ApprovalRecord expired = Created(*gateway, MailCall());
  ApprovalRecord waiting = Created(*gateway, MailCall(2));
  ASSERT_TRUE(cli->Approve(approved.id, Person("", "alice"), ""));
  ASSERT_TRUE(*gateway->Expire(expired.id, "approval expired after 10m"));
  ASSERT_TRUE(cli->Approve(waiting.id, Person("", "alice"), ""));  // one vote of two: still pending
  auto decided = gateway->DecidedSince(since);
  ASSERT_TRUE(decided) << decided.status().message();
  ASSERT_EQ(decided->size(), 2u);
  EXPECT_EQ((*decided)[0].id, approved.id);
  EXPECT_EQ((*decided)[1].id, expired.id);
  EXPECT_EQ(gateway->DecidedSince("")->size(), 3u);
}

TEST(ApprovalStoreTest, ATableFromBeforeTheOwnerColumnGetsIt) {
  TempDb tmp;
  ApprovalRecord call;
  {
    auto store = OpenApprovals(tmp.path());
    call = Created(*store, MailCall());
  }
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(tmp.path().c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(
      sqlite3_exec(raw, "ALTER TABLE state_approvals DROP COLUMN owner", nullptr, nullptr, nullptr),
      SQLITE_OK)
      << sqlite3_errmsg(raw);
  sqlite3_close(raw);
  auto store = OpenApprovals(tmp.path());
  ASSERT_TRUE(store);
  EXPECT_EQ(Fetched(*store, call.id).owner, "");
  ApprovalRecord owned = MailCall();
  owned.owner = "1:2";
  EXPECT_EQ(Fetched(*store, Created(*store, owned).id).owner, "1:2");
}

TEST(ApprovalStoreTest, TakeRestartCancelledGivesTheNewestFirst) {
  TempDb tmp;
  auto store = OpenApprovals(tmp.path());
  const std::string key(64, '5');
  ApprovalRecord older = MailCall(1, key);
  older.created = audit::FormatTime(std::chrono::system_clock::now() - 1min);
  older = Created(*store, older);
  ApprovalRecord newer = Created(*store, MailCall(1, key));
  ASSERT_EQ(*store->CancelAllPending("gateway restarted"), 2u);
  EXPECT_EQ((*store->TakeRestartCancelled(key))->id, newer.id);
  EXPECT_EQ((*store->TakeRestartCancelled(key))->id, older.id);
  EXPECT_FALSE(*store->TakeRestartCancelled(key));
}

TEST(ApprovalStoreTest, ListGivesPendingOldestFirstAndAllNewestFirst) {
  TempDb tmp;
  auto store = OpenApprovals(tmp.path());
  const auto now = std::chrono::system_clock::now();
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) {
    ApprovalRecord r = MailCall();
    r.created = audit::FormatTime(now - std::chrono::minutes(4 - i));
    ids.push_back(Created(*store, r).id);
  }
  ASSERT_TRUE(store->Deny(ids[1], Person("", "alice"), ""));
  auto pending = store->List(false);
  ASSERT_TRUE(pending) << pending.status().message();
  ASSERT_EQ(pending->size(), 3u);
  EXPECT_EQ((*pending)[0].id, ids[0]);
  EXPECT_EQ((*pending)[1].id, ids[2]);
  EXPECT_EQ((*pending)[2].id, ids[3]);
  auto all = store->List(true);
  ASSERT_EQ(all->size(), 4u);
  EXPECT_EQ((*all)[0].id, ids[3]);
  EXPECT_EQ((*all)[3].id, ids[0]);
  auto newest = store->List(true, 2);
  ASSERT_EQ(newest->size(), 2u);
  EXPECT_EQ((*newest)[1].id, ids[2]);
  EXPECT_EQ(store->List(false, 1)->size(), 1u);
}

TEST(ApprovalStoreTest, ToJsonShowsArgumentsAsJsonAndNotTheRetryFields) {
  TempDb tmp;
  auto store = OpenApprovals(tmp.path());
  ApprovalRecord call = Created(*store, MailCall(2));
  ASSERT_TRUE(store->Approve(call.id, Person("", "alice"), "first"));
  json j = ToJson(Fetched(*store, call.id));
  EXPECT_EQ(j["arguments"], json({{"to", "x@example.com"}, {"body", "hello"}}));
  EXPECT_EQ(j["status"], "pending");
  EXPECT_EQ(j["votes_needed"], 2);
  ASSERT_EQ(j["votes"].size(), 1u);
  EXPECT_EQ(j["votes"][0]["who"], "alice");
  EXPECT_EQ(j["votes"][0]["comment"], "first");
  EXPECT_TRUE(j["votes"][0]["at"].is_string());
  EXPECT_EQ(j["reasons"], json({"reads untrusted content", "can send data out"}));
  EXPECT_FALSE(j.contains("retry_key"));
  EXPECT_FALSE(j.contains("retry_told"));
  for (const char* key : {"id", "tenant", "user", "agent", "session", "tool", "server", "risk",
                          "rule", "reason", "binding", "definition_hash", "created", "expires",
                          "decided_by", "decided_at", "comment", "consumed_at"}) {
    EXPECT_TRUE(j[key].is_string()) << key;
  }
}

// Issue 31: one person under two names is one vote. The agent's client answered in-band as
// "bob (in-band)" and bob then approved through the API as "bob": two strings, one person.
TEST(ApprovalStoreTest, TwoPersonTellsVotesApartByPersonNotByName) {
  TempDb tmp;
  auto store = OpenApprovals(tmp.path());
  ApprovalRecord call = Created(*store, MailCall(2));
  ASSERT_TRUE(store->Approve(call.id, Person("acme", "bob", "bob (console)"), ""));
  auto renamed = store->Approve(call.id, Person("acme", "bob", "bob via the API"), "");
  ASSERT_TRUE(renamed);
  EXPECT_EQ(renamed->error, DecideError::kSameApprover) << "one person, two names, two votes";
  EXPECT_EQ(Fetched(*store, call.id).status, ApprovalStatus::kPending);
  // Same user id in another tenant is another person; same name, another user, too.
  auto other_tenant = store->Approve(call.id, Person("globex", "bob", "bob (console)"), "");
  ASSERT_TRUE(other_tenant);
  EXPECT_EQ(other_tenant->error, DecideError::kNone);
  EXPECT_TRUE(other_tenant->decided);
  ApprovalRecord got = Fetched(*store, call.id);
  ASSERT_EQ(got.votes.size(), 2u);
  EXPECT_EQ(got.votes[0].tenant, "acme");
  EXPECT_EQ(got.votes[0].user, "bob");
  EXPECT_EQ(got.votes[1].tenant, "globex");
  EXPECT_FALSE(got.votes[0].in_band);
  EXPECT_EQ(ToJson(got)["votes"][1]["user"], "bob");
}

TEST(ApprovalStoreTest, AnInBandAnswerIsNeverAVoteOfATwoPersonApproval) {
  TempDb tmp;
  auto store = OpenApprovals(tmp.path());
  ApprovalRecord two = Created(*store, MailCall(2));
  auto in_band = store->Approve(two.id, AgentClient("acme", "bob"), "");
  ASSERT_TRUE(in_band);
  EXPECT_EQ(in_band->error, DecideError::kNeedsPerson);
  EXPECT_TRUE(Fetched(*store, two.id).votes.empty());
  // After a person's vote it still cannot be the second.
  ASSERT_TRUE(store->Approve(two.id, Person("acme", "bob"), ""));
  auto second = store->Approve(two.id, AgentClient("acme", "bob"), "");
  ASSERT_TRUE(second);
  EXPECT_EQ(second->error, DecideError::kNeedsPerson);
  EXPECT_EQ(Fetched(*store, two.id).status, ApprovalStatus::kPending);

  // Where one vote is enough (self_approve), it is that vote, named as what it is.
  ApprovalRecord one = Created(*store, MailCall(1));
  auto single = store->Approve(one.id, AgentClient("acme", "bob"), "");
  ASSERT_TRUE(single);
  EXPECT_TRUE(single->decided);
  ApprovalRecord got = Fetched(*store, one.id);
  EXPECT_EQ(got.decided_by, "the agent's client (in-band)");
  ASSERT_EQ(got.votes.size(), 1u);
  EXPECT_TRUE(got.votes[0].in_band);
  EXPECT_EQ(got.votes[0].user, "bob");
}

TEST(ApprovalStoreTest, CommentsAndDecidersAreBoundedAndHaveNoControlCharacters) {
  TempDb tmp;
  auto store = OpenApprovals(tmp.path());
  ApprovalRecord call = Created(*store, MailCall());
  EXPECT_FALSE(store->Approve(call.id, Person("", "alice"), std::string(1025, 'c')));
  EXPECT_FALSE(store->Deny(call.id, Person("", "alice"), "\x1b[2Jall clear"));
  EXPECT_FALSE(store->Deny(call.id, Person("", "alice"), "bad \xff byte"));
  EXPECT_FALSE(store->Approve(call.id, Person("", ""), ""));
  EXPECT_FALSE(store->Approve(call.id, Person("", "ali\nce"), ""));
  EXPECT_FALSE(store->Approve(call.id, Person("", std::string(257, 'a')), ""));
  EXPECT_FALSE(store->Approve(call.id, Person("acme", "alice", std::string(257, 'a')), ""));
  EXPECT_FALSE(store->Approve(call.id, Person("ac\x1bme", "alice"), ""));
  EXPECT_EQ(Fetched(*store, call.id).status, ApprovalStatus::kPending);
  auto ok = store->Deny(call.id, Person("", "alice"), std::string("line one\n\tline two ") + "\xc3\xa9");
  ASSERT_TRUE(ok) << ok.status().message();
  EXPECT_TRUE(ok->decided);
  EXPECT_FALSE(store->Expire(call.id, std::string(1025, 'w')));
}

TEST(ApprovalStoreTest, ReadOnlyStoreReadsAFileWithoutTheTableAsNoApprovalsAndNeverWrites) {
  TempDb tmp;
  EXPECT_FALSE(ApprovalStore::Open({.path = tmp.path(), .create = false}));
  struct stat st;
  EXPECT_NE(stat(tmp.path().c_str(), &st), 0) << "a read-only open created the file";

  ASSERT_TRUE(KillStore::Open({.path = tmp.path()}));  // the file, without state_approvals
  auto reader = OpenApprovals(tmp.path(), /*create=*/false);
  ASSERT_TRUE(reader);
  auto pending = reader->List(false);
  ASSERT_TRUE(pending) << pending.status().message();
  EXPECT_TRUE(pending->empty());
  auto got = reader->Get("apr_" + std::string(32, '0'));
  ASSERT_TRUE(got);
  EXPECT_FALSE(*got);
  EXPECT_FALSE(reader->Create(MailCall()));
  EXPECT_FALSE(reader->Approve("apr_" + std::string(32, '0'), Person("", "alice"), ""));
  EXPECT_FALSE(reader->CancelAllPending("gateway restarted"));
  EXPECT_TRUE(reader->DataVersion());

  auto writer = OpenApprovals(tmp.path());
  ApprovalRecord call = Created(*writer, MailCall());
  EXPECT_EQ(reader->List(false)->size(), 1u);
  EXPECT_EQ(Fetched(*reader, call.id).id, call.id);
}

TEST(ApprovalStoreTest, AStoreWhoseTableWasDroppedFailsInsteadOfShowingNone) {
  TempDb tmp;
  auto store = OpenApprovals(tmp.path());
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(tmp.path().c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw, "DROP TABLE state_approvals", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(raw);
  auto listed = store->List(false);
  ASSERT_FALSE(listed);
  EXPECT_NE(listed.status().message().find("state_approvals is missing"), std::string::npos);
}

// Runs `sql` on the file through a connection of its own, as a hand edit would; the result code.
int HandEdit(const std::string& path, const std::string& sql) {
  sqlite3* raw = nullptr;
  if (sqlite3_open(path.c_str(), &raw) != SQLITE_OK) return -1;
  int rc = sqlite3_exec(raw, sql.c_str(), nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) rc = sqlite3_extended_errcode(raw);
  sqlite3_close(raw);
  return rc;
}

TEST(ApprovalStoreTest, HandEditedRowsThatMeanNothingAreRefusedByTheTable) {
  TempDb tmp;
  auto store = OpenApprovals(tmp.path());
  ApprovalRecord call = Created(*store, MailCall());
  const std::string where = " WHERE id = '" + call.id + "'";
  const std::string edits[] = {
      "UPDATE state_approvals SET status = 'maybe'" + where,
      // Approved by nobody, or pending with a decider.
      "UPDATE state_approvals SET status = 'approved', votes = '[{\"who\":\"x\",\"at\":\"y\"}]'" +
          where,
      "UPDATE state_approvals SET decided_by = 'mallory'" + where,
      "UPDATE state_approvals SET votes = 'alice'" + where,
      "UPDATE state_approvals SET votes = '{}'" + where,
      "UPDATE state_approvals SET arguments = '{\"to\":'" + where,
      "UPDATE state_approvals SET consumed_at = '2025-01-01T00:00:00.000000Z'" + where,
      "UPDATE state_approvals SET risk = 'none'" + where,
      "UPDATE state_approvals SET votes_needed = 0" + where,
      "UPDATE state_approvals SET retry_told = 1" + where,
      "UPDATE state_approvals SET binding = 'short'" + where,
      "UPDATE state_approvals SET id = 'apr_NOTHEX'" + where,
      "UPDATE state_approvals SET votes_needed = 'two'" + where,  // STRICT: an INTEGER column
      // Approved with one vote of two.
      "UPDATE state_approvals SET votes_needed = 2, status = 'approved', decided_by = 'x', "
      "decided_at = 'y', votes = '[{\"who\":\"x\",\"at\":\"y\"}]'" +
          where,
  };
  for (const std::string& sql : edits) {
    const int rc = HandEdit(tmp.path(), sql);
    EXPECT_TRUE(rc == SQLITE_CONSTRAINT_CHECK || rc == SQLITE_CONSTRAINT_DATATYPE)
        << sql << ": " << rc;
  }
  ApprovalRecord got = Fetched(*store, call.id);
  EXPECT_EQ(got.status, ApprovalStatus::kPending);
  EXPECT_EQ(got.decided_by, "");
  // A consistent hand edit is still a row the store reads.
  EXPECT_EQ(HandEdit(tmp.path(),
                     "UPDATE state_approvals SET status = 'denied', decided_by = 'root (sqlite3)', "
                     "decided_at = '2025-01-01T00:00:00.000000Z'" +
                         where),
            SQLITE_OK);
  EXPECT_EQ(Fetched(*store, call.id).status, ApprovalStatus::kDenied);
}

TEST(ApprovalStoreTest, DataVersionMovesWhenAnotherConnectionDecides) {
  TempDb tmp;
  auto gateway = OpenApprovals(tmp.path());
  auto cli = OpenApprovals(tmp.path());
  ApprovalRecord call = Created(*gateway, MailCall());
  auto before = gateway->DataVersion();
  ASSERT_TRUE(before);
  EXPECT_EQ(*gateway->DataVersion(), *before);
  ASSERT_TRUE(cli->Approve(call.id, Person("", "alice"), ""));
  EXPECT_NE(*gateway->DataVersion(), *before);
  EXPECT_EQ(Fetched(*gateway, call.id).status, ApprovalStatus::kApproved);
}

TEST(ApprovalStoreTest, StatusWordsRoundTrip) {
  for (ApprovalStatus s :
       {ApprovalStatus::kPending, ApprovalStatus::kApproved, ApprovalStatus::kDenied,
        ApprovalStatus::kExpired, ApprovalStatus::kCancelled}) {
    auto parsed = ParseApprovalStatus(ToString(s));
    ASSERT_TRUE(parsed);
    EXPECT_EQ(*parsed, s);
  }
  EXPECT_FALSE(ParseApprovalStatus("maybe"));
}

}  // namespace
}  // namespace warden::state
