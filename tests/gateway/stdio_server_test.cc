// `warden mcp`'s transport driven in-process over a socketpair with real JSON lines, the way an
// MCP client spawning warden talks to it; sandbox__exec runs for real and the audit log is
// checked afterwards.
#include "gateway/stdio/stdio_server.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "policy/default_policy.h"
#include "gateway/stages/kill_switches.h"
#include "testing.h"

namespace warden::gateway {
namespace {

using nlohmann::json;
using testing::OpenAudit;
using testing::PolicyFromText;
using testing::TempDir;

// A gateway serving one end of a socketpair on its own thread; the test is the client.
class StdioServerTest : public ::testing::Test {
 protected:
  void Start(std::shared_ptr<const policy::Policy> policy,
             std::size_t max_bytes = 4 * 1024 * 1024) {
    gw_ = std::make_unique<testing::TestGateway>(
        std::move(policy), dir_.File("warden.db"), identity::Caller{"", "tester", "", ""},
        GatewayOptions{.server_version = "9.9"});
    ASSERT_NE(gw_->audit, nullptr);
    log_ = gw_->audit.get();
    session_ = gw_->NewSession(identity::Caller{"", "tester", "", ""}, "sess-1");
    max_bytes_ = max_bytes;
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    client_ = sv[0];
    server_fd_ = sv[1];
    server_ =
        std::thread([this] { served_ = StdioServer(session_, max_bytes_).Serve(server_fd_, server_fd_); });
  }

  void TearDown() override {
    if (server_.joinable()) {
      shutdown(client_, SHUT_WR);
      server_.join();
    }
    if (client_ >= 0) close(client_);
    if (server_fd_ >= 0) close(server_fd_);
  }

  // Ends the session as a client does (closing its output) and waits for the server.
  void Finish() {
    shutdown(client_, SHUT_WR);
    server_.join();
    EXPECT_TRUE(served_.ok()) << served_.message();
  }

