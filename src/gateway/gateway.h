// What every session of one warden process shares: the policy in force, the audit log, the kill
// switches, the built-in tools, the pipeline, the worker pool, and how to reach upstream servers.
// Transports create sessions from it (`warden mcp`: one; `warden serve`: one per MCP session).
// Contract: docs/gateway.md.
#pragma once

#include <boost/asio/steady_timer.hpp>
#include <array>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "audit/audit_log.h"
#include "gateway/alerts.h"
#include "common/status.h"
#include "gateway/builtins/builtin_tools.h"
#include "gateway/stages/kill_switches.h"
#include "gateway/pipeline/pipeline.h"
#include "gateway/session/request_state.h"
#include "gateway/stages/chain.h"
#include "gateway/stages/stages.h"
#include "monitor/metrics.h"
#include "policy/holder.h"
#include "upstream/client.h"

namespace warden::gateway {

class McpSession;
class ToolPins;
class UpstreamInstances;

// How to make an upstream client (upstream::Client::Create in the warden binary). Unset: the
// gateway has no upstreams (a policy that names some is refused at session start with a clear
// error). A seam only so that the gateway library does not force the client on every test.
using UpstreamFactory = std::function<Result<std::unique_ptr<upstream::Client>>(
    upstream::Spec, upstream::Events, upstream::ClientOptions)>;

// Optional: reviews an upstream's tools/list against the pinned manifest (rug-pull defence) and
// returns the upstream tool names that may be shown. Unset: every tool is shown.
using PinReview = std::function<Result<std::vector<std::string>>(
    const std::string& server, const std::string& prefix, const nlohmann::json& tools)>;

struct GatewayOptions {
  std::string server_version = "0.1.0";
  int worker_threads = 64;  // built-in calls hold a worker while they run; forwarded ones do not
  // The control executor's threads (PostControl): the admin API and the cancelling of calls a
  // kill switch covers. Never shared with calls, so calls that hold every worker (built-ins,
  // and soon calls waiting for a person) cannot starve the request that would stop them.
  int control_threads = 2;
  std::chrono::milliseconds upstream_ready_timeout{20000};
  // A tool list an upstream gave with ttlMs (2026-07-28) is listed again when it runs out, but
  // never sooner than this after the last listing (a server saying 0 is not listed in a loop).
  std::chrono::milliseconds min_list_ttl{5000};
  UpstreamFactory make_upstream;
  PinReview pin_review;
  // The pin store's approval generation: when it changes (`warden tools approve`), each
  // session reviews its upstreams' tools again, so approved tools appear without a restart.
  std::function<int64_t()> pin_generation;
  // The pipeline's chain: empty for StandardChain() (stages/chain.cc); tests and benches put
  // their own stages in.
  std::vector<ChainLink> chain;
  // Services for stages beyond the core's own (the core fills in policy, kill switches, tools,
  // audit log, alerts and default caller, and passes the rest to every stage's factory
  // untouched).
  StageServices services;
  // Where the first_domain detector's first uses are stored (state/seen_domains.h); unset: in
  // memory only, so a restart alerts on each domain again.
  Alerts::RememberDomain remember_domain;
  // The secret MCP 2026-07-28 request states are sealed under (session/request_state.h): the
  // secret store's master key, so that gateways sharing it open each other's states. Unset: a
  // random key, and states do not survive a restart (the client is asked again).
  std::optional<std::array<uint8_t, 32>> request_state_secret;
};

// Everything a session needs; nothing here is owned by a session. Thread-safe.
class GatewayCore {
 public:
  // Nothing is owned but the pipeline and the pool; policy, audit, switches and tools must
  // outlive the core.
  GatewayCore(policy::PolicyHolder& policy, audit::AuditLog& audit, KillSwitches& switches,
              const BuiltinTools& tools, identity::Caller default_caller, GatewayOptions options = {});
  ~GatewayCore();

  policy::PolicyHolder& policy() { return policy_; }
  audit::AuditLog& audit() { return audit_; }
  KillSwitches& kill_switches() { return switches_; }
  const BuiltinTools& tools() const { return tools_; }
  Pipeline& pipeline() { return *pipeline_; }
  const GatewayOptions& options() const { return options_; }

