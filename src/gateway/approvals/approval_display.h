// An approval as people read it (docs/approvals.md "What people see").
#pragma once

#include <nlohmann/json.hpp>

#include "state/approval_store.h"

namespace warden::gateway {

// state::ToJson(record) plus, for every text a person reads, NAME_display: the same through the
// one display rule (audit/display_text.h), so that bidirectional controls, other format
// characters and controls show as \u202e-style escapes. arguments_display is the arguments
// pretty-printed (2 spaces) the same way; reasons_display an array; each vote gets
// who_display and comment_display. The raw fields stay unchanged, for machines: the console
// renders only the _display ones. Used by the approvals API (the console's data) and the
// approval webhook.
nlohmann::json ApprovalJsonForPeople(const state::ApprovalRecord& record);

}  // namespace warden::gateway
