// Operators' changes to the state (kill, unkill, tool approvals) also go into the audit log, as
// `admin` entries in its hash chain: the state tables say what is in force, the chain proves who
// changed it and when, and `warden audit verify` finds any later edit.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"

namespace warden::state {

struct AdminAction {
  std::string who;     // the operator (the audit entry's user)
  std::string action;  // the entry's decision: "kill", "unkill", "approve"
  std::string tenant;  // the tenant a switch names ("" otherwise)
  std::string agent;   // the agent a switch names
  std::string session; // the session a switch names
  std::string tool;    // the tool a switch or an approval names (SERVER__TOOL)
  std::string rule;    // what changed: "kill_switch.agent:coder", "tool_pin.files__read"
  std::string reason;  // the operator's reason, or what the approval accepted
  nlohmann::json arguments = nlohmann::json::object();  // details (redacted by the log)
};

// Appends `action` as one admin entry to the audit log in the database at `db_path` (opened,
// and created when missing, like `warden serve` does), and returns once it is durable.
Status RecordAdminAction(const std::string& db_path, const AdminAction& action);

// The login name of the user running this process ("uid N" when it has none): who the CLI
// records as having made a change.
std::string OperatorName();

}  // namespace warden::state
