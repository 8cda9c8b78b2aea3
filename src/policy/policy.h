// The policy engine's API: load a policy file, decide a tool call, filter tools/list, explain.
// Everything here except the loaders is pure: no I/O, no locks, no sleeping; decisions on the same
// Policy may run concurrently from any number of threads. Schema and semantics: docs/policy.md.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"
#include "policy/model.h"

namespace warden::policy {

// Who is calling, as the gateway's identity stage established it. `agent` may be empty (the user
// acting directly); `scope` is the task scope the session narrowed itself to, or empty.
struct CallContext {
  std::string tenant, user, agent, scope;
};

// One tool call. `tool` is the full exposed name (mail__send_email); `server` is the upstream's
// name (or the built-in's: sandbox, web) and may be empty when unknown.
struct ToolCall {
  std::string server, tool;
  nlohmann::json arguments;
};

struct Decision {
  Effect effect = Effect::kDeny;
  Risk risk = Risk::kHigh;
  Access access = Access::kWrite;
  std::vector<std::string> labels;  // of the rule (or default) that decided
  std::string rule;             // what decided: "tools[3] {tool: ...}", "defaults.unknown_tool",
                                // "scopes.NAME", "agent_profiles.NAME", "identity..."
  std::string reason;           // one line, for the agent, the audit log and `policy test`
  std::string sandbox_profile;  // the rule's sandbox profile, or empty
  int rule_index = -1;          // the deciding rule's index in Policy::rules, or -1 (a default,
                                // an identity or scope decision)
  bool visible = false;         // what Visible() says for this caller and tool name: the
                                // gateway answers calls to invisible tools as unknown tools
};

// Decides one call. Order: the caller must be known (tenant, user, agent acting for that user);
// the tool must be among the user's and the agent's `tools` and inside the session's scope; then
// the first rule in file order whose match holds gives risk, effect (or defaults.effect_by_risk),
// access and labels, and defaults.unknown_tool stands in when none does; the agent's profile
// denies labels it says `never` to, and a read scope denies write access. `ask` is returned as
// ask: the gateway turns it into "approval required". Never allocates for matching; the Decision's
// strings are the only allocations.
Decision Decide(const Policy& policy, const CallContext& context, const ToolCall& call);

// Whether `tool` belongs in this caller's tools/list. False when the caller is unknown, when the
// user's or agent's `tools` or the scope leave it out, when every rule that can apply denies it
// (or, in a read scope, gives write access), or when it may carry a label the agent's profile says
// `never` to. The labels considered are those of every rule that may match the name (whatever the
// arguments or server) plus `labels_hint` (names as in the policy; unknown names are ignored):
// hints can only hide a tool, never show one.
bool Visible(const Policy& policy, const CallContext& context, const std::string& tool,
             const std::vector<std::string>& labels_hint);

// Loads and checks a policy file. Errors say "FILE:LINE: where: what was expected"; nothing is
// returned on error. The only functions here that do I/O.
Result<Policy> LoadPolicyFile(const std::string& path);
// Same, from YAML text; `origin` names it in errors.
Result<Policy> LoadPolicyText(const std::string& yaml, const std::string& origin);

// The human-readable summary `warden policy check` prints: sections, then the rules in the order
// they are tried, with what each gives and any rule an earlier one always wins over.
std::string Explain(const Policy& policy);

// The upstream a full tool name belongs to, from the upstreams' prefixes (`sandbox` and `web` for
// the built-ins), or empty when none matches. For tools (like `policy test`) that know only names.
std::string ServerForTool(const Policy& policy, const std::string& tool);

}  // namespace warden::policy
