// Undo through a whole gateway core and a real upstream (tests/upstream/fixtures/echo_server.py
// --record, whose `calls` tool says what reached it): a call under a rule with `undo` leaves a
// plan keyed by its audit id (the undo stage); UndoRunner sends the compensating call, with its
// arguments taken from the original call's arguments or result, through the same pipeline as the
// original caller (so the policy may deny it, audited), links the two audit entries with an admin
// entry naming who asked, and refuses a second undo, a call with no compensating call, an
// unknown id. POST /api/calls/ID/undo answers the same through the admin API.
#include <gtest/gtest.h>

#include <memory>
#include <optional>

#include "audit/audit_log.h"
#include "gateway/http/admin_api.h"
#include "gateway/session/session.h"
#include "gateway/undo/undo_runner.h"
#include "state/undo_store.h"
#include "testing.h"
#include "upstream/client.h"

namespace warden::gateway {
namespace {

using nlohmann::json;
using testing::PolicyFromText;
using testing::TempDir;

std::string PolicyYaml() {
  return "version: 1\nupstreams:\n  echo:\n    command: [/usr/bin/python3, \"" +
         testing::EchoFixture() +
         "\", --record]\n"
         "tools:\n"
         "  - match: { tool: echo__calls }\n    risk: low\n"
         "  - match: { tool: echo__echo, args: { \"/text\": { prefix: \"forbidden\" } } }\n"
         "    risk: high\n    effect: deny\n"
         "  - match: { tool: echo__echo, args: { \"/text\": { prefix: \"{\" } } }\n"
         "    risk: medium\n"
         "    undo: { tool: echo__echo, args: { text: \"$result/id\" } }\n"
         "  - match: { tool: echo__echo }\n    risk: medium\n"
         "    undo: { tool: echo__echo, args: { text: \"$args/text\" } }\n"
         "  - match: { tool: echo__big }\n    risk: medium\n"
         "    undo: { tool: echo__echo, args: { text: \"forbidden undo\" } }\n"
         "  - match: { tool: echo__whoami }\n    risk: medium\n"
         "    undo: { tool: echo__echo, args: { text: \"$result/nope\" } }\n"
         "  - match: { server: echo }\n    risk: low\n"
         "defaults:\n  effect_by_risk: { low: allow, medium: allow, high: ask }\n";
}

class UndoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = dir_.File("warden.db");
    auto store = state::UndoStore::Open({.path = db_});
    ASSERT_TRUE(store) << store.status().message();
    store_ = std::move(*store);
    GatewayOptions options{.worker_threads = 4,
                           .make_upstream = [](upstream::Spec spec, upstream::Events events,
                                               upstream::ClientOptions o) {
                             return upstream::Client::Create(std::move(spec), std::move(events),
                                                             std::move(o));
                           }};
    options.services.undo = store_.get();
    gw_ = std::make_unique<testing::TestGateway>(PolicyFromText(PolicyYaml()), db_,
                                                 identity::Caller{"", "tester", "", ""}, options);
    session_ = gw_->NewSession(identity::Caller{"", "tester", "", ""}, "sess-undo");
    json init = testing::SendRequest(*session_, 1, "initialize",
                                     {{"protocolVersion", "2025-06-18"},
                                      {"capabilities", json::object()},
                                      {"clientInfo", {{"name", "t"}, {"version", "1"}}}})
                    .get();
    ASSERT_TRUE(init.contains("result")) << init.dump();
    session_->Handle(mcp::Notification{"notifications/initialized", std::nullopt}, {});
    json list = testing::SendRequest(*session_, 2, "tools/list", json::object()).get();
    ASSERT_TRUE(list.contains("result")) << list.dump();
  }

  void TearDown() override {
    if (session_) session_->Close();
    gw_.reset();
  }

  // Calls `tool` in the test's session; returns the reply and the call's audit entry id.
  std::pair<json, uint64_t> Call(const std::string& tool, json args) {
    json reply = testing::SendRequest(*session_, next_id_++, "tools/call",
                                      {{"name", tool}, {"arguments", std::move(args)}})
                     .get();
    audit::AuditFilter filter;
    filter.session = "sess-undo";
    filter.tool = tool;
    filter.limit = 1;
    filter.newest = true;
    auto entries = gw_->audit->Query(filter);
    EXPECT_TRUE(entries && entries->size() == 1);
    return {reply, entries && !entries->empty() ? entries->back().id : 0};
  }

