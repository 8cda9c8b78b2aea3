// The approval gate through a whole gateway core and a real upstream (tests/upstream/fixtures/
// echo_server.py --record, over stdio in its sandbox; its `calls` tool says what reached it): a
// call the policy sends to a person waits, holds no worker, and reaches the upstream only once
// approved, with exactly the stored arguments, once; denial, expiry, the client cancelling, a
// kill switch and a restart each end it with a tool error saying what happened. Decisions are
// made on the gate (what the API and console call) and, for the cross-process path, on a second
// store on the same file (what `warden approvals` does).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "audit/audit_log.h"
#include "gateway/approvals/approval_gate.h"
#include "gateway/session/session.h"
#include "state/approval_store.h"
#include "testing.h"
#include "upstream/client.h"

namespace warden::gateway {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using state::ApprovalRecord;
using state::ApprovalStatus;
using testing::PolicyFromText;
using testing::TempDir;

std::string PolicyYaml(const std::string& approvals) {
  return "version: 1\nupstreams:\n  echo:\n    command: [/usr/bin/python3, \"" +
         testing::EchoFixture() +
         "\", --record]\n"
         "tools:\n"
         "  - match: { tool: echo__calls }\n    risk: low\n"
         "  - match: { tool: task__end, server: task }\n    risk: low\n"
         "  - match: { tool: echo__echo }\n    risk: high\n"
         "  - match: { server: echo }\n    risk: low\n"
         "defaults:\n  effect_by_risk: { low: allow, medium: allow, high: ask }\n" +
         approvals;
}

class ApprovalsTest : public ::testing::Test {
 protected:
  void Start(const std::string& approvals = "", ApprovalGateOptions gate_options = {}) {
    db_ = dir_.File("warden.db");
    gate_audit_ = testing::OpenAudit(db_);
    auto gate = ApprovalGate::Open({.path = db_}, *gate_audit_, gate_options);
    ASSERT_TRUE(gate) << gate.status().message();
    gate_ = std::move(*gate);
    GatewayOptions options{.worker_threads = 2,
                           .make_upstream = [](upstream::Spec spec, upstream::Events events,
                                               upstream::ClientOptions o) {
                             return upstream::Client::Create(std::move(spec), std::move(events),
                                                             std::move(o));
                           }};
    options.services.approvals = gate_.get();
    gw_ = std::make_unique<testing::TestGateway>(PolicyFromText(PolicyYaml(approvals)), db_,
                                                 identity::Caller{"", "tester", "", ""}, options);
    session_ = NewSession("sess-approvals");
  }

  std::shared_ptr<McpSession> NewSession(const std::string& id) {
    auto session = gw_->NewSession(identity::Caller{"", "tester", "", ""}, id);
    json init = testing::SendRequest(*session, 1, "initialize",
                                     {{"protocolVersion", "2025-06-18"},
                                      {"capabilities", json::object()},
                                      {"clientInfo", {{"name", "t"}, {"version", "1"}}}})
                    .get();
    EXPECT_TRUE(init.contains("result")) << init.dump();
    session->Handle(mcp::Notification{"notifications/initialized", std::nullopt}, {});
    json list = testing::SendRequest(*session, 2, "tools/list", json::object()).get();
    EXPECT_TRUE(list.contains("result")) << list.dump();
    return session;
  }

  void TearDown() override {
    if (session_) session_->Close();
    if (gate_) gate_->StopAll("test ends");
    gw_.reset();
    gate_.reset();
  }

  std::future<json> Call(McpSession& session, int id, const std::string& tool, json args,
                         json meta = nullptr, MessageSink related = nullptr) {
    json params = {{"name", tool}, {"arguments", std::move(args)}};
    if (!meta.is_null()) params["_meta"] = std::move(meta);
    return testing::SendRequest(session, id, "tools/call", std::move(params), std::move(related));
  }

  // What reached the upstream: [{name, arguments}] of every call before this one.
  json UpstreamCalls() {
    json reply = Call(*session_, 900 + probe_++, "echo__calls", json::object()).get();
    json calls = json::parse(testing::ReplyText(reply), nullptr, false);
    EXPECT_TRUE(calls.is_array()) << reply.dump();
    json mine = json::array();
    for (const json& c : calls)
      if (c["name"] != "calls") mine.push_back(c);
    return mine;
  }

  // Waits (up to 5 s) until `n` approvals are pending; returns them.
  std::vector<ApprovalRecord> WaitPending(size_t n) {
    for (int i = 0; i < 500; ++i) {
      auto pending = gate_->store().List(false);
      EXPECT_TRUE(pending) << pending.status().message();
      if (pending && pending->size() >= n) return *pending;
      std::this_thread::sleep_for(10ms);
    }
    ADD_FAILURE() << "fewer than " << n << " approvals became pending";
    return {};
  }

  static bool Ready(std::future<json>& f, std::chrono::milliseconds wait) {
    return f.wait_for(wait) == std::future_status::ready;
  }