  void Send(const std::string& line) {
    std::string data = line + "\n";
    ASSERT_EQ(write(client_, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  }

  // The next line the server wrote, parsed.
  json Receive() {
    std::string line;
    char c;
    while (true) {
      ssize_t n = read(client_, &c, 1);
      if (n <= 0) break;
      if (c == '\n') break;
      line.push_back(c);
    }
    EXPECT_FALSE(line.empty()) << "no reply";
    json parsed = json::parse(line, nullptr, false);
    EXPECT_FALSE(parsed.is_discarded()) << line;
    return parsed;
  }

  json Request(const std::string& line) {
    Send(line);
    return Receive();
  }

  void Initialize() {
    json r = Request(
        R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}})");
    ASSERT_TRUE(r.contains("result")) << r.dump();
    Send(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  }

  json CallExec(int id, const json& arguments) {
    json msg = {{"jsonrpc", "2.0"},
                {"id", id},
                {"method", "tools/call"},
                {"params", {{"name", "sandbox__exec"}, {"arguments", arguments}}}};
    return Request(msg.dump());
  }

  TempDir dir_;
  std::unique_ptr<testing::TestGateway> gw_;
  audit::AuditLog* log_ = nullptr;
  std::size_t max_bytes_ = 0;
  std::shared_ptr<McpSession> session_;
  int client_ = -1, server_fd_ = -1;
  std::thread server_;
  Status served_;
};

std::shared_ptr<const policy::Policy> DefaultPolicy() {
  auto p = policy::LoadDefaultPolicy();
  EXPECT_TRUE(p.ok());
  return std::make_shared<const policy::Policy>(std::move(*p));
}

TEST_F(StdioServerTest, InitializeListAndCallEchoForReal) {
  Start(DefaultPolicy());
  json init = Request(
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}})");
  EXPECT_EQ(init["id"], 1);
  EXPECT_EQ(init["result"]["protocolVersion"], "2025-06-18");
  // Upstream tools can change during a session (restart, list_changed, an approval).
  EXPECT_EQ(init["result"]["capabilities"]["tools"]["listChanged"], true);
  EXPECT_EQ(init["result"]["serverInfo"]["name"], "warden");
  EXPECT_EQ(init["result"]["serverInfo"]["version"], "9.9");
  Send(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");  // no reply is owed

  json list = Request(R"({"jsonrpc":"2.0","id":"list","method":"tools/list"})");
  EXPECT_EQ(list["id"], "list");
  // The embedded default lists the built-ins (web__fetch reaches nothing: no egress allow-list).
  ASSERT_EQ(list["result"]["tools"].size(), 3u) << list.dump();
  EXPECT_EQ(list["result"]["tools"][0]["name"], "sandbox__exec");
  EXPECT_EQ(list["result"]["tools"][1]["name"], "web__fetch");
  EXPECT_EQ(list["result"]["tools"][2]["name"], "task__end");
  EXPECT_TRUE(list["result"]["tools"][0].contains("inputSchema"));

  json call = CallExec(3, {{"command", "echo hi"}});
  EXPECT_EQ(call["id"], 3);
  ASSERT_TRUE(call.contains("result")) << call.dump();
  EXPECT_EQ(call["result"]["isError"], false) << call.dump();
  EXPECT_EQ(call["result"]["content"][0]["text"], "hi\n");
  EXPECT_EQ(call["result"]["structuredContent"]["stdout"], "hi\n");
  EXPECT_EQ(call["result"]["structuredContent"]["exit_code"], 0);
  Finish();

  auto report = log_->Verify();
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok()) << report->detail;
  auto entries = log_->Tail(10);
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 1u);
  const audit::AuditEntry& e = entries->front();
  EXPECT_EQ(e.tool, "sandbox__exec");
  EXPECT_EQ(e.decision, "allow");
  EXPECT_EQ(e.kind, audit::EntryKind::kCall);
  EXPECT_EQ(e.user, "tester");
  EXPECT_EQ(e.session, "sess-1");
  EXPECT_EQ(e.arguments, (json{{"command", "echo hi"}}));
  ASSERT_TRUE(e.result.has_value());
  EXPECT_EQ(e.result->excerpt, "hi\n");
}

TEST_F(StdioServerTest, UnsupportedVersionIsAnsweredWithTheNewest) {
  Start(DefaultPolicy());
  json init = Request(
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"1999-01-01","capabilities":{}}})");
  EXPECT_EQ(init["result"]["protocolVersion"], "2025-11-25");
}

TEST_F(StdioServerTest, RequestsBeforeInitializeAreRefusedButPingIsAnswered) {
  Start(DefaultPolicy());
  json early = Request(R"({"jsonrpc":"2.0","id":7,"method":"tools/list"})");
  EXPECT_EQ(early["id"], 7);
  EXPECT_EQ(early["error"]["code"], -32600) << early.dump();
  EXPECT_NE(early["error"]["message"].get<std::string>().find("not initialized"),
            std::string::npos);
  json call = CallExec(8, {{"command", "echo hi"}});
  EXPECT_EQ(call["error"]["code"], -32600);
  json ping = Request(R"({"jsonrpc":"2.0","id":9,"method":"ping"})");
  EXPECT_EQ(ping["result"], json::object());
  Finish();
  // Nothing ran; each refusal is recorded as a protocol error (ping is no decision).
  auto entries = log_->Tail(10);
  ASSERT_EQ(entries->size(), 2u);
  for (const auto& e : *entries) {
    EXPECT_EQ(e.decision, "error");
    EXPECT_EQ(e.rule, "protocol");
    EXPECT_NE(e.reason.find("not initialized"), std::string::npos) << e.reason;
  }
}

