// `warden serve`'s Streamable HTTP transport, driven over real TCP with raw HTTP/1.1 requests (so
// every status code and header is asserted as a client sees it). Behind the server: real
// McpSessions on a real GatewayCore (policy, pipeline, audit log, kill switches, built-in tools);
// sandbox__exec runs for real.
//
// Test doubles, both at boundaries warden does not own:
//  * TestHost::Authenticate is a fixed key table. It stands in for the identity stage
//    (identity_test.cc covers the real Authenticator); the server only relies on the Caller it
//    returns.
//  * FakeUpstream stands in for a third-party upstream MCP server, so a test can make the
//    session send notifications (the GET stream) and progress during a call (POST switched to
//    SSE) at a moment of the test's choosing.
#include "gateway/http/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "policy/default_policy.h"
#include "gateway/gateway.h"
#include "gateway/http/http_replay.h"
#include "gateway/http/http_rules.h"
#include "gateway/stages/kill_switches.h"
#include "gateway/session/session.h"
#include "http_client.h"
#include "testing.h"

namespace warden::gateway {
namespace {

using nlohmann::json;
using testing::OpenAudit;
using testing::PolicyFromText;
using testing::TempDir;
namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using namespace std::chrono_literals;

// ---------------------------------------------------------------------------------------------
// Test doubles (see the file comment).

class FakeUpstream : public upstream::Client {
 public:
  FakeUpstream(upstream::Spec spec, upstream::Events events)
      : spec_(std::move(spec)), events_(std::move(events)) {}

  void Start() override {
    state_ = upstream::State::kReady;
    if (events_.on_state) events_.on_state(upstream::State::kReady, "started");
  }
  bool WaitReady(std::chrono::milliseconds) override { return true; }
  uint64_t Send(const std::string& method, json params, Done done,
                std::chrono::milliseconds) override {
    const uint64_t handle = next_++;
    const mcp::Id id(static_cast<int64_t>(handle));
    if (method == "tools/list") {
      json tool = {{"name", "echo"},
                   {"description", "Echoes its text"},
                   {"inputSchema", {{"type", "object"}}}};
      done(mcp::Response{id, {{"tools", json::array({tool})}}});
    } else if (method == "tools/call") {
      // Progress first when the call asked for it: a message related to the request.
      if (params.contains("_meta") && params["_meta"].contains("progressToken")) {
        events_.on_notification(mcp::Notification{
            "notifications/progress", json{{"progressToken", params["_meta"]["progressToken"]},
                                           {"progress", 1},
                                           {"total", 2}}});
      }
      std::string text = params.value("arguments", json::object()).value("text", "");
      if (text == "log") {
        // Log messages while serving the call, as a real server's would.
        events_.on_notification(mcp::Notification{
            "notifications/message", json{{"level", "info"}, {"data", "low detail"}}});
        events_.on_notification(mcp::Notification{
            "notifications/message", json{{"level", "error"}, {"data", "high alarm"}}});
      }
      done(mcp::Response{
          id,
          {{"content", json::array({{{"type", "text"}, {"text", text}}})}, {"isError", false}}});
    } else if (method == "resources/list") {
      done(mcp::Response{id, {{"resources", json::array({{{"uri", "notes://a"}, {"name", "a"}},
                                                         {{"uri", "notes://b"}, {"name", "b"}}})}}});
    } else if (method == "resources/subscribe" || method == "resources/unsubscribe") {
      {
        std::lock_guard lock(mu_);
        (method == "resources/subscribe" ? subscribed_ : unsubscribed_)
            .push_back(params.value("uri", ""));
      }
      done(mcp::Response{id, json::object()});
    } else {
      done(mcp::MakeError(id, mcp::kMethodNotFound, "Method not found: " + method));
    }
    return handle;
  }
  void Cancel(uint64_t, const std::string&) override {}
  void Notify(const std::string&, json) override {}
  void Stop() override { state_ = upstream::State::kStopped; }
  upstream::State state() const override { return state_; }
  upstream::ServerInfo info() const override {
    upstream::ServerInfo info;
    info.capabilities = {{"tools", json::object()}, {"resources", {{"subscribe", true}}}};
    return info;
  }
  const upstream::Spec& spec() const override { return spec_; }
  int pid() const override { return 0; }

  // Makes the "server" send a notification, as a real one would on its own.
  void Emit(const mcp::Notification& note) { events_.on_notification(note); }
  // The URIs warden subscribed and unsubscribed here, in order.
  std::vector<std::string> subscribed() {
    std::lock_guard lock(mu_);
    return subscribed_;
  }
  std::vector<std::string> unsubscribed() {
    std::lock_guard lock(mu_);
    return unsubscribed_;
  }

 private:
  upstream::Spec spec_;
  upstream::Events events_;
  std::atomic<upstream::State> state_{upstream::State::kStarting};
  std::atomic<uint64_t> next_{1};
  std::mutex mu_;
  std::vector<std::string> subscribed_, unsubscribed_;
};

class TestHost : public SessionHost {
 public:
  explicit TestHost(GatewayCore& core) : core_(core) {}

  Result<identity::Caller> Authenticate(std::string_view authorization, const std::string& peer) override {
    {
      std::lock_guard lock(mu_);
      last_peer_ = peer;
    }
    if (authorization == "Bearer alice-key") return identity::Caller{"", "alice", "", ""};
    if (authorization == "Bearer bob-key") return identity::Caller{"", "bob", "", ""};
    return Status::Error(authorization.empty() ? "missing credentials: send Authorization: Bearer"
                                               : "unknown API key");
  }
  std::shared_ptr<McpSession> CreateSession(const identity::Caller& caller) override {
    auto session = std::make_shared<McpSession>(core_, caller, SessionOptions{.transport = "http"});
    core_.Register(session);
    std::lock_guard lock(mu_);
    created_.push_back(session);
    return session;
  }
  std::string last_peer() {
    std::lock_guard lock(mu_);
    return last_peer_;
  }
  std::shared_ptr<McpSession> CreateTaskContext(const identity::Caller& caller,
                                                SessionOptions options) override {
    auto context = std::make_shared<McpSession>(core_, caller, std::move(options));
    core_.Register(context);
    return context;
  }
  std::shared_ptr<McpSession> Created(const std::string& id) {
    std::lock_guard lock(mu_);
    for (auto& weak : created_) {
      auto s = weak.lock();
      if (s && s->id() == id) return s;
    }
    return nullptr;
  }

 private:
  GatewayCore& core_;
  std::mutex mu_;
  std::string last_peer_;
  std::vector<std::weak_ptr<McpSession>> created_;
};

// ---------------------------------------------------------------------------------------------
// A raw HTTP/1.1 client: http_client.h.
using namespace http_test;

constexpr char kUpstreamPolicy[] = R"(version: 1
upstreams:
  notes:
    url: http://127.0.0.1:9/mcp
tools:
  - match: { tool: "sandbox__exec", server: "sandbox" }
    risk: medium
    effect: allow
  - match: { tool: "notes__echo", server: "notes" }
    risk: low
    effect: allow
defaults:
  unknown_tool: { risk: high, effect: deny }
)";

// ---------------------------------------------------------------------------------------------

class HttpServerTest : public ::testing::Test {
 protected:
  void StartServer(HttpServerOptions options = {},
                   const std::string& policy_text = std::string(policy::DefaultPolicyText())) {
    holder_.Set(PolicyFromText(policy_text));
    log_ = OpenAudit(dir_.File("warden.db"));
    ASSERT_NE(log_, nullptr);
    tools_ = BuiltinTools::Default();
    GatewayOptions gateway_options;
    gateway_options.worker_threads = 8;
    gateway_options.make_upstream =
        [this](upstream::Spec spec, upstream::Events events,
               upstream::ClientOptions) -> Result<std::unique_ptr<upstream::Client>> {
      auto fake = std::make_unique<FakeUpstream>(std::move(spec), std::move(events));
      std::lock_guard lock(fakes_mu_);
      fakes_.push_back(fake.get());
      return std::unique_ptr<upstream::Client>(std::move(fake));
    };
    core_ = std::make_unique<GatewayCore>(holder_, *log_, kills_, tools_,
                                          identity::Caller{"", "tester", "", ""}, gateway_options);
    host_ = std::make_unique<TestHost>(*core_);
    options.port = 0;
    server_ = std::make_unique<HttpServer>(*host_, options);
    Status started = server_->Start();
    ASSERT_TRUE(started.ok()) << started.message();
    ASSERT_NE(server_->port(), 0);
  }

  void TearDown() override {
    if (server_) server_->Stop();
    server_.reset();
    host_.reset();
    core_.reset();
  }

  uint16_t port() const { return server_->port(); }

