// The standard stages, one .cc each (identity_stage.cc, ...); chain.cc declares their order:
//   identity -> kill_switches -> policy -> arguments -> trifecta -> approval -> credentials
//   -> execute -> (final) redact, audit, undo, trifecta_record, monitor
#pragma once

#include <memory>
#include <string>

#include "audit/audit_log.h"
#include "gateway/builtins/builtin_tools.h"
#include "gateway/pipeline/pipeline.h"
#include "gateway/stages/chain.h"
#include "gateway/stages/kill_switches.h"
#include "identity/caller.h"
#include "policy/holder.h"

namespace warden::gateway {

// Fills the caller's tenant, user, agent and scope from a fixed identity (the stdio transport's
// local user) where the transport left them empty. The seam for API keys and JWTs (HTTP): that
// stage denies unauthenticated callers; this one never denies.
class IdentityStage : public Stage {
 public:
  explicit IdentityStage(identity::Caller caller) : caller_(std::move(caller)) {}
  std::string_view name() const override { return "identity"; }
  StageOutcome Run(CallContext& call) override;

 private:
  identity::Caller caller_;
};

// Denies calls stopped by a kill switch (global, tenant, user, agent, session or tool).
class KillSwitchStage : public Stage {
 public:
  explicit KillSwitchStage(const KillSwitches& switches) : switches_(switches) {}
  std::string_view name() const override { return "kill_switches"; }
  StageOutcome Run(CallContext& call) override;

 private:
  const KillSwitches& switches_;
};

// policy::Decide on the policy in force (one snapshot per call, kept in call.policy). A tool the
// caller may not see is refused as unknown; `deny` is a denial naming the rule; `ask` continues
// with the decision in call.decision, for the approval stage (and the execute stage refuses a
// call the policy sent to a person that no approval released). No policy in force: denied
// (fail closed).
class PolicyStage : public Stage {
 public:
  explicit PolicyStage(const policy::PolicyHolder& policy) : policy_(policy) {}
  std::string_view name() const override { return "policy"; }
  StageOutcome Run(CallContext& call) override;

 private:
  const policy::PolicyHolder& policy_;
};

// Checks an upstream tool's arguments against the inputSchema of its (pinned) definition
// (json_schema.h): arguments that fail it never reach the upstream, and the model reads why.
class ArgumentsStage : public Stage {
 public:
  std::string_view name() const override { return "arguments"; }
  StageOutcome Run(CallContext& call) override;
};

// A call the policy answered with `ask` waits here for a person (ApprovalGate): stored with its
// exact arguments and bound to them, the caller and the tool's definition; nothing runs before
// the decision. Approved: the stored call continues, once (ApprovalGranted in call.state).
// Denied, expired, cancelled: a tool error naming what happened. Without a gate: refused with
// "approval required". docs/approvals.md.
class ApprovalStage : public Stage {
 public:
  ApprovalStage(ApprovalGate* gate, audit::AuditLog* audit,
                std::function<void(std::function<void()>)> post)
      : gate_(gate), audit_(audit), post_(std::move(post)) {}
  std::string_view name() const override { return "approval"; }
  StageOutcome Run(CallContext& call) override;

 private:
  ApprovalGate* gate_;
  audit::AuditLog* audit_;
  std::function<void(std::function<void()>)> post_;
};

// The sandbox profile a built-in call runs on: the one the decision names, else the policy's
// `sandbox.profiles.default`, else DefaultExecProfile(). Error: a named profile that is missing.
Result<sandbox::Options> ChooseSandboxProfile(const CallContext& call);

// What the credentials stage gives a sandbox__exec call (in CallContext::state): the variables
// of the profile's egress `credentials`, the calling user's secrets, for the `warden run` child's
// own environment. The sandbox sees placeholders; the child's proxy holds the values.
struct SandboxLaunchEnv {
  std::map<std::string, std::string> env;
};

// Runs the tool (built-ins only in this slice) on the sandbox profile the decision names, else
// the policy's `sandbox.profiles.default`, else DefaultExecProfile(); fills call.result. A tool
// that does not exist is refused as unknown, arguments it rejects as invalid.
class ExecuteStage : public Stage {
 public:
  // `end_task`: StageServices::end_task (task__end's cancelling of the task's other calls).
  explicit ExecuteStage(const BuiltinTools& tools,
                        std::function<size_t(const CallContext&, const std::string&)> end_task = {})
      : tools_(tools), end_task_(std::move(end_task)) {}
  std::string_view name() const override { return "execute"; }
  StageOutcome Run(CallContext& call) override;

 private:
  const BuiltinTools& tools_;
  std::function<size_t(const CallContext&, const std::string&)> end_task_;
};

// A final stage: appends one entry per call to the audit log (a `call` entry when the tool ran, a
// `decision` entry when it was refused), with caller, tool, arguments (redacted by the log),
// decision, rule, reason, result summary, labels and latency. Runs after a denial too. When the
// entry cannot be written it denies (kInternal): the result never goes back unrecorded.
class AuditStage : public Stage {
 public:
  explicit AuditStage(audit::AuditLog& log) : log_(log) {}
  std::string_view name() const override { return "audit"; }
  StageOutcome Run(CallContext& call) override;

 private:
  audit::AuditLog& log_;
};

// The audit entry AuditStage writes for `call` (exposed for tests).
audit::AuditEntry AuditEntryFor(const CallContext& call);
// How a call ended, as the audit log and /metrics name it: the verdict's own decision ("ask"),
// else allow, deny, error (bad arguments, a failure inside warden) or pause.
std::string CallDecision(const CallContext& call);

// Counts every call in /metrics (monitor/families.h): warden_tool_calls_total by caller, tool
// and decision, and its time from arrival; when the policy's monitoring.logs says so, writes the
// call's JSON line (monitor/call_log.h) with its audit entry's id; and hands the call to the
// anomaly detectors (alerts.h), whose alerts are handled off the call path. Final and last, so
// that the figures include the audit write; it never denies.
class MonitorStage : public Stage {
 public:
  using Sink = std::function<void(std::string_view line)>;
  explicit MonitorStage(Alerts* alerts = nullptr);  // lines to stderr
  MonitorStage(Sink sink, Alerts* alerts = nullptr) : sink_(std::move(sink)), alerts_(alerts) {}
  std::string_view name() const override { return "monitor"; }
  StageOutcome Run(CallContext& call) override;

 private:
  void Detect(const CallContext& call, const std::string& decision);
  Sink sink_;
  Alerts* alerts_;
};

}  // namespace warden::gateway