  std::vector<audit::AuditEntry> Entries() {
    auto log = testing::OpenAudit(db_);
    std::vector<audit::AuditEntry> out;
    auto all = log->Query({});
    EXPECT_TRUE(all) << all.status().message();
    if (all) out = *all;
    return out;
  }

  TempDir dir_;
  std::string db_;
  std::unique_ptr<audit::AuditLog> gate_audit_;
  std::unique_ptr<ApprovalGate> gate_;
  std::unique_ptr<testing::TestGateway> gw_;
  std::shared_ptr<McpSession> session_;
  int probe_ = 0;
};

TEST_F(ApprovalsTest, AHighRiskCallWaitsAndRunsExactlyTheApprovedCallOnce) {
  Start();
  const json args = {{"text", "send to bob@example.com: the Q3 numbers"}, {"n", 3}};
  auto reply = Call(*session_, 10, "echo__echo", args);
  auto pending = WaitPending(1);
  ASSERT_EQ(pending.size(), 1u);
  const ApprovalRecord& r = pending[0];
  EXPECT_EQ(r.tool, "echo__echo");
  EXPECT_EQ(r.server, "echo");
  EXPECT_EQ(r.risk, "high");
  EXPECT_EQ(r.user, "tester");
  EXPECT_EQ(r.session, "sess-approvals");
  EXPECT_EQ(json::parse(r.arguments), args);
  EXPECT_EQ(r.binding.size(), 64u);
  EXPECT_EQ(r.definition_hash.size(), 64u) << "an upstream tool is bound to its definition";
  EXPECT_FALSE(Ready(reply, 200ms)) << "the call must wait for a person";
  EXPECT_TRUE(UpstreamCalls().empty()) << "nothing reaches the upstream before the decision";

  auto decided = gate_->Approve(r.id, state::Person("", "alice"), "ok");
  ASSERT_TRUE(decided) << decided.status().message();
  EXPECT_TRUE(decided->decided);
  ASSERT_TRUE(Ready(reply, 10s));
  json got = reply.get();
  EXPECT_EQ(testing::ReplyText(got), args["text"].get<std::string>()) << got.dump();
  json calls = UpstreamCalls();
  ASSERT_EQ(calls.size(), 1u) << calls.dump();
  EXPECT_EQ(calls[0]["arguments"], args);

  // Single use: the approval is spent; deciding it again is refused.
  auto again = gate_->Consume(r.id);
  ASSERT_TRUE(again);
  EXPECT_FALSE(*again);
  auto twice = gate_->Approve(r.id, state::Person("", "alice"), "");
  ASSERT_TRUE(twice);
  EXPECT_EQ(twice->error, state::DecideError::kAlreadyDecided);

  // Audited: the asking, and the call with who approved it.
  bool asked = false, ran = false;
  for (const audit::AuditEntry& e : Entries()) {
    if (e.tool != "echo__echo") continue;
    if (e.decision == "ask" && e.reason.find(r.id) != std::string::npos) asked = true;
    if (e.decision == "allow" && e.kind == audit::EntryKind::kCall) {
      ran = true;
      ASSERT_EQ(e.approvals.size(), 1u);
      EXPECT_EQ(e.approvals[0].who, "alice");
      EXPECT_NE(e.reason.find(r.id), std::string::npos) << e.reason;
    }
  }
  EXPECT_TRUE(asked);
  EXPECT_TRUE(ran);
}

TEST_F(ApprovalsTest, TheSameCallMadeAgainAsksAgain) {
  Start();
  auto first = Call(*session_, 10, "echo__echo", {{"text", "x"}});
  auto p1 = WaitPending(1);
  ASSERT_EQ(p1.size(), 1u);
  ASSERT_TRUE(gate_->Approve(p1[0].id, state::Person("", "alice"), ""));
  ASSERT_TRUE(Ready(first, 10s));
  EXPECT_EQ(testing::ReplyText(first.get()), "x");
  auto second = Call(*session_, 11, "echo__echo", {{"text", "x"}});
  auto p2 = WaitPending(1);
  ASSERT_EQ(p2.size(), 1u);
  EXPECT_NE(p2[0].id, p1[0].id);
  EXPECT_EQ(p2[0].binding, p1[0].binding) << "same call, same binding";
  EXPECT_FALSE(Ready(second, 200ms)) << "an approval is single-use";
  ASSERT_TRUE(gate_->Deny(p2[0].id, state::Person("", "alice"), ""));
  ASSERT_TRUE(Ready(second, 10s));
  EXPECT_EQ(UpstreamCalls().size(), 1u);
}

TEST_F(ApprovalsTest, DenialGivesTheAgentWhoAndWhy) {
  Start();
  auto reply = Call(*session_, 10, "echo__echo", {{"text", "wire $10k"}});
  auto pending = WaitPending(1);
  ASSERT_EQ(pending.size(), 1u);
  ASSERT_TRUE(gate_->Deny(pending[0].id, state::Person("", "alice"), "wrong recipient"));
  ASSERT_TRUE(Ready(reply, 10s));
  json got = reply.get();
  EXPECT_TRUE(got["result"].value("isError", false)) << got.dump();
  EXPECT_NE(testing::ReplyText(got).find("denied by alice: wrong recipient"), std::string::npos)
      << got.dump();
  EXPECT_TRUE(UpstreamCalls().empty());
  auto r = gate_->store().Get(pending[0].id);
  ASSERT_TRUE(r && *r);
  EXPECT_EQ((*r)->status, ApprovalStatus::kDenied);
  EXPECT_EQ((*r)->decided_by, "alice");
}

TEST_F(ApprovalsTest, ExpiryDeniesAndSaysAfterHowLong) {
  Start("approvals:\n  timeout: 1s\n");
  auto reply = Call(*session_, 10, "echo__echo", {{"text", "late"}});
  ASSERT_TRUE(Ready(reply, 10s));
  json got = reply.get();
  EXPECT_NE(testing::ReplyText(got).find("approval expired after 1s"), std::string::npos)
      << got.dump();
  EXPECT_TRUE(UpstreamCalls().empty());
  auto all = gate_->store().List(true);
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].status, ApprovalStatus::kExpired);
  // Approving after expiry changes nothing.
  auto late = gate_->Approve((*all)[0].id, state::Person("", "alice"), "");
  ASSERT_TRUE(late);
  EXPECT_EQ(late->error, state::DecideError::kAlreadyDecided);
  EXPECT_TRUE(UpstreamCalls().empty());
}