  // Runs `work` on the worker pool (calls and what they need).
  void Post(std::function<void()> work);
  // Runs `work` on the control executor: the admin and console API, and what a kill switch
  // does to calls in flight. Short jobs only (a store write, an audit append); never a call.
  void PostControl(std::function<void()> work);
  // Runs `work` on a worker once `delay` has passed, unless the returned timer is cancelled
  // first (then `work` never runs). Short jobs only, as for Post. Whoever holds the timer
  // cancels it before the core goes: a pending timer keeps the pool from finishing.
  std::shared_ptr<boost::asio::steady_timer> PostAfter(std::chrono::milliseconds delay,
                                                       std::function<void()> work);

  // The anomaly detectors and their alerts (alerts.h), which the monitor stage feeds.
  Alerts& alerts() { return *alerts_; }

  // The live upstream instances every session draws from (upstream_instances.h).
  UpstreamInstances& instances() { return *instances_; }

  // Seals and opens MCP 2026-07-28 request states (session/request_state.h).
  const RequestStateSealer& request_states() const { return *request_states_; }
  // The "upstream" request states already used on this node (single use, request_state.h).
  UsedStates& used_states() { return used_states_; }

  // The sandbox options a stdio upstream runs with: the policy's profile for it when named,
  // else the default (read-only: the executable's directory, the directories of absolute paths
  // among its arguments, the current directory; no network; no limits that need cgroups), plus
  // its egress allow-list.
  static Result<sandbox::Options> UpstreamSandbox(const policy::Policy& policy,
                                                  const policy::Upstream& upstream);

  // Records a request refused before the pipeline (a protocol error, an HTTP refusal) as a
  // decision entry with decision "error" and rule "protocol". Blocks for the write.
  void AuditRefusal(const identity::Caller& caller, const std::string& session, const std::string& what,
                    const std::string& reason);

  // Sessions register so that a kill switch can reach their calls in flight: the core listens
  // to its KillSwitches, and a switch that comes into force (pulled here, through the admin
  // API, or by `warden kill` in another process) cancels the calls it covers, from the control
  // executor.
  void Register(const std::shared_ptr<McpSession>& session);
  void Unregister(const McpSession* session);
  std::vector<std::shared_ptr<McpSession>> Sessions() const;

 private:
  // The collector of the gauges and stage figures /metrics shows (gateway_metrics.cc).
  monitor::Registry::Handle RegisterMetrics();
  // Cancels every call in flight that a switch of `scope` and `name` covers (all of them for
  // the global switch).
  void CancelCovered(KillScope scope, const std::string& name, const std::string& reason);

  policy::PolicyHolder& policy_;
  audit::AuditLog& audit_;
  KillSwitches& switches_;
  const BuiltinTools& tools_;
  GatewayOptions options_;
  // Before the pipeline, whose monitor stage uses it; its work runs on control_, joined in the
  // destructor's body.
  std::unique_ptr<Alerts> alerts_;
  std::unique_ptr<Pipeline> pipeline_;
  boost::asio::thread_pool pool_;
  boost::asio::thread_pool control_;
  std::unique_ptr<UpstreamInstances> instances_;
  std::unique_ptr<RequestStateSealer> request_states_;
  UsedStates used_states_;
  mutable std::mutex sessions_mu_;
  std::vector<std::weak_ptr<McpSession>> sessions_;
  // What the kill-switch listener reaches the core through: the switches outlive the core and
  // may call their listeners until they go, so the destructor clears this first.
  struct Listening {
    std::mutex mu;
    GatewayCore* core = nullptr;
  };
  std::shared_ptr<Listening> listening_;
  // Last member: removed (waiting for a scrape that reads the members above) before they go.
  monitor::Registry::Handle metrics_;
};

// The name an upstream item is exposed under: PREFIX__NAME, or NAME when the prefix is empty.
std::string ExposedName(const std::string& prefix, const std::string& name);

// The name the policy decides a non-tool request on an upstream by: UPSTREAM__METHOD
// ("everything__resources/read", "files__prompts/get", "everything__sampling/createMessage").
std::string MethodToolName(const std::string& upstream, const std::string& method);

}  // namespace warden::gateway
