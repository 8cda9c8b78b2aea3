// The response path and the streamed messages of a call, through a whole gateway core and a real
// upstream (tests/upstream/fixtures/echo_server.py --resources, over stdio in its sandbox): a
// stage inserted in the chain (as the redaction stage of the credentials issue will be) sees the
// result of every kind of request on its way back (tools/call, resources/read, prompts/get,
// completion/complete, and the client's answer to a request the upstream relayed), can rewrite or
// refuse it, and sees each progress notification of its call. Also: a relayed request that
// waits for the client holds no worker.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <mutex>
#include <vector>

#include "gateway/session/session.h"
#include "gateway/stages/chain.h"
#include "testing.h"
#include "upstream/client.h"

namespace warden::gateway {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::PolicyFromText;
using testing::TempDir;

// What the test stage keeps per call (CallContext::state): set on the way in, read on the way
// back, so that the test also shows state surviving the park at execute.
struct RedactSeen {
  bool came_in = false;
};

// Replaces "SECRET" in every string of `value`; true when one mentions "forbidden".
bool Rewrite(json& value) {
  bool forbidden = false;
  if (value.is_string()) {
    std::string s = value.get<std::string>();
    if (s.find("forbidden") != std::string::npos) forbidden = true;
    for (size_t at; (at = s.find("SECRET")) != std::string::npos;) s.replace(at, 6, "[REDACTED]");
    value = s;
  } else if (value.is_structured()) {
    for (json& child : value) forbidden |= Rewrite(child);
  }
  return forbidden;
}

class RedactTestStage : public Stage {
 public:
  std::string_view name() const override { return "redact_test"; }
  StageOutcome Run(CallContext& call) override {
    call.state.Get<RedactSeen>().came_in = true;
    return StageOutcome::Continue();
  }
  StageOutcome OnResult(CallContext& call) override {
    RedactSeen* seen = call.state.Find<RedactSeen>();
    if (seen == nullptr || !seen->came_in)
      return StageOutcome::Deny(Refusal::kInternal, "the call's state was lost on the way");
    if (Rewrite(call.result->value))
      return StageOutcome::Deny(Refusal::kDenied, "the result mentions forbidden", "test.redact");
    return StageOutcome::Continue();
  }
  bool OnStreamed(CallContext&, mcp::Notification& message) override {
    if (message.params) (*message.params)["message"] = "through redact_test";
    return true;
  }
};

std::vector<ChainLink> ChainWithRedaction() {
  std::vector<ChainLink> chain;
  for (const ChainLink& link : StandardChain()) {
    chain.push_back(link);
    // After the policy: a call the policy refuses never reaches it, and it sees every result.
    if (link.name == "policy")
      chain.push_back({"redact_test", [](const StageServices&) -> std::unique_ptr<Stage> {
                         return std::make_unique<RedactTestStage>();
                       }});
  }
  return chain;
}

class ResponsePathTest : public ::testing::Test {
 protected:
  void Start(int worker_threads, const std::string& extra_args = "") {
    gw_ = std::make_unique<testing::TestGateway>(
        PolicyFromText("version: 1\nupstreams:\n  echo:\n    command: [/usr/bin/python3, \"" +
                       testing::EchoFixture() +
                       "\", --resources" + extra_args + "]\ntools:\n  - match: { server: echo }\n    risk: low\n"
                       "defaults:\n  effect_by_risk: { low: allow, medium: allow, high: deny }\n"),
        dir_.File("warden.db"), identity::Caller{"", "tester", "", ""},
        GatewayOptions{
            .worker_threads = worker_threads,
            .make_upstream =
                [](upstream::Spec spec, upstream::Events events, upstream::ClientOptions options) {
                  return upstream::Client::Create(std::move(spec), std::move(events),
                                                  std::move(options));
                },
            .chain = ChainWithRedaction()});
    session_ = gw_->NewSession(identity::Caller{"", "tester", "", ""}, "sess-response");
    json init = Call(1, "initialize",
                     {{"protocolVersion", "2025-06-18"},
                      {"capabilities", {{"sampling", json::object()}}},
                      {"clientInfo", {{"name", "t"}, {"version", "1"}}}})
                    .get();
    ASSERT_TRUE(init.contains("result")) << init.dump();
    session_->Handle(mcp::Notification{"notifications/initialized", std::nullopt}, {});
    if (!extra_args.empty()) return;  // the test lists itself
    json list = Call(2, "tools/list", json::object()).get();
    ASSERT_TRUE(list.contains("result")) << list.dump();
  }
  void TearDown() override {
    if (session_) session_->Close();
  }

