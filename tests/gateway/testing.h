// Helpers shared by the gateway tests: a temporary directory, policies from text, an audit log.
#pragma once

#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "audit/audit_log.h"
#include "gateway/builtins/builtin_tools.h"
#include "gateway/builtins/exec_pool.h"
#include "gateway/gateway.h"
#include "gateway/stages/kill_switches.h"
#include "gateway/session/session.h"
#include "policy/holder.h"
#include "policy/policy.h"

namespace warden::gateway::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// The real stdio MCP server the upstream tests use (tests/upstream/fixtures/echo_server.py).
std::string EchoFixture();
// Loads `yaml`; fails the test (and returns null) when it does not load.
std::shared_ptr<const policy::Policy> PolicyFromText(const std::string& yaml);
// Opens (creating) the audit log at `path`; fails the test on error.
std::unique_ptr<audit::AuditLog> OpenAudit(const std::string& path);
// Writes `text` to `path`.
void WriteFile(const std::string& path, const std::string& text);
// Starts an ExecPool of `size` sandboxes of `profile` and waits (up to 10 s) until all are ready:
// until then calls would run cold, as in `warden serve`'s first moments. Null (and a test
// failure) when it does not come up.
std::unique_ptr<ExecPool> StartReadyExecPool(const sandbox::Options& profile, uint32_t size);
// Waits (up to 10 s) until `pool` has `ready` sandboxes ready; fails the test when it does not.
bool WaitExecPoolReady(const ExecPool& pool, uint32_t ready);

// Sends request `id` to `session`; the future gets the reply as JSON. Messages related to it
// (progress, requests an upstream relays) go to `related` when given.
std::future<nlohmann::json> SendRequest(McpSession& session, int id, const std::string& method,
                                        nlohmann::json params, MessageSink related = nullptr);
// Runs a 2025-11-25 session's handshake (initialize with `capabilities`, then
// notifications/initialized); false when initialize got no result.
bool Initialize2025(McpSession& session, const nlohmann::json& capabilities);
// The first text content of a tools/call reply, or the whole reply in <> when it has no result.
std::string ReplyText(const nlohmann::json& reply);

// A whole gateway core on real parts: the policy given, an audit log in `dir`, in-memory kill
// switches, the built-in tools. Sessions made with NewSession are registered with the core.
struct TestGateway {
  TestGateway(std::shared_ptr<const policy::Policy> policy, const std::string& audit_path,
              identity::Caller caller = {"", "tester", "", ""}, GatewayOptions options = {});
  std::shared_ptr<McpSession> NewSession(identity::Caller caller = {"", "tester", "", ""},
                                         std::string id = "");
  // A 2026-07-28 task context (no protocol session) of `caller` and `task`, registered.
  std::shared_ptr<McpSession> NewTaskContext(identity::Caller caller, std::string task = "");

  policy::PolicyHolder holder;
  std::unique_ptr<audit::AuditLog> audit;
  KillSwitches kills;
  BuiltinTools tools = BuiltinTools::Default();
  std::unique_ptr<GatewayCore> core;  // last: destroyed first
};

}  // namespace warden::gateway::testing
