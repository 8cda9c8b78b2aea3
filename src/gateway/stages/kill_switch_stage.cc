#include "gateway/stages/stages.h"

namespace warden::gateway {

StageOutcome KillSwitchStage::Run(CallContext& call) {
  auto pulled = switches_.Check({call.tenant, call.user, call.agent, call.session, call.tool, call.task});
  if (!pulled) return StageOutcome::Continue();
  std::string reason = "stopped by kill switch " + pulled->first;
  if (!pulled->second.empty()) reason += ": " + pulled->second;
  return StageOutcome::Deny(Refusal::kDenied, reason, "kill_switch." + pulled->first);
}

std::unique_ptr<Stage> MakeKillSwitchStage(const StageServices& services) {
  return std::make_unique<KillSwitchStage>(*services.kill_switches);
}

}  // namespace warden::gateway