  // A POST of `body` with the headers a well-behaved client sends.
  Req Post(const std::string& body, const std::string& session = "",
           const std::string& key = "alice-key") const {
    Req req;
    req.body = body;
    req.headers = {{"Content-Type", "application/json"}, {"Accept", kAcceptBoth}};
    if (!key.empty()) req.headers.emplace_back("Authorization", "Bearer " + key);
    if (!session.empty()) req.headers.emplace_back("Mcp-Session-Id", session);
    return req;
  }
  HttpReply Send(const Req& req) {
    Connection c(port());
    return c.Send(req);
  }
  HttpReply Call(const json& message, const std::string& session,
                 const std::string& key = "alice-key") {
    return Send(Post(message.dump(), session, key));
  }

  // initialize + notifications/initialized; returns the session id.
  std::string Initialize(const std::string& version = "2025-06-18",
                         const std::string& key = "alice-key") {
    HttpReply init = Send(Post(InitializeRequest(version).dump(), "", key));
    EXPECT_EQ(init.status, 200) << init.body;
    EXPECT_EQ(init.Header("content-type"), "application/json");
    EXPECT_EQ(init.Json()["result"]["protocolVersion"], version) << init.body;
    std::string id = init.Header("mcp-session-id");
    EXPECT_GE(id.size(), 32u);
    for (char c : id) EXPECT_TRUE(c >= 0x21 && c <= 0x7e) << "session id must be visible ASCII";
    HttpReply ready =
        Send(Post(R"({"jsonrpc":"2.0","method":"notifications/initialized"})", id, key));
    EXPECT_EQ(ready.status, 202) << ready.body;
    EXPECT_TRUE(ready.body.empty());
    return id;
  }

  FakeUpstream* LatestFake() {
    std::lock_guard lock(fakes_mu_);
    return fakes_.empty() ? nullptr : fakes_.back();
  }

