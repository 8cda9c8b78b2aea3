// What `warden mcp` and `warden serve` share: their common flags, and turning them into a running
// gateway core (policy in force, audit log, kill switches, built-in tools, upstream client, tool
// pins, hot reload of the policy file).
#pragma once

#include <CLI/CLI.hpp>
#include <atomic>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "audit/audit_log.h"
#include "common/status.h"
#include "gateway/audit_checkpoints.h"
#include "gateway/approvals/approval_gate.h"
#include "gateway/approvals/approval_webhook.h"
#include "gateway/builtins/builtin_tools.h"
#include "gateway/builtins/exec_pool.h"
#include "credentials/redactor.h"
#include "credentials/secret_store.h"
#include "credentials/tokens.h"
#include "gateway/credentials/broker.h"
#include "gateway/gateway.h"
#include "gateway/stages/kill_switches.h"
#include "identity/identity.h"
#include "policy/holder.h"
#include "state/pins.h"
#include "state/seen_domains.h"
#include "gateway/trifecta/flow_tracker.h"
#include "state/trifecta_store.h"
#include "state/undo_store.h"

namespace warden::cli {

struct GatewayFlags {
  std::string config;                  // --config
  std::string audit_db;                // --audit-db
  std::vector<std::string> upstreams;  // --upstream NAME=stdio:'CMD ARGS' | NAME=http://URL
  bool no_prefix = false;              // --no-prefix
  // --exec-pool: sandbox__exec's pre-warmed sandboxes (absent: the policy's sandbox.pool.size)
  std::optional<uint32_t> exec_pool;

  void AddTo(CLI::App* sub);
};

// Splits `text` into words like a shell would for a simple command: whitespace separates,
// single and double quotes group, backslash escapes outside single quotes. Error on an unclosed
// quote.
Result<std::vector<std::string>> SplitCommand(const std::string& text);

// One --upstream flag: NAME=stdio:COMMAND... or NAME=http(s)://URL.
struct UpstreamFlag {
  std::string name;
  std::vector<std::string> command;
  std::string url;
};
Result<UpstreamFlag> ParseUpstreamFlag(const std::string& text);

// The policy the flags ask for: the --config file, or the embedded default; with --upstream
// flags and no config, the embedded default plus those upstreams, whose tools are allowed at
// risk medium (the quick-use mode); with a config, the flags' upstreams are added to it (its
// rules decide their tools). Errors name the flag or file.
Result<std::shared_ptr<const policy::Policy>> PolicyFromFlags(const GatewayFlags& flags);

// A running gateway core and everything it borrows. Destroying it stops the policy watcher,
// closes sessions and joins the workers.
class Gateway {
 public:
  // With `identity` (warden serve), the policy's identity section is built into an
  // Authenticator too, at start and on every reload: a policy whose identity cannot be built
  // (an unreadable JWKS file, a bad key) is refused as a whole, like a policy with a syntax error.
  static Result<std::unique_ptr<Gateway>> Start(
      const GatewayFlags& flags, identity::Caller caller, std::ostream& log,
      std::optional<identity::IdentityOptions> identity = std::nullopt);
  ~Gateway();

  gateway::GatewayCore& core() { return *core_; }
  policy::PolicyHolder& policy() { return holder_; }
  // The authenticator built from the policy in force (null without `identity`). Put in force
  // before its policy, and replaced only with it: a reload either brings both or neither.
  std::shared_ptr<const identity::Authenticator> authenticator() const {
    return auth_.load(std::memory_order_acquire);
  }
  const std::string& audit_path() const { return audit_path_; }
  gateway::ApprovalGate& approvals() { return *approvals_; }
  gateway::ApprovalWebhook& webhook() { return webhook_; }
  state::UndoStore& undo() { return *undo_; }  // undo plans (docs/approvals.md "Undo")
  // The token minter (null without a credentials section): its public keys are served at
  // /.well-known/jwks.json.
  credentials::TokenMinter* minter() { return minter_.get(); }
  gateway::CredentialBroker* broker() { return broker_.get(); }
  // Loads the --config file again now (SIGHUP), and with it its identity (the JWKS file). One
  // unit: the whole new policy with its keys, or, on any error, the whole old one and a logged
  // error. The watcher retries when the policy file or its JWKS file changes, and on SIGHUP.
  // A policy that asks for another exec pool (size or profile) gets it (ExecPoolSlot::Apply).
  // Returns whether the new policy is in force.
  bool Reload();

 private:
  Gateway(GatewayFlags flags, std::ostream& log) : flags_(std::move(flags)), log_(log) {}
  using Stamp = std::pair<int64_t, int64_t>;
  // A file's modification time and size ({-1, -1}: cannot be stat'ed).
  static Stamp FileStamp(const std::string& path);
  // The --config file's stamp and that of the JWKS file the last policy read from it names.
  std::pair<Stamp, Stamp> ConfigStamp();
  void Watch(std::pair<Stamp, Stamp> last);
  // The pin review hid some of `server`'s tools: each changed or new one goes to the
  // tool_changed detector.
  void ReportHiddenTools(const std::string& server, const std::set<std::string>& shown);
  // Gives sandbox__exec the pool `policy` and --exec-pool ask for; says so when it changes.
  void ApplyExecPool(const policy::Policy& policy);

  GatewayFlags flags_;
  std::ostream& log_;
  policy::PolicyHolder holder_;
  std::unique_ptr<audit::AuditLog> audit_;
  std::unique_ptr<gateway::KillSwitches> switches_;
  std::unique_ptr<state::PinStore> pins_;
  std::unique_ptr<state::SeenDomainStore> seen_;  // outlives core_, whose alerts write to it
  gateway::ApprovalWebhook webhook_;                  // approvals.webhook; outlives approvals_
  std::unique_ptr<gateway::ApprovalGate> approvals_;  // outlives core_, whose calls wait in it
  std::unique_ptr<state::UndoStore> undo_;  // undo plans (options.services.undo); outlives core_
  // The trifecta's state (options.services.trifecta), both outliving core_.
  std::unique_ptr<state::TrifectaStore> flows_;
  std::unique_ptr<gateway::FlowTracker> flow_tracker_;
  // Credentials (docs/credentials.md), all outliving core_: the store and the minter when the
  // policy has a credentials section; the redactor and the broker always.
  std::unique_ptr<credentials::SecretStore> secrets_;
  std::unique_ptr<credentials::TokenMinter> minter_;
  credentials::Redactor redactor_;
  std::unique_ptr<gateway::CredentialBroker> broker_;
  gateway::ExecPoolSlot pools_;             // outlives tools_ and core_, which use it
  gateway::BuiltinTools tools_;
  std::unique_ptr<gateway::GatewayCore> core_;
  std::string audit_path_;
  std::optional<identity::IdentityOptions> identity_;
  std::atomic<std::shared_ptr<const identity::Authenticator>> auth_;
  std::mutex reload_mu_;
  std::string jwks_path_;  // under reload_mu_: identity.jwt.jwks_file of the last policy read
  std::atomic<bool> stop_{false};
  std::thread watcher_;
  // Checkpoints of the audit log by the gateway itself (storage.checkpoints): last, so that it
  // stops first.
  std::unique_ptr<gateway::AuditCheckpointer> checkpointer_;
};

}  // namespace warden::cli