TEST_F(ApprovalsTest, TheClientCancellingCancelsTheApproval) {
  Start();
  auto reply = Call(*session_, 10, "echo__echo", {{"text", "never"}});
  auto pending = WaitPending(1);
  ASSERT_EQ(pending.size(), 1u);
  session_->Handle(mcp::Notification{"notifications/cancelled", json{{"requestId", 10}}}, {});
  for (int i = 0; i < 300; ++i) {
    auto r = gate_->store().Get(pending[0].id);
    if (r && *r && (*r)->status != ApprovalStatus::kPending) break;
    std::this_thread::sleep_for(10ms);
  }
  auto r = gate_->store().Get(pending[0].id);
  ASSERT_TRUE(r && *r);
  EXPECT_EQ((*r)->status, ApprovalStatus::kCancelled);
  auto late = gate_->Approve(pending[0].id, state::Person("", "alice"), "");
  ASSERT_TRUE(late);
  EXPECT_EQ(late->error, state::DecideError::kAlreadyDecided);
  EXPECT_TRUE(UpstreamCalls().empty());
}

TEST_F(ApprovalsTest, AKillSwitchEndsAWaitingCall) {
  Start();
  auto reply = Call(*session_, 10, "echo__echo", {{"text", "stop me"}});
  auto pending = WaitPending(1);
  ASSERT_EQ(pending.size(), 1u);
  ASSERT_TRUE(gw_->kills.Kill(KillScope::kTool, "echo__echo", "incident 7").ok());
  ASSERT_TRUE(Ready(reply, 10s));
  json got = reply.get();
  EXPECT_NE(testing::ReplyText(got).find("incident 7"), std::string::npos) << got.dump();
  auto r = gate_->store().Get(pending[0].id);
  ASSERT_TRUE(r && *r);
  EXPECT_EQ((*r)->status, ApprovalStatus::kCancelled);
  ASSERT_TRUE(gw_->kills.Unkill(KillScope::kTool, "echo__echo").ok());
  EXPECT_TRUE(UpstreamCalls().empty());
}

TEST_F(ApprovalsTest, AWaitingClientHearsProgressSoThatItDoesNotTimeOut) {
  ApprovalGateOptions o;
  o.keepalive_interval = 50ms;
  Start("", o);
  std::mutex mu;
  std::vector<json> progress;
  auto reply = Call(*session_, 10, "echo__echo", {{"text", "p"}}, json{{"progressToken", "tok-1"}},
                    [&](const mcp::Message& m) {
                      if (auto* n = std::get_if<mcp::Notification>(&m)) {
                        std::lock_guard lock(mu);
                        if (n->method == "notifications/progress" && n->params)
                          progress.push_back(*n->params);
                      }
                    });
  auto pending = WaitPending(1);
  ASSERT_EQ(pending.size(), 1u);
  for (int i = 0; i < 200; ++i) {
    {
      std::lock_guard lock(mu);
      if (progress.size() >= 3) break;
    }
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_TRUE(gate_->Approve(pending[0].id, state::Person("", "alice"), ""));
  ASSERT_TRUE(Ready(reply, 10s));
  std::lock_guard lock(mu);
  ASSERT_GE(progress.size(), 3u);
  double last = -1;
  for (const json& p : progress) {
    EXPECT_EQ(p["progressToken"], "tok-1");
    EXPECT_GT(p["progress"].get<double>(), last) << "progress must increase";
    last = p["progress"].get<double>();
    EXPECT_NE(p["message"].get<std::string>().find(pending[0].id), std::string::npos);
  }
}

TEST_F(ApprovalsTest, TwoPersonRiskNeedsTwoDistinctApprovers) {
  Start("approvals:\n  two_person: [high]\n");
  auto reply = Call(*session_, 10, "echo__echo", {{"text", "big transfer"}});
  auto pending = WaitPending(1);
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].votes_needed, 2);
  auto one = gate_->Approve(pending[0].id, state::Person("", "alice"), "");
  ASSERT_TRUE(one);
  EXPECT_FALSE(one->decided);
  auto same = gate_->Approve(pending[0].id, state::Person("", "alice"), "");
  ASSERT_TRUE(same);
  EXPECT_EQ(same->error, state::DecideError::kSameApprover);
  EXPECT_FALSE(Ready(reply, 200ms));
  EXPECT_TRUE(UpstreamCalls().empty());
  auto two = gate_->Approve(pending[0].id, state::Person("", "carol"), "");
  ASSERT_TRUE(two);
  EXPECT_TRUE(two->decided);
  ASSERT_TRUE(Ready(reply, 10s));
  EXPECT_EQ(testing::ReplyText(reply.get()), "big transfer");
}

