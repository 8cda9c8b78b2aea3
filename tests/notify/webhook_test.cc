// WebhookSender against a real loopback receiver (hook_server.h): what is sent, when it is retried,
// what is given up, and that nothing on the caller's side waits on the network.
#include "notify/webhook.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "hook_server.h"

namespace warden::notify {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::ClosedPort;
using testing::Eventually;
using testing::HookServer;
using testing::ScriptedReply;

constexpr const char* kSecret = "whsec_loopback_test_secret";

// Fast settings: the tests never wait out a production backoff.
WebhookOptions FastOptions(const std::string& url) {
  WebhookOptions options;
  options.url = url;
  options.secret = kSecret;
  options.first_backoff = 20ms;
  options.request_timeout = 2s;
  return options;
}

std::unique_ptr<WebhookSender> MakeSender(const WebhookOptions& options) {
  auto made = WebhookSender::Create(options);
  EXPECT_TRUE(made.ok()) << made.status().message();
  return made.ok() ? std::move(*made) : nullptr;
}

ScriptedReply Answer(unsigned status) { return ScriptedReply{status, false, {}}; }
ScriptedReply Hang() { return ScriptedReply{0, true, {}}; }

int64_t NowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Ends when every event posted so far has ended (delivered, failed or dropped).
bool Settled(const WebhookSender& sender, uint64_t events) {
  return Eventually(
      [&] {
        const WebhookStats s = sender.Stats();
        return s.queued == 0 && s.delivered + s.failed + s.dropped >= events;
      },
      5s);
}

TEST(WebhookCreate, NamesWhatIsWrongWithTheOptions) {
  auto error = [](WebhookOptions options) {
    auto made = WebhookSender::Create(std::move(options));
    return made.ok() ? std::string("(created)") : made.status().message();
  };
  const std::string url = "http://127.0.0.1:9/hook";
  WebhookOptions o = FastOptions("ftp://hooks.example.com/");
  EXPECT_EQ(error(o),
            "webhook URL 'ftp://hooks.example.com/': must start with http:// or https://");
  o.url = "https://user:pw@hooks.example.com/";
  EXPECT_NE(error(o).find("user info is not allowed"), std::string::npos) << error(o);
  o.url = "https:///hook";
  EXPECT_EQ(error(o), "webhook URL 'https:///hook': no host");
  o.url = "http://h:99999/";
  EXPECT_EQ(error(o), "webhook URL 'http://h:99999/': bad port '99999'");
  o = FastOptions(url);
  o.secret.clear();
  EXPECT_EQ(error(o), "webhook secret is empty");
  o = FastOptions("https://127.0.0.1:9/hook");
  o.ca_file = "/nonexistent/ca.pem";
  EXPECT_EQ(
      error(o).rfind("webhook https://127.0.0.1:9: cannot load the CA file /nonexistent/ca.pem", 0),
      0u)
      << error(o);
  o = FastOptions(url);
  o.ca_file = "/etc/ssl/certs/ca-certificates.crt";
  EXPECT_EQ(error(o), "webhook ca_file is for https:// URLs only");
  o = FastOptions(url);
  o.max_attempts = 0;
  EXPECT_EQ(error(o), "webhook max_attempts must be at least 1");
  o = FastOptions(url);
  o.queue_bound = 0;
  EXPECT_EQ(error(o), "webhook queue_bound must be at least 1");
  o = FastOptions(url);
  o.request_timeout = 0ms;
  EXPECT_EQ(error(o), "webhook request_timeout must be positive");
}

TEST(Webhook, DeliversASignedEventWithItsFields) {
  HookServer server([](size_t) { return Answer(200); });
  auto sender = MakeSender(FastOptions(server.Url("/warden/hook?tenant=acme")));
  ASSERT_TRUE(sender);
  sender->Post("approval.created", {{"approval", {{"id", "apr_1"}, {"tool", "mail__send"}}}});
  ASSERT_TRUE(Settled(*sender, 1));
  EXPECT_EQ(sender->Stats().delivered, 1u);

  ASSERT_EQ(server.Count(), 1u);
  const testing::RecordedRequest req = server.Requests()[0];
  EXPECT_EQ(req.method, "POST");
  EXPECT_EQ(req.target, "/warden/hook?tenant=acme");
  EXPECT_EQ(req.headers.at("host"), "127.0.0.1:" + std::to_string(server.port()));
  EXPECT_EQ(req.headers.at("content-type"), "application/json");
  EXPECT_EQ(req.headers.at("x-warden-event"), "approval.created");

  const std::string signature = req.headers.at("x-warden-signature");
  EXPECT_TRUE(VerifySignature(kSecret, signature, req.body, NowSeconds(), 60s)) << signature;
  EXPECT_FALSE(VerifySignature("another secret", signature, req.body, NowSeconds(), 60s));

  const json body = json::parse(req.body);
  EXPECT_EQ(body.size(), 4u) << req.body;
  EXPECT_EQ(body["event"], "approval.created");
  EXPECT_EQ(body["data"], json({{"approval", {{"id", "apr_1"}, {"tool", "mail__send"}}}}));
  const std::string id = body["id"];
  EXPECT_EQ(id.rfind("evt_", 0), 0u);
  EXPECT_EQ(id.size(), 4u + 32u);
  // RFC 3339, UTC: "2026-12-02T14:20:12.123Z".
  const std::string time = body["time"];
  ASSERT_EQ(time.size(), 24u) << time;
  EXPECT_EQ(time[4], '-');
  EXPECT_EQ(time[10], 'T');
  EXPECT_EQ(time[19], '.');
  EXPECT_EQ(time.back(), 'Z');
}

TEST(Webhook, DeliversEventsInTheOrderPosted) {
  HookServer server([](size_t) { return Answer(204); });
  auto sender = MakeSender(FastOptions(server.Url()));
  ASSERT_TRUE(sender);
  for (int i = 0; i < 5; ++i) sender->Post("test.event", {{"n", i}});
  ASSERT_TRUE(Settled(*sender, 5));
  EXPECT_EQ(sender->Stats().delivered, 5u);
  const auto requests = server.Requests();
  ASSERT_EQ(requests.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(json::parse(requests[i].body)["data"]["n"], i);
  // Every event has an id of its own.
  EXPECT_NE(json::parse(requests[0].body)["id"], json::parse(requests[1].body)["id"]);
}

TEST(Webhook, RetriesA500WithGrowingBackoffThenDelivers) {
  HookServer server([](size_t i) { return Answer(i < 3 ? 500 : 200); });
  WebhookOptions options = FastOptions(server.Url());
  options.first_backoff = 40ms;
  auto sender = MakeSender(options);
  ASSERT_TRUE(sender);
  sender->Post("test.event", {{"n", 1}});
  ASSERT_TRUE(Settled(*sender, 1));
  const WebhookStats stats = sender->Stats();
  EXPECT_EQ(stats.delivered, 1u);
  EXPECT_EQ(stats.retried, 3u);
  EXPECT_EQ(stats.failed, 0u);

  const auto requests = server.Requests();
  ASSERT_EQ(requests.size(), 4u);
  // The same event each time (a receiver drops duplicates by id), signed afresh.
  for (const auto& req : requests) {
    EXPECT_EQ(req.body, requests[0].body);
    EXPECT_TRUE(VerifySignature(kSecret, req.headers.at("x-warden-signature"), req.body,
                                NowSeconds(), 60s));
  }
  // 40, 80, 160 ms at least between attempts: lower bounds only, a slow machine is not a failure.
  EXPECT_GE(requests[1].at - requests[0].at, 40ms);
  EXPECT_GE(requests[2].at - requests[1].at, 80ms);
  EXPECT_GE(requests[3].at - requests[2].at, 160ms);
}

TEST(Webhook, RetriesA429) {
  HookServer server([](size_t i) { return Answer(i == 0 ? 429 : 200); });
  auto sender = MakeSender(FastOptions(server.Url()));
  ASSERT_TRUE(sender);
  sender->Post("test.event", json::object());
  ASSERT_TRUE(Settled(*sender, 1));
  EXPECT_EQ(sender->Stats().delivered, 1u);
  EXPECT_EQ(sender->Stats().retried, 1u);
  EXPECT_EQ(server.Count(), 2u);
}

TEST(Webhook, GivesUpAfterMaxAttempts) {
  HookServer server([](size_t) { return Answer(503); });
  WebhookOptions options = FastOptions(server.Url());
  options.max_attempts = 3;
  options.first_backoff = 5ms;
  auto sender = MakeSender(options);
  ASSERT_TRUE(sender);
  sender->Post("test.event", json::object());
  ASSERT_TRUE(Settled(*sender, 1));
  const WebhookStats stats = sender->Stats();
  EXPECT_EQ(stats.failed, 1u);
  EXPECT_EQ(stats.retried, 2u);
  EXPECT_EQ(stats.delivered, 0u);
  EXPECT_EQ(server.Count(), 3u);
}

TEST(Webhook, DoesNotRetryA400) {
  HookServer server([](size_t) { return Answer(400); });
  auto sender = MakeSender(FastOptions(server.Url()));
  ASSERT_TRUE(sender);
  sender->Post("test.event", json::object());
  ASSERT_TRUE(Settled(*sender, 1));
  EXPECT_EQ(sender->Stats().failed, 1u);
  EXPECT_EQ(sender->Stats().retried, 0u);
  std::this_thread::sleep_for(100ms);  // a retry would have come by now (20 ms backoff)
  EXPECT_EQ(server.Count(), 1u);
}

TEST(Webhook, DoesNotFollowARedirect) {
  // A redirect could move a signed event to a host the operator never named.
  HookServer elsewhere([](size_t) { return Answer(200); });
  HookServer server([&](size_t) {
    return ScriptedReply{307, false, {{"Location", elsewhere.Url("/stolen")}}};
  });
  auto sender = MakeSender(FastOptions(server.Url()));
  ASSERT_TRUE(sender);
  sender->Post("test.event", json::object());
  ASSERT_TRUE(Settled(*sender, 1));
  EXPECT_EQ(sender->Stats().failed, 1u);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(server.Count(), 1u);
  EXPECT_EQ(elsewhere.Count(), 0u);
}

TEST(Webhook, RetriesWhenTheConnectionIsRefused) {
  WebhookOptions options = FastOptions("http://127.0.0.1:" + std::to_string(ClosedPort()) + "/");
  options.max_attempts = 3;
  options.first_backoff = 5ms;
  auto sender = MakeSender(options);
  ASSERT_TRUE(sender);
  sender->Post("test.event", json::object());
  ASSERT_TRUE(Settled(*sender, 1));
  EXPECT_EQ(sender->Stats().failed, 1u);
  EXPECT_EQ(sender->Stats().retried, 2u);
}

TEST(Webhook, RetriesARequestThatTimesOut) {
  HookServer server([](size_t i) { return i == 0 ? Hang() : Answer(200); });
  WebhookOptions options = FastOptions(server.Url());
  options.request_timeout = 200ms;
  auto sender = MakeSender(options);
  ASSERT_TRUE(sender);
  sender->Post("test.event", json::object());
  ASSERT_TRUE(Settled(*sender, 1));
  EXPECT_EQ(sender->Stats().delivered, 1u);
  EXPECT_EQ(sender->Stats().retried, 1u);
  EXPECT_EQ(server.Count(), 2u);
}

TEST(Webhook, PostReturnsAtOnceWhileTheServerNeverAnswers) {
  HookServer server([](size_t) { return Hang(); });
  WebhookOptions options = FastOptions(server.Url());
  options.request_timeout = 5s;
  auto sender = MakeSender(options);
  ASSERT_TRUE(sender);
  sender->Post("test.event", {{"n", 0}});
  ASSERT_TRUE(server.WaitForCount(1, 2s));  // the worker is stuck in a request now
  const auto start = std::chrono::steady_clock::now();
  for (int i = 1; i <= 100; ++i) sender->Post("test.event", {{"n", i}});
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, 1s);  // well under the 5 s request timeout
  EXPECT_EQ(sender->Stats().queued, 101u);
  EXPECT_EQ(sender->Stats().delivered, 0u);
}

TEST(Webhook, AFullQueueDropsTheOldestAndCountsIt) {
  // The first request hangs until the client's timeout; by then the queue has overflowed.
  HookServer server([](size_t i) { return i == 0 ? Hang() : Answer(200); });
  WebhookOptions options = FastOptions(server.Url());
  options.queue_bound = 3;
  options.request_timeout = 300ms;
  auto sender = MakeSender(options);
  ASSERT_TRUE(sender);
  for (int i = 0; i < 10; ++i) sender->Post("test.event", {{"n", i}});
  EXPECT_EQ(sender->Stats().dropped, 7u);
  EXPECT_EQ(sender->Stats().queued, 3u);
  ASSERT_TRUE(Settled(*sender, 10));
  const WebhookStats stats = sender->Stats();
  EXPECT_EQ(stats.dropped, 7u);
  EXPECT_EQ(stats.delivered, 3u);
  EXPECT_EQ(stats.failed, 0u);
  // The newest three arrive, in order (event 0 may have been sent once, into the hang).
  const auto requests = server.Requests();
  ASSERT_GE(requests.size(), 3u);
  for (int k = 0; k < 3; ++k)
    EXPECT_EQ(json::parse(requests[requests.size() - 3 + k].body)["data"]["n"], 7 + k);
}

TEST(Webhook, DestructorCancelsARequestInProgress) {
  HookServer server([](size_t) { return Hang(); });
  WebhookOptions options = FastOptions(server.Url());
  options.request_timeout = 30s;
  auto sender = MakeSender(options);
  ASSERT_TRUE(sender);
  sender->Post("test.event", json::object());
  ASSERT_TRUE(server.WaitForCount(1, 2s));
  const auto start = std::chrono::steady_clock::now();
  sender.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);  // not the 30 s timeout
}