  // Sends a request; the future gets the reply as JSON. Messages related to it (progress, the
  // requests the upstream relays) go to `related` when given.
  std::future<json> Call(int id, const std::string& method, json params,
                         MessageSink related = nullptr) {
    return testing::SendRequest(*session_, id, method, std::move(params), std::move(related));
  }
  static std::string Text(const json& reply) { return testing::ReplyText(reply); }

  TempDir dir_;
  std::unique_ptr<testing::TestGateway> gw_;
  std::shared_ptr<McpSession> session_;
};

TEST_F(ResponsePathTest, AToolResultIsRewrittenOnTheWayBackAndAuditedAsRewritten) {
  Start(4);
  json reply =
      Call(3, "tools/call", {{"name", "echo__echo"}, {"arguments", {{"text", "a SECRET b"}}}})
          .get();
  EXPECT_EQ(Text(reply), "a [REDACTED] b") << reply.dump();
  auto tail = gw_->audit->Tail(1);
  ASSERT_TRUE(tail.ok());
  ASSERT_EQ(tail->size(), 1u);
  ASSERT_TRUE((*tail)[0].result.has_value());
  EXPECT_EQ((*tail)[0].result->excerpt.find("SECRET"), std::string::npos)
      << "the audit log summarises what went back: " << (*tail)[0].result->excerpt;
  const auto stats = gw_->core->pipeline().Stats();
  auto it = std::find_if(stats.begin(), stats.end(),
                         [](const StageStats& s) { return s.name == "redact_test"; });
  ASSERT_NE(it, stats.end());
  EXPECT_GE(it->results, 1u);
}

TEST_F(ResponsePathTest, ResourcesPromptsAndCompletionsPassTheSameStages) {
  Start(4);
  json read = Call(3, "resources/read", {{"uri", "echo://note"}}).get();
  ASSERT_TRUE(read.contains("result")) << read.dump();
  EXPECT_EQ(read["result"]["contents"][0]["text"], "the note of echo://note says [REDACTED]")
      << read.dump();

  json prompts = Call(4, "prompts/list", json::object()).get();
  ASSERT_TRUE(prompts.contains("result")) << prompts.dump();
  json prompt =
      Call(5, "prompts/get", {{"name", "echo__greet"}, {"arguments", {{"who", "x"}}}}).get();
  ASSERT_TRUE(prompt.contains("result")) << prompt.dump();
  EXPECT_EQ(prompt["result"]["messages"][0]["content"]["text"], "greet [REDACTED] x")
      << prompt.dump();

  json completion = Call(6, "completion/complete",
                         {{"ref", {{"type", "ref/prompt"}, {"name", "echo__greet"}}},
                          {"argument", {{"name", "who"}, {"value", ""}}}})
                        .get();
  ASSERT_TRUE(completion.contains("result")) << completion.dump();
  EXPECT_EQ(completion["result"]["completion"]["values"][0], "[REDACTED]-1") << completion.dump();
}

TEST_F(ResponsePathTest, ARefusedResultIsWithheldAndTheRefusalIsAudited) {
  Start(4);
  json read = Call(3, "resources/read", {{"uri", "echo://forbidden"}}).get();
  ASSERT_TRUE(read.contains("error")) << read.dump();
  EXPECT_EQ(read["error"]["code"], -32003) << read.dump();
  EXPECT_NE(read["error"]["message"].get<std::string>().find("the result mentions forbidden"),
            std::string::npos)
      << read.dump();
  EXPECT_EQ(read.dump().find("says"), std::string::npos) << "nothing of the result goes back";

  json call =
      Call(4, "tools/call", {{"name", "echo__echo"}, {"arguments", {{"text", "forbidden"}}}}).get();
  ASSERT_TRUE(call.contains("result")) << call.dump();
  EXPECT_EQ(call["result"]["isError"], true);
  EXPECT_NE(
      Text(call).find("warden denied this call: the result mentions forbidden [rule: test.redact]"),
      std::string::npos)
      << call.dump();
  auto tail = gw_->audit->Tail(1);
  ASSERT_TRUE(tail.ok());
  ASSERT_EQ(tail->size(), 1u);
  EXPECT_EQ((*tail)[0].decision, "deny");
  EXPECT_EQ((*tail)[0].rule, "test.redact");
  EXPECT_NE((*tail)[0].reason.find("redact_test"), std::string::npos) << (*tail)[0].reason;
}

TEST_F(ResponsePathTest, ProgressPassesTheStagesOfItsCallAndARelayedAnswerIsRewritten) {
  Start(4);
  std::mutex mu;
  std::vector<mcp::Message> related;
  std::promise<std::string> asked;  // the id of the sampling request warden sent us
  bool asked_set = false;
  auto sink = [&](const mcp::Message& m) {
    std::lock_guard lock(mu);
    related.push_back(m);
    if (const auto* r = std::get_if<mcp::Request>(&m); r && !asked_set) {
      asked_set = true;
      asked.set_value(*r->id.AsString());
    }
  };
  auto call = Call(3, "tools/call",
                   {{"name", "echo__progress_and_sample"},
                    {"arguments", json::object()},
                    {"_meta", {{"progressToken", "tok"}}}},
                   sink);
  auto id = asked.get_future();
  ASSERT_EQ(id.wait_for(20s), std::future_status::ready) << "the sampling request never came";
  // The client's answer, which the pipeline carries back to the upstream as the relayed call's
  // result: the stage rewrites it on the way.
  session_->Handle(mcp::Response{mcp::Id(id.get()),
                                 {{"role", "assistant"},
                                  {"content", {{"type", "text"}, {"text", "SECRET answer"}}},
                                  {"model", "m"}}},
                   {});
  ASSERT_EQ(call.wait_for(20s), std::future_status::ready);
  json reply = call.get();
  EXPECT_EQ(Text(reply), "[REDACTED] answer") << reply.dump();
  std::lock_guard lock(mu);
  bool progress = false;
  for (const mcp::Message& m : related) {
    const auto* note = std::get_if<mcp::Notification>(&m);
    if (!note || note->method != "notifications/progress") continue;
    progress = true;
    EXPECT_EQ((*note->params)["message"], "through redact_test");
    EXPECT_EQ((*note->params)["progressToken"], "tok") << "the client's own token";
  }
  EXPECT_TRUE(progress) << "no progress notification reached the client";
}

TEST_F(ResponsePathTest, ARelayedRequestWaitingForTheClientHoldsNoWorker) {
  // One worker: if waiting for the client's answer held it, the second call could not start.
  Start(1);
  std::promise<std::string> asked;
  std::once_flag once;
  auto sink = [&](const mcp::Message& m) {
    if (const auto* r = std::get_if<mcp::Request>(&m))
      std::call_once(once, [&] { asked.set_value(*r->id.AsString()); });
  };
  auto waiting = Call(3, "tools/call",
                      {{"name", "echo__progress_and_sample"}, {"arguments", json::object()}}, sink);
  auto id = asked.get_future();
  ASSERT_EQ(id.wait_for(20s), std::future_status::ready) << "the sampling request never came";
  auto other =
      Call(4, "tools/call", {{"name", "echo__echo"}, {"arguments", {{"text", "still served"}}}});
  ASSERT_EQ(other.wait_for(10s), std::future_status::ready)
      << "a call waiting for the client held the only worker";
  EXPECT_EQ(Text(other.get()), "still served");
  EXPECT_NE(waiting.wait_for(0s), std::future_status::ready) << "it still waits for the client";
  session_->Handle(mcp::Response{mcp::Id(id.get()),
                                 {{"role", "assistant"},
                                  {"content", {{"type", "text"}, {"text", "late"}}},
                                  {"model", "m"}}},
                   {});
  ASSERT_EQ(waiting.wait_for(20s), std::future_status::ready);
  EXPECT_EQ(Text(waiting.get()), "late");
}

TEST_F(ResponsePathTest, AListingWaitingForAStartingUpstreamHoldsNoWorker) {
  // One worker and an upstream that takes 3 s to start: if resources/list waited on the worker,
  // the next request could not be served before it.
  Start(1, ", --start-delay, \"3\"");
  auto list = Call(3, "resources/list", json::object());
  auto refused = Call(4, "tools/call", {{"name", "web__fetch"}, {"arguments", {{"url", "http://x/"}}}});
  ASSERT_EQ(refused.wait_for(2s), std::future_status::ready)
      << "a listing waiting for a starting upstream held the only worker";
  EXPECT_NE(list.wait_for(0s), std::future_status::ready) << "the upstream is still starting";
  ASSERT_EQ(list.wait_for(30s), std::future_status::ready);
  json listed = list.get();
  ASSERT_TRUE(listed.contains("result")) << listed.dump();
  ASSERT_EQ(listed["result"]["resources"].size(), 2u) << listed.dump();
  EXPECT_EQ(listed["result"]["resources"][0]["uri"], "echo://note");
}

}  // namespace
}  // namespace warden::gateway