TEST_F(ApprovalsTest, AGatewayStartingBesideALiveOneLeavesItsApprovalsAlone) {
  Start();
  auto reply = Call(*session_, 10, "echo__echo", {{"text", "still mine"}});
  auto pending = WaitPending(1);
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].owner, ApprovalOwnerId());
  // `warden mcp` or `warden undo` opening the same file while this gateway runs.
  auto second_audit = testing::OpenAudit(db_);
  auto second = ApprovalGate::Open({.path = db_}, *second_audit);
  ASSERT_TRUE(second) << second.status().message();
  auto still = gate_->store().Get(pending[0].id);
  ASSERT_TRUE(still && *still);
  EXPECT_EQ((*still)->status, ApprovalStatus::kPending);
  EXPECT_FALSE(ApprovalOwnerGone(ApprovalOwnerId()));
  EXPECT_TRUE(ApprovalOwnerGone("1:0"));
  EXPECT_TRUE(ApprovalOwnerGone(""));
  EXPECT_TRUE(ApprovalOwnerGone("99999999:1"));
  ASSERT_TRUE(gate_->Approve(pending[0].id, state::Person("", "alice"), ""));
  ASSERT_TRUE(Ready(reply, 10s));
  EXPECT_EQ(testing::ReplyText(reply.get()), "still mine");
}

TEST_F(ApprovalsTest, ADecisionByAnotherProcessReleasesTheCall) {
  Start();
  auto reply = Call(*session_, 10, "echo__echo", {{"text", "from the cli"}});
  auto pending = WaitPending(1);
  ASSERT_EQ(pending.size(), 1u);
  // What `warden approvals approve` does: its own connection to the file.
  auto other = state::ApprovalStore::Open({.path = db_});
  ASSERT_TRUE(other);
  auto decided = (*other)->Approve(pending[0].id, state::Person("", "root (cli)"), "");
  ASSERT_TRUE(decided);
  EXPECT_TRUE(decided->decided);
  ASSERT_TRUE(Ready(reply, 10s)) << "the gate polls the store for other processes' decisions";
  EXPECT_EQ(testing::ReplyText(reply.get()), "from the cli");
}