TEST(Webhook, DestructorDoesNotWaitOutABackoff) {
  HookServer server([](size_t) { return Answer(500); });
  WebhookOptions options = FastOptions(server.Url());
  options.first_backoff = 30s;
  auto sender = MakeSender(options);
  ASSERT_TRUE(sender);
  sender->Post("test.event", json::object());
  ASSERT_TRUE(Eventually([&] { return server.Count() == 1; }, 2s));
  std::this_thread::sleep_for(50ms);  // into the backoff
  const auto start = std::chrono::steady_clock::now();
  sender.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_EQ(server.Count(), 1u);
}

TEST(Webhook, ARefusedEventNameIsNotSent) {
  // The name becomes a header: CR/LF in it would be header injection.
  HookServer server([](size_t) { return Answer(200); });
  auto sender = MakeSender(FastOptions(server.Url()));
  ASSERT_TRUE(sender);
  sender->Post("evil\r\nX-Injected: 1", json::object());
  sender->Post("", json::object());
  EXPECT_EQ(sender->Stats().failed, 2u);
  EXPECT_EQ(sender->Stats().queued, 0u);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(server.Count(), 0u);
}

TEST(Webhook, LogsNeitherTheSecretNorTheBodyNorTheUrlPath) {
  auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(1000);
  spdlog::default_logger()->sinks().push_back(sink);
  spdlog::set_level(spdlog::level::debug);
  {
    HookServer server([](size_t i) { return i == 0 ? Hang() : Answer(i % 2 ? 500 : 400); });
    WebhookOptions options = FastOptions(server.Url("/hooks/T0KEN-IN-PATH?sig=QUERY-TOKEN"));
    options.queue_bound = 2;
    options.request_timeout = 200ms;
    options.max_attempts = 2;
    auto sender = MakeSender(options);
    ASSERT_TRUE(sender);
    for (int i = 0; i < 6; ++i) sender->Post("test.event", {{"marker", "BODY-MARKER"}});
    ASSERT_TRUE(Settled(*sender, 6));
  }
  spdlog::default_logger()->sinks().pop_back();
  const std::vector<std::string> lines = sink->last_formatted();
  bool saw_drop = false;
  bool saw_give_up = false;
  for (const std::string& line : lines) {
    EXPECT_EQ(line.find(kSecret), std::string::npos) << line;
    EXPECT_EQ(line.find("BODY-MARKER"), std::string::npos) << line;
    EXPECT_EQ(line.find("T0KEN-IN-PATH"), std::string::npos) << line;
    EXPECT_EQ(line.find("QUERY-TOKEN"), std::string::npos) << line;
    saw_drop = saw_drop || line.find("dropped the oldest") != std::string::npos;
    saw_give_up = saw_give_up || line.find("gave up") != std::string::npos;
  }
  EXPECT_TRUE(saw_drop);
  EXPECT_TRUE(saw_give_up);
}

}  // namespace
}  // namespace warden::notify
