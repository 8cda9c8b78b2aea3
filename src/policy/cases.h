// Policy test cases (`warden policy test FILE CASES.yaml`): calls with the decision expected for
// each, so that a policy change that moves a decision is caught before it is deployed.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "policy/policy.h"

namespace warden::policy {

// One case: a single call by a caller, and optionally what it must get.
struct PolicyCase {
  std::string name;
  CallContext context;
  ToolCall call;  // server: as given, else derived with ServerForTool
  std::optional<Effect> expect_effect;
  std::optional<Risk> expect_risk;
  std::optional<std::string> expect_rule;  // "tools[3]", or the whole rule text
  int line = 0;
};

struct CaseOutcome {
  Decision decision;
  std::vector<std::string> mismatches;  // "effect: expected deny, got ask"; empty when it passed
};

// Reads a cases file: a YAML list of {name, tenant, user, agent, scope, server, tool, args,
// expect: {effect, risk, rule}}. Errors name the file, line and what was expected. `policy`
// supplies the server of calls that do not name one.
Result<std::vector<PolicyCase>> LoadCasesFile(const std::string& path, const Policy& policy);
Result<std::vector<PolicyCase>> LoadCasesText(const std::string& yaml, const std::string& origin,
                                              const Policy& policy);

// Decides the case's call and compares with what it expects.
CaseOutcome RunCase(const Policy& policy, const PolicyCase& c);

}  // namespace warden::policy