  TempDir dir_;
  policy::PolicyHolder holder_;
  KillSwitches kills_;
  BuiltinTools tools_;
  std::unique_ptr<audit::AuditLog> log_;
  std::unique_ptr<GatewayCore> core_;
  std::unique_ptr<TestHost> host_;
  std::unique_ptr<HttpServer> server_;
  std::mutex fakes_mu_;
  std::vector<FakeUpstream*> fakes_;
};

// ---- The happy path ----

TEST_F(HttpServerTest, InitializeGivesSessionIdThenToolsListAndCallWork) {
  StartServer();
  std::string sid = Initialize();
  EXPECT_EQ(server_->session_count(), 1u);
  EXPECT_EQ(host_->last_peer(), "127.0.0.1");

  HttpReply list = Call(Rpc(2, "tools/list"), sid);
  ASSERT_EQ(list.status, 200) << list.body;
  EXPECT_EQ(list.Header("content-type"), "application/json");
  bool has_exec = false;
  const json tools = list.Json()["result"]["tools"];
  for (const json& tool : tools) has_exec = has_exec || tool["name"] == "sandbox__exec";
  EXPECT_TRUE(has_exec) << list.body;

  HttpReply call = Call(
      Rpc(3, "tools/call", {{"name", "sandbox__exec"}, {"arguments", {{"command", "echo hi"}}}}),
      sid);
  ASSERT_EQ(call.status, 200) << call.body;
  json result = call.Json();
  EXPECT_EQ(result["id"], 3);
  EXPECT_EQ(result["result"]["structuredContent"]["stdout"], "hi\n") << call.body;
  EXPECT_EQ(result["result"]["isError"], false);
}

TEST_F(HttpServerTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  StartServer();
  std::string sid = Initialize();
  Connection c(port());
  for (int i = 10; i < 13; ++i) {
    HttpReply pong = c.Send(Post(Rpc(i, "ping").dump(), sid));
    ASSERT_EQ(pong.status, 200) << pong.body;
    EXPECT_EQ(pong.Json()["id"], i);
  }
  // Two requests written at once (pipelined) are answered in order.
  c.Write(Post(Rpc(20, "ping").dump(), sid).Build() + Post(Rpc(21, "ping").dump(), sid).Build());
  EXPECT_EQ(c.Read().Json()["id"], 20);
  EXPECT_EQ(c.Read().Json()["id"], 21);
}

TEST_F(HttpServerTest, NotificationsAndClientResponsesAreAcceptedWith202AndNoBody) {
  StartServer();
  std::string sid = Initialize();
  HttpReply note = Call(
      {{"jsonrpc", "2.0"}, {"method", "notifications/cancelled"}, {"params", {{"requestId", 99}}}},
      sid);
  EXPECT_EQ(note.status, 202);
  EXPECT_TRUE(note.body.empty());
  HttpReply response =
      Call({{"jsonrpc", "2.0"}, {"id", "warden-1"}, {"result", json::object()}}, sid);
  EXPECT_EQ(response.status, 202);
  EXPECT_TRUE(response.body.empty());
}

// ---- Session ids ----

TEST_F(HttpServerTest, RequestWithoutSessionIdIs400AndUnknownSessionIs404) {
  StartServer();
  HttpReply missing = Call(Rpc(2, "tools/list"), "");
  EXPECT_EQ(missing.status, 400);
  EXPECT_NE(missing.Json()["error"]["message"].get<std::string>().find("Mcp-Session-Id"),
            std::string::npos);
  HttpReply unknown = Call(Rpc(2, "tools/list"), "0123456789abcdef0123456789abcdef");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(unknown.Json()["error"]["code"], mcp::kInvalidRequest);
  EXPECT_EQ(server_->session_count(), 0u) << "a refused request must not create a session";
}

TEST_F(HttpServerTest, AttackAnotherCallersSessionIdIsIndistinguishableFromUnknown) {
  StartServer();
  std::string alice = Initialize("2025-06-18", "alice-key");
  HttpReply stolen = Call(Rpc(2, "tools/list"), alice, "bob-key");
  HttpReply unknown = Call(Rpc(2, "tools/list"), "ffffffffffffffffffffffffffffffff", "bob-key");
  EXPECT_EQ(stolen.status, 404);
  EXPECT_EQ(stolen.body, unknown.body) << "the answer must not reveal that the session exists";

  Req get{.method = "GET",
          .headers = {{"Accept", "text/event-stream"},
                      {"Authorization", "Bearer bob-key"},
                      {"Mcp-Session-Id", alice}}};
  EXPECT_EQ(Send(get).status, 404);
  Req del{.method = "DELETE",
          .headers = {{"Authorization", "Bearer bob-key"}, {"Mcp-Session-Id", alice}}};
  EXPECT_EQ(Send(del).status, 404);

  // Alice's session is untouched.
  EXPECT_EQ(server_->session_count(), 1u);
  EXPECT_EQ(Call(Rpc(3, "ping"), alice).status, 200);
}

TEST_F(HttpServerTest, MissingOrWrongCredentialsAre401WithBearerChallenge) {
  StartServer();
  for (const std::string key : {"", "mallory-key"}) {
    HttpReply refused = Send(Post(InitializeRequest("2025-06-18").dump(), "", key));
    EXPECT_EQ(refused.status, 401);
    EXPECT_EQ(refused.Header("www-authenticate"), "Bearer");
    EXPECT_TRUE(refused.Json().contains("error")) << refused.body;
    EXPECT_FALSE(refused.Json()["error"].get<std::string>().empty());
  }
  EXPECT_EQ(server_->session_count(), 0u);
}

TEST_F(HttpServerTest, AnUpstreamAtItsInstanceCapIs503WithRetryAfter) {
  std::string policy = kUpstreamPolicy;
  const std::string url = "    url: http://127.0.0.1:9/mcp\n";
  policy.replace(policy.find(url), url.size(), url + "    instances: per_session\n    max_instances: 1\n");
  StartServer({}, policy);
  std::string first = Initialize();
  ASSERT_FALSE(first.empty());
  HttpReply refused = Send(Post(InitializeRequest("2025-11-25").dump(), "", "bob-key"));
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_EQ(refused.Header("retry-after"), "5");
  EXPECT_TRUE(refused.Header("mcp-session-id").empty()) << "no session was opened";
  json body = refused.Json();
  EXPECT_EQ(body["error"]["code"], kUpstreamBusy) << refused.body;
  EXPECT_NE(body["error"]["message"].get<std::string>().find("upstreams.notes.max_instances = 1"),
            std::string::npos)
      << refused.body;
  EXPECT_EQ(server_->session_count(), 1u);
  // The first session still works; once it is gone there is room again.
  EXPECT_EQ(Call(Rpc(3, "ping"), first).status, 200);
  Req del{.method = "DELETE",
          .headers = {{"Authorization", "Bearer alice-key"}, {"Mcp-Session-Id", first}}};
  EXPECT_EQ(Send(del).status, 204);
  EXPECT_FALSE(Initialize("2025-11-25", "bob-key").empty());
}

TEST_F(HttpServerTest, DeleteEndsTheSessionThenItIs404) {
  StartServer();
  std::string sid = Initialize();
  std::shared_ptr<McpSession> session = host_->Created(sid);
  ASSERT_NE(session, nullptr);
  Req del{.method = "DELETE",
          .headers = {{"Authorization", "Bearer alice-key"}, {"Mcp-Session-Id", sid}}};
  HttpReply deleted = Send(del);
  EXPECT_EQ(deleted.status, 204);
  EXPECT_TRUE(session->closed()) << "DELETE answers once the session is closed";
  EXPECT_EQ(server_->session_count(), 0u);
  EXPECT_EQ(Call(Rpc(2, "ping"), sid).status, 404);
  EXPECT_EQ(Send(del).status, 404);
  Req no_id{.method = "DELETE", .headers = {{"Authorization", "Bearer alice-key"}}};
  EXPECT_EQ(Send(no_id).status, 400);
}

TEST_F(HttpServerTest, FailedInitializeLeavesNoSession) {
  StartServer();
  HttpReply bad = Call(Rpc(1, "initialize", {{"capabilities", json::object()}}), "");
  EXPECT_EQ(bad.status, 200);  // a JSON-RPC error is an answer, not an HTTP failure
  EXPECT_EQ(bad.Json()["error"]["code"], mcp::kInvalidParams);
  EXPECT_EQ(bad.Header("mcp-session-id"), "");
  for (int i = 0; i < 50 && server_->session_count() != 0; ++i) std::this_thread::sleep_for(20ms);
  EXPECT_EQ(server_->session_count(), 0u);
}

TEST_F(HttpServerTest, IdleSessionIsClosedBySweeper) {
  HttpServerOptions options;
  options.session_idle_timeout = 1s;
  StartServer(options);
  std::string sid = Initialize();
  std::shared_ptr<McpSession> session = host_->Created(sid);
  ASSERT_NE(session, nullptr);
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (server_->session_count() != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(server_->session_count(), 0u);
  for (int i = 0; i < 100 && !session->closed(); ++i) std::this_thread::sleep_for(20ms);
  EXPECT_TRUE(session->closed());
  EXPECT_EQ(Call(Rpc(2, "ping"), sid).status, 404);
}

TEST_F(HttpServerTest, ActiveSessionIsNotSwept) {
  HttpServerOptions options;
  options.session_idle_timeout = 1s;
  StartServer(options);
  std::string sid = Initialize();
  for (int i = 0; i < 6; ++i) {  // 1.8 s of pings, each well inside the timeout
    std::this_thread::sleep_for(300ms);
    ASSERT_EQ(Call(Rpc(10 + i, "ping"), sid).status, 200);
  }
  EXPECT_EQ(server_->session_count(), 1u);
}

// ---- Header checks ----

TEST_F(HttpServerTest, WrongContentTypeIs415) {
  StartServer();
  Req req = Post(InitializeRequest("2025-06-18").dump());
  req.headers[0].second = "text/plain";
  HttpReply refused = Send(req);
  EXPECT_EQ(refused.status, 415);
  EXPECT_NE(refused.Json()["error"]["message"].get<std::string>().find("text/plain"),
            std::string::npos);
}

TEST_F(HttpServerTest, AcceptMissingEitherTypeIs406) {
  StartServer();
  for (const std::string accept : {"application/json", "text/event-stream", "*/*", ""}) {
    Req req = Post(InitializeRequest("2025-06-18").dump());
    req.headers[1].second = accept;
    EXPECT_EQ(Send(req).status, 406) << "Accept: " << accept;
  }
  Req get{.method = "GET",
          .headers = {{"Accept", "application/json"}, {"Authorization", "Bearer alice-key"}}};
  EXPECT_EQ(Send(get).status, 406);
}

TEST_F(HttpServerTest, AttackDnsRebindingOriginIsRefusedWith403) {
  HttpServerOptions options;
  options.allowed_origins = {"https://app.example"};
  StartServer(options);
  for (const std::string origin :
       {"http://evil.example", "http://localhost.evil.example",
        "http://127.0.0.1.evil.example:8787", "null", "http://localhost:80@evil.example"}) {
    Req req = Post(InitializeRequest("2025-06-18").dump());
    req.headers.emplace_back("Origin", origin);
    HttpReply refused = Send(req);
    EXPECT_EQ(refused.status, 403) << origin;
    EXPECT_NE(refused.body.find("not allowed"), std::string::npos);
  }
  EXPECT_EQ(server_->session_count(), 0u);
  for (const std::string origin :
       {"http://localhost:5173", "http://127.0.0.1", "https://app.example"}) {
    Req req = Post(InitializeRequest("2025-06-18").dump());
    req.headers.emplace_back("Origin", origin);
    EXPECT_EQ(Send(req).status, 200) << origin;
  }
}

// Issue 10 item 12: a page on evil.example whose name is rebound to 127.0.0.1 talks to warden
// as "evil.example:PORT". Its Host header says so, whether or not an Origin is sent.
TEST_F(HttpServerTest, AttackDnsRebindingHostHeaderIsRefusedWith403) {
  HttpServerOptions options;
  options.allowed_hosts = {"warden.internal", "proxy.example:443"};
  StartServer(options);
  const std::string p = std::to_string(port());
  for (const std::string& host : std::vector<std::string>{
           "evil.example:8787", "evil.example:" + p, "evil.example", "localhost.evil.example:" + p,
        "127.0.0.1.nip.io:" + p, "localhost:" + std::to_string(port() == 1 ? 2 : port() - 1),
        "localhost:" + p + "@evil.example", "evil.example@localhost", "localhost.", "[::1",
        "::1", "localhost:", "localhost:x", "proxy.example", "proxy.example:444", "warden.internal.",
        "local host"}) {
    Req req = Post(InitializeRequest("2025-06-18").dump());
    req.headers.emplace_back("Host", host);
    HttpReply refused = Send(req);
    EXPECT_EQ(refused.status, 403) << host;
    EXPECT_NE(refused.body.find("is not allowed"), std::string::npos) << refused.body;
  }
  EXPECT_EQ(server_->session_count(), 0u);
  // The admin API and the health check too: nothing answers a rebound name.
  Req api;
  api.method = "GET";
  api.path = "/api/kill";
  api.headers = {{"Host", "evil.example:" + p}, {"Authorization", "Bearer alice-key"}};
  EXPECT_EQ(Send(api).status, 403);
  Req health;
  health.method = "GET";
  health.path = "/healthz";
  health.headers = {{"Host", "evil.example:" + p}};
  EXPECT_EQ(Send(health).status, 403);
  health.headers = {{"Host", "localhost:" + p}};
  EXPECT_EQ(Send(health).status, 200);
  Req two = Post(InitializeRequest("2025-06-18").dump());
  two.headers.emplace_back("Host", "evil.example");
  two.headers.insert(two.headers.begin(), {"Host", "127.0.0.1"});
  EXPECT_EQ(Send(two).status, 400) << "two Host headers";
  for (const std::string& host : std::vector<std::string>{
           "127.0.0.1", "127.0.0.1:" + p, "localhost", "localhost:" + p, "LocalHost:" + p, "[::1]",
        "[::1]:" + p, "warden.internal", "warden.internal:8443", "proxy.example:443"}) {
    Req req = Post(InitializeRequest("2025-06-18").dump());
    req.headers.emplace_back("Host", host);
    EXPECT_EQ(Send(req).status, 200) << host;
  }
  Req none = Post(InitializeRequest("2025-06-18").dump());
  none.host_header = false;  // an HTTP/1.0-style client: no Host, not a browser
  EXPECT_EQ(Send(none).status, 200);
}

TEST_F(HttpServerTest, CorsPreflightForAllowedOriginsOnly) {
  HttpServerOptions options;
  options.allowed_origins = {"https://app.example"};
  StartServer(options);
  auto preflight = [&](const std::string& path, const std::string& origin) {
    Req req{.method = "OPTIONS", .path = path};
    if (!origin.empty()) req.headers.emplace_back("Origin", origin);
    req.headers.emplace_back("Access-Control-Request-Method", "POST");
    req.headers.emplace_back("Access-Control-Request-Headers",
                             "content-type, authorization, mcp-session-id");
    return Send(req);
  };
  for (const std::string path : {"/mcp", "/api/kill"}) {
    // An allowed origin: 204, that origin (never *), the methods and headers MCP needs. No
    // credentials are asked for: a browser sends none on a preflight.
    HttpReply ok = preflight(path, "https://app.example");
    EXPECT_EQ(ok.status, 204) << path << ok.body;
    EXPECT_EQ(ok.Header("access-control-allow-origin"), "https://app.example");
    EXPECT_EQ(ok.Header("access-control-allow-methods"), "GET, POST, DELETE, OPTIONS");
    std::string allowed = ok.Header("access-control-allow-headers");
    for (const char* h : {"Content-Type", "Authorization", "Mcp-Session-Id",
                          "MCP-Protocol-Version", "Last-Event-ID", "Accept"}) {
      EXPECT_NE(allowed.find(h), std::string::npos) << h;
    }
    EXPECT_EQ(ok.Header("vary"), "Origin");
    EXPECT_FALSE(ok.Header("access-control-max-age").empty());
    EXPECT_TRUE(ok.body.empty());
    // A loopback page is allowed too (the server is on 127.0.0.1).
    EXPECT_EQ(preflight(path, "http://localhost:5173").status, 204);

    // Another origin: 403, and nothing a browser would take as permission.
    HttpReply evil = preflight(path, "https://evil.example");
    EXPECT_EQ(evil.status, 403) << path;
    EXPECT_EQ(evil.Header("access-control-allow-origin"), "");
    EXPECT_EQ(preflight(path, "null").status, 403);

    // No Origin: not a preflight, just OPTIONS: 204 with Allow and no CORS grant.
    HttpReply plain = preflight(path, "");
    EXPECT_EQ(plain.status, 204) << path;
    EXPECT_EQ(plain.Header("allow"), "GET, POST, DELETE, OPTIONS");
    EXPECT_EQ(plain.Header("access-control-allow-origin"), "");
  }
  EXPECT_EQ(server_->session_count(), 0u);
}

TEST_F(HttpServerTest, CorsHeadersOnRealResponsesToAllowedOrigins) {
  HttpServerOptions options;
  options.allowed_origins = {"https://app.example"};
  StartServer(options);
  Req init = Post(InitializeRequest("2025-06-18").dump());
  init.headers.emplace_back("Origin", "https://app.example");
  HttpReply ok = Send(init);
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(ok.Header("access-control-allow-origin"), "https://app.example");
  EXPECT_EQ(ok.Header("access-control-expose-headers"), "Mcp-Session-Id");
  EXPECT_EQ(ok.Header("vary"), "Origin");
  // Errors an allowed page should be able to read carry the grant too (401 here).
  Req anonymous = Post(InitializeRequest("2025-06-18").dump(), "", "");
  anonymous.headers.emplace_back("Origin", "https://app.example");
  HttpReply refused = Send(anonymous);
  EXPECT_EQ(refused.status, 401);
  EXPECT_EQ(refused.Header("access-control-allow-origin"), "https://app.example");
  // Without Origin (a non-browser client): no grant, but Vary for caches.
  HttpReply plain = Send(Post(InitializeRequest("2025-06-18").dump()));
  EXPECT_EQ(plain.status, 200);
  EXPECT_EQ(plain.Header("access-control-allow-origin"), "");
  EXPECT_EQ(plain.Header("vary"), "Origin");
}

TEST_F(HttpServerTest, OversizeBodyIs413WithoutBeingRead) {
  HttpServerOptions options;
  options.max_body_bytes = 1024;
  StartServer(options);
  // Announced too big: refused on the head alone (no body is ever sent).
  Req big = Post("");
  big.content_length = false;
  big.headers.emplace_back("Content-Length", "100000000");
  auto start = std::chrono::steady_clock::now();
  HttpReply refused = Send(big);
  EXPECT_EQ(refused.status, 413);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_NE(refused.Json()["error"]["message"].get<std::string>().find("1024"), std::string::npos);

  // Chunked, so the size shows only while reading: refused once it passes the limit.
  Req chunked = Post("");
  chunked.content_length = false;
  chunked.headers.emplace_back("Transfer-Encoding", "chunked");
  std::string piece(900, 'x');
  char size[16];
  std::snprintf(size, sizeof size, "%zx", piece.size());
  chunked.body =
      std::string(size) + "\r\n" + piece + "\r\n" + size + "\r\n" + piece + "\r\n0\r\n\r\n";
  EXPECT_EQ(Send(chunked).status, 413);
}

TEST_F(HttpServerTest, UnsupportedProtocolVersionHeaderIs400) {
  StartServer();
  std::string sid = Initialize();
  Req bad = Post(Rpc(2, "ping").dump(), sid);
  bad.headers.emplace_back("MCP-Protocol-Version", "2024-01-01");
  HttpReply refused = Send(bad);
  EXPECT_EQ(refused.status, 400);
  EXPECT_NE(refused.body.find("2024-01-01"), std::string::npos);
  Req good = Post(Rpc(3, "ping").dump(), sid);
  good.headers.emplace_back("MCP-Protocol-Version", "2025-06-18");
  EXPECT_EQ(Send(good).status, 200);
  EXPECT_EQ(Call(Rpc(4, "ping"), sid).status, 200)
      << "no header: accepted (spec: assume 2025-03-26)";
}

// MCP 2026-07-28 beside the 2025 sessions on the same endpoint: a request that names the new
// version in its _meta is served without a session, and every answer says so in its own terms.
TEST_F(HttpServerTest, A2026RequestIsServedWithoutASessionBesideA2025Session) {
  StartServer();
  std::string sid = Initialize("2025-11-25");
  const json meta = {{"io.modelcontextprotocol/protocolVersion", "2026-07-28"},
                     {"io.modelcontextprotocol/clientCapabilities", json::object()}};
  auto modern = [&](int id, const std::string& method, json params,
                    std::vector<std::pair<std::string, std::string>> extra = {}) {
    params["_meta"] = meta;
    Req req = Post(Rpc(id, method, params).dump());
    req.headers.emplace_back("MCP-Protocol-Version", "2026-07-28");
    req.headers.emplace_back("Mcp-Method", method);
    for (auto& h : extra) req.headers.push_back(h);
    return Send(req);
  };
  HttpReply discover = modern(1, "server/discover", json::object());
  ASSERT_EQ(discover.status, 200) << discover.body;
  EXPECT_TRUE(discover.Header("mcp-session-id").empty()) << "no session is opened";
  json d = discover.Json()["result"];
  EXPECT_EQ(d["resultType"], "complete");
  EXPECT_EQ(d["supportedVersions"][0], "2026-07-28");
  EXPECT_EQ(d["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "warden");
  EXPECT_TRUE(d["capabilities"].contains("tools"));

  HttpReply list = modern(2, "tools/list", json::object());
  ASSERT_EQ(list.status, 200) << list.body;
  EXPECT_EQ(list.Json()["result"]["cacheScope"], "private") << "filtered by policy per caller";
  EXPECT_GT(list.Json()["result"]["ttlMs"].get<int64_t>(), 0);
  EXPECT_EQ(list.Json()["result"]["resultType"], "complete");

  HttpReply call = modern(3, "tools/call",
                          {{"name", "sandbox__exec"}, {"arguments", {{"command", "echo modern"}}}},
                          {{"Mcp-Name", "=?base64?c2FuZGJveF9fZXhlYw==?="}});
  ASSERT_EQ(call.status, 200) << call.body;
  EXPECT_EQ(call.Json()["result"]["structuredContent"]["stdout"], "modern\n") << call.body;
  EXPECT_EQ(call.Json()["result"]["resultType"], "complete");

  // The header a proxy routed on says another tool than the body: refused before anything runs.
  HttpReply mismatch = modern(4, "tools/call",
                              {{"name", "sandbox__exec"}, {"arguments", {{"command", "echo no"}}}},
                              {{"Mcp-Name", "notes__echo"}});
  EXPECT_EQ(mismatch.status, 400);
  EXPECT_EQ(mismatch.Json()["error"]["code"], -32020) << mismatch.body;
  EXPECT_EQ(mismatch.Json()["id"], 4);
  HttpReply no_method_header = Send([&] {
    Req req = Post(Rpc(5, "tools/list", {{"_meta", meta}}).dump());
    req.headers.emplace_back("MCP-Protocol-Version", "2026-07-28");
    return req;
  }());
  EXPECT_EQ(no_method_header.status, 400);
  EXPECT_EQ(no_method_header.Json()["error"]["code"], -32020);
  // Removed methods: 404 with -32601 on the new wire, still answered in the 2025 session.
  HttpReply ping = modern(6, "ping", json::object());
  EXPECT_EQ(ping.status, 404);
  EXPECT_EQ(ping.Json()["error"]["code"], -32601);
  EXPECT_EQ(Call(Rpc(7, "ping"), sid).status, 200);
  // A version nobody speaks: -32022 naming both eras' versions.
  Req future = Post(Rpc(8, "tools/list",
                        {{"_meta", {{"io.modelcontextprotocol/protocolVersion", "2099-01-01"}}}})
                        .dump());
  future.headers.emplace_back("MCP-Protocol-Version", "2099-01-01");
  future.headers.emplace_back("Mcp-Method", "tools/list");
  HttpReply unsupported = Send(future);
  EXPECT_EQ(unsupported.status, 400);
  json e = unsupported.Json()["error"];
  EXPECT_EQ(e["code"], -32022) << unsupported.body;
  EXPECT_EQ(e["data"]["requested"], "2099-01-01");
  EXPECT_EQ(e["data"]["supported"][0], "2026-07-28");
  EXPECT_EQ(e["data"]["supported"][1], "2025-11-25");
  // An envelope without the client's capabilities is no 2026 request: 400, -32602.
  Req bare = Post(Rpc(10, "tools/list",
                      {{"_meta", {{"io.modelcontextprotocol/protocolVersion", "2026-07-28"}}}})
                      .dump());
  bare.headers.emplace_back("MCP-Protocol-Version", "2026-07-28");
  bare.headers.emplace_back("Mcp-Method", "tools/list");
  HttpReply no_caps = Send(bare);
  EXPECT_EQ(no_caps.status, 400);
  EXPECT_EQ(no_caps.Json()["error"]["code"], -32602) << no_caps.body;
  // Unauthenticated 2026 requests are refused like any other.
  Req anonymous = Post(Rpc(9, "tools/list", {{"_meta", meta}}).dump(), "", "");
  anonymous.headers.emplace_back("Mcp-Method", "tools/list");
  EXPECT_EQ(Send(anonymous).status, 401);
  EXPECT_EQ(server_->session_count(), 1u) << "2026 requests open no session";
}

// MCP 2026-07-28: log messages reach a request's stream only at the level its _meta asks for,
// and none when it asks for none.
TEST_F(HttpServerTest, A2026RequestHearsLogMessagesOnlyAtTheLevelItAskedFor) {
  StartServer({}, kUpstreamPolicy);
  auto call = [&](int id, json meta) {
    meta["io.modelcontextprotocol/protocolVersion"] = "2026-07-28";
    meta["io.modelcontextprotocol/clientCapabilities"] = json::object();
    Req req = Post(Rpc(id, "tools/call",
                       {{"name", "notes__echo"}, {"arguments", {{"text", "log"}}}, {"_meta", meta}})
                       .dump());
    req.headers.emplace_back("MCP-Protocol-Version", "2026-07-28");
    req.headers.emplace_back("Mcp-Method", "tools/call");
    req.headers.emplace_back("Mcp-Name", "notes__echo");
    return Send(req);
  };
  HttpReply quiet = call(1, json::object());
  ASSERT_EQ(quiet.status, 200) << quiet.body;
  EXPECT_EQ(quiet.body.find("notifications/message"), std::string::npos) << quiet.body;
  HttpReply loud = call(2, {{"io.modelcontextprotocol/logLevel", "warning"}});
  ASSERT_EQ(loud.status, 200) << loud.body;
  std::vector<json> messages = SseMessages(loud.body);
  ASSERT_EQ(messages.size(), 2u) << loud.body;
  EXPECT_EQ(messages[0]["method"], "notifications/message");
  EXPECT_EQ(messages[0]["params"]["data"], "high alarm");
  EXPECT_EQ(messages[1]["result"]["content"][0]["text"], "log");
}

// Issue 10 item 13: "MCP-Protocol-Version:" with nothing after it is not a version.
TEST_F(HttpServerTest, EmptyProtocolVersionHeaderIs400) {
  StartServer();
  std::string sid = Initialize();
  for (const std::string value : {"", " "}) {
    Req bad = Post(Rpc(2, "ping").dump(), sid);
    bad.headers.emplace_back("MCP-Protocol-Version", value);
    HttpReply refused = Send(bad);
    EXPECT_EQ(refused.status, 400) << "'" << value << "'";
    EXPECT_NE(refused.body.find("empty MCP-Protocol-Version"), std::string::npos) << refused.body;
    Req get;
    get.method = "GET";
    get.headers = {{"Accept", "text/event-stream"}, {"Authorization", "Bearer alice-key"},
                   {"Mcp-Session-Id", sid}, {"MCP-Protocol-Version", value}};
    EXPECT_EQ(Send(get).status, 400);
  }
  EXPECT_EQ(Call(Rpc(4, "ping"), sid).status, 200) << "no header at all is still accepted";
}

// ---- Bodies ----
// ---- Bodies ----

TEST_F(HttpServerTest, MalformedJsonIs400WithParseError) {
  StartServer();
  std::string sid = Initialize();
  HttpReply bad = Send(Post(R"({"jsonrpc":"2.0","id":)", sid));
  EXPECT_EQ(bad.status, 400);
  json error = bad.Json();
  EXPECT_EQ(error["error"]["code"], mcp::kParseError) << bad.body;
  EXPECT_TRUE(error["id"].is_null());
  // Without a session too: the parse error is what is wrong.
  EXPECT_EQ(Send(Post("not json")).Json()["error"]["code"], mcp::kParseError);
}

TEST_F(HttpServerTest, BatchRefusedOn2025_06_18) {
  StartServer();
  std::string sid = Initialize("2025-06-18");
  json batch = json::array({Rpc(2, "ping"), Rpc(3, "ping")});
  HttpReply refused = Call(batch, sid);
  EXPECT_EQ(refused.status, 400);
  EXPECT_EQ(refused.Json()["error"]["code"], mcp::kInvalidRequest);
}

TEST_F(HttpServerTest, BatchAcceptedOn2025_03_26) {
  StartServer();
  std::string sid = Initialize("2025-03-26");
  json batch = json::array({Rpc(2, "ping"),
                            {{"jsonrpc", "2.0"}, {"method", "notifications/whatever"}},
                            Rpc(3, "tools/list"),
                            json("not a message")});
  HttpReply answered = Call(batch, sid);
  ASSERT_EQ(answered.status, 200) << answered.body;
  json replies = answered.Json();
  ASSERT_TRUE(replies.is_array()) << answered.body;
  ASSERT_EQ(replies.size(), 3u) << "two requests and one malformed entry";
  EXPECT_EQ(replies[0]["id"], 2);
  EXPECT_EQ(replies[1]["id"], 3);
  EXPECT_TRUE(replies[1]["result"].contains("tools"));
  EXPECT_EQ(replies[2]["error"]["code"], mcp::kInvalidRequest);

  // Notifications only: 202. initialize inside a batch: refused.
  json notes = json::array({{{"jsonrpc", "2.0"}, {"method", "notifications/a"}},
                            {{"jsonrpc", "2.0"}, {"method", "notifications/b"}}});
  EXPECT_EQ(Call(notes, sid).status, 202);
  HttpReply with_init = Call(json::array({InitializeRequest("2025-03-26"), Rpc(4, "ping")}), sid);
  EXPECT_EQ(with_init.status, 400);
  EXPECT_NE(with_init.body.find("initialize"), std::string::npos);
}

// ---- Streams ----

// MCP 2026-07-28: a listen stream acknowledges first, naming what it honours, then carries the
// updates of the resources it subscribed, tagged with its id, and nothing else; closing it
// unsubscribes upstream.
TEST_F(HttpServerTest, AListenStreamCarriesTheUpdatesOfItsResourcesOnly) {
  // Subscribing is decided like any request to an upstream: this policy allows the notes server's.
  std::string policy = kUpstreamPolicy;
  policy.insert(policy.find("defaults:"),
                "  - match: { server: \"notes\" }\n    risk: low\n    effect: allow\n");
  StartServer({}, policy);
  const json meta = {{"io.modelcontextprotocol/protocolVersion", "2026-07-28"},
                     {"io.modelcontextprotocol/clientCapabilities", json::object()}};
  auto post = [&](int id, const std::string& method, json params) {
    params["_meta"] = meta;
    Req req = Post(Rpc(id, method, params).dump());
    req.headers.emplace_back("MCP-Protocol-Version", "2026-07-28");
    req.headers.emplace_back("Mcp-Method", method);
    return req;
  };
  ASSERT_EQ(Send(post(1, "tools/list", json::object())).status, 200);  // the upstream is up
  // As a client does: the resources are listed before they are subscribed (warden routes a URI
  // to the upstream whose listing named it).
  ASSERT_EQ(Send(post(2, "resources/list", json::object())).status, 200);
  FakeUpstream* fake = LatestFake();
  ASSERT_NE(fake, nullptr);
  auto stream = std::make_unique<Connection>(port());
  stream->Write(post(77, "subscriptions/listen",
                     {{"notifications",
                       {{"toolsListChanged", true},
                        {"resourceSubscriptions", {"notes://a", "notes://b"}}}}})
                    .Build());
  std::string got = stream->ReadUntil("acknowledged");
  EXPECT_NE(got.find("200 OK"), std::string::npos) << got;
  EXPECT_NE(got.find("text/event-stream"), std::string::npos) << got;
  while (got.find("\n\n", got.find("acknowledged")) == std::string::npos) {
    std::string more = stream->ReadUntil("\n", 2s);
    if (more.empty()) break;
    got += more;
  }
  std::vector<json> acks = SseMessages(got);
  ASSERT_EQ(acks.size(), 1u) << got;
  EXPECT_EQ(acks[0]["method"], "notifications/subscriptions/acknowledged");
  EXPECT_EQ(acks[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 77);
  EXPECT_EQ(acks[0]["params"]["notifications"]["toolsListChanged"], true);
  EXPECT_EQ(acks[0]["params"]["notifications"]["resourceSubscriptions"],
            json::array({"notes://a", "notes://b"}));
  std::vector<std::string> subscribed = fake->subscribed();
  std::sort(subscribed.begin(), subscribed.end());
  EXPECT_EQ(subscribed, (std::vector<std::string>{"notes://a", "notes://b"}));

  fake->Emit(mcp::Notification{"notifications/resources/updated", json{{"uri", "notes://other"}}});
  fake->Emit(mcp::Notification{"notifications/resources/updated", json{{"uri", "notes://b"}}});
  std::string events = stream->ReadUntil("notes://b");
  std::vector<json> updates = SseMessages(events);
  ASSERT_EQ(updates.size(), 1u) << events;
  EXPECT_EQ(updates[0]["method"], "notifications/resources/updated");
  EXPECT_EQ(updates[0]["params"]["uri"], "notes://b");
  EXPECT_EQ(updates[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 77);

  // A listen with a filter that is not an object: -32602, no stream.
  HttpReply bad = Send(post(78, "subscriptions/listen", {{"notifications", "all"}}));
  EXPECT_EQ(bad.Json()["error"]["code"], -32602) << bad.body;

  // Closing the stream ends the subscription: both resources are unsubscribed upstream.
  stream.reset();
  for (int i = 0; i < 200 && fake->unsubscribed().size() < 2; ++i) std::this_thread::sleep_for(10ms);
  std::vector<std::string> gone = fake->unsubscribed();
  std::sort(gone.begin(), gone.end());
  EXPECT_EQ(gone, (std::vector<std::string>{"notes://a", "notes://b"}));
}

TEST_F(HttpServerTest, GetStreamReceivesNotificationsTheSessionSends) {
  StartServer({}, kUpstreamPolicy);
  std::string sid = Initialize();
  FakeUpstream* fake = LatestFake();
  ASSERT_NE(fake, nullptr);

  Connection stream(port());
  stream.Write(Req{.method = "GET",
                   .headers = {{"Accept", "text/event-stream"},
                               {"Authorization", "Bearer alice-key"},
                               {"Mcp-Session-Id", sid}}}
                   .Build());
  std::string head = stream.ReadUntil("\r\n\r\n");
  EXPECT_NE(head.find("200 OK"), std::string::npos) << head;
  EXPECT_NE(head.find("text/event-stream"), std::string::npos) << head;

  // Only one GET stream per session.
  Req second{.method = "GET",
             .headers = {{"Accept", "text/event-stream"},
                         {"Authorization", "Bearer alice-key"},
                         {"Mcp-Session-Id", sid}}};
  EXPECT_EQ(Send(second).status, 409);

  fake->Emit(mcp::Notification{"notifications/message",
                               json{{"level", "info"}, {"data", "hello from upstream"}}});
  std::string events = stream.ReadUntil("hello from upstream");
  std::vector<json> messages = SseMessages(events);
  ASSERT_EQ(messages.size(), 1u) << events;
  EXPECT_EQ(messages[0]["method"], "notifications/message");
  EXPECT_EQ(messages[0]["params"]["logger"], "notes");
  EXPECT_NE(events.find("id: "), std::string::npos) << "every event carries an id";

  // The client goes away: the stream is detached and a new GET may open one.
  stream.Close();
  HttpReply again{};
  for (int i = 0; i < 50; ++i) {
    Connection c(port());
    c.Write(second.Build());
    std::string reply = c.ReadUntil("\r\n\r\n", 2s);
    if (reply.find("200 OK") != std::string::npos) {
      again.status = 200;
      break;
    }
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(again.status, 200);
}

TEST_F(HttpServerTest, GetStreamSendsKeepAliveComments) {
  HttpServerOptions options;
  options.sse_keepalive = 200ms;
  StartServer(options);
  std::string sid = Initialize();
  Connection stream(port());
  stream.Write(Req{.method = "GET",
                   .headers = {{"Accept", "text/event-stream"},
                               {"Authorization", "Bearer alice-key"},
                               {"Mcp-Session-Id", sid}}}
                   .Build());
  std::string got = stream.ReadUntil(": keep-alive", 3s);
  EXPECT_NE(got.find(": keep-alive"), std::string::npos) << got;
}

TEST_F(HttpServerTest, DeleteEndsTheOpenGetStream) {
  StartServer();
  std::string sid = Initialize();
  Connection stream(port());
  stream.Write(Req{.method = "GET",
                   .headers = {{"Accept", "text/event-stream"},
                               {"Authorization", "Bearer alice-key"},
                               {"Mcp-Session-Id", sid}}}
                   .Build());
  ASSERT_NE(stream.ReadUntil("\r\n\r\n").find("200 OK"), std::string::npos);
  Req del{.method = "DELETE",
          .headers = {{"Authorization", "Bearer alice-key"}, {"Mcp-Session-Id", sid}}};
  EXPECT_EQ(Send(del).status, 204);
  std::string tail = stream.ReadUntil("0\r\n\r\n", 5s);
  EXPECT_NE(tail.find("0\r\n\r\n"), std::string::npos) << "the chunked stream ends";
}

TEST_F(HttpServerTest, RelatedMessageBeforeTheReplySwitchesThePostToSse) {
  StartServer({}, kUpstreamPolicy);
  std::string sid = Initialize();
  json call = Rpc(5, "tools/call",
                  {{"name", "notes__echo"},
                   {"arguments", {{"text", "echoed"}}},
                   {"_meta", {{"progressToken", "tok-1"}}}});
  HttpReply streamed = Call(call, sid);
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  EXPECT_EQ(streamed.Header("content-type"), "text/event-stream");
  std::vector<json> messages = SseMessages(streamed.body);
  ASSERT_EQ(messages.size(), 2u) << streamed.body;
  EXPECT_EQ(messages[0]["method"], "notifications/progress");
  EXPECT_EQ(messages[0]["params"]["progressToken"], "tok-1") << "the client's own token";
  EXPECT_EQ(messages[1]["id"], 5);
  EXPECT_EQ(messages[1]["result"]["content"][0]["text"], "echoed");

  // The same call without a progress token: plain JSON.
  call["params"].erase("_meta");
  call["id"] = 6;
  HttpReply plain = Call(call, sid);
  EXPECT_EQ(plain.Header("content-type"), "application/json");
  EXPECT_EQ(plain.Json()["result"]["content"][0]["text"], "echoed");
}

// ---- Failure and abuse ----

TEST_F(HttpServerTest, ClientDisconnectingMidCallDoesNotStopTheCall) {
  StartServer();
  std::string sid = Initialize();
  {
    Connection c(port());
    c.Write(
        Post(Rpc(7, "tools/call",
                 {{"name", "sandbox__exec"}, {"arguments", {{"command", "sleep 1; echo late"}}}})
                 .dump(),
             sid)
            .Build());
    std::this_thread::sleep_for(200ms);
    c.Close();  // gone before the reply
  }
  // The call still runs to the end inside the session and is audited; its reply is dropped.
  bool audited = false;
  for (int i = 0; i < 100 && !audited; ++i) {
    std::this_thread::sleep_for(100ms);
    auto tail = log_->Tail(20);
    ASSERT_TRUE(tail.ok()) << tail.status().message();
    for (const auto& entry : *tail) {
      audited |= entry.tool == "sandbox__exec" && entry.session == sid;
    }
  }
  EXPECT_TRUE(audited);
  EXPECT_EQ(Call(Rpc(8, "ping"), sid).status, 200);
}

TEST_F(HttpServerTest, HealthzUnknownPathsAndMethods) {
  StartServer();
  HttpReply health = Send(Req{.method = "GET", .path = "/healthz"});
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.Json()["status"], "ok");
  EXPECT_EQ(Send(Req{.method = "GET", .path = "/other"}).status, 404);
  HttpReply put = Send(Req{.method = "PUT", .headers = {{"Authorization", "Bearer alice-key"}}});
  EXPECT_EQ(put.status, 405);
  EXPECT_EQ(put.Header("allow"), "GET, POST, DELETE, OPTIONS");
  // A host without an admin API answers /api/ with 404, after authentication.
  EXPECT_EQ(Send(Req{.method = "GET", .path = "/api/kill"}).status, 401);
  HttpReply api = Send(
      Req{.method = "GET", .path = "/api/kill", .headers = {{"Authorization", "Bearer alice-key"}}});
  EXPECT_EQ(api.status, 404);
  EXPECT_TRUE(api.Json().contains("error")) << api.body;
}

TEST_F(HttpServerTest, MalformedHttpIs400AndTheConnectionCloses) {
  StartServer();
  Connection c(port());
  c.Write("THIS IS NOT HTTP\r\n\r\n");
  HttpReply reply = c.Read();
  EXPECT_EQ(reply.status, 400);
  EXPECT_NE(reply.body.find("malformed"), std::string::npos);
  EXPECT_EQ(Send(Req{.method = "GET", .path = "/healthz"}).status, 200);
}

TEST_F(HttpServerTest, FuzzMangledRequestsDoNotCrashTheServer) {
  StartServer();
  std::string sid = Initialize();
  const std::vector<std::string> seeds = {
      Post(Rpc(2, "ping").dump(), sid).Build(),
      Post(InitializeRequest("2025-03-26").dump()).Build(),
      Post(json::array({Rpc(3, "ping"), Rpc(4, "tools/list")}).dump(), sid).Build(),
      Req{.method = "GET",
          .headers = {{"Accept", "text/event-stream"},
                      {"Authorization", "Bearer alice-key"},
                      {"Mcp-Session-Id", sid}}}
          .Build(),
      Req{.method = "DELETE",
          .headers = {{"Authorization", "Bearer bob-key"}, {"Mcp-Session-Id", sid}}}
          .Build(),
  };
  std::mt19937 rng(1234);
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  for (int round = 0; round < 200; ++round) {
    std::string bytes = seeds[pick(seeds.size())];
    int edits = 1 + static_cast<int>(pick(6));
    for (int e = 0; e < edits && !bytes.empty(); ++e) {
      std::size_t at = pick(bytes.size());
      switch (pick(6)) {
        case 0:
          bytes[at] = static_cast<char>(rng());
          break;  // flip a byte
        case 1:
          bytes.erase(at, pick(16) + 1);
          break;  // drop some
        case 2:
          bytes.insert(at, std::string(pick(8) + 1, static_cast<char>(rng())));
          break;
        case 3:
          bytes.resize(at);
          break;  // truncate
        case 4:
          bytes.insert(at, "\r\n");
          break;  // break a line
        case 5:
          bytes.insert(at, bytes.substr(0, pick(bytes.size()) + 1));
          break;  // repeat
      }
    }
    Connection c(port());
    c.Write(bytes);
    c.ReadUntil("\r\n\r\n", 100ms);  // whatever comes back, if anything
    c.Close();
  }
  HttpReply health = Send(Req{.method = "GET", .path = "/healthz"});
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(Call(Rpc(99, "ping"), sid).status, 200) << "the session survived the noise";
}

TEST_F(HttpServerTest, StopClosesEverySession) {
  StartServer();
  std::string sid = Initialize();
  std::shared_ptr<McpSession> session = host_->Created(sid);
  ASSERT_NE(session, nullptr);
  Connection idle(port());  // an open keep-alive connection must not hold Stop up
  server_->Stop();
  EXPECT_TRUE(session->closed());
  EXPECT_EQ(server_->session_count(), 0u);
}

// ---- Resumable streams (2025-11-25, SEP-1699) ----

// The event ids and data of an SSE body, in order (the priming event has empty data).
std::vector<std::pair<std::string, std::string>> SseEvents(const std::string& body) {
  std::vector<std::pair<std::string, std::string>> out;
  std::string id;
  std::size_t pos = 0;
  while (pos < body.size()) {
    std::size_t end = body.find('\n', pos);
    if (end == std::string::npos) break;
    std::string line = body.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.starts_with("id: ")) id = line.substr(4);
    if (line.starts_with("data: ")) out.emplace_back(id, line.substr(6));
    if (line.starts_with("data:") && line.size() == 5) out.emplace_back(id, "");
    pos = end + 1;
  }
  return out;
}

Req ResumeGet(const std::string& sid, const std::string& last_event_id) {
  Req get{.method = "GET",
          .headers = {{"Accept", "text/event-stream"},
                      {"Authorization", "Bearer alice-key"},
                      {"Mcp-Session-Id", sid}}};
  if (!last_event_id.empty()) get.headers.emplace_back("Last-Event-ID", last_event_id);
  return get;
}

TEST_F(HttpServerTest, SlowReplyOn2025_11_25IsAPrimedStreamThatResumesAfterADrop) {
  StartServer();
  std::string sid = Initialize("2025-11-25");
  // A call that takes a second: past sse_after, so the POST becomes a primed SSE stream.
  Connection post(port());
  post.Write(Post(Rpc(5, "tools/call",
                      {{"name", "sandbox__exec"},
                       {"arguments", {{"command", "sleep 1; echo resumed"}}}})
                      .dump(),
                  sid)
                 .Build());
  std::string head = post.ReadUntil("data: \n\n", 5s);
  ASSERT_NE(head.find("200 OK"), std::string::npos) << head;
  EXPECT_NE(head.find("text/event-stream"), std::string::npos) << head;
  EXPECT_NE(head.find("retry: 1000\n"), std::string::npos) << head;
  auto primed = SseEvents(head.substr(head.find("\r\n\r\n")));
  ASSERT_EQ(primed.size(), 1u) << head;
  EXPECT_TRUE(primed[0].second.empty()) << "the priming event has empty data";
  const std::string priming_id = primed[0].first;
  ASSERT_TRUE(priming_id.ends_with("-0")) << priming_id;
  // The client drops the connection mid-call.
  post.Close();

  // It comes back with GET and Last-Event-ID: it gets the reply when it comes, then the end.
  Connection resumed(port());
  resumed.Write(ResumeGet(sid, priming_id).Build());
  std::string body = resumed.ReadUntil("0\r\n\r\n", 10s);
  ASSERT_NE(body.find("200 OK"), std::string::npos) << body;
  auto events = SseEvents(body.substr(body.find("\r\n\r\n")));
  ASSERT_EQ(events.size(), 1u) << body;
  json reply = json::parse(events[0].second);
  EXPECT_EQ(reply["id"], 5);
  EXPECT_EQ(reply["result"]["structuredContent"]["stdout"], "resumed\n") << body;
  const std::string stream = priming_id.substr(0, priming_id.size() - 2);
  EXPECT_EQ(events[0].first, stream + "-1") << "ids go on along the same stream";
  EXPECT_NE(body.find("0\r\n\r\n"), std::string::npos) << "the stream ends after the reply";

  // Resuming again after the end replays what came after the id, and ends at once.
  HttpReply again = Send(ResumeGet(sid, priming_id));
  ASSERT_EQ(again.status, 200) << again.body;
  ASSERT_EQ(SseMessages(again.body).size(), 1u) << again.body;
  EXPECT_EQ(SseMessages(again.body)[0]["id"], 5);
  HttpReply after_last = Send(ResumeGet(sid, stream + "-1"));
  ASSERT_EQ(after_last.status, 200) << after_last.body;
  EXPECT_TRUE(SseMessages(after_last.body).empty()) << after_last.body;

  // Ids this session never sent: 400 with the reason, not a new stream.
  const std::vector<std::string> bad_ids = {stream + "-7", "999999-0", "not-an-id", "5", "-1"};
  for (const std::string& bad : bad_ids) {
    HttpReply refused = Send(ResumeGet(sid, bad));
    EXPECT_EQ(refused.status, 400) << bad << " " << refused.body;
    EXPECT_NE(refused.body.find("Last-Event-ID"), std::string::npos) << refused.body;
  }
  // Another caller cannot resume alice's stream: the session is not theirs.
  Req bob = ResumeGet(sid, priming_id);
  bob.headers[1].second = "Bearer bob-key";
  EXPECT_EQ(Send(bob).status, 404);
}

TEST_F(HttpServerTest, QuickRepliesStayJson) {
  // "Quick" is anything under sse_after: generous here, so that a loaded machine (the ASan run)
  // cannot make a ping slow enough to switch.
  HttpServerOptions options;
  options.sse_after = 5s;
  StartServer(options);
  std::string sid = Initialize("2025-11-25");
  HttpReply quick = Call(Rpc(2, "ping"), sid);
  EXPECT_EQ(quick.Header("content-type"), "application/json");
}

TEST_F(HttpServerTest, OlderVersionsAreNotPrimedOrSwitched) {
  StartServer();  // sse_after 100 ms: the call below takes five times that
  std::string old = Initialize("2025-06-18");
  HttpReply slow = Call(Rpc(3, "tools/call",
                            {{"name", "sandbox__exec"},
                             {"arguments", {{"command", "sleep 0.5; echo slow"}}}}),
                        old);
  EXPECT_EQ(slow.Header("content-type"), "application/json") << "no SSE switch before 2025-11-25";
  EXPECT_EQ(slow.Json()["result"]["structuredContent"]["stdout"], "slow\n");
}

TEST_F(HttpServerTest, GetStreamResumesWithinItsBoundedReplayBuffer) {
  HttpServerOptions options;
  options.replay_events = 3;
  StartServer(options, kUpstreamPolicy);
  std::string sid = Initialize("2025-11-25");
  FakeUpstream* fake = LatestFake();
  ASSERT_NE(fake, nullptr);
  Connection stream(port());
  stream.Write(ResumeGet(sid, "").Build());
  std::string got = stream.ReadUntil("data: \n\n");
  ASSERT_NE(got.find("200 OK"), std::string::npos) << got;
  for (int i = 1; i <= 5; ++i) {
    fake->Emit(mcp::Notification{"notifications/message",
                                 json{{"level", "info"}, {"data", "note " + std::to_string(i)}}});
  }
  got += stream.ReadUntil("note 5");
  auto events = SseEvents(got.substr(got.find("\r\n\r\n")));
  ASSERT_EQ(events.size(), 6u) << got;  // priming + 5
  stream.Close();
  // Give the server a moment to see the stream go, so the session's stream slot is free.
  HttpReply resumed{};
  std::string body;
  for (int i = 0; i < 50; ++i) {
    Connection c(port());
    c.Write(ResumeGet(sid, events[2].first).Build());  // after "note 2"
    body = c.ReadUntil("note 5", 2s);
    if (body.find("200 OK") != std::string::npos) break;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_NE(body.find("200 OK"), std::string::npos) << body;
  std::vector<json> replayed = SseMessages(body);
  ASSERT_EQ(replayed.size(), 3u) << body;
  EXPECT_EQ(replayed[0]["params"]["data"], "note 3");
  EXPECT_EQ(replayed[2]["params"]["data"], "note 5");
  // Only the latest 3 events are kept: resuming after "note 1" would leave a gap, so it is
  // refused rather than served with one missing.
  HttpReply gap = Send(ResumeGet(sid, events[1].first));
  EXPECT_EQ(gap.status, 400) << gap.body;
  EXPECT_NE(gap.body.find("no longer kept"), std::string::npos) << gap.body;
}

TEST(HttpServerStartTest, BadHostAndPortInUseAreErrors) {
  struct NoHost : SessionHost {
    Result<identity::Caller> Authenticate(std::string_view, const std::string&) override {
      return Status::Error("no");
    }
    std::shared_ptr<McpSession> CreateSession(const identity::Caller&) override { return nullptr; }
  } host;
  HttpServer bad_host(host, HttpServerOptions{.host = "not an address", .port = 0});
  Status st = bad_host.Start();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("not an address"), std::string::npos);

  HttpServer first(host, HttpServerOptions{.port = 0});
  ASSERT_TRUE(first.Start().ok());
  HttpServer second(host, HttpServerOptions{.port = first.port()});
  Status in_use = second.Start();
  EXPECT_FALSE(in_use.ok());
  EXPECT_NE(in_use.message().find(std::to_string(first.port())), std::string::npos);
}

// ---- The header rules on their own ----

TEST(HttpRulesTest, OriginAllowList) {
  using http::OriginAllowed;
  std::vector<std::string> allowed = {"https://app.example", "http://tool.example:8080/"};
  EXPECT_TRUE(OriginAllowed("", allowed, false)) << "no Origin: not a browser";
  EXPECT_TRUE(OriginAllowed("https://app.example", allowed, false));
  EXPECT_TRUE(OriginAllowed("HTTPS://APP.EXAMPLE", allowed, false));
  EXPECT_TRUE(OriginAllowed("http://tool.example:8080", allowed, false));
  EXPECT_FALSE(OriginAllowed("https://app.example:444", allowed, false));
  EXPECT_FALSE(OriginAllowed("https://app.example.evil", allowed, false));
  EXPECT_FALSE(OriginAllowed("http://localhost:3000", allowed, false))
      << "loopback origins only for a loopback-bound server";
  EXPECT_TRUE(OriginAllowed("http://localhost:3000", allowed, true));
  EXPECT_TRUE(OriginAllowed("http://[::1]", allowed, true));
  EXPECT_FALSE(OriginAllowed("http://localhost:3000x", allowed, true));
  EXPECT_FALSE(OriginAllowed("http://localhost.", allowed, true));
  EXPECT_FALSE(OriginAllowed("null", allowed, true));
  EXPECT_FALSE(OriginAllowed("file://", allowed, true));
}

TEST(HttpRulesTest, HostAllowList) {
  using http::HostAllowed;
  const std::vector<std::string> own = {"localhost", "127.0.0.1", "[::1]", "[fe80::1]",
                                        "10.0.0.5"};
  const std::vector<std::string> allowed = {"Warden.Example", "proxy.example:443", "[2001:db8::1]"};
  EXPECT_TRUE(HostAllowed("", allowed, own, 8787)) << "no Host: not a browser";
  for (const char* host : {"localhost", "localhost:8787", "127.0.0.1:8787", "[::1]:8787",
                           "[FE80::1]", "10.0.0.5:8787", "warden.example:1", "WARDEN.example",
                           "proxy.example:443", "[2001:db8::1]:9", " localhost:8787 "}) {
    EXPECT_TRUE(HostAllowed(host, allowed, own, 8787)) << host;
  }
  for (const char* host : {"evil.example:8787", "evil.example", "localhost:8788", "10.0.0.6",
                           "10.0.0.5:1", "proxy.example", "proxy.example:80", "::1", "[::1",
                           "[::1]x", "[]", "[::1]:", "localhost:123456", "a@localhost",
                           "localhost/x", "localhost.", ":8787", "[evil.example]"}) {
    EXPECT_FALSE(HostAllowed(host, allowed, own, 8787)) << host;
  }
}

TEST(HttpRulesTest, AcceptAndContentType) {
  EXPECT_TRUE(http::AcceptsMediaType("application/json, text/event-stream", "text/event-stream"));
  EXPECT_TRUE(http::AcceptsMediaType("Text/Event-Stream;q=0.5", "text/event-stream"));
  EXPECT_FALSE(http::AcceptsMediaType("*/*", "application/json"));
  EXPECT_FALSE(http::AcceptsMediaType("application/jsonx", "application/json"));
  EXPECT_TRUE(http::IsJsonContentType("application/json; charset=utf-8"));
  EXPECT_FALSE(http::IsJsonContentType("application/json-seq"));
  EXPECT_FALSE(http::IsJsonContentType(""));
}

TEST(HttpRulesTest, AttackSseFieldInjectionThroughNewlines) {
  std::string event = http::SseEvent("7-1", "a\nevent: evil\r\ndata: x");
  EXPECT_EQ(event, "id: 7-1\ndata: a\ndata: event: evil\ndata: \ndata: data: x\n\n");
  EXPECT_EQ(http::HttpChunk("hello"), "5\r\nhello\r\n");
}

TEST(HttpReplayTest, BufferKeepsTheLatestEventsAndRefusesGaps) {
  http::ReplayBuffer buffer(3, 1 << 20);
  EXPECT_EQ(buffer.last(), 0u);
  ASSERT_TRUE(buffer.After(0).has_value()) << "the priming event: nothing after it yet";
  EXPECT_TRUE(buffer.After(0)->empty());
  EXPECT_FALSE(buffer.After(1).has_value()) << "never sent";
  for (int i = 1; i <= 5; ++i) EXPECT_EQ(buffer.Append("e" + std::to_string(i)), uint64_t(i));
  EXPECT_EQ(buffer.size(), 3u);
  auto after3 = buffer.After(3);
  ASSERT_TRUE(after3.has_value());
  ASSERT_EQ(after3->size(), 2u);
  EXPECT_EQ((*after3)[0], (std::pair<uint64_t, std::string>{4, "e4"}));
  EXPECT_EQ((*after3)[1], (std::pair<uint64_t, std::string>{5, "e5"}));
  EXPECT_EQ(buffer.After(2)->size(), 3u) << "3, 4 and 5 are all still kept";
  EXPECT_FALSE(buffer.After(1).has_value()) << "event 2 was dropped: a gap";
  EXPECT_FALSE(buffer.After(0).has_value());
  EXPECT_TRUE(buffer.After(5)->empty());
  EXPECT_FALSE(buffer.After(6).has_value());
}

TEST(HttpReplayTest, BufferByteCapKeepsAtLeastTheNewestEvent) {
  http::ReplayBuffer buffer(100, 10);
  buffer.Append("12345");
  buffer.Append("67890");
  EXPECT_EQ(buffer.size(), 2u);
  buffer.Append("abc");
  EXPECT_EQ(buffer.size(), 2u);
  EXPECT_LE(buffer.bytes(), 10u);
  buffer.Append(std::string(50, 'x'));  // over the cap alone: still kept
  EXPECT_EQ(buffer.size(), 1u);
  ASSERT_TRUE(buffer.After(3).has_value());
  EXPECT_EQ(buffer.After(3)->size(), 1u);
}

TEST(HttpReplayTest, EventIdsAndPrimingEvent) {
  EXPECT_EQ(http::EventId(12, 3), "12-3");
  auto parsed = http::ParseEventId("12-3");
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->first, 12u);
  EXPECT_EQ(parsed->second, 3u);
  for (const char* bad : {"", "12", "-3", "12-", "0-1", "a-1", "1-b", "1-2-3", "+1-2", "1- 2",
                          "99999999999999999999-1"}) {
    EXPECT_FALSE(http::ParseEventId(bad).has_value()) << bad;
  }
  EXPECT_EQ(http::SsePrimingEvent("7-0", 1000), "id: 7-0\nretry: 1000\ndata: \n\n");
  EXPECT_EQ(http::SseEvent("", "x"), "data: x\n\n");
}

}  // namespace
}  // namespace warden::gateway
