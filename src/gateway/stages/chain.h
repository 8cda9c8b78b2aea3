// The order of the pipeline's stages, declared once (chain.cc: StandardChain), and what they are
// built from. A new stage is a new file that defines its Stage and a factory, plus one line in
// StandardChain; nothing in the core changes. docs/gateway.md ("The pipeline") shows the chain.
#pragma once

#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "gateway/pipeline/pipeline.h"
#include "identity/caller.h"

namespace warden::audit {
class AuditLog;
}
namespace warden::policy {
class PolicyHolder;
}
namespace warden::state {
class UndoStore;
}

namespace warden::gateway {

class ApprovalGate;
class BuiltinTools;
class CredentialBroker;
class KillSwitches;
class FlowTracker;
class Alerts;

// What stages are built from; nothing is owned, all must outlive the pipeline. A stage that
// needs a new service adds a field here; whoever builds the gateway sets it
// (GatewayOptions::services), and the gateway core passes it through untouched.
struct StageServices {
  const policy::PolicyHolder* policy = nullptr;
  const KillSwitches* kill_switches = nullptr;
  const BuiltinTools* tools = nullptr;
  audit::AuditLog* audit = nullptr;
  identity::Caller caller;  // who calls when the transport says nothing (stdio: the local user)
  // Where calls the policy sends to a person wait (approvals/approval_gate.h). Null: such calls
  // are refused ("approval required"), as before there was a gate.
  ApprovalGate* approvals = nullptr;
  // Runs work on the gateway's worker pool (the core fills it in): a stage whose call resumes
  // on a thread that must not run the rest of the chain (the gate's) posts it here.
  std::function<void(std::function<void()>)> post;
  // Where the undo stage records each call's compensating call (state/undo_store.h). Null: no
  // undo plans are recorded (and `warden undo` finds none).
  state::UndoStore* undo = nullptr;
  // Secrets and tokens at call time, and what the redact stage hides (credentials/broker.h).
  // Null: no credentials are injected (a policy that names any is refused before this) and only
  // the well-known shapes of secrets are redacted.
  CredentialBroker* credentials = nullptr;
  // The trifecta's per-session state (trifecta/flow_tracker.h). Null: the trifecta stage keeps
  // its own, in memory only (it is never off: a policy without `trifecta:` gets its defaults).
  FlowTracker* trifecta = nullptr;
  // The anomaly detectors and what their alerts do (alerts.h); the core fills it in with its
  // own. Null: the monitor stage counts and logs, and detects nothing.
  Alerts* alerts = nullptr;
  // task__end: cancels every other call in flight of the same principal and task (or, for a
  // call in no named task, the same session) with `why`, and says how many. The core fills it in.
  std::function<size_t(const CallContext&, const std::string& why)> end_task;
};

// One link of a chain: the stage's stable name, how to build it, and whether it is final (runs
// whatever happened before it, as audit does).
struct ChainLink {
  std::string_view name;
  std::unique_ptr<Stage> (*make)(const StageServices& services);
  bool final = false;
};

// identity -> kill_switches -> policy -> arguments -> trifecta -> approval -> credentials ->
// execute, then redact, audit, undo, trifecta_record and monitor as final stages.
const std::vector<ChainLink>& StandardChain();

// The pipeline of `chain` (StandardChain() unless a test or bench builds its own), built from
// `services`.
std::unique_ptr<Pipeline> BuildPipeline(const StageServices& services,
                                        const std::vector<ChainLink>& chain = StandardChain());

}  // namespace warden::gateway
