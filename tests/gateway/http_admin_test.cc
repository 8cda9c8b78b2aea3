// The admin API (kill switches over HTTP, src/gateway/admin_api.h) on a real HttpServer, with
// real McpSessions on a real GatewayCore, callers authenticated by the real identity::Authenticator
// from API keys in a two-tenant policy, sandbox__exec running for real, and the kill switches wired
// to the sessions' in-flight calls as `warden serve` wires them (gateway_setup.cc).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "gateway/http/admin_api.h"
#include "gateway/http/http_server.h"
#include "gateway/session/session.h"
#include "http_client.h"
#include "identity/identity.h"
#include "testing.h"

namespace warden::gateway {
namespace {

using namespace http_test;
using testing::PolicyFromText;
using testing::TempDir;

// People's own keys (`keys:` on the user): ann-key (approver of acme), carl-key (not an
// approver), gina-key (approver of globex). Agents' keys: ops-key (ann's agent), coder-key
// (carl's), gops-key (gina's) and others. Both tenants have an agent called "shared". The admin
// API is for people: every agent key is refused there, an approver's agent's included.
std::string TwoTenantPolicy() {
  auto key = [](const char* k) { return "[\"" + identity::HashApiKey(k) + "\"]"; };
  return std::string(R"(version: 1
identity:
  tenants:
    acme:
      users:
        ann: { approver: true, keys: )") +
         key("ann-key") + R"( }
        carl: { keys: )" +
         key("carl-key") + R"( }
      agents:
        ops: { user: ann, keys: )" +
         key("ops-key") + R"( }
        coder: { user: carl, keys: )" +
         key("coder-key") + R"( }
        shared: { user: carl, keys: )" +
         key("acme-shared-key") + R"( }
    globex:
      users:
        gina: { approver: true, keys: )" +
         key("gina-key") + R"( }
      agents:
        gops: { user: gina, keys: )" +
         key("gops-key") + R"( }
        worker: { user: gina, keys: )" +
         key("worker-key") + R"( }
        shared: { user: gina, keys: )" +
         key("globex-shared-key") + R"( }
tools:
  - match: { tool: "sandbox__exec", server: "sandbox" }
    risk: medium
    effect: allow
defaults:
  unknown_tool: { risk: high, effect: deny }
)";
}

class AdminHost : public SessionHost {
 public:
  AdminHost(GatewayCore& core, identity::Authenticator auth, AdminApiOptions options)
      : core_(core), auth_(std::move(auth)), api_(std::make_shared<AdminApi>(core, options)) {}
  Result<identity::Caller> Authenticate(std::string_view authorization,
                                        const std::string&) override {
    return auth_.Authenticate(authorization);
  }
  std::shared_ptr<McpSession> CreateSession(const identity::Caller& caller) override {
    auto session = std::make_shared<McpSession>(core_, caller, SessionOptions{.transport = "http"});
    core_.Register(session);
    return session;
  }
  void Refused(const identity::Caller& caller, int status, const std::string& what,
               const std::string& peer) override {
    GatewayCore* core = &core_;
    core_.Post([core, caller, status, what, peer] {
      core->AuditRefusal(caller, "", "http " + std::to_string(status), what + " (" + peer + ")");
    });
  }
  void Admin(const identity::Caller& caller, AdminRequest request,
             std::function<void(AdminReply)> done) override {
    api_->Submit(caller, std::move(request), std::move(done));
  }

 private:
  GatewayCore& core_;
  identity::Authenticator auth_;
  std::shared_ptr<AdminApi> api_;
};

class AdminApiTest : public ::testing::Test {
 protected:
  void StartServer(const std::string& policy_text = TwoTenantPolicy(),
                   identity::IdentityOptions identity = {}, AdminApiOptions admin = {},
                   GatewayOptions gateway = {}) {
    auto policy = PolicyFromText(policy_text);
    ASSERT_NE(policy, nullptr);
    gw_ = std::make_unique<testing::TestGateway>(policy, dir_.File("warden.db"),
                                                 identity::Caller{"", "tester", "", ""}, gateway);
    auto auth = identity::Authenticator::Create(*policy, identity);
    ASSERT_TRUE(auth.ok()) << auth.status().message();
    host_ = std::make_unique<AdminHost>(*gw_->core, std::move(*auth), admin);
    HttpServerOptions options;
    options.port = 0;
    options.allowed_origins = {"https://console.example"};
    server_ = std::make_unique<HttpServer>(*host_, options);
    Status started = server_->Start();
    ASSERT_TRUE(started.ok()) << started.message();
  }
  void TearDown() override {
    if (server_) server_->Stop();
    server_.reset();
    host_.reset();
    gw_.reset();
  }

