// The upstream client over stdio, against fixtures/echo_server.py running in a real warden sandbox.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <thread>

#include "testing.h"
#include "upstream/client.h"

namespace warden::upstream {
namespace {

using namespace std::chrono_literals;
using testing::EchoSpec;
using testing::ErrorCode;
using testing::ErrorMessage;
using testing::Eventually;
using testing::FastOptions;
using testing::Recorder;
using testing::Structured;
using testing::ToolCall;
using testing::ToolText;

std::unique_ptr<Client> Make(Spec spec, Events events = {}, ClientOptions options = FastOptions()) {
  auto made = Client::Create(std::move(spec), std::move(events), options);
  EXPECT_TRUE(made.ok()) << made.status().message();
  return made.ok() ? std::move(*made) : nullptr;
}

std::unique_ptr<Client> Started(Spec spec = EchoSpec(), Events events = {},
                                ClientOptions options = FastOptions()) {
  auto client = Make(std::move(spec), std::move(events), options);
  if (!client) return nullptr;
  client->Start();
  EXPECT_TRUE(client->WaitReady(8s)) << "state " << StateName(client->state());
  return client;
}

// A Done that keeps the reply for the test thread.
struct Reply {
  std::promise<mcp::Message> promise;
  std::future<mcp::Message> future = promise.get_future();
  std::atomic<int> calls{0};
  Client::Done Hook() {
    return [this](mcp::Message m) {
      if (calls++ == 0) promise.set_value(std::move(m));
    };
  }
  bool Ready(std::chrono::milliseconds wait) {
    return future.wait_for(wait) == std::future_status::ready;
  }
};

TEST(StdioClient, HandshakeKeepsTheServersInfo) {
  auto client = Started();
  ASSERT_TRUE(client);
  ServerInfo info = client->info();
  EXPECT_EQ(info.protocol_version, "2025-11-25");
  EXPECT_EQ(info.server_info.value("name", ""), "echo-fixture");
  EXPECT_EQ(info.capabilities["tools"]["listChanged"], true);
  EXPECT_EQ(info.instructions, "test fixture");
  EXPECT_EQ(client->state(), State::kReady);
  EXPECT_GT(client->pid(), 0);
}

TEST(StdioClient, EchoRoundTrip) {
  auto client = Started();
  ASSERT_TRUE(client);
  mcp::Message listed = client->Call("tools/list", nlohmann::json::object());
  ASSERT_TRUE(std::holds_alternative<mcp::Response>(listed)) << ErrorMessage(listed);
  EXPECT_EQ(std::get<mcp::Response>(listed).result["tools"][0]["name"], "echo");
  EXPECT_EQ(ToolText(client->Call("tools/call", ToolCall("echo", {{"text", "hello upstream"}}))),
            "hello upstream");
}

TEST(StdioClient, RequestSentBeforeReadyWaitsForTheHandshake) {
  auto client = Make(EchoSpec());
  ASSERT_TRUE(client);
  Reply early;
  client->Send("tools/call", ToolCall("echo", {{"text", "early"}}), early.Hook());
  client->Start();
  ASSERT_TRUE(early.Ready(8s));
  EXPECT_EQ(ToolText(early.future.get()), "early");
}

TEST(StdioClient, OneSlowCallDoesNotBlockTwentyOthers) {
  auto client = Started();
  ASSERT_TRUE(client);
  Reply slow;
  client->Send("tools/call", ToolCall("slow", {{"seconds", 3}}), slow.Hook());
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::unique_ptr<Reply>> replies;
  for (int i = 0; i < 20; ++i) {
    replies.push_back(std::make_unique<Reply>());
    client->Send("tools/call", ToolCall("echo", {{"text", "call " + std::to_string(i)}}),
                 replies.back()->Hook());
  }
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(replies[i]->Ready(5s)) << "call " << i;
    EXPECT_EQ(ToolText(replies[i]->future.get()), "call " + std::to_string(i));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2500ms)
      << "the echoes waited for the slow call";
  EXPECT_FALSE(slow.Ready(0ms)) << "the slow call should still be running";
  ASSERT_TRUE(slow.Ready(5s));
  EXPECT_EQ(ToolText(slow.future.get()), "slept");
}

TEST(StdioClient, TimeoutCompletesWith32001AndTellsTheServer) {
  auto client = Started();
  ASSERT_TRUE(client);
  Reply reply;
  const uint64_t handle =
      client->Send("tools/call", ToolCall("slow", {{"seconds", 5}}), reply.Hook(), 300ms);
  ASSERT_TRUE(reply.Ready(3s));
  mcp::Message m = reply.future.get();
  EXPECT_EQ(ErrorCode(m), -32001);
  EXPECT_EQ(ErrorMessage(m), "upstream echo: request timed out after 300 ms");
  EXPECT_TRUE(Eventually([&] {
    auto ids = Structured(client->Call("tools/call", ToolCall("cancelled")))["ids"];
    return ids.is_array() && std::find(ids.begin(), ids.end(), handle) != ids.end();
  })) << "the server never received notifications/cancelled for "
      << handle;
}

TEST(StdioClient, CancelCompletesWith32800OnceAndTellsTheServer) {
  auto client = Started();
  ASSERT_TRUE(client);
  Reply reply;
  const uint64_t handle =
      client->Send("tools/call", ToolCall("slow", {{"seconds", 5}}), reply.Hook());
  std::this_thread::sleep_for(200ms);
  client->Cancel(handle, "the user gave up");
  ASSERT_TRUE(reply.Ready(1s));
  EXPECT_EQ(ErrorCode(reply.future.get()), -32800);
  client->Cancel(handle, "again");  // already done: nothing happens
  EXPECT_TRUE(Eventually([&] {
    auto ids = Structured(client->Call("tools/call", ToolCall("cancelled")))["ids"];
    return ids.is_array() && std::find(ids.begin(), ids.end(), handle) != ids.end();
  }));
  EXPECT_EQ(reply.calls.load(), 1);
}

TEST(StdioClient, ServerDeathFailsCallsInFlightThenTheClientRestarts) {
  Recorder rec;
  auto client = Started(EchoSpec(), rec.Hook());
  ASSERT_TRUE(client);
  const int first_pid = client->pid();
  Reply slow;
  client->Send("tools/call", ToolCall("slow", {{"seconds", 5}}), slow.Hook());
  mcp::Message died =
      client->Call("tools/call", ToolCall("exit", {{"code", 3}, {"message", "boom"}}));
  EXPECT_EQ(ErrorCode(died), -32603);
  EXPECT_EQ(ErrorMessage(died), "upstream echo: server exited (status 3: boom)");
  ASSERT_TRUE(slow.Ready(2s));
  EXPECT_EQ(ErrorMessage(slow.future.get()), "upstream echo: server exited (status 3: boom)");
  EXPECT_TRUE(Eventually([&] { return rec.Count(State::kReady) >= 2; }, 8000ms));
  EXPECT_EQ(rec.LastWhy(State::kRestarting), "exited with status 3: boom");
  EXPECT_EQ(ToolText(client->Call("tools/call", ToolCall("echo", {{"text", "back"}}))), "back");
  EXPECT_NE(client->pid(), first_pid);
}

TEST(StdioClient, RestartStartsANewServerWithAFreshEnvironmentAtOnceAndCountsNoFailure) {
  Recorder rec;
  Spec spec = EchoSpec();
  std::atomic<int> starts{0};
  // The environment is read at every start (a rotated credential reaches the next process).
  spec.start_env = [&starts]() -> Result<std::map<std::string, std::string>> {
    return std::map<std::string, std::string>{{"GENERATION", std::to_string(++starts)}};
  };
  ClientOptions options = FastOptions();
  options.max_restarts = 0;  // a Restart is no failure: even with none allowed it restarts
  options.backoff_initial = 10s;  // and it does not wait out a backoff
  options.backoff_max = 10s;
  auto client = Started(spec, rec.Hook(), options);
  ASSERT_TRUE(client);
  const int first_pid = client->pid();
  Reply slow;
  client->Send("tools/call", ToolCall("slow", {{"seconds", 5}}), slow.Hook());
  client->Restart("its credentials changed");
  ASSERT_TRUE(slow.Ready(3s));
  EXPECT_EQ(ErrorMessage(slow.future.get()), "upstream echo: restarted: its credentials changed");
  EXPECT_TRUE(Eventually([&] { return rec.Count(State::kReady) >= 2; }, 5000ms));
  EXPECT_EQ(rec.Count(State::kRestarting), 0);
  EXPECT_EQ(rec.LastWhy(State::kStarting), "restarted: its credentials changed");
  EXPECT_EQ(starts.load(), 2);
  EXPECT_EQ(ToolText(client->Call("tools/call", ToolCall("echo", {{"text", "back"}}))), "back");
  EXPECT_NE(client->pid(), first_pid);
  client->Stop();
  client->Restart("after stop");  // nothing happens
  EXPECT_EQ(client->state(), State::kStopped);
}

TEST(StdioClient, ExhaustedRestartsStopForGood) {
  Recorder rec;
  Spec spec;
  spec.name = "broken";
  spec.command = {"python3", "-c", "import sys; sys.stderr.write('no luck today\\n'); sys.exit(2)"};
  ClientOptions options = FastOptions();
  options.max_restarts = 2;
  auto client = Make(spec, rec.Hook(), options);
  ASSERT_TRUE(client);
  client->Start();
  EXPECT_FALSE(client->WaitReady(8s));
  EXPECT_EQ(client->state(), State::kStopped);
  EXPECT_EQ(rec.Count(State::kStarting), 3);  // the first start and two restarts
  EXPECT_TRUE(Eventually([&] { return !rec.LastWhy(State::kStopped).empty(); }));
  EXPECT_EQ(rec.LastWhy(State::kStopped),
            "exited with status 2: no luck today (gave up after 2 restarts)");
  mcp::Message late = client->Call("ping", nullptr);
  EXPECT_EQ(ErrorMessage(late), "upstream broken: stopped");
}

TEST(StdioClient, StopFailsCallsInFlightWithStopped) {
  auto client = Started();
  ASSERT_TRUE(client);
  Reply slow;
  client->Send("tools/call", ToolCall("slow", {{"seconds", 5}}), slow.Hook());
  std::this_thread::sleep_for(100ms);
  client->Stop();
  ASSERT_TRUE(slow.Ready(0ms));
  mcp::Message m = slow.future.get();
  EXPECT_EQ(ErrorCode(m), -32603);
  EXPECT_EQ(ErrorMessage(m), "upstream echo: stopped");
  EXPECT_EQ(client->state(), State::kStopped);
  client->Stop();  // idempotent
}

TEST(StdioClient, StopLeavesNoProcessBehind) {
  auto client = Started();
  ASSERT_TRUE(client);
  // A grandchild in its own session: the kind of process that outlives a careless kill.
  mcp::Message spawned = client->Call("tools/call", ToolCall("spawn"));
  ASSERT_TRUE(Structured(spawned).contains("pid")) << ToolText(spawned);
  const pid_t launcher = client->pid();
  std::vector<pid_t> inside = testing::Descendants(launcher);
  ASSERT_GE(inside.size(), 2u) << "expected at least the server and its sleep below warden run";
  client->Stop();
  EXPECT_EQ(client->pid(), 0);
  EXPECT_TRUE(testing::ProcessGone(launcher)) << "warden run " << launcher << " is still there";
  for (pid_t p : inside)
    EXPECT_TRUE(testing::ProcessGone(p)) << "process " << p << " survived Stop";
}

TEST(StdioClient, StopKillsAServerThatIgnoresTheEndOfItsInput) {
  auto client = Started(EchoSpec("stubborn", {"--ignore-eof"}));
  ASSERT_TRUE(client);
  ASSERT_TRUE(Structured(client->Call("tools/call", ToolCall("spawn"))).contains("pid"));
  const pid_t launcher = client->pid();
  std::vector<pid_t> inside = testing::Descendants(launcher);
  ASSERT_GE(inside.size(), 2u);
  const auto start = std::chrono::steady_clock::now();
  client->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  EXPECT_TRUE(testing::ProcessGone(launcher));
  for (pid_t p : inside)
    EXPECT_TRUE(testing::ProcessGone(p)) << "process " << p << " survived Stop";
}

TEST(StdioClient, ServerCannotReadHostFilesOrReachTheNetwork) {
  const std::string dir = std::filesystem::temp_directory_path() /
                          ("warden-upstream-secret-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string secret = dir + "/secret.txt";
  std::ofstream(secret) << "top secret";
  std::filesystem::permissions(secret, std::filesystem::perms::all);  // even world-readable
  auto client = Started();
  ASSERT_TRUE(client);
  nlohmann::json report =
      Structured(client->Call("tools/call", ToolCall("whoami", {{"secret_path", secret}})));
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(report.is_object());
  EXPECT_FALSE(report.contains("secret")) << "the server read " << secret << ": " << report.dump();
  EXPECT_TRUE(report.contains("secret_error"));
  EXPECT_FALSE(report.contains("root_listing")) << report.dump();
  EXPECT_FALSE(report.contains("network")) << "the server reached 1.1.1.1: " << report.dump();
  EXPECT_EQ(report["hostname"], "sandbox");
  EXPECT_NE(report["uid"], 0);
}

TEST(StdioClient, ServerRequestsGoToOnRequestAndNotificationsToOnNotification) {
  Recorder rec;
  Events events = rec.Hook();
  std::vector<std::thread> answerers;
  std::mutex answerers_mu;
  events.on_request = [&](const mcp::Request& request, std::function<void(mcp::Message)> reply) {
    // Answer later, from another thread, as the gateway does.
    std::lock_guard<std::mutex> lock(answerers_mu);
    answerers.emplace_back([request, reply] {
      std::this_thread::sleep_for(50ms);
      if (request.method == "sampling/createMessage")
        reply(mcp::Response{request.id,
                            {{"role", "assistant"},
                             {"content", {{"type", "text"}, {"text", "sampled by the client"}}},
                             {"model", "test"}}});
      else
        reply(mcp::MakeError(request.id, -32601, "no"));
    });
  };
  auto client = Started(EchoSpec(), events);
  ASSERT_TRUE(client);
  nlohmann::json params = ToolCall("progress_and_sample");
  params["_meta"] = {{"progressToken", "tok-1"}};
  EXPECT_EQ(ToolText(client->Call("tools/call", params)), "sampled by the client");
  {
    std::lock_guard<std::mutex> lock(rec.mu);
    auto it = std::find_if(rec.notifications.begin(), rec.notifications.end(),
                           [](auto& n) { return n.method == "notifications/progress"; });
    ASSERT_NE(it, rec.notifications.end());
    EXPECT_EQ((*it->params)["progressToken"], "tok-1");
  }
  client->Stop();
  for (auto& t : answerers) t.join();
}

TEST(StdioClient, WithoutOnRequestServerRequestsGetMethodNotFound) {
  auto client = Started();
  ASSERT_TRUE(client);
  EXPECT_EQ(ToolText(client->Call("tools/call", ToolCall("progress_and_sample"))), "error -32601");
}

TEST(StdioClient, OversizedMessageKillsTheConnectionAndTheClientRestarts) {
  Recorder rec;
  ClientOptions options = FastOptions();
  options.max_message_bytes = 64 * 1024;
  auto client = Started(EchoSpec(), rec.Hook(), options);
  ASSERT_TRUE(client);
  mcp::Message m = client->Call("tools/call", ToolCall("big", {{"bytes", 200000}}));
  EXPECT_EQ(ErrorCode(m), -32603);
  EXPECT_EQ(ErrorMessage(m), "upstream echo: server killed (sent a message over 65536 bytes)");
  EXPECT_TRUE(client->WaitReady(8s));
  EXPECT_EQ(ToolText(client->Call("tools/call", ToolCall("big", {{"bytes", 1000}}))),
            std::string(1000, 'x'));
}

TEST(StdioClient, ServerSpeakingAnUnknownProtocolVersionIsAnError) {
  Recorder rec;
  auto client = Make(EchoSpec("old", {"--protocol", "1999-01-01"}), rec.Hook());
  ASSERT_TRUE(client);
  client->Start();
  EXPECT_FALSE(client->WaitReady(8s));
  EXPECT_EQ(client->state(), State::kStopped);
  EXPECT_TRUE(Eventually([&] { return !rec.LastWhy(State::kStopped).empty(); }));
  EXPECT_EQ(
      rec.LastWhy(State::kStopped),
      "the server answered protocol version '1999-01-01', which warden does not speak (it speaks "
      "2025-11-25, 2025-06-18, 2025-03-26)");
}

TEST(StdioClient, OlderSupportedProtocolVersionIsKept) {
  auto client = Started(EchoSpec("older", {"--protocol", "2025-06-18"}));
  ASSERT_TRUE(client);
  EXPECT_EQ(client->info().protocol_version, "2025-06-18");
}

TEST(StdioClient, SandboxSetupFailureIsReportedWithWardensMessage) {
  Recorder rec;
  Spec spec = EchoSpec("nobind");
  spec.sandbox.binds.push_back({"/nonexistent/warden-test-dir", "", false});
  ClientOptions options = FastOptions();
  options.max_restarts = 0;
  // What is tested is the message, not a deadline: `warden run` (0.6 s to start and exit in the
  // ASan build) once took over FastOptions' 8 s under the full suite's load, and the client
  // then rightly reported its initialize timing out instead.
  options.connect_timeout = 60s;
  auto client = Make(spec, rec.Hook(), options);
  ASSERT_TRUE(client);
  client->Start();
  EXPECT_FALSE(client->WaitReady(60s));
  EXPECT_TRUE(Eventually([&] { return !rec.LastWhy(State::kStopped).empty(); }));
  const std::string why = rec.LastWhy(State::kStopped);
  EXPECT_NE(why.find("exited with status 125"), std::string::npos) << why;
  EXPECT_NE(why.find("/nonexistent/warden-test-dir"), std::string::npos) << why;
}

}  // namespace
}  // namespace warden::upstream
