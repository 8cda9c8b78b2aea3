// The upstream client over Streamable HTTP, against fixtures/http_echo_server.py on 127.0.0.1.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <future>
#include <mutex>
#include <thread>

#include "testing.h"
#include "upstream/client.h"

namespace warden::upstream {
namespace {

using namespace std::chrono_literals;
using testing::ErrorCode;
using testing::ErrorMessage;
using testing::Eventually;
using testing::FastOptions;
using testing::HttpFixture;
using testing::Recorder;
using testing::Structured;
using testing::ToolCall;
using testing::ToolText;

Spec HttpSpec(const std::string& url, const std::string& ca_file = "") {
  Spec spec;
  spec.name = "web";
  spec.url = url;
  spec.headers = {{"X-Test", "1"}};
  spec.ca_file = ca_file;
  return spec;
}

std::unique_ptr<Client> Started(const std::string& url, Events events = {},
                                ClientOptions options = FastOptions(),
                                const std::string& ca_file = "") {
  return testing::StartClient(HttpSpec(url, ca_file), std::move(events), options);
}

nlohmann::json Stats(const std::string& url) {
  auto other = Started(url);
  return other ? Structured(other->Call("tools/call", ToolCall("stats"))) : nlohmann::json();
}

TEST(HttpClient, RoundTripWithSessionAndVersionHeaders) {
  HttpFixture server;
  auto client = Started(server.url());
  ASSERT_TRUE(client);
  EXPECT_EQ(client->info().server_info.value("name", ""), "http-fixture");
  EXPECT_EQ(client->pid(), 0);
  EXPECT_EQ(ToolText(client->Call("tools/call", ToolCall("echo", {{"text", "over http"}}))),
            "over http");
  // The fixture refuses requests without the session id (400) or the negotiated version (400).
  nlohmann::json stats = Structured(client->Call("tools/call", ToolCall("stats")));
  EXPECT_EQ(stats["initialize"], 1);
  EXPECT_EQ(stats["bad_version"], 0);
}

TEST(HttpClient, SseReplyDeliversNotificationsThenTheResult) {
  HttpFixture server;
  Recorder rec;
  auto client = Started(server.url(), rec.Hook());
  ASSERT_TRUE(client);
  EXPECT_EQ(ToolText(client->Call("tools/call", ToolCall("sse_echo", {{"text", "streamed"}}))),
            "streamed");
  EXPECT_TRUE(rec.Saw("notifications/progress", "progressToken", "t"));
}

TEST(HttpClient, ServerRequestOnTheStreamIsForwardedAndAnswered) {
  HttpFixture server;
  Events events;
  std::atomic<int> asked{0};
  events.on_request = [&](const mcp::Request& request, std::function<void(mcp::Message)> reply) {
    ++asked;
    EXPECT_EQ(request.method, "sampling/createMessage");
    reply(mcp::Response{request.id,
                        {{"role", "assistant"},
                         {"content", {{"type", "text"}, {"text", "answered by the client"}}},
                         {"model", "m"}}});
  };
  auto client = Started(server.url(), events);
  ASSERT_TRUE(client);
  EXPECT_EQ(ToolText(client->Call("tools/call", ToolCall("ask"))), "answered by the client");
  EXPECT_EQ(asked.load(), 1);
}

TEST(HttpClient, GetStreamCarriesServerInitiatedMessages) {
  HttpFixture server;
  Recorder rec;
  auto client = Started(server.url(), rec.Hook());
  ASSERT_TRUE(client);
  EXPECT_EQ(ToolText(client->Call("tools/call", ToolCall("push", {{"text", "unprompted"}}))),
            "pushed");
  EXPECT_TRUE(
      Eventually([&] { return rec.Saw("notifications/message", "data", "unprompted"); }, 3000ms));
}

TEST(HttpClient, ServerWithoutGetStreamIsFine) {
  HttpFixture server({"--no-get"});
  auto client = Started(server.url());
  ASSERT_TRUE(client);
  std::this_thread::sleep_for(100ms);  // let the GET be refused with 405
  EXPECT_EQ(client->state(), State::kReady);
  EXPECT_EQ(ToolText(client->Call("tools/call", ToolCall("echo", {{"text", "still fine"}}))),
            "still fine");
}

TEST(HttpClient, StreamClosedEarlyIsResumedWithLastEventId) {
  HttpFixture server;
  auto client = Started(server.url());
  ASSERT_TRUE(client);
  EXPECT_EQ(ToolText(client->Call("tools/call", ToolCall("resume", {{"text", "resumed"}}))),
            "resumed");
}

TEST(HttpClient, StopEndsTheSessionWithDelete) {
  HttpFixture server;
  auto client = Started(server.url());
  ASSERT_TRUE(client);
  client->Stop();
  EXPECT_EQ(client->state(), State::kStopped);
  EXPECT_EQ(Stats(server.url())["delete"], 1);
}

TEST(HttpClient, ExpiredSessionIsReinitialized) {
  HttpFixture server;
  Recorder rec;
  auto client = Started(server.url(), rec.Hook());
  ASSERT_TRUE(client);
  EXPECT_EQ(ToolText(client->Call("tools/call", ToolCall("expire"))), "expired");
  // The next request meets the 404: it fails (it may not be safe to send twice), the client
  // starts a new session.
  mcp::Message lost = client->Call("tools/call", ToolCall("echo", {{"text", "lost"}}));
  EXPECT_EQ(ErrorCode(lost), -32603);
  EXPECT_EQ(ErrorMessage(lost), "upstream web: session expired (HTTP 404)");
  EXPECT_TRUE(Eventually(
      [&] { return rec.Count(State::kReady) == 2 && client->state() == State::kReady; }, 5000ms));
  EXPECT_EQ(rec.LastWhy(State::kRestarting), "session expired (HTTP 404)");
  EXPECT_EQ(ToolText(client->Call("tools/call", ToolCall("echo", {{"text", "new session"}}))),
            "new session");
  EXPECT_EQ(Structured(client->Call("tools/call", ToolCall("stats")))["initialize"], 2);
}

TEST(HttpClient, ConcurrentCallsDoNotWaitForEachOther) {
  HttpFixture server;
  auto client = Started(server.url());
  ASSERT_TRUE(client);
  std::vector<std::future<mcp::Message>> replies;
  for (int i = 0; i < 20; ++i) {
    auto p = std::make_shared<std::promise<mcp::Message>>();
    replies.push_back(p->get_future());
    client->Send("tools/call", ToolCall("sse_echo", {{"text", std::to_string(i)}}),
                 [p](mcp::Message m) { p->set_value(std::move(m)); });
  }
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(replies[i].wait_for(5s), std::future_status::ready) << i;
    EXPECT_EQ(ToolText(replies[i].get()), std::to_string(i));
  }
}

TEST(HttpClient, UnreachableServerStopsWithTheCause) {
  // A port nobody listens on: bind one, then close it.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  Recorder rec;
  ClientOptions options = FastOptions();
  options.max_restarts = 1;
  auto made =
      Client::Create(HttpSpec("http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/mcp"),
                     rec.Hook(), options);
  ASSERT_TRUE(made.ok());
  (*made)->Start();
  EXPECT_FALSE((*made)->WaitReady(5s));
  EXPECT_TRUE(Eventually([&] { return !rec.LastWhy(State::kStopped).empty(); }));
  const std::string why = rec.LastWhy(State::kStopped);
  EXPECT_EQ(why.rfind("initialize failed: cannot connect to 127.0.0.1:", 0), 0u) << why;
  EXPECT_NE(why.find("(gave up after 1 restarts)"), std::string::npos) << why;
}

// https: a self-signed certificate for the name "localhost" only, made with the openssl tool.
class TlsFixture {
 public:
  TlsFixture() : dir_(std::filesystem::temp_directory_path() / ("warden-tls-" + std::to_string(getpid()))) {
    std::filesystem::create_directories(dir_);
    const std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost"
                            " -addext subjectAltName=DNS:localhost -keyout " + key() + " -out " +
                            cert() + " >/dev/null 2>&1";
    made_ = std::system(cmd.c_str()) == 0;
    if (made_) server_ = std::make_unique<HttpFixture>(std::vector<std::string>{"--tls", cert(), key()});
  }
  ~TlsFixture() {
    server_.reset();
    std::filesystem::remove_all(dir_);
  }
  bool made() const { return made_; }
  std::string cert() const { return (dir_ / "cert.pem").string(); }
  std::string key() const { return (dir_ / "key.pem").string(); }
  std::string url(const std::string& host) const {
    return "https://" + host + ":" + std::to_string(server_->port()) + "/mcp";
  }