TEST_F(ApprovalsTest, ARestartCancelsAndTheRetryIsToldOnceThenAsksAgain) {
  // An earlier gateway's pending approval, left in the file by a crash.
  {
    db_ = dir_.File("warden.db");
    auto store = state::ApprovalStore::Open({.path = db_});
    ASSERT_TRUE(store);
    ApprovalRecord old;
    old.id = NewApprovalId();
    old.tenant = "";
    old.user = "tester";
    old.session = "an-old-session";
    old.tool = "echo__echo";
    old.server = "echo";
    old.arguments = R"({"text":"retry me"})";
    old.risk = "high";
    old.rule = "tools[1]";
    old.created = state::Now();
    old.expires = state::Now();
    // The binding without the session, as the stage computes it (the definition is the echo
    // fixture's, which this test reads back from the new approval below).
    old.binding = std::string(64, 'a');
    old.retry_key = std::string(64, 'b');
    ASSERT_TRUE((*store)->Create(old));
  }
  Start();
  auto cancelled = gate_->store().List(true);
  ASSERT_TRUE(cancelled);
  ASSERT_EQ(cancelled->size(), 1u);
  EXPECT_EQ((*cancelled)[0].status, ApprovalStatus::kCancelled);
  EXPECT_EQ((*cancelled)[0].comment, "gateway restarted");

  // The call in this session asks; its retry key is what a restart would have left.
  auto reply = Call(*session_, 10, "echo__echo", {{"text", "retry me"}});
  auto pending = WaitPending(1);
  ASSERT_EQ(pending.size(), 1u);
  const std::string retry_key = pending[0].retry_key;
  ASSERT_TRUE(gate_->Deny(pending[0].id, state::Person("", "alice"), "")) << "end it";
  ASSERT_TRUE(Ready(reply, 10s));

  // Now a crash with that call pending: a new gate on the file cancels it as restarted.
  {
    auto store = state::ApprovalStore::Open({.path = db_});
    ASSERT_TRUE(store);
    ApprovalRecord crashed = pending[0];
    crashed.id = NewApprovalId();
    crashed.status = ApprovalStatus::kPending;
    crashed.decided_by.clear();
    crashed.decided_at.clear();
    crashed.comment.clear();
    crashed.votes.clear();
    crashed.owner = "1:0";  // a process that is not running (pid 1 started at boot, not at 0)
    ASSERT_TRUE((*store)->Create(crashed));
  }
  session_->Close();
  session_.reset();
  gate_->StopAll("test restarts");
  gw_.reset();
  gate_.reset();
  Start();
  auto retry = Call(*session_, 11, "echo__echo", {{"text", "retry me"}});
  ASSERT_TRUE(Ready(retry, 10s)) << "the first retry is told at once";
  json got = retry.get();
  EXPECT_NE(testing::ReplyText(got).find("cancelled (gateway restarted)"), std::string::npos)
      << got.dump();
  auto again = Call(*session_, 12, "echo__echo", {{"text", "retry me"}});
  auto now_pending = WaitPending(1);
  ASSERT_EQ(now_pending.size(), 1u) << "the next retry asks again";
  EXPECT_EQ(now_pending[0].retry_key, retry_key);
  EXPECT_FALSE(Ready(again, 200ms));
  EXPECT_TRUE(UpstreamCalls().empty());
}

// In-band: where self_approve lets the requesting user decide and the client declared elicitation,
// the client is asked with the exact call; its answer decides (here the one local user).
class InBandApprovalsTest : public ApprovalsTest {
 protected:
  std::shared_ptr<McpSession> ElicitingSession() {
    auto session = gw_->NewSession(identity::Caller{"", "tester", "", ""}, "sess-in-band");
    json init = testing::SendRequest(*session, 1, "initialize",
                                     {{"protocolVersion", "2025-11-25"},
                                      {"capabilities", {{"elicitation", json::object()}}},
                                      {"clientInfo", {{"name", "t"}, {"version", "1"}}}})
                    .get();
    EXPECT_TRUE(init.contains("result")) << init.dump();
    session->Handle(mcp::Notification{"notifications/initialized", std::nullopt}, {});
    EXPECT_TRUE(
        testing::SendRequest(*session, 2, "tools/list", json::object()).get().contains("result"));
    return session;
  }

  // Makes the call, waits for warden's elicitation/create, answers it with `answer`, and returns
  // the call's reply (not waited for) and the elicitation's params.
  std::pair<std::future<json>, json> Answered(McpSession& session, const json& args,
                                              const json& answer) {
    auto asked = std::make_shared<std::promise<mcp::Request>>();
    auto once = std::make_shared<std::once_flag>();
    auto reply =
        Call(session, 10, "echo__echo", args, nullptr, [asked, once](const mcp::Message& m) {
          if (auto* r = std::get_if<mcp::Request>(&m); r && r->method == "elicitation/create")
            std::call_once(*once, [&] { asked->set_value(*r); });
        });
    auto request = asked->get_future();
    EXPECT_EQ(request.wait_for(10s), std::future_status::ready) << "the client was not asked";
    mcp::Request r = request.get();
    session.Handle(mcp::Response{r.id, answer}, {});
    return {std::move(reply), r.params.value_or(json())};
  }
  // The same, waiting for the reply.
  std::pair<json, json> CallAndAnswer(McpSession& session, const json& args, const json& answer) {
    auto [reply, params] = Answered(session, args, answer);
    EXPECT_TRUE(Ready(reply, 10s));
    return {reply.get(), std::move(params)};
  }
};

TEST_F(InBandApprovalsTest, TheClientSeesTheExactCallAndItsYesRunsIt) {
  Start("approvals:\n  self_approve: true\n");
  auto session = ElicitingSession();
  const json args = {{"text", "pay 120 EUR to DE89 3704 0044 0532 0130 00"}};
  auto [reply, params] =
      CallAndAnswer(*session, args, {{"action", "accept"}, {"content", {{"decision", "approve"}}}});
  EXPECT_EQ(testing::ReplyText(reply), args["text"].get<std::string>()) << reply.dump();
  EXPECT_EQ(params["mode"], "form");
  const std::string message = params["message"].get<std::string>();
  EXPECT_NE(message.find("echo__echo"), std::string::npos) << message;
  EXPECT_NE(message.find("DE89 3704 0044 0532 0130 00"), std::string::npos) << message;
  // Only a decision and a comment are asked for: never a secret.
  EXPECT_EQ(params["requestedSchema"]["properties"].size(), 2u) << params.dump();
  auto all = gate_->store().List(true);
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].status, ApprovalStatus::kApproved);
  EXPECT_EQ((*all)[0].decided_by, "the agent's client (in-band)");
  ASSERT_EQ((*all)[0].votes.size(), 1u);
  EXPECT_TRUE((*all)[0].votes[0].in_band);
  session->Close();
}

