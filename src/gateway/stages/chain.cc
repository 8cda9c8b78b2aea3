#include "gateway/stages/chain.h"

namespace warden::gateway {

// Each stage's factory, defined in its own file.
std::unique_ptr<Stage> MakeIdentityStage(const StageServices& services);
std::unique_ptr<Stage> MakeKillSwitchStage(const StageServices& services);
std::unique_ptr<Stage> MakePolicyStage(const StageServices& services);
std::unique_ptr<Stage> MakeArgumentsStage(const StageServices& services);
std::unique_ptr<Stage> MakeTrifectaStage(const StageServices& services);
std::unique_ptr<Stage> MakeTrifectaRecordStage(const StageServices& services);
std::unique_ptr<Stage> MakeApprovalStage(const StageServices& services);
std::unique_ptr<Stage> MakeCredentialsStage(const StageServices& services);
std::unique_ptr<Stage> MakeExecuteStage(const StageServices& services);
std::unique_ptr<Stage> MakeRedactStage(const StageServices& services);
std::unique_ptr<Stage> MakeAuditStage(const StageServices& services);
std::unique_ptr<Stage> MakeUndoStage(const StageServices& services);
std::unique_ptr<Stage> MakeMonitorStage(const StageServices& services);

const std::vector<ChainLink>& StandardChain() {
  // The one declaration of the order (docs/gateway.md shows it). Requests come in top to bottom
  // and their results go back bottom to top; final stages run last, whatever happened.
  // One stage per line, as the chain reads.
  // clang-format off
  static const std::vector<ChainLink> chain = {
      {"identity", MakeIdentityStage},
      {"kill_switches", MakeKillSwitchStage},
      {"policy", MakePolicyStage},
      {"arguments", MakeArgumentsStage},
      {"trifecta", MakeTrifectaStage},
      {"approval", MakeApprovalStage},
      {"credentials", MakeCredentialsStage},
      {"execute", MakeExecuteStage},
      {"redact", MakeRedactStage, /*final=*/true},
      {"audit", MakeAuditStage, /*final=*/true},
      {"undo", MakeUndoStage, /*final=*/true},
      {"trifecta_record", MakeTrifectaRecordStage, /*final=*/true},
      {"monitor", MakeMonitorStage, /*final=*/true},
  };
  // clang-format on
  return chain;
}

std::unique_ptr<Pipeline> BuildPipeline(const StageServices& services,
                                        const std::vector<ChainLink>& chain) {
  auto pipeline = std::make_unique<Pipeline>();
  for (const ChainLink& link : chain) {
    std::unique_ptr<Stage> stage = link.make(services);
    if (link.final) {
      pipeline->AddFinalStage(std::move(stage));
    } else {
      pipeline->AddStage(std::move(stage));
    }
  }
  return pipeline;
}

}  // namespace warden::gateway
