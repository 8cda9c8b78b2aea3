#include "gateway/approvals/approval_display.h"

#include "audit/display_text.h"

namespace warden::gateway {

nlohmann::json ApprovalJsonForPeople(const state::ApprovalRecord& record) {
  nlohmann::json j = state::ToJson(record);
  audit::AddDisplayFields(j, {"tool", "server", "tenant", "user", "agent", "session", "rule",
                              "reason", "reasons", "decided_by", "comment"});
  j["arguments_display"] = audit::JsonForDisplay(j["arguments"]);
  if (j.contains("votes") && j["votes"].is_array()) {
    for (nlohmann::json& vote : j["votes"]) audit::AddDisplayFields(vote, {"who", "comment"});
  }
  return j;
}

}  // namespace warden::gateway
