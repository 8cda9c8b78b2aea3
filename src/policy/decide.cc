// Deciding one call and filtering tools/list. Pure functions of (Policy, caller, call); the only
// allocations are the strings of the Decision returned.
#include <optional>

#include "policy/policy.h"
#include "policy/rule_index.h"
#include "policy/trifecta.h"

namespace warden::policy {
namespace {

// The caller's entries in the policy; all null in single-user mode (no tenants declared).
struct Caller {
  const User* user = nullptr;
  const Agent* agent = nullptr;
  const AgentProfile* profile = nullptr;
  const Scope* scope = nullptr;
};

// Why a call is refused before any rule is consulted. Such tools are also hidden from the caller.
struct Refusal {
  std::string rule, reason;
};

std::optional<Refusal> ResolveCaller(const Policy& policy, const CallContext& ctx, Caller* caller) {
  if (!ctx.scope.empty()) {
    auto scope = policy.scopes.find(ctx.scope);
    if (scope == policy.scopes.end()) {
      return Refusal{"scopes",
                     "unknown scope '" + ctx.scope +
                         "': a session may only narrow itself to a scope the policy defines"};
    }
    caller->scope = &scope->second;
  }
  const auto& tenants = policy.identity.tenants;
  if (tenants.empty()) return std::nullopt;  // single-user mode
  auto tenant = tenants.find(ctx.tenant);
  if (tenant == tenants.end()) return Refusal{"identity", "unknown tenant '" + ctx.tenant + "'"};
  auto user = tenant->second.users.find(ctx.user);
  if (user == tenant->second.users.end()) {
    return Refusal{"identity", "'" + ctx.user + "' is not a user of tenant '" + ctx.tenant + "'"};
  }
  caller->user = &user->second;
  if (ctx.agent.empty()) return std::nullopt;
  auto agent = tenant->second.agents.find(ctx.agent);
  if (agent == tenant->second.agents.end()) {
    return Refusal{"identity",
                   "'" + ctx.agent + "' is not an agent of tenant '" + ctx.tenant + "'"};
  }
  if (agent->second.user != ctx.user) {
    return Refusal{"identity", "agent '" + ctx.agent + "' acts for user '" + agent->second.user +
                                   "', not '" + ctx.user + "'"};
  }
  caller->agent = &agent->second;
  if (!agent->second.profile.empty()) {
    auto profile = policy.agent_profiles.find(agent->second.profile);
    if (profile != policy.agent_profiles.end()) caller->profile = &profile->second;
  }
  return std::nullopt;
}

bool AnyMatches(const std::vector<Glob>& globs, std::string_view tool) {
  for (const Glob& g : globs) {
    if (g.Matches(tool)) return true;
  }
  return false;
}

std::string GlobList(const std::vector<Glob>& globs) {
  std::string out;
  for (const Glob& g : globs) out += (out.empty() ? "" : ", ") + g.pattern();
  return out;
}

// The limits that come before the rules: the user's tools, the agent's tools (never more than its
// user's: both must admit the tool), the session's scope (it can only take tools away).
std::optional<Refusal> CheckToolLimits(const Caller& caller, const CallContext& ctx,
                                       std::string_view tool) {
  if (caller.user && caller.user->tools && !AnyMatches(*caller.user->tools, tool)) {
    return Refusal{"identity.tenants." + ctx.tenant + ".users." + ctx.user + ".tools",
                   "user '" + ctx.user + "' may not use '" + std::string(tool) +
                       "' (their tools: " + GlobList(*caller.user->tools) + ")"};
  }
  if (caller.agent && caller.agent->tools && !AnyMatches(*caller.agent->tools, tool)) {
    return Refusal{"identity.tenants." + ctx.tenant + ".agents." + ctx.agent + ".tools",
                   "agent '" + ctx.agent + "' may not use '" + std::string(tool) +
                       "' (its tools: " + GlobList(*caller.agent->tools) + ")"};
  }
  if (caller.scope && caller.scope->tools && !AnyMatches(*caller.scope->tools, tool)) {
    return Refusal{"scopes." + ctx.scope, "'" + std::string(tool) +
                                              "' is outside the session's scope '" + ctx.scope +
                                              "' (tools: " + GlobList(*caller.scope->tools) + ")"};
  }
  return std::nullopt;
}

bool IdentityConditionsHold(const RuleMatch& m, const CallContext& ctx) {
  return (m.tenant.empty() || m.tenant == ctx.tenant) && (m.user.empty() || m.user == ctx.user) &&
         (m.agent.empty() || m.agent == ctx.agent) && (m.scope.empty() || m.scope == ctx.scope);
}

bool ServerAndArgsHold(const RuleMatch& m, const ToolCall& call) {
  if (!m.server.Matches(call.server)) return false;
  for (const ArgCondition& condition : m.args) {
    if (!condition.Holds(call.arguments)) return false;
  }
  return true;
}

template <typename Visit>
void ForEachCandidate(const Policy& policy, std::string_view tool, Visit&& visit) {
  if (policy.index) {
    policy.index->ForEachCandidate(tool, visit);
    return;
  }
  for (uint32_t i = 0; i < policy.rules.size(); ++i) {
    if (!visit(i)) return;
  }
}

Effect EffectOf(const Policy& policy, std::optional<Effect> effect, Risk risk) {
  return effect ? *effect : policy.defaults.effect_by_risk[static_cast<size_t>(risk)];
}

// One walk over the rules that may apply to a tool name, in order, answers both questions:
// which rule decides a call (the first whose whole match holds) and whether the name is visible
// (every outcome that some server or arguments could give, up to the first rule that applies to
// every call of this name, or defaults.unknown_tool when none does).
class RuleWalk {
 public:
  RuleWalk(const Policy& policy, const Caller& caller, const CallContext& ctx,
           std::string_view tool, const ToolCall* call) {
    ForEachCandidate(policy, tool, [&](uint32_t i) {
      const Rule& rule = policy.rules[i];
      const RuleMatch& m = rule.match;
      if (!IdentityConditionsHold(m, ctx) || !m.tool.Matches(tool)) return true;
      Consider(caller, EffectOf(policy, rule.effect, rule.risk), rule.access, rule.labels);
      if (call && !decided_ && ServerAndArgsHold(m, *call)) decided_ = &rule;
      always_ = m.server.matches_all() && m.args.empty();
      return !always_;
    });
    if (!always_) {
      const UnknownToolDefault& u = policy.defaults.unknown_tool;
      Consider(caller, EffectOf(policy, u.effect, u.risk), u.access, u.labels);
    }
  }

