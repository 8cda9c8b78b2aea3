// warden as a client of MCP 2026-07-28 (modern) servers: the era probe, the per-request _meta and
// mirror headers, multi round-trip requests answered through Events::on_request, the methods the
// revision removed answered locally, and the subscriptions/listen stream. Against
// fixtures/modern_server.py over stdio (in a real warden sandbox) and over HTTP, and the legacy
// fixtures for the fallback.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>

#include "mcp/modern.h"
#include "testing.h"
#include "upstream/client.h"

namespace warden::upstream {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::EchoSpec;
using testing::ErrorCode;
using testing::ErrorMessage;
using testing::Eventually;
using testing::FastOptions;
using testing::HttpFixture;
using testing::ModernSpec;
using testing::Recorder;
using testing::Structured;
using testing::ToolCall;
using testing::ToolText;

ClientOptions ModernOptions() {
  ClientOptions o = FastOptions();
  o.client_capabilities = {{"elicitation", {{"form", json::object()}}}, {"sampling", json::object()}};
  o.client_info = {{"name", "warden-test"}, {"version", "9"}};
  return o;
}

std::unique_ptr<Client> StartedModern(Spec spec, Events events = {}, ClientOptions options = ModernOptions()) {
  return testing::StartClient(std::move(spec), std::move(events), std::move(options));
}

Spec ModernHttpSpec(const HttpFixture& server) {
  Spec spec;
  spec.name = "modern-http";
  spec.url = server.url();
  return spec;
}

// The questions a modern server asked through on_request, answered by `answer`.
struct ModernAsker {
  std::mutex mu;
  std::vector<mcp::Request> asked;
  std::function<mcp::Message(const mcp::Request&)> answer;
  Events Hook(Recorder& recorder) {
    Events e = recorder.Hook();
    e.on_request = [this](const mcp::Request& request, std::function<void(mcp::Message)> reply) {
      {
        std::lock_guard<std::mutex> lock(mu);
        asked.push_back(request);
      }
      // Answered from another thread, later: as the gateway does when a person answers.
      std::thread([this, request, reply = std::move(reply)] { reply(answer(request)); }).detach();
    };
    return e;
  }
};

TEST(ModernClient, ProbeFindsAModernServerAndSendsNoInitialize) {
  Recorder recorder;
  auto client = StartedModern(ModernSpec(), recorder.Hook());
  ASSERT_TRUE(client);
  EXPECT_TRUE(client->info().modern);
  EXPECT_EQ(client->info().protocol_version, "2026-07-28");
  EXPECT_EQ(client->info().server_info.value("name", ""), "modern-fixture");
  EXPECT_EQ(client->info().instructions, "modern fixture");
  EXPECT_NE(recorder.LastWhy(State::kReady).find("discovered modern-fixture"), std::string::npos);
  json stats = Structured(client->Call("tools/call", ToolCall("stats")));
  EXPECT_EQ(stats["initialize"], 0);
  EXPECT_EQ(stats["discover"], 1);
  EXPECT_EQ(stats["no_meta"], 0);
}

TEST(ModernClient, EveryRequestCarriesWardensOwnMeta) {
  auto client = StartedModern(ModernSpec());
  ASSERT_TRUE(client);
  // A caller's _meta is kept, but the reserved keys are warden's: a downstream client cannot
  // claim capabilities warden did not offer.
  json params = ToolCall("meta");
  params["_meta"] = {{"progressToken", "p1"},
                     {mcp::kMetaClientCapabilities, {{"roots", json::object()}}},
                     {mcp::kMetaProtocolVersion, "1999-01-01"}};
  json meta = Structured(client->Call("tools/call", params));
  EXPECT_EQ(meta["progressToken"], "p1");
  EXPECT_EQ(meta[mcp::kMetaProtocolVersion], "2026-07-28");
  EXPECT_EQ(meta[mcp::kMetaClientCapabilities], ModernOptions().client_capabilities);
  EXPECT_EQ(meta[mcp::kMetaClientInfo], ModernOptions().client_info);
  EXPECT_FALSE(meta.contains(mcp::kMetaLogLevel));
  // logging/setLevel is gone from the wire: answered here, then carried in each request's _meta.
  mcp::Message set = client->Call("logging/setLevel", {{"level", "warning"}});
  ASSERT_TRUE(std::holds_alternative<mcp::Response>(set)) << ErrorMessage(set);
  meta = Structured(client->Call("tools/call", ToolCall("meta")));
  EXPECT_EQ(meta[mcp::kMetaLogLevel], "warning");
  EXPECT_TRUE(std::holds_alternative<mcp::Response>(client->Call("ping", json::object())));
}

TEST(ModernClient, InputRequiredIsAskedThroughOnRequestAndRetriedWithTheServersState) {
  Recorder recorder;
  ModernAsker asker;
  asker.answer = [](const mcp::Request& q) -> mcp::Message {
    return mcp::Response{q.id, {{"action", "accept"}, {"content", {{"name", "ada"}}}}};
  };
  auto client = StartedModern(ModernSpec(), asker.Hook(recorder));
  ASSERT_TRUE(client);
  EXPECT_EQ(ToolText(client->Call("tools/call", ToolCall("ask"))), "hello ada");
  std::lock_guard<std::mutex> lock(asker.mu);
  ASSERT_EQ(asker.asked.size(), 1u);
  EXPECT_EQ(asker.asked[0].method, "elicitation/create");
  EXPECT_EQ(asker.asked[0].params->value("message", ""), "Who is asking?");
  // The server's requestState stays with the client: whoever answers never sees it.
  EXPECT_EQ(asker.asked[0].params->dump().find("ask-1"), std::string::npos);
}

TEST(ModernClient, SeveralQuestionsInOneRoundAreAllAnsweredBeforeTheRetry) {
  Recorder recorder;
  ModernAsker asker;
  asker.answer = [](const mcp::Request& q) -> mcp::Message {
    if (q.method == "roots/list")
      return mcp::Response{q.id, {{"roots", json::array({{{"uri", "file:///w"}}})}}};
    return mcp::Response{q.id, {{"role", "assistant"},
                                {"content", {{"type", "text"}, {"text", "SAMPLED"}}},
                                {"model", "m"}}};
  };
  auto client = StartedModern(ModernSpec(), asker.Hook(recorder));
  ASSERT_TRUE(client);
  EXPECT_EQ(ToolText(client->Call("tools/call", ToolCall("sample"))), "SAMPLED|file:///w");
}

TEST(ModernClient, AQuestionTheClientRefusesFailsTheCallNamingIt) {
  Recorder recorder;
  ModernAsker asker;
  asker.answer = [](const mcp::Request& q) -> mcp::Message {
    return mcp::MakeError(q.id, -32601, "the client cannot elicit");
  };
  auto client = StartedModern(ModernSpec(), asker.Hook(recorder));
  ASSERT_TRUE(client);
  mcp::Message reply = client->Call("tools/call", ToolCall("ask"));
  EXPECT_EQ(ErrorCode(reply), -32601);
  EXPECT_NE(ErrorMessage(reply).find("question 'who'"), std::string::npos) << ErrorMessage(reply);
}

TEST(ModernClient, AServerThatAsksForeverIsGivenUpOn) {
  Recorder recorder;
  ModernAsker asker;
  asker.answer = [](const mcp::Request& q) -> mcp::Message { return mcp::Response{q.id, json::object()}; };
  ClientOptions options = ModernOptions();
  options.max_input_rounds = 3;
  auto client = StartedModern(ModernSpec(), asker.Hook(recorder), options);
  ASSERT_TRUE(client);
  mcp::Message reply = client->Call("tools/call", ToolCall("loop"));
  EXPECT_NE(ErrorMessage(reply).find("asked for input 4 times"), std::string::npos)
      << ErrorMessage(reply);
}

TEST(ModernClient, CancelReachesACallWaitingForAnswers) {
  Recorder recorder;
  Events events = recorder.Hook();
  std::promise<void> asked;
  events.on_request = [&asked](const mcp::Request&, std::function<void(mcp::Message)>) {
    asked.set_value();  // never answered
  };
  auto client = StartedModern(ModernSpec(), events);
  ASSERT_TRUE(client);
  std::promise<mcp::Message> done;
  const uint64_t handle = client->Send("tools/call", ToolCall("ask"),
                                       [&done](mcp::Message m) { done.set_value(std::move(m)); });
  ASSERT_EQ(asked.get_future().wait_for(5s), std::future_status::ready);
  client->Cancel(handle, "the user went away");
  auto future = done.get_future();
  ASSERT_EQ(future.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(ErrorCode(future.get()), -32800);
}

TEST(ModernClient, ListChangesAndSubscribedResourcesArriveOnTheListenStream) {
  Recorder recorder;
  auto client = StartedModern(ModernSpec(), recorder.Hook());
  ASSERT_TRUE(client);
  ASSERT_TRUE(Eventually([&] {
    json filters = Structured(client->Call("tools/call", ToolCall("listens")))["filters"];
    return filters.size() == 1 && filters[0].value("toolsListChanged", false);
  }));
  EXPECT_EQ(ToolText(client->Call("tools/call", ToolCall("changed"))), "sent");
  EXPECT_TRUE(Eventually([&] { return recorder.Saw("notifications/tools/list_changed"); }));
  // resources/subscribe is gone from the wire: the listen stream is opened anew with the set.
  ASSERT_TRUE(std::holds_alternative<mcp::Response>(
      client->Call("resources/subscribe", {{"uri", "doc://a"}})));
  ASSERT_TRUE(Eventually([&] {
    json filters = Structured(client->Call("tools/call", ToolCall("listens")))["filters"];
    return filters.size() == 1 && filters[0].value("resourceSubscriptions", json()) == json::array({"doc://a"});
  })) << "the old stream is ended once the new one is open";
  client->Call("tools/call", ToolCall("touch", {{"uri", "doc://b"}}));
  client->Call("tools/call", ToolCall("touch", {{"uri", "doc://a"}}));
  EXPECT_TRUE(Eventually([&] { return recorder.Saw("notifications/resources/updated", "uri", "doc://a"); }));
  EXPECT_FALSE(recorder.Saw("notifications/resources/updated", "uri", "doc://b"));
  ASSERT_TRUE(std::holds_alternative<mcp::Response>(
      client->Call("resources/unsubscribe", {{"uri", "doc://a"}})));
  EXPECT_TRUE(Eventually([&] {
    json filters = Structured(client->Call("tools/call", ToolCall("listens")))["filters"];
    return filters.size() == 1 && !filters[0].contains("resourceSubscriptions");
  }));
}

TEST(ModernClient, OverHttpTheHeadersMirrorTheBody) {
  HttpFixture server({"--http"}, "modern_server.py");
  Recorder recorder;
  ModernAsker asker;
  asker.answer = [](const mcp::Request& q) -> mcp::Message {
    return mcp::Response{q.id, {{"action", "accept"}, {"content", {{"name", "bo"}}}}};
  };
  auto client = StartedModern(ModernHttpSpec(server), asker.Hook(recorder));
  ASSERT_TRUE(client);
  EXPECT_TRUE(client->info().modern);
  json headers = Structured(client->Call("tools/call", ToolCall("headers")));
  EXPECT_EQ(headers["mcp-protocol-version"], "2026-07-28");
  EXPECT_EQ(headers["mcp-method"], "tools/call");
  EXPECT_EQ(headers["mcp-name"], "headers");
  EXPECT_FALSE(headers.contains("mcp-session-id"));
  // A name that is not plain ASCII goes in the =?base64?...?= form (the fixture checks it too).
  headers = Structured(client->Call("tools/call", ToolCall("h\u00e9llo")));
  EXPECT_EQ(headers["mcp-name"], mcp::EncodeHeaderValue("h\u00e9llo"));
  EXPECT_EQ(headers["mcp-name"].get<std::string>().rfind("=?base64?", 0), 0u);
  // The multi round-trip works over HTTP too.
  EXPECT_EQ(ToolText(client->Call("tools/call", ToolCall("ask"))), "hello bo");
}

TEST(ModernClient, OverHttpToolParametersMarkedForHeadersAreMirroredAndBadMarksDropTheTool) {
  HttpFixture server({"--http"}, "modern_server.py");
  auto client = StartedModern(ModernHttpSpec(server));
  ASSERT_TRUE(client);
  mcp::Message listed = client->Call("tools/list", json::object());
  ASSERT_TRUE(std::holds_alternative<mcp::Response>(listed)) << ErrorMessage(listed);
  std::set<std::string> names;
  for (const auto& tool : std::get<mcp::Response>(listed).result["tools"]) names.insert(tool["name"]);
  EXPECT_TRUE(names.count("region"));
  EXPECT_FALSE(names.count("bad")) << "an x-mcp-header under items makes the tool invalid";
  json headers = Structured(
      client->Call("tools/call", ToolCall("region", {{"region", " eu west "}, {"query", "q"}})));
  EXPECT_EQ(headers["mcp-param-region"], mcp::EncodeHeaderValue(" eu west "));
  EXPECT_FALSE(headers.contains("mcp-param-query"));
  headers = Structured(client->Call("tools/call", ToolCall("region", {{"query", "q"}})));
  EXPECT_FALSE(headers.contains("mcp-param-region")) << "no value: no header";
}

TEST(ModernClient, ALegacyServerIsSpokenToAsBefore) {
  auto client = StartedModern(EchoSpec());
  ASSERT_TRUE(client);
  EXPECT_FALSE(client->info().modern);
  EXPECT_EQ(client->info().protocol_version, "2025-11-25");
  HttpFixture server;
  Spec spec;
  spec.name = "legacy-http";
  spec.url = server.url();
  auto http = StartedModern(spec);
  ASSERT_TRUE(http);
  EXPECT_FALSE(http->info().modern);
  EXPECT_EQ(ToolText(http->Call("tools/call", ToolCall("echo", {{"text", "hi"}}))), "hi");
}

TEST(ModernClient, ALegacyServerSilentOnTheProbeIsReachedAfterTheProbeTimeout) {
  ClientOptions options = ModernOptions();
  options.probe_timeout = 300ms;
  auto client = StartedModern(EchoSpec("quiet", {"--ignore-discover"}), {}, options);
  ASSERT_TRUE(client);
  EXPECT_FALSE(client->info().modern);
  EXPECT_EQ(ToolText(client->Call("tools/call", ToolCall("echo", {{"text", "late"}}))), "late");
}

TEST(ModernClient, AnUpstreamPinnedToModernRefusesALegacyServer) {
  Recorder recorder;
  ClientOptions options = ModernOptions();
  options.era = Era::kModern;
  auto made = Client::Create(EchoSpec(), recorder.Hook(), options);
  ASSERT_TRUE(made.ok());
  (*made)->Start();
  EXPECT_FALSE((*made)->WaitReady(8s));
  EXPECT_EQ((*made)->state(), State::kStopped);
  EXPECT_NE(recorder.LastWhy(State::kStopped).find("does not speak MCP 2026-07-28"), std::string::npos)
      << recorder.LastWhy(State::kStopped);
}

TEST(ModernClient, AnUpstreamPinnedToLegacyIsNotProbed) {
  ClientOptions options = ModernOptions();
  options.era = Era::kLegacy;
  options.max_restarts = 0;
  Recorder recorder;
  auto made = Client::Create(ModernSpec(), recorder.Hook(), options);
  ASSERT_TRUE(made.ok());
  (*made)->Start();
  EXPECT_FALSE((*made)->WaitReady(8s)) << "a modern-only server refuses initialize";
  EXPECT_NE(recorder.LastWhy(State::kStopped).find("initialize failed"), std::string::npos)
      << recorder.LastWhy(State::kStopped);
}

}  // namespace
}  // namespace warden::upstream