// Issue 31: `codex exec` declines every elicitation by itself and Claude Code's -p mode cancels
// every one: by default neither ends the approval, a person still decides.
TEST_F(InBandApprovalsTest, DecliningOrCancellingInTheClientLeavesItToAPersonByDefault) {
  Start("approvals:\n  self_approve: true\n");
  auto session = ElicitingSession();
  for (const char* action : {"decline", "cancel"}) {
    SCOPED_TRACE(action);
    auto [reply, params] = Answered(*session, {{"text", action}}, {{"action", action}});
    EXPECT_FALSE(Ready(reply, 300ms)) << "the client's " << action << " ended the wait";
    auto pending = WaitPending(1);
    ASSERT_EQ(pending.size(), 1u);
    EXPECT_TRUE(pending[0].votes.empty());
    ASSERT_TRUE(gate_->Approve(pending[0].id, state::Person("", "tester", "tester (local operator)"), ""));
    ASSERT_TRUE(Ready(reply, 10s));
    EXPECT_EQ(testing::ReplyText(reply.get()), action);
  }
  session->Close();
}

TEST_F(InBandApprovalsTest, WithClientDeclineDenyDecliningInTheClientDenies) {
  Start("approvals:\n  self_approve: true\n  client_decline: deny\n");
  auto session = ElicitingSession();
  auto [reply, params] = CallAndAnswer(*session, {{"text", "no"}}, {{"action", "decline"}});
  EXPECT_NE(testing::ReplyText(reply).find("declined in the client"), std::string::npos)
      << reply.dump();
  EXPECT_TRUE(UpstreamCalls().empty());
  session->Close();
}

// Issue 31, the attack: two_person with self_approve. The agent's own client answered the in-band
// question within milliseconds ("tester (in-band)"), its user approved once ("tester"): two names,
// one person, and the call ran. Now the client is not asked for a two-person call, the user's
// second name is the same person, and only another person's vote releases it.
TEST_F(InBandApprovalsTest, ATwoPersonApprovalIsNeverMetByTheAgentsClientAndItsUser) {
  Start("approvals:\n  self_approve: true\n  two_person: [high]\n");
  auto session = ElicitingSession();
  std::atomic<int> elicitations{0};
  auto reply = Call(*session, 10, "echo__echo", {{"text", "wire 9000 EUR"}}, nullptr,
                    [&elicitations](const mcp::Message& m) {
                      if (auto* r = std::get_if<mcp::Request>(&m);
                          r && r->method == "elicitation/create")
                        ++elicitations;
                    });
  auto pending = WaitPending(1);
  ASSERT_EQ(pending.size(), 1u);
  const std::string id = pending[0].id;
  // Even if a client's answer were taken, the store refuses it as a vote of two.
  auto in_band = gate_->Approve(id, state::AgentClient("", "tester"), "");
  ASSERT_TRUE(in_band);
  EXPECT_EQ(in_band->error, state::DecideError::kNeedsPerson);
  // The user, once as the local operator and once under the CLI's name: one person.
  auto first = gate_->Approve(id, state::Person("", "tester", "tester (local operator)"), "");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->error, state::DecideError::kNone);
  auto again = gate_->Approve(id, state::Person("", "tester", "tester (cli)"), "");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->error, state::DecideError::kSameApprover);
  EXPECT_FALSE(Ready(reply, 200ms)) << "one person's votes released a two-person call";
  EXPECT_EQ(elicitations.load(), 0) << "the agent's client was asked to vote on a two-person call";
  EXPECT_TRUE(UpstreamCalls().empty());
  auto second = gate_->Approve(id, state::Person("", "carol"), "");
  ASSERT_TRUE(second);
  EXPECT_TRUE(second->decided);
  ASSERT_TRUE(Ready(reply, 10s));
  EXPECT_EQ(testing::ReplyText(reply.get()), "wire 9000 EUR");
  session->Close();
}