  // What reached the upstream: [{name, arguments}], `calls` itself left out.
  json UpstreamCalls() {
    json reply = Call("echo__calls", json::object()).first;
    json calls = json::parse(testing::ReplyText(reply), nullptr, false);
    EXPECT_TRUE(calls.is_array()) << reply.dump();
    json mine = json::array();
    for (const json& c : calls)
      if (c["name"] != "calls") mine.push_back(c);
    return mine;
  }

  std::optional<audit::AuditEntry> Entry(uint64_t id) {
    audit::AuditFilter filter;
    filter.after_id = id - 1;
    filter.limit = 1;
    auto entries = gw_->audit->Query(filter);
    if (!entries || entries->empty() || entries->front().id != id) return std::nullopt;
    return entries->front();
  }

  UndoOutcome Undo(uint64_t id, const std::string& who = "alice (test)") {
    return UndoRunner(*gw_->core, *store_).Undo(id, who);
  }

  TempDir dir_;
  std::string db_;
  std::unique_ptr<state::UndoStore> store_;
  std::unique_ptr<testing::TestGateway> gw_;
  std::shared_ptr<McpSession> session_;
  int next_id_ = 10;
};

TEST_F(UndoTest, UndoRunsTheCompensatingCallWithTheOriginalArgumentsAndLinksTheEntries) {
  auto [reply, id] = Call("echo__echo", {{"text", "hello"}});
  ASSERT_EQ(testing::ReplyText(reply), "hello");
  ASSERT_NE(id, 0u);

  UndoOutcome out = Undo(id);
  ASSERT_EQ(out.result, UndoResult::kDone) << out.message;
  EXPECT_EQ(out.undo_tool, "echo__echo");
  EXPECT_EQ(out.undo_arguments, (json{{"text", "hello"}}));
  EXPECT_EQ(out.reply["content"][0]["text"], "hello");

  json calls = UpstreamCalls();
  ASSERT_EQ(calls.size(), 2u) << calls.dump();
  EXPECT_EQ(calls[1], (json{{"name", "echo"}, {"arguments", {{"text", "hello"}}}}));

  // The compensating call: an ordinary call entry of the original caller, in session undo-ID.
  auto undo_entry = Entry(out.undo_call_id);
  ASSERT_TRUE(undo_entry);
  EXPECT_EQ(undo_entry->kind, audit::EntryKind::kCall);
  EXPECT_EQ(undo_entry->session, "undo-" + std::to_string(id));
  EXPECT_EQ(undo_entry->user, "tester");
  EXPECT_EQ(undo_entry->tool, "echo__echo");
  EXPECT_EQ(undo_entry->decision, "allow");
  EXPECT_GT(out.undo_call_id, id);

  // The link: an admin entry naming who, the original call and the compensating one.
  auto link = Entry(out.link_id);
  ASSERT_TRUE(link);
  EXPECT_EQ(link->kind, audit::EntryKind::kAdmin);
  EXPECT_EQ(link->decision, "undo");
  EXPECT_EQ(link->rule, "undo." + std::to_string(id));
  ASSERT_EQ(link->approvals.size(), 1u);
  EXPECT_EQ(link->approvals[0].who, "alice (test)");
  EXPECT_EQ(link->arguments["call_id"], id);
  EXPECT_EQ(link->arguments["undo_call_id"], out.undo_call_id);

  auto row = store_->Find(id);
  ASSERT_TRUE(row && row->has_value());
  EXPECT_EQ((*row)->status, state::UndoStatus::kDone);
  EXPECT_EQ((*row)->undone_by, "alice (test)");
  EXPECT_EQ((*row)->undo_call_id, out.undo_call_id);
}

TEST_F(UndoTest, ASecondUndoIsRefusedSayingByWhomAndWhen) {
  auto [reply, id] = Call("echo__echo", {{"text", "once"}});
  ASSERT_EQ(Undo(id).result, UndoResult::kDone);
  UndoOutcome again = Undo(id, "bob (test)");
  EXPECT_EQ(again.result, UndoResult::kAlreadyUndone);
  EXPECT_NE(again.message.find("already undone by alice (test) at "), std::string::npos)
      << again.message;
  EXPECT_EQ(UpstreamCalls().size(), 2u) << "the compensating call ran once";
}

TEST_F(UndoTest, ResultReferenceTakesTheValueFromTheCallsResult) {
  auto [reply, id] = Call("echo__echo", {{"text", "{\"id\": \"msg-7\"}"}});
  UndoOutcome out = Undo(id);
  ASSERT_EQ(out.result, UndoResult::kDone) << out.message;
  EXPECT_EQ(out.undo_arguments, (json{{"text", "msg-7"}}));
  json calls = UpstreamCalls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1]["arguments"], (json{{"text", "msg-7"}}));
}

