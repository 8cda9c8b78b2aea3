// Policy test cases (`warden policy test FILE CASES.yaml`): calls with the decision expected for
// each, so that a policy change that moves a decision is caught before it is deployed.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "policy/policy.h"
#include "policy/trifecta.h"

namespace warden::policy {

// What a call must get (any part may be left out).
struct CaseExpect {
  std::optional<Effect> effect;
  std::optional<Risk> risk;
  std::optional<std::string> rule;  // "tools[3]", the whole rule text, or "trifecta..."
  bool any() const { return effect || risk || rule; }
};

// One call of a sequence: the call, what it returned (when it ran), what it must get, and
// whether it is the exfiltration a scenario is about (for the figures `policy test` prints).
struct CaseStep {
  ToolCall call;                         // server: as given, else derived with ServerForTool
  std::optional<nlohmann::json> result;  // a CallToolResult, built from `result:` (see below)
  CaseExpect expect;
  bool attack = false;
  int line = 0;
};

// One case: a single call by a caller, or a session of calls (`calls:`), each decided against
// what the earlier ones brought into the session (the trifecta, docs/trifecta.md).
struct PolicyCase {
  std::string name;
  CallContext context;
  ToolCall call;  // single call: server as given, else derived with ServerForTool
  CaseExpect expect;
  std::vector<CaseStep> steps;  // a sequence when not empty (then `call` is unused)
  int line = 0;
};

// What one call got: the policy's decision, the trifecta's verdict, and the two together.
struct StepOutcome {
  Decision decision;
  TrifectaCheck trifecta;
  Effect effect = Effect::kDeny;        // the stronger of decision.effect and trifecta.effect
  std::string rule;                     // the trifecta's rule when it decided, else the decision's
  std::vector<std::string> mismatches;  // "effect: expected deny, got ask"; empty: it passed
};

struct CaseOutcome {
  Decision decision;                    // single call: its decision; sequence: the last step's
  std::vector<std::string> mismatches;  // single call: as StepOutcome's; sequence: every step's
  std::vector<StepOutcome> steps;       // sequence: one per step
};

// Reads a cases file: a YAML list of {name, tenant, user, agent, scope, server, tool, args,
// expect: {effect, risk, rule}}, or of {name, tenant, user, agent, scope, calls: [{server, tool,
// args, result, expect, attack}]}. A step's `expect` may be a bare effect (`expect: ask`); its
// `result` is the tool's structured result (a mapping or list) or its text (a string). Errors
// name the file, line and what was expected. `policy` supplies the server of calls that do not
// name one.
Result<std::vector<PolicyCase>> LoadCasesFile(const std::string& path, const Policy& policy);
Result<std::vector<PolicyCase>> LoadCasesText(const std::string& yaml, const std::string& origin,
                                              const Policy& policy);

// Decides the case's call (or each call of its sequence in turn: a call that is not denied and
// has a result adds what it returned to the session, as an approved call would) and compares
// with what it expects.
CaseOutcome RunCase(const Policy& policy, const PolicyCase& c);

}  // namespace warden::policy
