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
#include "gateway/http_server.h"

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

#include "gateway/default_policy.h"
#include "gateway/gateway.h"
#include "gateway/http_rules.h"
#include "gateway/kill_switches.h"
#include "gateway/session.h"
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

constexpr char kAcceptBoth[] = "application/json, text/event-stream";

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
      done(mcp::Response{
          id,
          {{"content", json::array({{{"type", "text"}, {"text", text}}})}, {"isError", false}}});
    } else {
      done(mcp::MakeError(id, mcp::kMethodNotFound, "Method not found: " + method));
    }
    return handle;
  }
  void Cancel(uint64_t, const std::string&) override {}
  void Notify(const std::string&, json) override {}
  void Stop() override { state_ = upstream::State::kStopped; }
  upstream::State state() const override { return state_; }
  upstream::ServerInfo info() const override { return {}; }
  const upstream::Spec& spec() const override { return spec_; }
  int pid() const override { return 0; }

  // Makes the "server" send a notification, as a real one would on its own.
  void Emit(const mcp::Notification& note) { events_.on_notification(note); }

 private:
  upstream::Spec spec_;
  upstream::Events events_;
  std::atomic<upstream::State> state_{upstream::State::kStarting};
  std::atomic<uint64_t> next_{1};
};

class TestHost : public SessionHost {
 public:
  explicit TestHost(GatewayCore& core) : core_(core) {}

  Result<Caller> Authenticate(std::string_view authorization, const std::string& peer) override {
    {
      std::lock_guard lock(mu_);
      last_peer_ = peer;
    }
    if (authorization == "Bearer alice-key") return Caller{"", "alice", "", ""};
    if (authorization == "Bearer bob-key") return Caller{"", "bob", "", ""};
    return Status::Error(authorization.empty() ? "missing credentials: send Authorization: Bearer"
                                               : "unknown API key");
  }
  std::shared_ptr<McpSession> CreateSession(const Caller& caller) override {
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
// A raw HTTP/1.1 client.

struct HttpReply {
  int status = 0;                              // 0: no response (the error is in body)
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;

  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
  json Json() const { return json::parse(body, nullptr, false); }
};

struct Req {
  std::string method = "POST";
  std::string path = "/mcp";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  bool content_length = true;

  std::string Build() const {
    std::string out = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    for (const auto& [name, value] : headers) out += name + ": " + value + "\r\n";
    if (content_length && (method == "POST" || !body.empty())) {
      out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    }
    return out + "\r\n" + body;
  }
};

HttpReply FromBeast(const bhttp::response<bhttp::string_body>& res) {
  HttpReply reply;
  reply.status = static_cast<int>(res.result_int());
  for (const auto& field : res) {
    std::string name(field.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    reply.headers[name] = std::string(field.value());
  }
  reply.body = res.body();
  return reply;
}

// Beast's SyncReadStream over a socket with SO_RCVTIMEO: a read that times out fails instead of
// waiting forever (Asio's own blocking reads would poll again), so a test never hangs.
struct TimedReader {
  int fd;
  template <typename Buffers>
  std::size_t read_some(const Buffers& buffers, beast::error_code& ec) {
    net::mutable_buffer b = *net::buffer_sequence_begin(buffers);
    ssize_t n = ::recv(fd, b.data(), b.size(), 0);
    if (n > 0) {
      ec = {};
      return static_cast<std::size_t>(n);
    }
    ec = n == 0 ? beast::error_code(net::error::eof)
                : beast::error_code(errno, boost::system::system_category());
    return 0;
  }
  template <typename Buffers>
  std::size_t read_some(const Buffers& buffers) {
    beast::error_code ec;
    std::size_t n = read_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }
};

// One TCP connection to the server.
class Connection {
 public:
  explicit Connection(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0)
        << strerror(errno);
    SetTimeout(10s);
  }
  ~Connection() { Close(); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void Write(const std::string& bytes) {
    std::size_t done = 0;
    while (done < bytes.size()) {  // the server may refuse before reading it all: stop then
      ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return;
      done += static_cast<std::size_t>(n);
    }
  }
  HttpReply Read() {
    SetTimeout(10s);
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(boost::none);
    beast::error_code ec;
    TimedReader reader{fd_};
    bhttp::read(reader, buffer_, parser, ec);
    if (ec) return HttpReply{0, {}, ec.message()};
    return FromBeast(parser.get());
  }
  HttpReply Send(const Req& req) {
    Write(req.Build());
    return Read();
  }
  // Reads raw bytes until `needle` appears, the peer closes, or the timeout; returns them.
  std::string ReadUntil(const std::string& needle, std::chrono::milliseconds timeout = 10s) {
    std::string got;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    SetTimeout(50ms);
    char chunk[4096];
    while (got.find(needle) == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n == 0) break;
      if (n > 0) got.append(chunk, static_cast<std::size_t>(n));
    }
    return got;
  }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  void SetTimeout(std::chrono::milliseconds t) {
    timeval tv{static_cast<time_t>(t.count() / 1000),
               static_cast<suseconds_t>(t.count() % 1000 * 1000)};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  int fd_ = -1;
  beast::flat_buffer buffer_;
};

// The JSON-RPC messages carried by an SSE body, in order.
std::vector<json> SseMessages(const std::string& body) {
  std::vector<json> out;
  std::size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    std::size_t end = body.find('\n', pos);
    std::string data = body.substr(pos + 6, end == std::string::npos ? end : end - pos - 6);
    json j = json::parse(data, nullptr, false);
    if (!j.is_discarded()) out.push_back(std::move(j));
    pos = end == std::string::npos ? body.size() : end;
  }
  return out;
}

json Rpc(int id, const std::string& method, json params = json::object()) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
}

json InitializeRequest(const std::string& version) {
  return Rpc(1, "initialize",
             {{"protocolVersion", version},
              {"capabilities", json::object()},
              {"clientInfo", {{"name", "http-test"}, {"version", "1"}}}});
}

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
                   const std::string& policy_text = std::string(DefaultPolicyText())) {
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
                                          Caller{"", "tester", "", ""}, gateway_options);
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
  EXPECT_EQ(put.Header("allow"), "GET, POST, DELETE");
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

TEST(HttpServerStartTest, BadHostAndPortInUseAreErrors) {
  struct NoHost : SessionHost {
    Result<Caller> Authenticate(std::string_view, const std::string&) override {
      return Status::Error("no");
    }
    std::shared_ptr<McpSession> CreateSession(const Caller&) override { return nullptr; }
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

}  // namespace
}  // namespace warden::gateway
