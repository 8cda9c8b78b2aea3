#include "gateway/stages/stages.h"

namespace warden::gateway {

StageOutcome IdentityStage::Run(CallContext& call) {
  if (call.tenant.empty()) call.tenant = caller_.tenant;
  if (call.user.empty()) call.user = caller_.user;
  if (call.agent.empty()) call.agent = caller_.agent;
  if (call.scope.empty()) call.scope = caller_.scope;
  return StageOutcome::Continue();
}

std::unique_ptr<Stage> MakeIdentityStage(const StageServices& services) {
  return std::make_unique<IdentityStage>(services.caller);
}

}  // namespace warden::gateway