TEST_F(StdioServerTest, UnknownMethodIsMethodNotFound) {
  Start(DefaultPolicy());
  Initialize();
  json r = Request(R"({"jsonrpc":"2.0","id":4,"method":"tools/frobnicate"})");
  EXPECT_EQ(r["id"], 4);
  EXPECT_EQ(r["error"]["code"], -32601);
  // Without upstreams the resource and prompt lists are empty, not errors.
  json resources = Request(R"({"jsonrpc":"2.0","id":5,"method":"resources/list"})");
  EXPECT_EQ(resources["result"]["resources"], json::array()) << resources.dump();
}

TEST_F(StdioServerTest, MalformedJsonIsAParseErrorWithANullIdAndTheServerGoesOn) {
  Start(DefaultPolicy());
  Initialize();
  json r = Request(R"({"jsonrpc":"2.0","id":5,"method":)");
  EXPECT_EQ(r["error"]["code"], -32700) << r.dump();
  EXPECT_TRUE(r["id"].is_null());
  json bad_shape = Request(R"({"jsonrpc":"1.0","id":6,"method":"ping"})");
  EXPECT_EQ(bad_shape["error"]["code"], -32600);
  json ping = Request(R"({"jsonrpc":"2.0","id":7,"method":"ping"})");
  EXPECT_EQ(ping["id"], 7);
  EXPECT_TRUE(ping.contains("result"));
}

TEST_F(StdioServerTest, OversizedLineIsRefusedWithoutBufferingItAndTheNextLineWorks) {
  Start(DefaultPolicy(), 1024);
  Initialize();
  Send(std::string(R"({"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":")") +
       std::string(100000, 'a') + "\"}}");
  json r = Receive();
  EXPECT_EQ(r["error"]["code"], -32600) << r.dump();
  json ping = Request(R"({"jsonrpc":"2.0","id":2,"method":"ping"})");
  EXPECT_EQ(ping["id"], 2);
}

TEST_F(StdioServerTest, UnknownToolIsInvalidParamsAndAudited) {
  Start(DefaultPolicy());
  Initialize();
  json r = Request(
      R"({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"fs__delete","arguments":{}}})");
  EXPECT_EQ(r["error"]["code"], -32602) << r.dump();
  EXPECT_NE(r["error"]["message"].get<std::string>().find("unknown tool: fs__delete"),
            std::string::npos);
  json no_name = Request(R"({"jsonrpc":"2.0","id":6,"method":"tools/call","params":{}})");
  EXPECT_EQ(no_name["error"]["code"], -32602);
  Finish();
  auto entries = log_->Tail(10);
  ASSERT_EQ(entries->size(), 1u);
  EXPECT_EQ((*entries)[0].tool, "fs__delete");
  EXPECT_EQ((*entries)[0].decision, "deny");
  EXPECT_TRUE(log_->Verify()->ok());
}

