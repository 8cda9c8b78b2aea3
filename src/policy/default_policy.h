// The embedded default policy, in force when `warden mcp` / `warden serve` run without --config.
#pragma once

#include <string_view>

#include "common/status.h"
#include "policy/policy.h"

namespace warden::policy {

// The YAML text: single-user (no tenants), sandbox__exec allowed at risk medium, every other tool
// denied (defaults.unknown_tool: high, deny).
std::string_view DefaultPolicyText();
// DefaultPolicyText loaded by the policy engine (origin "<embedded default policy>").
Result<policy::Policy> LoadDefaultPolicy();

}  // namespace warden::policy
