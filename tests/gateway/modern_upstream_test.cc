// A 2026-07-28 upstream behind warden (tests/upstream/fixtures/modern_server.py, a real stdio
// server in a real sandbox): its input_required reaches a 2025 session as the matching request
// over the session, and a 2026 task context as input_required with the upstream's own keys and
// the upstream's requestState sealed inside warden's (kind "upstream"): the attack on that state
// (replayed, another caller's, another task's, another call's, altered) is refused.
#include <gtest/gtest.h>

#include <future>
#include <mutex>
#include <thread>

#include "gateway/session/session.h"
#include "testing.h"
#include "upstream/client.h"

namespace warden::gateway {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

std::string ModernFixture() {
  return std::string(WARDEN_SOURCE_DIR) + "/tests/upstream/fixtures/modern_server.py";
}

class ModernUpstreamTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(); }
  // The gateway, fronting the fixture run with `args` (a YAML list's items after the script).
  // `more`: further upstreams, YAML lines under `upstreams:`.
  void Start(const std::string& args = "", std::chrono::milliseconds min_list_ttl = 5000ms,
             const std::string& more = "") {
    GatewayOptions options{.worker_threads = 2,
                           .make_upstream = [](upstream::Spec spec, upstream::Events events,
                                               upstream::ClientOptions o) {
                             return upstream::Client::Create(std::move(spec), std::move(events),
                                                             std::move(o));
                           }};
    options.min_list_ttl = min_list_ttl;
    for (auto& c : contexts_) c->Close();
    contexts_.clear();
    gw_.reset();
    gw_ = std::make_unique<testing::TestGateway>(
        testing::PolicyFromText("version: 1\nupstreams:\n  m:\n    command: [/usr/bin/python3, \"" +
                                ModernFixture() + "\"" + args + "]\n" + more +
                                "tools:\n  - match: { server: m }\n    risk: low\n  - match: { server: e }\n    risk: low\n"
                                "defaults:\n  effect_by_risk: { low: allow, medium: allow, high: ask }\n"),
        dir_.File("audit.db"), identity::Caller{"", "tester", "", ""}, options);
  }
  void TearDown() override {
    for (auto& c : contexts_) c->Close();
    gw_.reset();
  }
  std::shared_ptr<McpSession> Context(identity::Caller caller, std::string task = "") {
    auto context = gw_->NewTaskContext(std::move(caller), std::move(task));
    contexts_.push_back(context);
    return context;
  }
  static std::future<json> Send(McpSession& context, int id, json params,
                                json caps = {{"elicitation", json::object()}}) {
    auto promise = std::make_shared<std::promise<json>>();
    auto future = promise->get_future();
    if (!params.contains("_meta")) params["_meta"] = json::object();
    params["_meta"]["io.modelcontextprotocol/protocolVersion"] = "2026-07-28";
    params["_meta"]["io.modelcontextprotocol/clientCapabilities"] = std::move(caps);
    context.HandleModern(mcp::Request{mcp::Id(int64_t{id}), "tools/call", std::move(params)},
                         Exchange{.related = nullptr, .reply = [promise](mcp::Message m) {
                                    promise->set_value(json::parse(mcp::Serialize(m)));
                                  }});
    return future;
  }
  static json Wait(std::future<json> f) {
    EXPECT_EQ(f.wait_for(20s), std::future_status::ready) << "no answer";
    return f.wait_for(0s) == std::future_status::ready ? f.get() : json();
  }
  static json Ask() { return {{"name", "m__ask"}, {"arguments", json::object()}}; }

  testing::TempDir dir_;
  std::unique_ptr<testing::TestGateway> gw_;
  std::vector<std::shared_ptr<McpSession>> contexts_;
};

TEST_F(ModernUpstreamTest, ItsInputRequiredReachesA2025SessionAsARequestOverTheSession) {
  auto session = gw_->NewSession();
  ASSERT_TRUE(testing::Initialize2025(*session, {{"elicitation", json::object()}}));
  json list = testing::SendRequest(*session, 2, "tools/list", json::object()).get();
  ASSERT_NE(list.dump().find("m__ask"), std::string::npos) << list.dump();
  std::weak_ptr<McpSession> weak = session;
  auto reply = testing::SendRequest(*session, 3, "tools/call", Ask(), [weak](const mcp::Message& m) {
    auto* r = std::get_if<mcp::Request>(&m);
    if (r == nullptr || r->method != "elicitation/create") return;
    // The client answers the question as a 2025 client does: a response on the session.
    if (auto s = weak.lock())
      s->Handle(mcp::Response{r->id, {{"action", "accept"}, {"content", {{"name", "ada"}}}}}, {});
  });
  ASSERT_EQ(reply.wait_for(20s), std::future_status::ready);
  json done = reply.get();
  EXPECT_EQ(testing::ReplyText(done), "hello ada") << done.dump();
  EXPECT_EQ(done.dump().find("ask-1"), std::string::npos) << "the upstream's state stays in warden";
  session->Close();
}

