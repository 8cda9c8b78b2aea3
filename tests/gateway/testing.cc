#include "testing.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "sandbox/pool.h"

namespace warden::gateway::testing {

std::string EchoFixture() {
  return std::string(WARDEN_SOURCE_DIR) + "/tests/upstream/fixtures/echo_server.py";
}
namespace {
// sandbox__exec launches the warden binary built beside these tests (sandbox/launcher.h).
const bool kLauncherSet = (setenv("WARDEN_BIN", WARDEN_BIN_PATH, /*overwrite=*/0), true);
}  // namespace

TempDir::TempDir() {
  const char* base = getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/warden-gw-XXXXXX";
  char* made = mkdtemp(tmpl.data());
  EXPECT_NE(made, nullptr) << "mkdtemp " << tmpl;
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::shared_ptr<const policy::Policy> PolicyFromText(const std::string& yaml) {
  auto loaded = policy::LoadPolicyText(yaml, "test.yaml");
  EXPECT_TRUE(loaded.ok()) << loaded.status().message();
  if (!loaded.ok()) return nullptr;
  return std::make_shared<const policy::Policy>(std::move(*loaded));
}

bool WaitExecPoolReady(const ExecPool& pool, uint32_t ready) {
  for (int i = 0; i < 500; ++i) {
    auto status = sandbox::pool::QueryStatus(pool.socket());
    if (status.ok() && (*status)["ready"].get<uint32_t>() >= ready) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ADD_FAILURE() << "the exec pool did not get " << ready << " sandboxes ready in 10 s";
  return false;
}

std::unique_ptr<ExecPool> StartReadyExecPool(const sandbox::Options& profile, uint32_t size) {
  auto pool = ExecPool::Start(profile, size);
  EXPECT_TRUE(pool.ok()) << pool.status().message();
  if (!pool.ok() || !WaitExecPoolReady(**pool, size)) return nullptr;
  return std::move(*pool);
}

std::unique_ptr<audit::AuditLog> OpenAudit(const std::string& path) {
  audit::AuditOptions options;
  options.path = path;
  auto log = audit::AuditLog::Open(options);
  EXPECT_TRUE(log.ok()) << log.status().message();
  if (!log.ok()) return nullptr;
  return std::move(*log);
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

std::future<nlohmann::json> SendRequest(McpSession& session, int id, const std::string& method,
                                        nlohmann::json params, MessageSink related) {
  auto promise = std::make_shared<std::promise<nlohmann::json>>();
  auto future = promise->get_future();
  Exchange exchange;
  exchange.related = std::move(related);
  exchange.reply = [promise](mcp::Message m) {
    promise->set_value(nlohmann::json::parse(mcp::Serialize(m)));
  };
  session.Handle(mcp::Request{mcp::Id(static_cast<int64_t>(id)), method, std::move(params)},
                 std::move(exchange));
  return future;
}

std::string ReplyText(const nlohmann::json& reply) {
  if (!reply.contains("result")) return "<" + reply.dump() + ">";
  return reply["result"]["content"][0]["text"].get<std::string>();
}

TestGateway::TestGateway(std::shared_ptr<const policy::Policy> policy,
                         const std::string& audit_path, identity::Caller caller, GatewayOptions options)
    : holder(std::move(policy)), audit(OpenAudit(audit_path)) {
  core = std::make_unique<GatewayCore>(holder, *audit, kills, tools, std::move(caller),
                                       std::move(options));
}

std::shared_ptr<McpSession> TestGateway::NewTaskContext(identity::Caller caller, std::string task) {
  auto context = std::make_shared<McpSession>(
      *core, std::move(caller),
      SessionOptions{.transport = "http", .modern = true, .task = std::move(task)});
  core->Register(context);
  return context;
}

bool Initialize2025(McpSession& session, const nlohmann::json& capabilities) {
  const nlohmann::json init = SendRequest(session, 1, "initialize",
                                          {{"protocolVersion", "2025-11-25"},
                                           {"capabilities", capabilities},
                                           {"clientInfo", {{"name", "t"}, {"version", "1"}}}})
                                  .get();
  session.Handle(mcp::Notification{"notifications/initialized", std::nullopt}, {});
  return init.contains("result");
}

std::shared_ptr<McpSession> TestGateway::NewSession(identity::Caller caller, std::string id) {
  auto session = std::make_shared<McpSession>(*core, std::move(caller),
                                              SessionOptions{.session_id = std::move(id)});
  core->Register(session);
  return session;
}

}  // namespace warden::gateway::testing
