// The approvals console's HTTP side (src/gateway/http/console.h): the embedded files and their
// headers, console logins and their cookies, the CSRF and Origin rules of /api/ requests made with
// the cookie (or in single-user mode with nothing), over real TCP against a real HttpServer.
//
// Test double: ConsoleTestHost stands in for the gateway (SessionHost). Authenticate is a fixed key
// table (identity_test.cc covers the real Authenticator), and Admin answers with the caller it was
// given, so a test sees who the server decided the request came from.
#include "gateway/http/console.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "gateway/http/http_server.h"
#include "http_client.h"

namespace warden::gateway {
namespace {

using namespace http_test;
using namespace std::chrono_literals;

constexpr char kConsolePersonKey[] = "alice-person-key";
constexpr char kConsoleAgentKey[] = "mailer-agent-key";

class ConsoleTestHost : public SessionHost {
 public:
  explicit ConsoleTestHost(bool single_user) : single_user_(single_user) {}

  Result<identity::Caller> Authenticate(std::string_view authorization,
                                        const std::string&) override {
    // Single-user mode: every request is the local operator, credentials or not.
    if (single_user_) return identity::Caller{"", "me", "", ""};
    if (authorization == std::string("Bearer ") + kConsolePersonKey && !alice_revoked_) {
      return identity::Caller{"acme", "alice", "", ""};
    }
    if (authorization == std::string("Bearer ") + kConsoleAgentKey) {
      return identity::Caller{"acme", "bob", "mailer", ""};
    }
    if (authorization.empty()) return Status::Error("missing Authorization header");
    return Status::Error("unknown API key");
  }
  std::shared_ptr<McpSession> CreateSession(const identity::Caller&) override { return nullptr; }
  void Refused(const identity::Caller&, int status, const std::string& what,
               const std::string&) override {
    std::lock_guard lock(mu_);
    refusals_.push_back(std::to_string(status) + " " + what);
  }
  void Admin(const identity::Caller& caller, AdminRequest request,
             std::function<void(AdminReply)> done) override {
    admin_calls_++;
    nlohmann::json body = {{"tenant", caller.tenant}, {"user", caller.user},
                           {"agent", caller.agent},   {"method", request.method},
                           {"path", request.path},    {"body", request.body}};
    done(AdminReply{200, body.dump(), {}});
  }

  std::vector<std::string> refusals() {
    std::lock_guard lock(mu_);
    return refusals_;
  }
  int admin_calls() const { return admin_calls_; }
  void RevokeAlice() { alice_revoked_ = true; }

 private:
  const bool single_user_;
  std::atomic<bool> alice_revoked_{false};
  std::atomic<int> admin_calls_{0};
  std::mutex mu_;
  std::vector<std::string> refusals_;
};

class ConsoleTest : public ::testing::Test {
 protected:
  void StartServer(bool single_user = false) {
    host_ = std::make_unique<ConsoleTestHost>(single_user);
    HttpServerOptions options;
    options.port = 0;
    options.allowed_origins = {"https://allowed.example"};
    server_ = std::make_unique<HttpServer>(*host_, options);
    Status started = server_->Start();
    ASSERT_TRUE(started.ok()) << started.message();
    port_ = std::to_string(server_->port());
  }
  void TearDown() override {
    if (server_) server_->Stop();
  }

  HttpReply Send(const Req& req) { return Connection(server_->port()).Send(req); }
  // A request as the console's page sends it: Host and Origin of the listener itself.
  Req Page(std::string method, std::string path, std::string body = "") {
    Req req{.method = std::move(method), .path = std::move(path), .body = std::move(body)};
    req.headers = {{"Host", "127.0.0.1:" + port_}, {"Origin", "http://127.0.0.1:" + port_}};
    if (!req.body.empty()) req.headers.emplace_back("Content-Type", "application/json");
    return req;
  }
  Req WithCookie(Req req, const std::string& token) {
    req.headers.emplace_back("Cookie", "theme=dark; warden_console=" + token);
    return req;
  }