// MCP 2026-07-28: the same in-band question, without a session. The call ends with
// input_required carrying the elicitation and a request state sealed by warden; the client's
// retry with the answer runs it. The state is bound to the caller, the task and the exact call,
// and resumes it once: every other use is refused with -32602, audited, and runs nothing.
class ModernInBandTest : public ApprovalsTest {
 protected:
  std::shared_ptr<McpSession> Context(identity::Caller caller, std::string task = "") {
    auto context = gw_->NewTaskContext(std::move(caller), std::move(task));
    contexts_.push_back(context);
    return context;
  }
  static json Meta() {
    return {{"io.modelcontextprotocol/protocolVersion", "2026-07-28"},
            {"io.modelcontextprotocol/clientCapabilities", {{"elicitation", json::object()}}}};
  }
  static std::future<json> Send(McpSession& context, int id, json params) {
    auto promise = std::make_shared<std::promise<json>>();
    auto future = promise->get_future();
    if (!params.contains("_meta")) params["_meta"] = json::object();
    params["_meta"].update(Meta());
    context.HandleModern(mcp::Request{mcp::Id(int64_t{id}), "tools/call", std::move(params)},
                         Exchange{.related = nullptr, .reply = [promise](mcp::Message m) {
                                    promise->set_value(json::parse(mcp::Serialize(m)));
                                  }});
    return future;
  }
  static json Echo(const std::string& text) {
    return {{"name", "echo__echo"}, {"arguments", {{"text", text}}}};
  }
  static json Retry(json call, const json& state, const json& responses) {
    call["requestState"] = state;
    call["inputResponses"] = responses;
    return call;
  }
  json Wait(std::future<json> f) {
    EXPECT_TRUE(Ready(f, 10s)) << "no answer";
    return f.wait_for(0s) == std::future_status::ready ? f.get() : json();
  }
  void TearDown() override {
    for (auto& c : contexts_) c->Close();
    ApprovalsTest::TearDown();
  }
  std::vector<std::shared_ptr<McpSession>> contexts_;
};

TEST_F(ModernInBandTest, AnAskReturnsInputRequiredAndTheRetryWithTheAnswerRunsIt) {
  Start("approvals:\n  self_approve: true\n");
  auto context = Context(identity::Caller{"", "tester", "", ""});
  const json call = Echo("pay 120 EUR to DE89 3704 0044 0532 0130 00");
  json first = Wait(Send(*context, 1, call));
  ASSERT_EQ(first["result"]["resultType"], "input_required") << first.dump();
  const json& requests = first["result"]["inputRequests"];
  ASSERT_EQ(requests.size(), 1u) << first.dump();
  const std::string key = requests.begin().key();
  EXPECT_EQ(requests[key]["method"], "elicitation/create");
  EXPECT_NE(requests[key]["params"]["message"].get<std::string>().find("DE89 3704 0044 0532 0130 00"),
            std::string::npos);
  EXPECT_TRUE(UpstreamCalls().empty()) << "ran before the answer";
  json done = Wait(Send(*context, 2, Retry(call, first["result"]["requestState"],
                                           {{key, {{"action", "accept"},
                                                   {"content", {{"decision", "approve"}}}}}})));
  EXPECT_EQ(done["id"], 2);
  EXPECT_EQ(done["result"]["resultType"], "complete") << done.dump();
  EXPECT_EQ(testing::ReplyText(done), call["arguments"]["text"].get<std::string>());
  auto all = gate_->store().List(true);
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].status, ApprovalStatus::kApproved);
  EXPECT_EQ((*all)[0].decided_by, "the agent's client (in-band)");
  EXPECT_EQ((*all)[0].session, "") << "a 2026 call has no protocol session";
  EXPECT_EQ(UpstreamCalls().size(), 1u);
}

// Kill switches per session become per task: a task switch ends the task's call waiting for a
// person and refuses its next ones, and nobody else's.
TEST_F(ModernInBandTest, ATaskKillSwitchEndsTheTasksWaitingCallAndRefusesItsNextOnes) {
  Start();  // no self_approve: the call waits for a person, the stream open
  auto task = Context(identity::Caller{"", "tester", "", ""}, "board-prep-42");
  auto other = Context(identity::Caller{"", "tester", "", ""}, "other-task");
  json waiting_call = Echo("wire 9000 EUR");
  waiting_call["_meta"] = json{{"warden/task", "board-prep-42"}};
  auto waiting = Send(*task, 1, waiting_call);
  ASSERT_EQ(WaitPending(1).size(), 1u);
  ASSERT_TRUE(gw_->kills.Kill(KillScope::kTask, "board-prep-42", "incident 8").ok());
  json ended = Wait(std::move(waiting));
  EXPECT_NE(testing::ReplyText(ended).find("incident 8"), std::string::npos) << ended.dump();
  json again = Wait(Send(*task, 2, {{"name", "echo__calls"},
                                    {"arguments", json::object()},
                                    {"_meta", {{"warden/task", "board-prep-42"}}}}));
  EXPECT_NE(testing::ReplyText(again).find("task:board-prep-42"), std::string::npos) << again.dump();
  json free = Wait(Send(*other, 3, {{"name", "echo__calls"},
                                    {"arguments", json::object()},
                                    {"_meta", {{"warden/task", "other-task"}}}}));
  EXPECT_EQ(free["result"]["isError"], false) << free.dump();
  ASSERT_TRUE(gw_->kills.Unkill(KillScope::kTask, "board-prep-42").ok());
  EXPECT_TRUE(UpstreamCalls().empty());
}