TEST_F(UndoTest, ACallWhoseRuleHasNoUndoSaysSo) {
  auto [reply, id] = Call("echo__cancelled", json::object());
  ASSERT_TRUE(reply.contains("result")) << reply.dump();
  UndoOutcome out = Undo(id);
  EXPECT_EQ(out.result, UndoResult::kNotUndoable);
  EXPECT_EQ(out.message,
            "call " + std::to_string(id) + " has no compensating call: its rule has no undo");
}

TEST_F(UndoTest, AReferenceThatFindsNothingLeavesNoCompensatingCallAndSaysWhy) {
  auto [reply, id] = Call("echo__whoami", json::object());
  ASSERT_TRUE(reply.contains("result")) << reply.dump();
  UndoOutcome out = Undo(id);
  EXPECT_EQ(out.result, UndoResult::kNotUndoable);
  EXPECT_NE(out.message.find("'$result/nope' finds nothing"), std::string::npos) << out.message;
  EXPECT_EQ(UpstreamCalls().size(), 1u);
}

TEST_F(UndoTest, ACallThatWasRefusedHasNothingToUndo) {
  auto [reply, id] = Call("echo__echo", {{"text", "forbidden x"}});
  UndoOutcome out = Undo(id);
  EXPECT_EQ(out.result, UndoResult::kNotUndoable);
  EXPECT_NE(out.message.find("did not run (deny)"), std::string::npos) << out.message;
}

TEST_F(UndoTest, AnUnknownCallIsRefused) {
  EXPECT_EQ(Undo(999999).result, UndoResult::kUnknownCall);
  EXPECT_EQ(Undo(0).result, UndoResult::kUnknownCall);
}

TEST_F(UndoTest, AnUndoThePolicyDeniesIsDeniedAndAudited) {
  auto [reply, id] = Call("echo__big", {{"bytes", 10}});
  ASSERT_TRUE(reply.contains("result")) << reply.dump();
  UndoOutcome out = Undo(id);
  ASSERT_EQ(out.result, UndoResult::kFailed) << out.message;
  EXPECT_TRUE(out.reply.value("isError", false)) << out.reply.dump();
  // Nothing reached the upstream but the original call.
  json calls = UpstreamCalls();
  ASSERT_EQ(calls.size(), 1u) << calls.dump();
  EXPECT_EQ(calls[0]["name"], "big");
  // The denial is audited in the undo's session, and linked as a failed undo.
  auto denied = Entry(out.undo_call_id);
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->decision, "deny");
  EXPECT_EQ(denied->session, "undo-" + std::to_string(id));
  auto link = Entry(out.link_id);
  ASSERT_TRUE(link);
  EXPECT_EQ(link->decision, "undo_failed");
  EXPECT_EQ(link->approvals[0].who, "alice (test)");
  auto row = store_->Find(id);
  ASSERT_TRUE(row && row->has_value());
  EXPECT_EQ((*row)->status, state::UndoStatus::kFailed);
}

TEST_F(UndoTest, TheApiUndoesForTheLocalOperatorAndRefusesAgents) {
  auto [reply, id] = Call("echo__echo", {{"text", "api"}});
  auto api = std::make_shared<AdminApi>(*gw_->core, AdminApiOptions{.local_operator = true});
  AdminRequest request{"POST", "/api/calls/" + std::to_string(id) + "/undo", "", "", "127.0.0.1"};

  AdminReply agent = api->Handle(identity::Caller{"", "tester", "bot", ""}, request);
  EXPECT_EQ(agent.status, 403) << agent.body;

  AdminReply done = api->Handle(identity::Caller{"", "tester", "", ""}, request);
  ASSERT_EQ(done.status, 200) << done.body;
  json body = json::parse(done.body);
  EXPECT_EQ(body["call_id"], id);
  EXPECT_EQ(body["undo_tool"], "echo__echo");
  EXPECT_EQ(body["undo_arguments"], (json{{"text", "api"}}));
  EXPECT_EQ(body["result"]["content"][0]["text"], "api");
  EXPECT_GT(body["undo_call_id"].get<uint64_t>(), id);

  AdminReply again = api->Handle(identity::Caller{"", "tester", "", ""}, request);
  EXPECT_EQ(again.status, 409) << again.body;
  AdminReply get = api->Handle(identity::Caller{"", "tester", "", ""},
                               AdminRequest{"GET", request.path, "", "", "127.0.0.1"});
  EXPECT_EQ(get.status, 405);
}

}  // namespace
}  // namespace warden::gateway
