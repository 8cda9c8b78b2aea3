#include "gateway/stages/stages.h"

#include "audit/result_summary.h"
#include "schema/json_schema.h"

namespace warden::gateway {

StageOutcome IdentityStage::Run(CallContext& call) {
  if (call.tenant.empty()) call.tenant = caller_.tenant;
  if (call.user.empty()) call.user = caller_.user;
  if (call.agent.empty()) call.agent = caller_.agent;
  if (call.scope.empty()) call.scope = caller_.scope;
  return StageOutcome::Continue();
}

StageOutcome KillSwitchStage::Run(CallContext& call) {
  auto pulled = switches_.Check(call.tenant, call.agent, call.tool);
  if (!pulled) return StageOutcome::Continue();
  std::string reason = "stopped by kill switch " + pulled->first;
  if (!pulled->second.empty()) reason += ": " + pulled->second;
  return StageOutcome::Deny(Refusal::kDenied, reason, "kill_switch." + pulled->first);
}

StageOutcome PolicyStage::Run(CallContext& call) {
  call.policy = policy_.Current();
  if (!call.policy) return StageOutcome::Deny(Refusal::kInternal, "no policy is in force");
  if (call.server.empty()) call.server = policy::ServerForTool(*call.policy, call.tool);
  policy::Decision d =
      policy::Decide(*call.policy, {call.tenant, call.user, call.agent, call.scope},
                     {call.server, call.tool, call.arguments});
  call.decision = d;
  // A hidden tool is answered exactly like one that does not exist: no oracle for what is hidden.
  if (!d.visible)
    return StageOutcome::Deny(Refusal::kUnknownTool, "unknown tool: " + call.tool, d.rule);
  switch (d.effect) {
    case policy::Effect::kAllow:
      return StageOutcome::Continue();
    case policy::Effect::kAsk:
      return StageOutcome::Deny(Refusal::kDenied, "approval required: " + d.reason, d.rule);
    case policy::Effect::kDeny:
      return StageOutcome::Deny(Refusal::kDenied, d.reason, d.rule);
  }
  return StageOutcome::Deny(Refusal::kDenied, d.reason, d.rule);
}

StageOutcome ArgumentsStage::Run(CallContext& call) {
  if (call.tool_definition.is_null()) return StageOutcome::Continue();
  Status checked = schema::CheckToolArguments(call.tool_definition, call.arguments);
  if (!checked.ok())
    return StageOutcome::Deny(Refusal::kInvalidArguments,
                              "invalid arguments for " + call.tool + ": " + checked.message());
  return StageOutcome::Continue();
}

StageOutcome ExecuteStage::Run(CallContext& call) {
  if (call.forward) {
    // Parked until the upstream answers: the pipeline goes on on the thread that delivers it.
    call.park = [&call](std::function<void(StageOutcome)> resume) {
      call.forward(call, [&call, resume = std::move(resume)](Result<ToolResult> result) {
        if (!result) {
          // A kill switch or the client ended it: say why rather than the upstream's "cancelled".
          std::string why = result.status().message();
          if (call.cancel && call.cancel->cancelled())
            why = "the call was cancelled (" + call.cancel->reason() + "): " + why;
          resume(StageOutcome::Deny(Refusal::kInternal, why));
          return;
        }
        call.result = std::move(*result);
        resume(StageOutcome::Continue());
      });
    };
    return StageOutcome{StageResult::kPause, Refusal::kNone, "waiting for the upstream", ""};
  }
  const BuiltinTool* tool = tools_.Find(call.tool);
  if (tool == nullptr)
    return StageOutcome::Deny(Refusal::kUnknownTool, "unknown tool: " + call.tool);
  sandbox::Options profile = DefaultExecProfile();
  if (call.policy) {
    std::string name = call.decision ? call.decision->sandbox_profile : "";
    const auto& profiles = call.policy->sandbox.profiles;
    auto it = profiles.find(name.empty() ? std::string("default") : name);
    if (it != profiles.end()) {
      profile = it->second;
    } else if (!name.empty()) {
      return StageOutcome::Deny(Refusal::kInternal,
                                "sandbox profile '" + name + "' is not defined");
    }
  }
  if (tool->server == "sandbox") {
    // Which isolation ran the code, and why, goes into the audit entry (issue 5: the backend
    // chosen by profile or policy is recorded with its reason).
    const std::string rule = call.decision ? call.decision->rule : "";
    const bool named = call.decision && !call.decision->sandbox_profile.empty();
    call.execution = "sandbox profile '" +
                     (named ? call.decision->sandbox_profile : std::string("default")) + "'" +
                     (named && !rule.empty() ? " from rule " + rule : "") + ", backend " +
                     profile.backend;
  }
  ToolEnv env{.profile = std::move(profile), .policy = call.policy.get(), .cancel = call.cancel};
  auto result = tool->run(call.arguments, env);
  if (!result)
    return StageOutcome::Deny(Refusal::kInvalidArguments, "invalid arguments for " + call.tool +
                                                              ": " + result.status().message());
  call.result = std::move(*result);
  if (!call.result->execution.empty() && !call.execution.empty())
    call.execution += " (" + call.result->execution + ")";
  return StageOutcome::Continue();
}

namespace {

std::string DecisionWord(const CallContext& call) {
  const StageOutcome& v = call.verdict;
  switch (v.result) {
    case StageResult::kContinue:
      return "allow";
    case StageResult::kPause:
      return "pause";
    case StageResult::kDeny:
      break;
  }
  switch (v.refusal) {
    case Refusal::kInvalidArguments:
    case Refusal::kInternal:
      return "error";
    default:
      break;
  }
  if (call.verdict_stage == "policy" && call.decision &&
      call.decision->effect == policy::Effect::kAsk && call.decision->visible)
    return "ask";
  return "deny";
}

}  // namespace

audit::AuditEntry AuditEntryFor(const CallContext& call) {
  audit::AuditEntry e;
  e.tenant = call.tenant;
  e.user = call.user;
  e.agent = call.agent;
  e.session = call.session;
  e.tool = call.tool;
  e.arguments = call.arguments;
  e.decision = DecisionWord(call);
  if (call.verdict.result == StageResult::kContinue) {
    e.rule = call.decision ? call.decision->rule : "";
    e.reason = call.decision ? call.decision->reason : "";
  } else {
    e.rule = call.verdict.rule;
    e.reason = call.verdict_stage + ": " + call.verdict.reason;
  }
  if (!call.execution.empty())
    e.reason += (e.reason.empty() ? "" : "; ") + std::string("ran in ") + call.execution;
  if (call.decision) e.labels = call.decision->labels;
  if (call.result) {
    e.result = audit::SummarizeResult(call.result->text);
    e.kind = audit::EntryKind::kCall;
  } else {
    e.kind = audit::EntryKind::kDecision;
  }
  auto elapsed = std::chrono::steady_clock::now() - call.started;
  e.latency_us =
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(elapsed).count());
  return e;
}

StageOutcome AuditStage::Run(CallContext& call) {
  auto receipt = log_.Append(AuditEntryFor(call));
  if (!receipt)
    return StageOutcome::Deny(
        Refusal::kInternal, "the audit log could not record the call, so its result is withheld: " +
                                receipt.status().message());
  return StageOutcome::Continue();
}

std::unique_ptr<Pipeline> BuildStandardPipeline(const GatewayDeps& deps) {
  auto pipeline = std::make_unique<Pipeline>();
  pipeline->AddStage(std::make_unique<IdentityStage>(deps.caller));
  pipeline->AddStage(std::make_unique<KillSwitchStage>(*deps.kill_switches));
  pipeline->AddStage(std::make_unique<PolicyStage>(*deps.policy));
  pipeline->AddStage(std::make_unique<ArgumentsStage>());
  pipeline->AddStage(std::make_unique<ExecuteStage>(*deps.tools));
  pipeline->AddFinalStage(std::make_unique<AuditStage>(*deps.audit));
  return pipeline;
}

}  // namespace warden::gateway