  struct Login {
    HttpReply reply;
    std::string token;  // from Set-Cookie
    std::string csrf;
  };
  Login LogIn(const std::string& credential) {
    Login login;
    login.reply =
        Send(Page("POST", "/console/login", nlohmann::json{{"credential", credential}}.dump()));
    std::string cookie = login.reply.Header("set-cookie");
    const std::string prefix = "warden_console=";
    if (cookie.starts_with(prefix))
      login.token = cookie.substr(prefix.size(), cookie.find(';') - prefix.size());
    nlohmann::json body = login.reply.Json();
    if (body.is_object() && body.contains("csrf")) login.csrf = body["csrf"];
    return login;
  }

  std::unique_ptr<ConsoleTestHost> host_;
  std::unique_ptr<HttpServer> server_;
  std::string port_;
};

void ExpectConsoleHeaders(const HttpReply& reply, const std::string& what) {
  EXPECT_EQ(reply.Header("content-security-policy"),
            "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
            "img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
      << what;
  EXPECT_EQ(reply.Header("x-content-type-options"), "nosniff") << what;
  EXPECT_EQ(reply.Header("referrer-policy"), "no-referrer") << what;
  EXPECT_EQ(reply.Header("cache-control"), "no-store") << what;
  EXPECT_EQ(reply.Header("access-control-allow-origin"), "") << what;
}

// ---- Static files ----

TEST_F(ConsoleTest, ServesTheEmbeddedPageAtRootAndApprovalPaths) {
  StartServer();
  for (const std::string path : {"/", "/approvals/apr_0123abcd", "/approvals/apr_x?tab=1"}) {
    HttpReply page = Send(Req{.method = "GET", .path = path});
    ASSERT_EQ(page.status, 200) << path << page.body;
    EXPECT_EQ(page.Header("content-type"), "text/html; charset=utf-8") << path;
    EXPECT_NE(page.body.find("<script src=\"/console/app.js\""), std::string::npos) << path;
    ExpectConsoleHeaders(page, path);
  }
  // The page is the file in web/, byte for byte.
  const http::ConsoleAsset* index = http::FindConsoleAsset("index.html");
  ASSERT_NE(index, nullptr);
  EXPECT_EQ(Send(Req{.method = "GET", .path = "/"}).body, index->content);
}

TEST_F(ConsoleTest, ServesScriptAndStyleWithTheirContentTypes) {
  StartServer();
  HttpReply script = Send(Req{.method = "GET", .path = "/console/app.js"});
  ASSERT_EQ(script.status, 200);
  EXPECT_EQ(script.Header("content-type"), "text/javascript; charset=utf-8");
  EXPECT_NE(script.body.find("textContent"), std::string::npos);
  ExpectConsoleHeaders(script, "app.js");
  HttpReply style = Send(Req{.method = "GET", .path = "/console/style.css"});
  ASSERT_EQ(style.status, 200);
  EXPECT_EQ(style.Header("content-type"), "text/css; charset=utf-8");
  ExpectConsoleHeaders(style, "style.css");
}

TEST_F(ConsoleTest, AnythingElseUnderConsoleIsNotFound) {
  StartServer();
  for (const std::string path :
       {"/console", "/console/", "/console/README.md", "/console/../web/app.js",
        "/console/x/app.js", "/console/app.js.map", "/approvals/", "/approvals/a/b",
        "/approvals/%3Cscript%3E", "/index.html"}) {
    HttpReply reply = Send(Req{.method = "GET", .path = path});
    EXPECT_EQ(reply.status, 404) << path << reply.body;
    EXPECT_TRUE(reply.Json().contains("error")) << path;
  }
  // Refusals carry the console's headers too.
  ExpectConsoleHeaders(Send(Req{.method = "GET", .path = "/console/nope.js"}), "404");
  EXPECT_EQ(Send(Req{.method = "POST", .path = "/console/app.js"}).status, 405);
  EXPECT_EQ(Send(Req{.method = "DELETE", .path = "/"}).status, 405);
}

TEST_F(ConsoleTest, ConsoleRefusesOtherOrigins) {
  StartServer();
  // Even an origin --allow-origin names (allowed for MCP) and a loopback page on another port.
  for (const std::string origin : {"https://evil.example", "https://allowed.example",
                                   "http://localhost:5173", "http://127.0.0.1:1", "null"}) {
    Req req{.method = "GET", .path = "/console/session"};
    req.headers = {{"Host", "127.0.0.1:" + port_}, {"Origin", origin}};
    HttpReply reply = Send(req);
    EXPECT_EQ(reply.status, 403) << origin;
    EXPECT_EQ(reply.Header("access-control-allow-origin"), "") << origin;
    ExpectConsoleHeaders(reply, origin);
  }
  // Its own origin, or no Origin at all, is served.
  EXPECT_EQ(Send(Page("GET", "/")).status, 200);
  EXPECT_EQ(Send(Req{.method = "GET", .path = "/"}).status, 200);
}

// ---- Logins ----

TEST_F(ConsoleTest, LoginWithAPersonsKeySetsAStrictHttpOnlyCookie) {
  StartServer();
  Login login = LogIn(kConsolePersonKey);
  ASSERT_EQ(login.reply.status, 200) << login.reply.body;
  ExpectConsoleHeaders(login.reply, "login");
  EXPECT_EQ(login.reply.Json()["user"], "alice");
  EXPECT_EQ(login.reply.Json()["tenant"], "acme");
  EXPECT_EQ(login.csrf.size(), 64u);
  EXPECT_EQ(login.token.size(), 64u);  // 256 random bits, hex
  EXPECT_NE(login.token, login.csrf);
  EXPECT_EQ(login.reply.Header("set-cookie"),
            "warden_console=" + login.token + "; HttpOnly; SameSite=Strict; Path=/");
  // The answer never holds the credential or the session token.
  EXPECT_EQ(login.reply.body.find(kConsolePersonKey), std::string::npos);
  EXPECT_EQ(login.reply.body.find(login.token), std::string::npos);

  HttpReply session = Send(WithCookie(Page("GET", "/console/session"), login.token));
  ASSERT_EQ(session.status, 200) << session.body;
  EXPECT_EQ(session.Json()["user"], "alice");
  EXPECT_EQ(session.Json()["csrf"], login.csrf);
  // Two logins are two sessions.
  EXPECT_NE(LogIn(kConsolePersonKey).token, login.token);
}

TEST_F(ConsoleTest, AgentKeysMayNotUseTheConsole) {
  StartServer();
  Login login = LogIn(kConsoleAgentKey);
  EXPECT_EQ(login.reply.status, 403);
  EXPECT_EQ(login.reply.Json()["error"], "agents may not use the console");
  EXPECT_EQ(login.reply.Header("set-cookie"), "");
  auto refusals = host_->refusals();
  ASSERT_FALSE(refusals.empty());
  EXPECT_NE(refusals.back().find("403 /console/login"), std::string::npos) << refusals.back();
}

TEST_F(ConsoleTest, BadLoginsAreRefused) {
  StartServer();
  EXPECT_EQ(LogIn("wrong-key").reply.status, 401);
  EXPECT_EQ(Send(Page("POST", "/console/login", R"({"key": "x"})")).status, 400);
  EXPECT_EQ(Send(Page("POST", "/console/login", R"(["x"])")).status, 400);
  EXPECT_EQ(Send(Page("POST", "/console/login", R"({"credential": "a\r\nX-Evil: 1"})")).status,
            400);
  Req form = Page("POST", "/console/login");
  form.body = "credential=x";
  form.headers.emplace_back("Content-Type", "application/x-www-form-urlencoded");
  EXPECT_EQ(Send(form).status, 415);  // a cross-site form cannot log anyone in
  EXPECT_EQ(Send(Page("GET", "/console/login")).status, 405);
}

TEST_F(ConsoleTest, SessionWithoutAValidCookieIs401) {
  StartServer();
  EXPECT_EQ(Send(Page("GET", "/console/session")).status, 401);
  EXPECT_EQ(Send(WithCookie(Page("GET", "/console/session"), std::string(64, 'a'))).status, 401);
  EXPECT_EQ(Send(WithCookie(Page("GET", "/console/session"), "")).status, 401);
}

TEST_F(ConsoleTest, LogoutEndsTheSessionAndNeedsTheCsrfToken) {
  StartServer();
  Login login = LogIn(kConsolePersonKey);
  ASSERT_EQ(login.reply.status, 200);
  EXPECT_EQ(Send(WithCookie(Page("POST", "/console/logout"), login.token)).status, 403);
  Req logout = WithCookie(Page("POST", "/console/logout"), login.token);
  logout.headers.emplace_back("X-CSRF-Token", login.csrf);
  HttpReply out = Send(logout);
  EXPECT_EQ(out.status, 200) << out.body;
  EXPECT_NE(out.Header("set-cookie").find("Max-Age=0"), std::string::npos);
  EXPECT_EQ(Send(WithCookie(Page("GET", "/console/session"), login.token)).status, 401);
}

TEST_F(ConsoleTest, ARevokedKeyEndsItsSessions) {
  StartServer();
  Login login = LogIn(kConsolePersonKey);
  ASSERT_EQ(login.reply.status, 200);
  host_->RevokeAlice();  // a policy reload removed the key
  EXPECT_EQ(Send(WithCookie(Page("GET", "/console/session"), login.token)).status, 401);
  EXPECT_EQ(Send(WithCookie(Page("GET", "/api/approvals"), login.token)).status, 401);
}

// ---- /api/ with the cookie ----

TEST_F(ConsoleTest, ApiRequestsWithTheCookieAreTheSessionsPerson) {
  StartServer();
  Login login = LogIn(kConsolePersonKey);
  ASSERT_EQ(login.reply.status, 200);
  HttpReply list = Send(WithCookie(Page("GET", "/api/approvals"), login.token));
  ASSERT_EQ(list.status, 200) << list.body;
  EXPECT_EQ(list.Json()["user"], "alice");
  EXPECT_EQ(list.Json()["tenant"], "acme");
  EXPECT_EQ(list.Json()["agent"], "");
  // Without the cookie (and without a key): 401, as before.
  EXPECT_EQ(Send(Page("GET", "/api/approvals")).status, 401);
}

TEST_F(ConsoleTest, CsrfAttackWithTheCookieButNoTokenIsRefused) {
  StartServer();
  Login login = LogIn(kConsolePersonKey);
  ASSERT_EQ(login.reply.status, 200);
  const std::string body = R"({"comment": "ok"})";
  const std::string path = "/api/approvals/apr_1/approve";
  HttpReply missing = Send(WithCookie(Page("POST", path, body), login.token));
  EXPECT_EQ(missing.status, 403);
  EXPECT_NE(missing.Json()["error"].get<std::string>().find("missing X-CSRF-Token"),
            std::string::npos)
      << missing.body;
  Req bad = WithCookie(Page("POST", path, body), login.token);
  bad.headers.emplace_back("X-CSRF-Token", std::string(64, '0'));
  HttpReply wrong = Send(bad);
  EXPECT_EQ(wrong.status, 403);
  EXPECT_NE(wrong.Json()["error"].get<std::string>().find("bad X-CSRF-Token"), std::string::npos)
      << wrong.body;
  // Another session's token is as bad.
  Login other = LogIn(kConsolePersonKey);
  Req crossed = WithCookie(Page("POST", path, body), login.token);
  crossed.headers.emplace_back("X-CSRF-Token", other.csrf);
  EXPECT_EQ(Send(crossed).status, 403);
  for (const std::string method : {"DELETE", "PUT", "PATCH"}) {
    EXPECT_EQ(Send(WithCookie(Page(method, "/api/kill", body), login.token)).status, 403) << method;
  }
  EXPECT_EQ(host_->admin_calls(), 0);

  Req good = WithCookie(Page("POST", path, body), login.token);
  good.headers.emplace_back("X-CSRF-Token", login.csrf);
  HttpReply ok = Send(good);
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(ok.Json()["user"], "alice");
  EXPECT_EQ(ok.Json()["path"], path);
  EXPECT_EQ(ok.Json()["body"], body);
}

TEST_F(ConsoleTest, AuthorizationHeaderNeedsNoCsrfToken) {
  StartServer();
  Req req{.method = "POST", .path = "/api/kill", .body = R"({"scope": "agent"})"};
  req.headers = {{"Authorization", std::string("Bearer ") + kConsolePersonKey},
                 {"Content-Type", "application/json"}};
  HttpReply reply = Send(req);
  EXPECT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(reply.Json()["user"], "alice");
  // And a header wins over a cookie: the agent's key stays the agent, whatever the cookie says.
  Login login = LogIn(kConsolePersonKey);
  Req agent = WithCookie(req, login.token);
  agent.headers[0].second = std::string("Bearer ") + kConsoleAgentKey;
  EXPECT_EQ(Send(agent).Json()["agent"], "mailer");
}

TEST_F(ConsoleTest, CookieRequestsFromAnotherOriginAreRefused) {
  StartServer();
  Login login = LogIn(kConsolePersonKey);
  ASSERT_EQ(login.reply.status, 200);
  for (const std::string origin :
       {"https://evil.example", "http://localhost:5173", "https://allowed.example"}) {
    Req req = WithCookie(Page("GET", "/api/approvals"), login.token);
    req.headers[1].second = origin;
    EXPECT_EQ(Send(req).status, 403) << origin;
  }
  EXPECT_EQ(host_->admin_calls(), 0);
}

TEST_F(ConsoleTest, ApiOriginIsOwnOrExplicitlyAllowed) {
  StartServer();
  auto with_origin = [&](const std::string& origin) {
    Req req{.method = "GET", .path = "/api/kill"};
    req.headers = {{"Host", "127.0.0.1:" + port_},
                   {"Authorization", std::string("Bearer ") + kConsolePersonKey},
                   {"Origin", origin}};
    return Send(req).status;
  };
  EXPECT_EQ(with_origin("http://127.0.0.1:" + port_), 200);
  EXPECT_EQ(with_origin("https://allowed.example"), 200);  // --allow-origin
  EXPECT_EQ(with_origin("http://localhost:5173"), 403);    // MCP allows it, the API does not
  EXPECT_EQ(with_origin("https://evil.example"), 403);
  // MCP keeps its rules: a loopback page may reach /mcp on a loopback listener.
  Req mcp{.method = "POST", .path = "/mcp", .body = InitializeRequest("2025-06-18").dump()};
  mcp.headers = {{"Origin", "http://localhost:5173"},
                 {"Authorization", std::string("Bearer ") + kConsolePersonKey},
                 {"Content-Type", "application/json"},
                 {"Accept", kAcceptBoth}};
  EXPECT_NE(Send(mcp).status, 403);
}

// ---- Single-user mode ----

TEST_F(ConsoleTest, SingleUserModeNeedsNoLoginButStillACsrfToken) {
  StartServer(/*single_user=*/true);
  HttpReply session = Send(Page("GET", "/console/session"));
  ASSERT_EQ(session.status, 200) << session.body;
  EXPECT_EQ(session.Json()["user"], "me");
  std::string csrf = session.Json()["csrf"];
  std::string cookie = session.Header("set-cookie");
  ASSERT_TRUE(cookie.starts_with("warden_console="));
  std::string token = cookie.substr(15, cookie.find(';') - 15);

  // Reading needs nothing; a change without the session's token is refused.
  EXPECT_EQ(Send(Page("GET", "/api/approvals")).status, 200);
  const std::string path = "/api/approvals/apr_1/deny";
  HttpReply bare = Send(Page("POST", path, R"({"comment": "no"})"));
  EXPECT_EQ(bare.status, 403);
  EXPECT_NE(bare.Json()["error"].get<std::string>().find("X-CSRF-Token"), std::string::npos);
  EXPECT_EQ(Send(WithCookie(Page("POST", path, R"({"comment": "no"})"), token)).status, 403);
  Req good = WithCookie(Page("POST", path, R"({"comment": "no"})"), token);
  good.headers.emplace_back("X-CSRF-Token", csrf);
  HttpReply ok = Send(good);
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(ok.Json()["user"], "me");
  // The same session answers again with its token.
  EXPECT_EQ(Send(WithCookie(Page("GET", "/console/session"), token)).Json()["csrf"], csrf);
}

// ---- The pure rules ----

TEST(ConsoleRules, OriginIsOwnComparesSchemeHostAndPort) {
  using http::OriginIsOwn;
  EXPECT_TRUE(OriginIsOwn("http://127.0.0.1:8787", "127.0.0.1:8787"));
  EXPECT_TRUE(OriginIsOwn("HTTP://LocalHost:8787/", "localhost:8787"));
  EXPECT_TRUE(OriginIsOwn("https://warden.example", "warden.example"));  // behind a TLS proxy
  EXPECT_TRUE(OriginIsOwn("https://warden.example", "warden.example:443"));
  EXPECT_TRUE(OriginIsOwn("http://[::1]:8787", "[::1]:8787"));
  EXPECT_FALSE(OriginIsOwn("http://127.0.0.1:8788", "127.0.0.1:8787"));
  EXPECT_FALSE(OriginIsOwn("http://localhost:8787", "127.0.0.1:8787"));
  EXPECT_FALSE(OriginIsOwn("http://127.0.0.1", "127.0.0.1:8787"));
  EXPECT_FALSE(OriginIsOwn("http://127.0.0.1:8787", ""));
  EXPECT_FALSE(OriginIsOwn("null", "127.0.0.1:8787"));
  EXPECT_FALSE(OriginIsOwn("file://", "127.0.0.1:8787"));
  EXPECT_FALSE(OriginIsOwn("http://evil@127.0.0.1:8787", "127.0.0.1:8787"));
  EXPECT_FALSE(OriginIsOwn("http://127.0.0.1:8787/x", "127.0.0.1:8787"));
}

TEST(ConsoleRules, CookieValuesAndConstantTimeEquality) {
  EXPECT_EQ(http::ConsoleCookieValues("a=1; warden_console=abc ;b=2; warden_console=def"),
            (std::vector<std::string>{"abc", "def"}));
  EXPECT_TRUE(http::ConsoleCookieValues("xwarden_console=abc; warden_consolex=1").empty());
  EXPECT_TRUE(http::ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(http::ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(http::ConstantTimeEquals("abc", "abcd"));
}

TEST(ConsoleRules, SessionsExpireWhenIdleAndAreCapped) {
  http::ConsoleSessions sessions({.idle_timeout = 60s, .max_sessions = 2});
  auto t0 = std::chrono::steady_clock::now();
  auto first = sessions.Open("Bearer a", t0);
  ASSERT_TRUE(sessions.Find(first.token, t0 + 59s).has_value());
  EXPECT_FALSE(sessions.Find(first.token, t0 + 59s + 61s).has_value());  // idle past the timeout
  auto a = sessions.Open("Bearer a", t0);
  auto b = sessions.Open("Bearer b", t0 + 1s);
  ASSERT_TRUE(sessions.Find(a.token, t0 + 2s).has_value());  // a used after b
  auto c = sessions.Open("Bearer c", t0 + 3s);  // the cap evicts the least recently used: b
  EXPECT_EQ(sessions.size(), 2u);
  EXPECT_TRUE(sessions.Find(a.token, t0 + 4s).has_value());
  EXPECT_FALSE(sessions.Find(b.token, t0 + 4s).has_value());
  EXPECT_EQ(sessions.Find(c.token, t0 + 4s)->authorization, "Bearer c");
}

}  // namespace
}  // namespace warden::gateway