  const Rule* decided() const { return decided_; }
  bool Visible(const Caller& caller, LabelSet hint) const {
    if (caller.profile && ((labels_ | hint) & caller.profile->never)) return false;
    return permitted_;
  }

 private:
  void Consider(const Caller& caller, Effect effect, Access access, LabelSet labels) {
    labels_ |= labels;
    bool read_only = caller.scope && caller.scope->access == Access::kRead;
    if (effect != Effect::kDeny && !(read_only && access == Access::kWrite)) permitted_ = true;
  }

  const Rule* decided_ = nullptr;
  bool always_ = false;
  LabelSet labels_ = 0;
  bool permitted_ = false;
};

std::string LabelText(LabelSet labels) {
  std::string out;
  for (const std::string& name : LabelNames(labels)) out += (out.empty() ? "" : ", ") + name;
  return out;
}

}  // namespace

Decision Decide(const Policy& policy, const CallContext& ctx, const ToolCall& call) {
  Decision d;
  Caller caller;
  std::optional<Refusal> refusal = ResolveCaller(policy, ctx, &caller);
  if (!refusal) refusal = CheckToolLimits(caller, ctx, call.tool);
  if (refusal) {
    d.rule = std::move(refusal->rule);
    d.reason = std::move(refusal->reason);
    return d;  // deny, high, write, hidden
  }

  RuleWalk walk(policy, caller, ctx, call.tool, &call);
  const Rule* rule = walk.decided();
  std::optional<Effect> effect;
  LabelSet labels;
  if (rule) {
    d.risk = rule->risk;
    d.access = rule->access;
    labels = rule->labels;
    effect = rule->effect;
    d.sandbox_profile = rule->sandbox_profile;
    d.rule = rule->text;
    d.rule_index = static_cast<int>(rule - policy.rules.data());
  } else {
    const UnknownToolDefault& u = policy.defaults.unknown_tool;
    d.risk = u.risk;
    d.access = u.access;
    labels = u.labels;
    effect = u.effect;
    d.rule = "defaults.unknown_tool";
  }
  d.effect = EffectOf(policy, effect, d.risk);
  labels |= IntrinsicLabels(policy, call.tool, call.server, d.sandbox_profile);
  d.labels = LabelNames(labels);
  d.visible = walk.Visible(caller, 0);

  if (caller.profile && (labels & caller.profile->never)) {
    d.effect = Effect::kDeny;
    d.reason = "agent '" + ctx.agent + "' has profile '" + caller.agent->profile +
               "', which never uses tools labelled " + LabelText(labels & caller.profile->never) +
               " (" + (rule ? rule->id : d.rule) + " gives them)";
    d.rule = "agent_profiles." + caller.agent->profile;
    return d;
  }
  if (caller.scope && caller.scope->access == Access::kRead && d.access == Access::kWrite) {
    d.effect = Effect::kDeny;
    d.reason = "scope '" + ctx.scope + "' is read-only and " + (rule ? rule->id : d.rule) +
               " gives write access (only rules with access: read are usable in it)";
    d.rule = "scopes." + ctx.scope;
    return d;
  }
  std::string& reason = d.reason;  // on the hot path: one allocation
  reason.reserve(64 + call.tool.size());
  if (!rule) reason.append("no rule matches '").append(call.tool).append("'; ");
  reason.append("risk ").append(RiskName(d.risk)).append(" -> ").append(EffectName(d.effect));
  if (!effect) {
    reason.append(" (defaults.effect_by_risk.").append(RiskName(d.risk)).append(")");
  } else {
    reason.append(rule ? " (the rule's effect)" : " (defaults.unknown_tool.effect)");
  }
  return d;
}

bool Visible(const Policy& policy, const CallContext& ctx, const std::string& tool,
             const std::vector<std::string>& labels_hint) {
  Caller caller;
  if (ResolveCaller(policy, ctx, &caller) || CheckToolLimits(caller, ctx, tool)) return false;
  LabelSet hint = LabelSetOf(labels_hint);
  hint |= IntrinsicLabels(policy, tool, "", "");
  return RuleWalk(policy, caller, ctx, tool, nullptr).Visible(caller, hint);
}

std::string ServerForTool(const Policy& policy, const std::string& tool) {
  if (tool.starts_with("sandbox__")) return "sandbox";
  if (tool.starts_with("web__")) return "web";
  std::string unprefixed;
  int unprefixed_count = 0;
  for (const auto& [name, upstream] : policy.upstreams) {
    if (upstream.prefix.empty()) {
      unprefixed = name;
      ++unprefixed_count;
    } else if (tool.starts_with(upstream.prefix + "__")) {
      return name;
    }
  }
  return unprefixed_count == 1 ? unprefixed : "";
}

}  // namespace warden::policy
