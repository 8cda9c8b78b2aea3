#include "gateway/stages/stages.h"

namespace warden::gateway {

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
      // The approval stage holds the call for a person; the execute stage refuses it if none did.
      return StageOutcome::Continue();
    case policy::Effect::kDeny:
      return StageOutcome::Deny(Refusal::kDenied, d.reason, d.rule);
  }
  return StageOutcome::Deny(Refusal::kDenied, d.reason, d.rule);
}

std::unique_ptr<Stage> MakePolicyStage(const StageServices& services) {
  return std::make_unique<PolicyStage>(*services.policy);
}

}  // namespace warden::gateway