 private:
  std::filesystem::path dir_;
  bool made_ = false;
  std::unique_ptr<HttpFixture> server_;
};

TEST(HttpsClient, TrustedCertificateCarriesTheWholeProtocol) {
  TlsFixture tls;
  if (!tls.made()) GTEST_SKIP() << "the openssl tool could not make a certificate";
  Recorder rec;
  auto client = Started(tls.url("localhost"), rec.Hook(), FastOptions(), tls.cert());
  ASSERT_TRUE(client);
  EXPECT_EQ(ToolText(client->Call("tools/call", ToolCall("echo", {{"text", "over tls"}}))),
            "over tls");
  // An SSE reply and the GET stream, both ended by the server's close without close_notify.
  EXPECT_EQ(ToolText(client->Call("tools/call", ToolCall("sse_echo", {{"text", "sse"}}))), "sse");
  EXPECT_EQ(ToolText(client->Call("tools/call", ToolCall("push", {{"text", "pushed over tls"}}))),
            "pushed");
  EXPECT_TRUE(Eventually(
      [&] { return rec.Saw("notifications/message", "data", "pushed over tls"); }, 3000ms));
}

// Starts a client for `spec` that gives up after one restart; returns why it stopped.
std::string WhyItStops(const Spec& spec) {
  Recorder rec;
  ClientOptions options = FastOptions();
  options.max_restarts = 1;
  auto made = Client::Create(spec, rec.Hook(), options);
  if (!made.ok()) return "not created: " + made.status().message();
  (*made)->Start();
  EXPECT_FALSE((*made)->WaitReady(5s));
  EXPECT_TRUE(Eventually([&] { return !rec.LastWhy(State::kStopped).empty(); }));
  return rec.LastWhy(State::kStopped);
}

// The attack: a server (or a man in the middle) with a certificate nobody vouches for.
TEST(HttpsClient, UntrustedCertificateIsRefused) {
  TlsFixture tls;
  if (!tls.made()) GTEST_SKIP() << "the openssl tool could not make a certificate";
  const std::string why = WhyItStops(HttpSpec(tls.url("localhost")));
  EXPECT_NE(why.find("TLS with localhost:"), std::string::npos) << why;
  EXPECT_NE(why.find("certificate"), std::string::npos) << why;
}

// The attack: a trusted certificate presented for a name it was not issued for.
TEST(HttpsClient, CertificateForAnotherNameIsRefused) {
  TlsFixture tls;
  if (!tls.made()) GTEST_SKIP() << "the openssl tool could not make a certificate";
  const std::string why = WhyItStops(HttpSpec(tls.url("127.0.0.1"), tls.cert()));
  EXPECT_NE(why.find("TLS with 127.0.0.1:"), std::string::npos) << why;
  EXPECT_NE(why.find("certificate"), std::string::npos) << why;
}

TEST(HttpsClient, MissingCaFileIsNamed) {
  const std::string why = WhyItStops(HttpSpec("https://localhost:1/mcp", "/nonexistent/ca.pem"));
  EXPECT_NE(why.find("cannot load the CA file /nonexistent/ca.pem"), std::string::npos) << why;
}

}  // namespace
}  // namespace warden::upstream