  HttpReply Api(const std::string& method, const std::string& key, const std::string& body = "",
                const std::string& path = "/api/kill") {
    Req req{.method = method, .path = path, .body = body};
    if (!key.empty()) req.headers.emplace_back("Authorization", "Bearer " + key);
    if (!body.empty()) req.headers.emplace_back("Content-Type", "application/json");
    Connection c(server_->port());
    return c.Send(req);
  }
  HttpReply Kill(const std::string& key, const std::string& scope, const std::string& name,
                 const std::string& reason = "test") {
    return Api("POST", key, json{{"scope", scope}, {"name", name}, {"reason", reason}}.dump());
  }
  HttpReply Unkill(const std::string& key, const std::string& scope, const std::string& name) {
    return Api("DELETE", key, json{{"scope", scope}, {"name", name}}.dump());
  }

  Req Post(const json& body, const std::string& session, const std::string& key) const {
    Req req{.body = body.dump()};
    req.headers = {{"Content-Type", "application/json"},
                   {"Accept", kAcceptBoth},
                   {"Authorization", "Bearer " + key}};
    if (!session.empty()) req.headers.emplace_back("Mcp-Session-Id", session);
    return req;
  }
  std::string Initialize(const std::string& key) {
    Connection c(server_->port());
    HttpReply init = c.Send(Post(InitializeRequest("2025-06-18"), "", key));
    EXPECT_EQ(init.status, 200) << init.body;
    std::string sid = init.Header("mcp-session-id");
    Connection c2(server_->port());
    EXPECT_EQ(
        c2.Send(Post(json{{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}}, sid, key))
            .status,
        202);
    return sid;
  }
  HttpReply Exec(const std::string& sid, const std::string& key, const std::string& command,
                 int id = 7) {
    Connection c(server_->port());
    return c.Send(Post(
        Rpc(id, "tools/call", {{"name", "sandbox__exec"}, {"arguments", {{"command", command}}}}),
        sid, key));
  }
  // The admin entries in the audit log.
  std::vector<audit::AuditEntry> AdminEntries() {
    std::vector<audit::AuditEntry> out;
    auto tail = gw_->audit->Tail(1000);
    EXPECT_TRUE(tail.ok());
    for (auto& e : *tail)
      if (e.kind == audit::EntryKind::kAdmin) out.push_back(e);
    return out;
  }
  bool RefusalAudited(const std::string& status, const std::string& needle) {
    // Refusals are written from the worker pool: wait a little for them.
    for (int i = 0; i < 100; ++i) {
      auto tail = gw_->audit->Tail(1000);
      for (auto& e : *tail) {
        if (e.tool == "http " + status && e.reason.find(needle) != std::string::npos) return true;
      }
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }

  TempDir dir_;
  std::unique_ptr<testing::TestGateway> gw_;
  std::unique_ptr<AdminHost> host_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(AdminApiTest, ApproverKillsAnAgentOfTheirTenantAndEndsItsInFlightSandbox) {
  StartServer();
  std::string sid = Initialize("coder-key");
  ASSERT_FALSE(sid.empty());
  HttpReply ok = Exec(sid, "coder-key", "echo before");
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(ok.Json()["result"]["isError"], false) << ok.body;

  // An in-flight sandbox that would run for 30 s.
  auto started = std::chrono::steady_clock::now();
  auto running = std::async(std::launch::async, [&] { return Exec(sid, "coder-key", "sleep 30"); });
  std::this_thread::sleep_for(700ms);  // let the sandbox start

  HttpReply killed = Kill("ann-key", "agent", "coder", "runaway loop");
  ASSERT_EQ(killed.status, 200) << killed.body;
  EXPECT_EQ(killed.Header("content-type"), "application/json");
  EXPECT_EQ(killed.Json()["switch"], "agent:coder");
  EXPECT_EQ(killed.Json()["active"], true);
  EXPECT_EQ(killed.Json()["changed"], true);
  auto kill_time = std::chrono::steady_clock::now();

  // The next call is refused at once (well within the one second the issue allows).
  HttpReply denied = Exec(sid, "coder-key", "echo after", 8);
  EXPECT_LT(std::chrono::steady_clock::now() - kill_time, 1s);
  ASSERT_EQ(denied.status, 200) << denied.body;
  EXPECT_NE(denied.body.find("agent:coder"), std::string::npos) << denied.body;
  EXPECT_NE(denied.body.find("runaway loop"), std::string::npos) << denied.body;

  // The in-flight sandbox is ended, long before its 30 s.
  ASSERT_EQ(running.wait_for(10s), std::future_status::ready);
  HttpReply ended = running.get();
  EXPECT_LT(std::chrono::steady_clock::now() - started, 15s);
  EXPECT_NE(ended.body.find("kill switch"), std::string::npos) << ended.body;

  // Another agent of the same tenant is not stopped.
  std::string ops = Initialize("ops-key");
  EXPECT_EQ(Exec(ops, "ops-key", "echo fine").Json()["result"]["isError"], false);

  // Released: coder works again.
  HttpReply released = Unkill("ann-key", "agent", "coder");
  ASSERT_EQ(released.status, 200) << released.body;
  EXPECT_EQ(released.Json()["active"], false);
  EXPECT_EQ(released.Json()["changed"], true);
  HttpReply again = Exec(sid, "coder-key", "echo again", 9);
  EXPECT_EQ(again.Json()["result"]["structuredContent"]["stdout"], "again\n") << again.body;

  // Both changes are admin audit entries naming who made them.
  std::vector<audit::AuditEntry> admin = AdminEntries();
  ASSERT_EQ(admin.size(), 2u);
  EXPECT_EQ(admin[0].decision, "kill");
  EXPECT_EQ(admin[0].rule, "kill_switch.agent:coder");
  EXPECT_EQ(admin[0].user, "ann");
  EXPECT_EQ(admin[0].tenant, "acme");
  EXPECT_EQ(admin[0].agent, "coder");
  EXPECT_EQ(admin[0].reason, "runaway loop");
  EXPECT_EQ(admin[0].arguments["via"], "api");
  EXPECT_EQ(admin[0].arguments["by"]["agent"], "") << "a person, with her own key";
  EXPECT_EQ(admin[1].decision, "unkill");
  EXPECT_TRUE(gw_->audit->Verify().ok());
}

// A user switch stops every agent acting for that user, in-flight sandbox included, and nobody
// else's; a session switch stops one session and not another of the same agent. An approver may
// stop only their own tenant's users, and no session (an id does not say whose it is).
TEST_F(AdminApiTest, UserAndSessionSwitchesStopExactlyThatUserOrSession) {
  StartServer();
  std::string coder = Initialize("coder-key");
  std::string shared = Initialize("acme-shared-key");  // carl's second agent
  std::string ops = Initialize("ops-key");             // ann's
  auto running = std::async(std::launch::async, [&] { return Exec(coder, "coder-key", "sleep 30"); });
  std::this_thread::sleep_for(700ms);

  HttpReply killed = Kill("ann-key", "user", "carl", "carl's laptop was stolen");
  ASSERT_EQ(killed.status, 200) << killed.body;
  EXPECT_EQ(killed.Json()["switch"], "user:carl");
  ASSERT_EQ(running.wait_for(10s), std::future_status::ready);
  EXPECT_NE(running.get().body.find("kill switch"), std::string::npos);
  HttpReply denied = Exec(shared, "acme-shared-key", "echo no", 8);
  EXPECT_NE(denied.body.find("user:carl"), std::string::npos) << denied.body;
  EXPECT_NE(denied.body.find("carl's laptop was stolen"), std::string::npos) << denied.body;
  EXPECT_EQ(Exec(ops, "ops-key", "echo fine").Json()["result"]["isError"], false);
  // Listed for ann, with her tenant's names only.
  HttpReply listed = Api("GET", "ann-key");
  ASSERT_EQ(listed.status, 200) << listed.body;
  EXPECT_NE(listed.body.find("user:carl"), std::string::npos) << listed.body;
  ASSERT_EQ(Unkill("ann-key", "user", "carl").status, 200);

  // Not another tenant's user; no session at all from an approver.
  HttpReply other = Kill("ann-key", "user", "gina");
  EXPECT_EQ(other.status, 403);
  EXPECT_NE(other.body.find("has no user 'gina'"), std::string::npos) << other.body;
  HttpReply session_by_approver = Kill("ann-key", "session", coder);
  EXPECT_EQ(session_by_approver.status, 403);
  EXPECT_NE(session_by_approver.body.find("only the local operator"), std::string::npos);

  // The operator stops one session: the same agent's other session goes on.
  std::string coder2 = Initialize("coder-key");
  auto long_call = std::async(std::launch::async, [&] { return Exec(coder, "coder-key", "sleep 30", 10); });
  std::this_thread::sleep_for(700ms);
  ASSERT_TRUE(gw_->core->kill_switches().Kill(state::KillScope::kSession, coder, "injected session", "op").ok());
  ASSERT_EQ(long_call.wait_for(10s), std::future_status::ready);
  EXPECT_NE(long_call.get().body.find("kill switch"), std::string::npos);
  HttpReply stopped = Exec(coder, "coder-key", "echo no", 11);
  EXPECT_NE(stopped.body.find("session:" + coder), std::string::npos) << stopped.body;
  HttpReply other_session = Exec(coder2, "coder-key", "echo yes", 12);
  EXPECT_EQ(other_session.Json()["result"]["structuredContent"]["stdout"], "yes\n") << other_session.body;
  // Ann does not see the session switch.
  EXPECT_EQ(Api("GET", "ann-key").body.find("session:"), std::string::npos);
}

// Calls that hold every worker (built-ins run on them; soon calls waiting for a person) must not
// starve the admin API, nor the switch that would end them: both run on the core's control
// executor.
TEST_F(AdminApiTest, AttackCallsHoldingEveryWorkerStarveNeitherTheAdminApiNorTheirKill) {
  StartServer(TwoTenantPolicy(), {}, {}, GatewayOptions{.worker_threads = 2});
  std::string sid = Initialize("coder-key");
  ASSERT_FALSE(sid.empty());
  auto started = std::chrono::steady_clock::now();
  std::vector<std::future<HttpReply>> sleeping;
  for (int i = 0; i < 2; ++i) {
    sleeping.push_back(std::async(std::launch::async,
                                  [&, i] { return Exec(sid, "coder-key", "sleep 30", 20 + i); }));
  }
  std::this_thread::sleep_for(700ms);  // both sandboxes started, both workers held
  // The workers are taken: a quick call waits behind the sleeps.
  auto queued =
      std::async(std::launch::async, [&] { return Exec(sid, "coder-key", "echo queued", 30); });
  ASSERT_EQ(queued.wait_for(1s), std::future_status::timeout)
      << "a call ran although both workers were held: the test no longer holds them";

  auto asked = std::chrono::steady_clock::now();
  HttpReply listed = Api("GET", "ann-key");
  EXPECT_EQ(listed.status, 200) << listed.body;
  EXPECT_LT(std::chrono::steady_clock::now() - asked, 3s) << "the admin API waited for a worker";

  HttpReply killed = Kill("ann-key", "agent", "coder", "held every worker");
  ASSERT_EQ(killed.status, 200) << killed.body;
  for (auto& call : sleeping) {
    ASSERT_EQ(call.wait_for(10s), std::future_status::ready) << "a held call was not ended";
    HttpReply ended = call.get();
    EXPECT_NE(ended.body.find("held every worker"), std::string::npos) << ended.body;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - started, 15s);
  // The queued call then runs into the switch.
  ASSERT_EQ(queued.wait_for(10s), std::future_status::ready);
  HttpReply after = queued.get();
  EXPECT_NE(after.body.find("agent:coder"), std::string::npos) << after.body;
  EXPECT_EQ(Unkill("ann-key", "agent", "coder").status, 200);
}

TEST_F(AdminApiTest, AttackCrossTenantAndNonApproverChangesAreRefused) {
  StartServer();
  struct Case {
    std::string key, scope, name;
    int status;
    std::string why;
  };
  const Case cases[] = {
      {"ann-key", "agent", "worker", 403, "no agent 'worker'"},     // globex's agent
      {"ann-key", "tenant", "globex", 403, "own tenant"},           // another tenant
      {"ann-key", "agent", "shared", 403, "another tenant"},        // the name is in both
      {"ann-key", "tool", "sandbox__exec", 403, "local operator"},  // crosses tenants
      {"ann-key", "all", "", 403, "local operator"},
      {"carl-key", "agent", "coder", 403, "not an approver"},  // carl is no approver
      {"carl-key", "tenant", "acme", 403, "not an approver"},
      {"gina-key", "agent", "coder", 403, "no agent 'coder'"},
      {"coder-key", "agent", "coder", 403, "may not use the admin API"},  // an agent
      {"ops-key", "agent", "coder", 403, "may not use the admin API"},    // an approver's agent
  };
  for (const Case& c : cases) {
    HttpReply reply = Kill(c.key, c.scope, c.name);
    EXPECT_EQ(reply.status, c.status) << c.key << " " << c.scope << " " << c.name << reply.body;
    EXPECT_NE(reply.Json().value("error", "").find(c.why), std::string::npos) << reply.body;
    HttpReply un = Unkill(c.key, c.scope, c.name);
    EXPECT_EQ(un.status, c.status) << "unkill " << c.key << " " << c.scope << un.body;
  }
  EXPECT_TRUE(gw_->kills.Active().empty()) << "no refused request changed anything";
  EXPECT_TRUE(AdminEntries().empty());
  EXPECT_TRUE(RefusalAudited("403", "not an approver"));
  EXPECT_TRUE(RefusalAudited("403", "/api/kill"));

  // Without credentials, or with a wrong key: 401 before anything else.
  HttpReply anonymous = Kill("", "agent", "coder");
  EXPECT_EQ(anonymous.status, 401);
  EXPECT_EQ(anonymous.Header("www-authenticate"), "Bearer");
  EXPECT_EQ(Kill("guessed-key", "agent", "coder").status, 401);
  EXPECT_EQ(Api("GET", "").status, 401);
  EXPECT_TRUE(gw_->kills.Active().empty());

  // An approver may stop their own tenant; the other tenant is untouched.
  EXPECT_EQ(Kill("gina-key", "tenant", "globex").status, 200);
  EXPECT_TRUE(gw_->kills.Check("globex", "worker", "sandbox__exec").has_value());
  EXPECT_FALSE(gw_->kills.Check("acme", "coder", "sandbox__exec").has_value());
}

TEST_F(AdminApiTest, AttackAStoppedCallerCannotReleaseSwitches) {
  StartServer();
  // ann stops her own agent ops: the agent cannot release itself (no agent may use the API) ...
  ASSERT_EQ(Kill("ann-key", "agent", "ops").status, 200);
  HttpReply self = Unkill("ops-key", "agent", "ops");
  EXPECT_EQ(self.status, 403) << self.body;
  EXPECT_TRUE(gw_->kills.Check("acme", "ops", "x").has_value());
  // ... gina's tenant stopped by gina: her own key cannot release it, she is stopped too ...
  ASSERT_EQ(Kill("gina-key", "tenant", "globex").status, 200);
  HttpReply tenant = Unkill("gina-key", "tenant", "globex");
  EXPECT_EQ(tenant.status, 403) << tenant.body;
  EXPECT_NE(tenant.body.find("stopped by kill switch tenant:globex"), std::string::npos)
      << tenant.body;
  EXPECT_EQ(gw_->kills.Active().size(), 2u);
  // ... while ann, whom the agent switch does not stop, may release it with her own key.
  EXPECT_EQ(Unkill("ann-key", "agent", "ops").status, 200);
  EXPECT_FALSE(gw_->kills.Check("acme", "ops", "x").has_value());
}

// An agent's credential never reaches an endpoint: refused once, before dispatch, whatever the
// path or method, even when the agent's user is an approver (an injected agent must not release
// the switch that stopped it, nor approve its own calls).
TEST_F(AdminApiTest, AttackAgentKeysAreRefusedOnEveryAdminPathEvenForAnApproversAgent) {
  StartServer();
  struct Case {
    std::string method, path, body;
  };
  const std::string body = R"({"scope":"agent","name":"coder","reason":"x"})";
  const Case cases[] = {
      {"GET", "/api/kill", ""},
      {"POST", "/api/kill", body},
      {"DELETE", "/api/kill", R"({"scope":"agent","name":"coder"})"},
      {"POST", "/api/unkill", R"({"scope":"agent","name":"coder"})"},
      {"PUT", "/api/kill", body},
      {"GET", "/api/approvals", ""},
      {"POST", "/api/approvals/apr_1/approve", R"({"comment":"ok"})"},
      {"GET", "/api/nothing", ""},
  };
  for (const std::string key : {"ops-key", "gops-key", "coder-key"}) {
    for (const Case& c : cases) {
      HttpReply reply = Api(c.method, key, c.body, c.path);
      EXPECT_EQ(reply.status, 403) << key << " " << c.method << " " << c.path << ": " << reply.body;
      const std::string error = reply.Json().value("error", "");
      EXPECT_NE(error.find("may not use the admin API"), std::string::npos) << error;
      EXPECT_NE(error.find("keys:"), std::string::npos) << "says what to use instead: " << error;
    }
  }
  EXPECT_NE(Api("GET", "ops-key").Json()["error"].get<std::string>().find("agent 'ops'"),
            std::string::npos);
  EXPECT_TRUE(gw_->kills.Active().empty()) << "no agent changed anything";
  EXPECT_TRUE(AdminEntries().empty());
  EXPECT_TRUE(RefusalAudited("403", "agent 'ops' may not use the admin API"));
  EXPECT_TRUE(RefusalAudited("403", "GET /api/kill"));

  // The same approvers with their own keys.
  HttpReply listed = Api("GET", "ann-key");
  EXPECT_EQ(listed.status, 200) << listed.body;
  HttpReply killed = Kill("ann-key", "agent", "coder");
  EXPECT_EQ(killed.status, 200) << killed.body;
  EXPECT_EQ(Kill("gina-key", "agent", "worker").status, 200);
  EXPECT_EQ(gw_->kills.Active().size(), 2u);
  std::vector<audit::AuditEntry> admin = AdminEntries();
  ASSERT_EQ(admin.size(), 2u);
  EXPECT_EQ(admin[0].user, "ann");
  EXPECT_EQ(admin[0].arguments["by"]["agent"], "");
}

TEST_F(AdminApiTest, ListShowsOnlyWhatTheApproverMaySee) {
  StartServer();
  ASSERT_EQ(Kill("ann-key", "agent", "coder", "acme reason").status, 200);
  ASSERT_EQ(Kill("gina-key", "agent", "worker", "globex reason").status, 200);
  HttpReply ann = Api("GET", "ann-key");
  ASSERT_EQ(ann.status, 200) << ann.body;
  json switches = ann.Json()["switches"];
  ASSERT_EQ(switches.size(), 1u) << ann.body;
  EXPECT_EQ(switches[0]["switch"], "agent:coder");
  EXPECT_EQ(switches[0]["reason"], "acme reason");
  EXPECT_NE(switches[0]["who"].get<std::string>().find("ann@acme"), std::string::npos);
  EXPECT_EQ(ann.body.find("worker"), std::string::npos) << "no names of another tenant";
  HttpReply gina = Api("GET", "gina-key");
  ASSERT_EQ(gina.Json()["switches"].size(), 1u) << gina.body;
  EXPECT_EQ(gina.Json()["switches"][0]["switch"], "agent:worker");
  EXPECT_EQ(Api("GET", "carl-key").status, 403) << "a non-approver lists nothing";
  // Killing again is not a change; the list still has one entry.
  HttpReply again = Kill("ann-key", "agent", "coder", "acme reason");
  EXPECT_EQ(again.Json()["changed"], false);
  EXPECT_EQ(Api("GET", "ann-key").Json()["switches"].size(), 1u);
  // POST /api/unkill is DELETE /api/kill.
  HttpReply un = Api("POST", "ann-key", R"({"scope":"agent","name":"coder"})", "/api/unkill");
  EXPECT_EQ(un.status, 200) << un.body;
  EXPECT_TRUE(Api("GET", "ann-key").Json()["switches"].empty());
}

TEST_F(AdminApiTest, BadRequestsGetClearJsonErrors) {
  StartServer();
  struct Case {
    std::string body;
    int status;
    std::string why;
  };
  const Case cases[] = {
      {"{not json", 400, "JSON object"},
      {"[1,2]", 400, "JSON object"},
      {R"({"scope":"planet","name":"x"})", 400, "unknown kill switch scope"},
      {R"({"name":"coder"})", 400, "'scope' is required"},
      {R"({"scope":"agent"})", 400, ""},
      {R"({"scope":"agent","name":"co*"})", 400, ""},
      {R"({"scope":"agent","name":"coder","extra":1})", 400, "unknown field"},
      {R"({"scope":"agent","name":7})", 400, "must be a string"},
  };
  for (const Case& c : cases) {
    HttpReply reply = Api("POST", "ann-key", c.body);
    EXPECT_EQ(reply.status, c.status) << c.body << " -> " << reply.body;
    ASSERT_TRUE(reply.Json().contains("error")) << reply.body;
    EXPECT_NE(reply.Json()["error"].get<std::string>().find(c.why), std::string::npos)
        << reply.body;
  }
  EXPECT_EQ(Api("GET", "ann-key", "", "/api/nothing").status, 404);
  HttpReply put = Api("PUT", "ann-key", R"({"scope":"agent","name":"coder"})");
  EXPECT_EQ(put.status, 405);
  EXPECT_NE(put.Header("allow").find("POST"), std::string::npos);
  EXPECT_EQ(Api("GET", "ann-key", "", "/api/unkill").status, 405);

  // Wrong media type, oversized body.
  Req text{.method = "POST", .path = "/api/kill", .body = "scope=agent"};
  text.headers = {{"Authorization", "Bearer ann-key"}, {"Content-Type", "text/plain"}};
  EXPECT_EQ(Connection(server_->port()).Send(text).status, 415);
  Req big{.method = "POST",
          .path = "/api/kill",
          .body = json{{"scope", "agent"},
                       {"name", "coder"},
                       {"reason", std::string(kMaxAdminBodyBytes, 'x')}}
                      .dump()};
  big.headers = {{"Authorization", "Bearer ann-key"}, {"Content-Type", "application/json"}};
  EXPECT_EQ(Connection(server_->port()).Send(big).status, 413);

  // The origin check applies to the API as to /mcp.
  Req evil{.method = "GET", .path = "/api/kill"};
  evil.headers = {{"Authorization", "Bearer ann-key"}, {"Origin", "https://evil.example"}};
  EXPECT_EQ(Connection(server_->port()).Send(evil).status, 403);
  Req console = evil;
  console.headers[1].second = "https://console.example";
  HttpReply allowed = Connection(server_->port()).Send(console);
  EXPECT_EQ(allowed.status, 200);
  EXPECT_EQ(allowed.Header("access-control-allow-origin"), "https://console.example");
  EXPECT_TRUE(gw_->kills.Active().empty());
}

// In single-user mode any credential (or none) is the local user. Changes are sent with an
// Authorization header, as curl would: one without needs the console's session and CSRF token.
constexpr char kAnyKey[] = "whatever";

TEST_F(AdminApiTest, LocalOperatorMayChangeEverySwitch) {
  StartServer("version: 1\n",
              identity::IdentityOptions{.local_single_user = true, .local_user = "me"},
              AdminApiOptions{.local_operator = true});
  // Any Authorization value is the local user here. A change without one would need the
  // console's CSRF token (console_test.cc).
  HttpReply tool = Kill("any", "tool", "sandbox__exec", "maintenance");
  ASSERT_EQ(tool.status, 200) << tool.body;
  HttpReply all = Kill("any", "all", "");
  ASSERT_EQ(all.status, 200) << all.body;
  EXPECT_EQ(Api("GET", kAnyKey).Json()["switches"].size(), 2u);
  EXPECT_EQ(Unkill("any", "all", "").status, 200);
  EXPECT_EQ(Unkill("any", "tool", "sandbox__exec").status, 200);
  EXPECT_TRUE(gw_->kills.Active().empty());
  std::vector<audit::AuditEntry> admin = AdminEntries();
  ASSERT_EQ(admin.size(), 4u);
  EXPECT_EQ(admin[0].user, "me");
  EXPECT_EQ(admin[0].arguments["by"]["local_operator"], true);
}

// A policy FILE that declares no tenants, served on a loopback listener, is single-user mode as
// the embedded default is: warden serve passes local_single_user and local_operator for any
// loopback listener (serve_command.cc), and the local user is the operator.
TEST_F(AdminApiTest, APolicyFileWithoutTenantsOnLoopbackServesTheLocalOperator) {
  const std::string file = R"(version: 1
sandbox:
  profiles:
    default: { memory: 512M, pids: 128, timeout: 30s, net: none }
tools:
  - match: { tool: "sandbox__exec" }
    risk: medium
    effect: allow
defaults:
  unknown_tool: { risk: high, effect: deny }
)";
  StartServer(file, identity::IdentityOptions{.local_single_user = true, .local_user = "me"},
              AdminApiOptions{.local_operator = true});
  // MCP without credentials, as the local user.
  std::string sid = Initialize(kAnyKey);
  ASSERT_FALSE(sid.empty());
  HttpReply ran = Exec(sid, kAnyKey, "echo local");
  EXPECT_EQ(ran.Json()["result"]["structuredContent"]["stdout"], "local\n") << ran.body;
  // The admin API: every switch, tool and all included.
  EXPECT_EQ(Api("GET", kAnyKey).status, 200);
  HttpReply tool = Kill(kAnyKey, "tool", "sandbox__exec", "maintenance");
  ASSERT_EQ(tool.status, 200) << tool.body;
  EXPECT_EQ(Unkill(kAnyKey, "tool", "sandbox__exec").status, 200);
  std::vector<audit::AuditEntry> admin = AdminEntries();
  ASSERT_EQ(admin.size(), 2u);
  EXPECT_EQ(admin[0].user, "me");
  EXPECT_EQ(admin[0].arguments["by"]["local_operator"], true);
}

TEST_F(AdminApiTest, WithoutLocalOperatorModeAPolicyWithoutTenantsGivesNoOperator) {
  // Defence in depth: a caller without a tenant is not the operator unless the listener said so.
  StartServer("version: 1\n",
              identity::IdentityOptions{.local_single_user = true, .local_user = "me"},
              AdminApiOptions{.local_operator = false});
  EXPECT_EQ(Kill(kAnyKey, "tool", "sandbox__exec").status, 403);
  EXPECT_TRUE(gw_->kills.Active().empty());
}

// On any other listener (warden serve: not loopback) a policy without tenants refuses every HTTP
// request, MCP and admin alike, with credentials or without.
TEST_F(AdminApiTest, APolicyWithoutTenantsOnANonLoopbackListenerRefusesEveryRequest) {
  StartServer("version: 1\n", identity::IdentityOptions{}, AdminApiOptions{});
  for (const std::string key : {"", "ann-key"}) {
    HttpReply listed = Api("GET", key);
    EXPECT_EQ(listed.status, 401) << listed.body;
    EXPECT_NE(listed.body.find("identity is not configured"), std::string::npos) << listed.body;
    EXPECT_EQ(Kill(key, "all", "").status, 401);
    Connection c(server_->port());
    Req init = Post(InitializeRequest("2025-06-18"), "", key.empty() ? "x" : key);
    EXPECT_EQ(c.Send(init).status, 401);
  }
  EXPECT_TRUE(gw_->kills.Active().empty());
}

}  // namespace
}  // namespace warden::gateway