TEST_F(ModernUpstreamTest, ItsInputRequiredReachesA2026ClientWithItsKeysAndItsStateSealed) {
  auto context = Context(identity::Caller{"", "tester", "", ""});
  json first = Wait(Send(*context, 1, Ask()));
  ASSERT_EQ(first["result"]["resultType"], "input_required") << first.dump();
  ASSERT_TRUE(first["result"]["inputRequests"].contains("who")) << "the upstream's own key";
  EXPECT_EQ(first["result"]["inputRequests"]["who"]["method"], "elicitation/create");
  const std::string state = first["result"]["requestState"];
  EXPECT_NE(state, "ask-1") << "wrapped in warden's own";
  EXPECT_EQ(state.find("ask-1"), std::string::npos);
  json retry = Ask();
  retry["requestState"] = state;
  retry["inputResponses"] = {{"who", {{"action", "accept"}, {"content", {{"name", "ada"}}}}}};
  json done = Wait(Send(*context, 2, retry));
  EXPECT_EQ(done["result"]["resultType"], "complete") << done.dump();
  EXPECT_EQ(testing::ReplyText(done), "hello ada") << done.dump();
  // Single use: the same state again is refused, and runs nothing.
  json again = Wait(Send(*context, 3, retry));
  ASSERT_TRUE(again.contains("error")) << again.dump();
  EXPECT_EQ(again["error"]["code"], -32602);
  EXPECT_NE(again["error"]["message"].get<std::string>().find("already used"), std::string::npos);
  // Nor after the task context that took it is gone (idle, evicted or ended): single use is
  // kept by the gateway, not by the context.
  context->Close();
  auto next = Context(identity::Caller{"", "tester", "", ""});
  json replayed = Wait(Send(*next, 4, retry));
  ASSERT_TRUE(replayed.contains("error")) << replayed.dump();
  EXPECT_NE(replayed["error"]["message"].get<std::string>().find("already used"),
            std::string::npos)
      << replayed.dump();
}

// The attack: a state warden wrapped is tried by another caller, in another task, for another
// call, and altered. Each is refused (-32602) before anything reaches the upstream.
TEST_F(ModernUpstreamTest, ItsWrappedStateWorksOnlyForTheCallerTaskAndCallItWasIssuedFor) {
  auto mine = Context(identity::Caller{"", "tester", "", ""}, "t1");
  auto other_task = Context(identity::Caller{"", "tester", "", ""}, "t2");
  auto stranger = Context(identity::Caller{"", "mallory", "", ""}, "t1");
  json first = Wait(Send(*mine, 1, Ask()));
  ASSERT_EQ(first["result"]["resultType"], "input_required") << first.dump();
  const std::string state = first["result"]["requestState"];
  const json answers = {{"who", {{"action", "accept"}, {"content", {{"name", "eve"}}}}}};
  auto refused = [&](McpSession& where, json params, const std::string& why) {
    params["requestState"] = params.value("requestState", state);
    params["inputResponses"] = answers;
    json r = Wait(Send(where, 7, std::move(params)));
    ASSERT_TRUE(r.contains("error")) << r.dump();
    EXPECT_EQ(r["error"]["code"], -32602);
    EXPECT_NE(r["error"]["message"].get<std::string>().find(why), std::string::npos) << r.dump();
  };
  refused(*stranger, Ask(), "another caller");
  refused(*other_task, Ask(), "another task");
  refused(*mine, {{"name", "m__ask"}, {"arguments", {{"to", "eve"}}}}, "another call");
  std::string altered = state;
  altered[altered.size() / 2] = altered[altered.size() / 2] == 'A' ? 'B' : 'A';
  json tampered = Ask();
  tampered["requestState"] = altered;
  refused(*mine, tampered, "altered");
  // After all that, the state is still good for its own call: nothing above used it.
  json retry = Ask();
  retry["requestState"] = state;
  retry["inputResponses"] = answers;
  EXPECT_EQ(testing::ReplyText(Wait(Send(*mine, 8, retry))), "hello eve");
}

// What the 2026 request can answer is what the upstream is told, question by question.
TEST_F(ModernUpstreamTest, TheUpstreamIsToldTheCapabilitiesOfTheRequestItServes) {
  auto context = Context(identity::Caller{"", "tester", "", ""});
  json meta = Wait(Send(*context, 1, {{"name", "m__meta"}, {"arguments", json::object()}},
                        {{"sampling", json::object()}, {"experimental", {{"x", 1}}}}));
  ASSERT_TRUE(meta.contains("result")) << meta.dump();
  EXPECT_EQ(meta["result"]["structuredContent"]["io.modelcontextprotocol/clientCapabilities"],
            json({{"sampling", json::object()}}))
      << meta.dump();
}

