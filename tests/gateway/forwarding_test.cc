// Calls forwarded to a real upstream (tests/upstream/fixtures/echo_server.py over stdio, in its
// `warden run` sandbox): the execute stage parks while the upstream works and the pipeline ends
// on the thread that delivers the reply, so no worker waits. Checked here through a session:
// replies, cancellation reaching the upstream, a kill switch ending an upstream call in flight,
// and two slow calls of one session overlapping.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <future>

#include "gateway/session/session.h"
#include "upstream/client.h"
#include "testing.h"

namespace warden::gateway {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::PolicyFromText;
using testing::TempDir;

class ForwardingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    gw_ = std::make_unique<testing::TestGateway>(
        PolicyFromText("version: 1\nupstreams:\n  echo:\n    command: [/usr/bin/python3, \"" + testing::EchoFixture() +
                       "\"]\ntools:\n  - match: { server: echo }\n    risk: low\n"
                       "defaults:\n  effect_by_risk: { low: allow, medium: allow, high: deny }\n"),
        dir_.File("warden.db"), identity::Caller{"", "tester", "", ""},
        GatewayOptions{.make_upstream = [](upstream::Spec spec, upstream::Events events,
                                           upstream::ClientOptions options) {
          return upstream::Client::Create(std::move(spec), std::move(events), std::move(options));
        }});
    session_ = gw_->NewSession(identity::Caller{"", "tester", "", ""}, "sess-fwd");
    json init = Call(1, "initialize",
                     {{"protocolVersion", "2025-06-18"},
                      {"capabilities", json::object()},
                      {"clientInfo", {{"name", "t"}, {"version", "1"}}}})
                    .get();
    ASSERT_TRUE(init.contains("result")) << init.dump();
    session_->Handle(mcp::Notification{"notifications/initialized", std::nullopt}, {});
    json list = Call(2, "tools/list", json::object()).get();
    ASSERT_TRUE(list.contains("result")) << list.dump();
    ASSERT_GE(list["result"]["tools"].size(), 8u) << list.dump();
  }
  void TearDown() override {
    if (session_) session_->Close();
  }

  // Sends a request; the future gets the reply as JSON.
  std::future<json> Call(int id, const std::string& method, json params) {
    return testing::SendRequest(*session_, id, method, std::move(params));
  }
  std::future<json> CallTool(int id, const std::string& tool, json arguments) {
    return Call(id, "tools/call", {{"name", tool}, {"arguments", std::move(arguments)}});
  }
  static std::string Text(const json& reply) { return testing::ReplyText(reply); }

  TempDir dir_;
  std::unique_ptr<testing::TestGateway> gw_;
  std::shared_ptr<McpSession> session_;
};

TEST_F(ForwardingTest, ReplyComesBackAndIsAudited) {
  EXPECT_EQ(Text(CallTool(3, "echo__echo", {{"text", "through"}}).get()), "through");
  auto tail = gw_->audit->Tail(1);
  ASSERT_TRUE(tail.ok());
  ASSERT_EQ(tail->size(), 1u);
  EXPECT_EQ((*tail)[0].tool, "echo__echo");
  EXPECT_EQ((*tail)[0].decision, "allow");
}

TEST_F(ForwardingTest, CancelledCallEndsAndTheUpstreamIsTold) {
  auto slow = CallTool(3, "echo__slow", {{"seconds", 30}});
  std::this_thread::sleep_for(300ms);  // let it reach the upstream
  session_->Handle(mcp::Notification{"notifications/cancelled", json{{"requestId", 3}}}, {});
  ASSERT_EQ(slow.wait_for(10s), std::future_status::ready) << "the cancelled call never ended";
  json seen = CallTool(4, "echo__cancelled", json::object()).get();
  ASSERT_TRUE(seen.contains("result")) << seen.dump();
  EXPECT_FALSE(seen["result"]["structuredContent"]["ids"].empty()) << seen.dump();
}

TEST_F(ForwardingTest, KillSwitchEndsAnUpstreamCallInFlight) {
  auto slow = CallTool(3, "echo__slow", {{"seconds", 30}});
  std::this_thread::sleep_for(300ms);
  // The core listens to its switches: a new one reaches the sessions' calls in flight.
  ASSERT_TRUE(gw_->kills.Kill(KillScope::kTool, "echo__slow", "incident 7").ok());
  ASSERT_EQ(slow.wait_for(10s), std::future_status::ready) << "the killed call never ended";
  json reply = slow.get();
  EXPECT_NE(reply.dump().find("incident 7"), std::string::npos) << "REPLY " << reply.dump();
  // The next call of that tool is refused before it reaches the upstream.
  json again = CallTool(4, "echo__slow", {{"seconds", 1}}).get();
  EXPECT_NE(again.dump().find("incident 7"), std::string::npos) << again.dump();
}

TEST_F(ForwardingTest, SlowCallsOfOneSessionOverlap) {
  // Each takes 2 s upstream; run one after the other they would take 4 s.
  const auto start = std::chrono::steady_clock::now();
  auto a = CallTool(3, "echo__slow", {{"seconds", 2}});
  auto b = CallTool(4, "echo__slow", {{"seconds", 2}});
  EXPECT_EQ(Text(a.get()), "slept");
  EXPECT_EQ(Text(b.get()), "slept");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3800ms);
}

}  // namespace
}  // namespace warden::gateway