TEST_F(StdioServerTest, HiddenToolIsNotListedAndCallingItIsAnsweredAsUnknown) {
  Start(PolicyFromText(R"(version: 1
tools:
  - match: { tool: "sandbox__exec" }
    effect: deny
  - match: { tool: "web__fetch" }
    effect: deny
  - match: { tool: "task__end" }
    effect: deny
)"));
  Initialize();
  json list = Request(R"({"jsonrpc":"2.0","id":2,"method":"tools/list"})");
  EXPECT_EQ(list["result"]["tools"], json::array()) << list.dump();
  json call = CallExec(3, {{"command", "echo hi"}});
  EXPECT_EQ(call["error"]["code"], -32602) << call.dump();
  EXPECT_EQ(call["error"]["message"], "unknown tool: sandbox__exec");
  Finish();
  auto entries = log_->Tail(10);
  ASSERT_EQ(entries->size(), 1u);
  EXPECT_EQ((*entries)[0].rule.rfind("tools[0]", 0), 0u) << (*entries)[0].rule;
}

TEST_F(StdioServerTest, PolicyDenialAndAskComeBackAsErrorResultsNamingTheRule) {
  Start(PolicyFromText(R"(version: 1
tools:
  - match: { tool: "sandbox__exec", args: { "/command": { prefix: "curl" } } }
    effect: deny
  - match: { tool: "sandbox__exec", args: { "/command": { prefix: "sudo" } } }
    effect: ask
  - match: { tool: "sandbox__exec" }
    risk: low
)"));
  Initialize();
  json denied = CallExec(2, {{"command", "curl http://example.com"}});
  EXPECT_EQ(denied["result"]["isError"], true) << denied.dump();
  std::string text = denied["result"]["content"][0]["text"];
  EXPECT_NE(text.find("denied"), std::string::npos) << text;
  EXPECT_NE(text.find("tools[0]"), std::string::npos) << text;
  json ask = CallExec(3, {{"command", "sudo ls"}});
  EXPECT_NE(ask["result"]["content"][0]["text"].get<std::string>().find("approval required"),
            std::string::npos)
      << ask.dump();
  Finish();
  auto entries = log_->Tail(10);
  ASSERT_EQ(entries->size(), 2u);
  EXPECT_EQ((*entries)[0].decision, "deny");
  EXPECT_EQ((*entries)[1].decision, "ask");
  EXPECT_EQ((*entries)[1].rule.rfind("tools[1]", 0), 0u);
}

TEST_F(StdioServerTest, InvalidArgumentsAreAToolErrorTheModelCanFix) {
  Start(DefaultPolicy());
  Initialize();
  json r = CallExec(2, {{"cmd", "ls"}});
  EXPECT_EQ(r["result"]["isError"], true) << r.dump();
  EXPECT_NE(r["result"]["content"][0]["text"].get<std::string>().find("unknown argument 'cmd'"),
            std::string::npos);
  Finish();
  EXPECT_EQ((*log_->Tail(10))[0].decision, "error");
}

TEST_F(StdioServerTest, KilledToolIsDeniedOverTheWire) {
  Start(DefaultPolicy());
  gw_->kills.Kill(KillScope::kTool, "sandbox__exec", "maintenance");
  Initialize();
  json r = CallExec(2, {{"command", "echo hi"}});
  EXPECT_EQ(r["result"]["isError"], true);
  EXPECT_NE(r["result"]["content"][0]["text"].get<std::string>().find("maintenance"),
            std::string::npos);
}

TEST_F(StdioServerTest, SecondInitializeIsRefused) {
  Start(DefaultPolicy());
  Initialize();
  json again = Request(
      R"({"jsonrpc":"2.0","id":9,"method":"initialize","params":{"protocolVersion":"2025-06-18"}})");
  EXPECT_EQ(again["error"]["code"], -32600);
}

TEST_F(StdioServerTest, BatchesOnlyIn20250326) {
  Start(DefaultPolicy());
  json init = Request(
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26"}})");
  ASSERT_EQ(init["result"]["protocolVersion"], "2025-03-26");
  json batch = Request(
      R"([{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/x"},{"jsonrpc":"2.0","id":3,"method":"nope"}])");
  ASSERT_TRUE(batch.is_array()) << batch.dump();
  ASSERT_EQ(batch.size(), 2u);
  EXPECT_EQ(batch[0]["id"], 2);
  EXPECT_EQ(batch[1]["error"]["code"], -32601);
}

TEST_F(StdioServerTest, BatchesAreRefusedIn20250618) {
  Start(DefaultPolicy());
  Initialize();
  json batch = Request(R"([{"jsonrpc":"2.0","id":2,"method":"ping"}])");
  EXPECT_EQ(batch["error"]["code"], -32600);
}

TEST_F(StdioServerTest, CrLfLinesAndBlankLinesAreTolerated) {
  Start(DefaultPolicy());
  Send("");
  json ping = Request("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r");
  EXPECT_EQ(ping["id"], 1);
}

}  // namespace
}  // namespace warden::gateway