// A 2025 session's client is what its calls can answer: a 2026 upstream is told the session's
// own capabilities with each call, not those of the session that started the (per-user)
// instance.
TEST_F(ModernUpstreamTest, TheUpstreamIsToldTheCapabilitiesOfThe2025SessionItServes) {
  auto first = gw_->NewSession();
  ASSERT_TRUE(testing::Initialize2025(*first, {{"elicitation", json::object()}}));
  auto second = gw_->NewSession();
  ASSERT_TRUE(testing::Initialize2025(*second, {{"roots", {{"listChanged", true}}}}));
  const json call = {{"name", "m__meta"}, {"arguments", json::object()}};
  json meta = testing::SendRequest(*second, 2, "tools/call", call).get();
  ASSERT_TRUE(meta.contains("result")) << meta.dump();
  EXPECT_EQ(meta["result"]["structuredContent"]["io.modelcontextprotocol/clientCapabilities"],
            json({{"roots", {{"listChanged", true}}}}))
      << meta.dump();
  meta = testing::SendRequest(*first, 2, "tools/call", call).get();
  EXPECT_EQ(meta["result"]["structuredContent"]["io.modelcontextprotocol/clientCapabilities"],
            json({{"elicitation", json::object()}}))
      << meta.dump();
  first->Close();
  second->Close();
}

// The envelope of a 2026 request is of its hop to warden: a 2025 upstream sees none of it, a
// 2026 upstream sees warden's (its own client info and version), never the agent's claims.
TEST_F(ModernUpstreamTest, TheClientsEnvelopeStopsAtWarden) {
  Start("", 5000ms,
        "  e:\n    command: [/usr/bin/python3, \"" + std::string(WARDEN_SOURCE_DIR) +
            "/tests/upstream/fixtures/echo_server.py\", --meta]\n");
  auto context = Context(identity::Caller{"", "tester", "", ""}, "t1");
  json with = {{"arguments", json::object()},
               {"_meta",
                {{"io.modelcontextprotocol/clientInfo", {{"name", "agent-claims"}, {"version", "9"}}},
                 {"io.modelcontextprotocol/logLevel", "debug"},
                 {"progressToken", "p1"}}}};
  with["name"] = "e__meta";
  json legacy = Wait(Send(*context, 1, with));
  ASSERT_TRUE(legacy.contains("result")) << legacy.dump();
  const json& seen = legacy["result"]["structuredContent"];
  EXPECT_EQ(seen.dump().find("agent-claims"), std::string::npos) << seen.dump();
  EXPECT_FALSE(seen.contains("io.modelcontextprotocol/protocolVersion")) << seen.dump();
  EXPECT_FALSE(seen.contains("io.modelcontextprotocol/logLevel")) << seen.dump();
  // What warden can answer for this request, in the revision's key: the request declared
  // elicitation (Send's default).
  EXPECT_EQ(seen["io.modelcontextprotocol/clientCapabilities"], json({{"elicitation", json::object()}}))
      << seen.dump();
  EXPECT_TRUE(seen.contains("progressToken")) << "the call's own _meta goes along: " << seen.dump();
  with["name"] = "m__meta";
  json modern = Wait(Send(*context, 2, with));
  ASSERT_TRUE(modern.contains("result")) << modern.dump();
  const json& told = modern["result"]["structuredContent"];
  EXPECT_EQ(told.dump().find("agent-claims"), std::string::npos) << told.dump();
  EXPECT_EQ(told["io.modelcontextprotocol/protocolVersion"], "2026-07-28") << told.dump();
}

// A list that came with ttlMs is listed again when it runs out: a tool the upstream added
// without telling anyone shows up (here the floor is 100 ms instead of 5 s, and the fixture says
// 50 ms).
TEST_F(ModernUpstreamTest, AToolListIsListedAgainWhenItsTtlRunsOut) {
  Start(", --ttl-ms, \"50\"", 100ms);
  auto session = gw_->NewSession();
  ASSERT_TRUE(testing::Initialize2025(*session, json::object()));
  auto names = [&] { return testing::SendRequest(*session, 9, "tools/list", json::object()).get().dump(); };
  ASSERT_NE(names().find("m__grow"), std::string::npos);
  EXPECT_EQ(names().find("m__grown"), std::string::npos);
  EXPECT_EQ(testing::ReplyText(testing::SendRequest(*session, 10, "tools/call",
                                                    {{"name", "m__grow"}, {"arguments", json::object()}})
                                   .get()),
            "grown");
  bool seen = false;
  for (int i = 0; i < 100 && !seen; ++i) {
    seen = names().find("m__grown") != std::string::npos;
    if (!seen) std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(seen) << "the list was not listed again after its ttlMs";
  session->Close();
}

}  // namespace
}  // namespace warden::gateway
