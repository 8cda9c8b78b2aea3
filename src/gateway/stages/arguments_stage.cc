#include "gateway/stages/stages.h"
#include "schema/json_schema.h"

namespace warden::gateway {

StageOutcome ArgumentsStage::Run(CallContext& call) {
  if (call.tool_definition.is_null()) return StageOutcome::Continue();
  Status checked = schema::CheckToolArguments(call.tool_definition, call.arguments);
  if (!checked.ok())
    return StageOutcome::Deny(Refusal::kInvalidArguments,
                              "invalid arguments for " + call.tool + ": " + checked.message());
  return StageOutcome::Continue();
}

std::unique_ptr<Stage> MakeArgumentsStage(const StageServices&) {
  return std::make_unique<ArgumentsStage>();
}

}  // namespace warden::gateway