// task__end ends the task's call waiting for a person (its approval is cancelled), and nobody
// else's: not another task's, not another caller's in the same task.
TEST_F(ModernInBandTest, TaskEndCancelsTheTasksWaitingCallsOnly) {
  Start();  // no self_approve: calls wait for a person
  auto task = Context(identity::Caller{"", "tester", "", ""}, "board-prep-42");
  auto other = Context(identity::Caller{"", "tester", "", ""}, "other-task");
  auto stranger = Context(identity::Caller{"", "mallory", "", ""}, "board-prep-42");
  json mine = Echo("wire 9000 EUR");
  mine["_meta"] = json{{"warden/task", "board-prep-42"}};
  json theirs = Echo("wire 1 EUR");
  theirs["_meta"] = json{{"warden/task", "other-task"}};
  auto waiting = Send(*task, 1, mine);
  auto untouched = Send(*other, 2, theirs);
  auto foreign = Send(*stranger, 3, mine);
  ASSERT_EQ(WaitPending(3).size(), 3u);
  json end = Wait(Send(*task, 4, {{"name", "task__end"}, {"arguments", json::object()},
                                  {"_meta", {{"warden/task", "board-prep-42"}}}}));
  EXPECT_EQ(end["result"]["isError"], false) << end.dump();
  EXPECT_EQ(end["result"]["structuredContent"]["calls_cancelled"], 1) << end.dump();
  json ended = Wait(std::move(waiting));
  EXPECT_NE(testing::ReplyText(ended).find("the task ended"), std::string::npos) << ended.dump();
  EXPECT_EQ(untouched.wait_for(300ms), std::future_status::timeout) << "another task's call waits on";
  EXPECT_EQ(foreign.wait_for(0ms), std::future_status::timeout) << "another caller's call waits on";
  auto pending = gate_->store().List(false);
  ASSERT_TRUE(pending);
  EXPECT_EQ(pending->size(), 2u);
  gate_->StopAll("test ends");
  EXPECT_TRUE(UpstreamCalls().empty());
}

// The attack: whoever holds a request state tries to use it where it was not issued.
TEST_F(ModernInBandTest, ATamperedForeignAlteredOrReplayedStateIsRefusedAndRunsNothing) {
  Start("approvals:\n  self_approve: true\n");
  auto mine = Context(identity::Caller{"", "tester", "", ""});
  const json call = Echo("wire 9000 EUR");
  json first = Wait(Send(*mine, 1, call));
  ASSERT_EQ(first["result"]["resultType"], "input_required") << first.dump();
  const std::string state = first["result"]["requestState"];
  const std::string key = first["result"]["inputRequests"].begin().key();
  const json yes = {{key, {{"action", "accept"}, {"content", {{"decision", "approve"}}}}}};
  auto refused = [&](McpSession& where, json params, const std::string& why) {
    json r = Wait(Send(where, 5, std::move(params)));
    ASSERT_TRUE(r.contains("error")) << r.dump();
    EXPECT_EQ(r["error"]["code"], -32602);
    EXPECT_NE(r["error"]["message"].get<std::string>().find(why), std::string::npos) << r.dump();
  };
  // One character changed anywhere: does not open.
  std::string tampered = state;
  tampered[tampered.size() / 2] = tampered[tampered.size() / 2] == 'A' ? 'B' : 'A';
  refused(*mine, Retry(call, tampered, yes), "altered");
  refused(*mine, Retry(call, "not a state", yes), "not warden's");
  refused(*mine, Retry(call, 42, yes), "must be the string");
  // Another agent of the same user, and another task of the same caller.
  auto other_agent = Context(identity::Caller{"", "tester", "other-agent", ""});
  refused(*other_agent, Retry(call, state, yes), "another caller");
  auto other_task = Context(identity::Caller{"", "tester", "", ""}, "t2");
  refused(*other_task, Retry(call, state, yes), "another task");
  // The same state for other arguments.
  refused(*mine, Retry(Echo("wire 90000 EUR"), state, yes), "another call");
  EXPECT_TRUE(UpstreamCalls().empty()) << "a refused retry ran the call";
  // The state resumes once: a retry without the answer is asked again, with a new state...
  json again = Wait(Send(*mine, 6, Retry(call, state, json::object())));
  ASSERT_EQ(again["result"]["resultType"], "input_required") << again.dump();
  EXPECT_NE(again["result"]["requestState"], state);
  // ... and the first one, replayed, is refused.
  refused(*mine, Retry(call, state, yes), "already used");
  json done = Wait(Send(*mine, 7, Retry(call, again["result"]["requestState"], yes)));
  EXPECT_EQ(testing::ReplyText(done), "wire 9000 EUR") << done.dump();
  // Replayed after the call ended: it names nothing any more.
  refused(*mine, Retry(call, again["result"]["requestState"], yes), "has ended");
  EXPECT_EQ(UpstreamCalls().size(), 1u);
  // Each refusal is in the audit log, saying why.
  int audited = 0;
  for (const auto& e : Entries())
    if (e.reason.find("requestState refused") != std::string::npos) ++audited;
  EXPECT_GE(audited, 8);
}


}  // namespace
}  // namespace warden::gateway
