// What `warden policy check` prints: the policy as warden understood it, rules in the order they
// are tried, so that a reader can predict every decision from this text alone.
#include <sstream>

#include "policy/policy.h"

namespace warden::policy {
namespace {

std::string Join(const std::vector<std::string>& items, const char* separator = ", ") {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

std::string Globs(const std::vector<Glob>& globs) {
  std::vector<std::string> patterns;
  for (const auto& g : globs) patterns.push_back(g.pattern());
  return patterns.empty() ? "none" : Join(patterns);
}

std::string Bytes(uint64_t bytes) {
  if (bytes == 0) return "unlimited";
  if (bytes % (1ull << 30) == 0) return std::to_string(bytes >> 30) + "G";
  if (bytes % (1ull << 20) == 0) return std::to_string(bytes >> 20) + "M";
  if (bytes % (1ull << 10) == 0) return std::to_string(bytes >> 10) + "k";
  return std::to_string(bytes);
}

std::string Millis(uint64_t ms) {
  if (ms == 0) return "unlimited";
  if (ms % 60000 == 0) return std::to_string(ms / 60000) + "m";
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

// "no keys", "1 key", "3 keys".
std::string Count(size_t n, const char* one, const char* many) {
  if (n == 0) return std::string("no ") + many;
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// Approval timeouts: whole hours as "h" (168h reads better than 10080m).
std::string Timeout(uint64_t ms) {
  if (ms >= 3600000 && ms % 3600000 == 0) return std::to_string(ms / 3600000) + "h";
  return Millis(ms);
}

std::string Risks(const std::vector<Risk>& risks) {
  std::vector<std::string> names;
  for (Risk r : risks) names.push_back(RiskName(r));
  return Join(names);
}

// What a rule (or the default) gives, in one line.
std::string Gives(const Policy& policy, Risk risk, std::optional<Effect> effect, Access access,
                  LabelSet labels, const std::string& sandbox_profile) {
  std::string out = std::string("risk ") + RiskName(risk) + ", ";
  if (effect) {
    out += EffectName(*effect);
  } else {
    out += std::string(EffectName(policy.defaults.effect_by_risk[static_cast<size_t>(risk)])) +
           " (by risk)";
  }
  out += std::string(", access ") + AccessName(access);
  if (labels) out += ", labels " + Join(LabelNames(labels));
  if (!sandbox_profile.empty()) out += ", sandbox " + sandbox_profile;
  return out;
}

// An earlier rule that matches every call `later` matches, as far as cheap checks tell.
const Rule* ShadowedBy(const Policy& policy, size_t later_index) {
  const RuleMatch& later = policy.rules[later_index].match;
  auto covers = [](const std::string& earlier, const std::string& later_name) {
    return earlier.empty() || earlier == later_name;
  };
  for (size_t i = 0; i < later_index; ++i) {
    const RuleMatch& m = policy.rules[i].match;
    if (m.args.empty() && later.tool.CoveredBy(m.tool) && later.server.CoveredBy(m.server) &&
        covers(m.tenant, later.tenant) && covers(m.user, later.user) &&
        covers(m.agent, later.agent) && covers(m.scope, later.scope)) {
      return &policy.rules[i];
    }
  }
  return nullptr;
}

void IdentitySummary(const Policy& policy, std::ostream& out) {
  const auto& id = policy.identity;
  if (id.tenants.empty()) {
    out << "identity: single-user (no tenants declared: callers are not told apart)\n";
  } else {
    out << "identity:\n";
    for (const auto& [tname, tenant] : id.tenants) {
      out << "  tenant " << tname << "\n";
      for (const auto& [uname, user] : tenant.users) {
        out << "    user " << uname << (user.approver ? " (approver)" : "");
        out << ": tools " << (user.tools ? Globs(*user.tools) : "any") << ", "
            << Count(user.keys.size(), "key", "keys") << "\n";
      }
      for (const auto& [aname, agent] : tenant.agents) {
        out << "    agent " << aname << " acts for " << agent.user;
        if (!agent.profile.empty()) out << ", profile " << agent.profile;
        out << ", " << Count(agent.keys.size(), "key", "keys");
        if (agent.tools) out << ", tools " << Globs(*agent.tools);
        out << "\n";
      }
    }
  }
  if (id.jwt) {
    out << "  jwt: issuer " << id.jwt->issuer << ", keys from " << id.jwt->jwks_file
        << ", claims tenant=" << id.jwt->tenant_claim << " user=" << id.jwt->user_claim
        << " agent=" << id.jwt->agent_claim << "\n";
  }
}

void ApprovalsSummary(const Policy& policy, std::ostream& out) {
  const Approvals& a = policy.approvals;
  out << "approvals: time out after " << Timeout(a.timeout_ms) << ", self-approval "
      << (a.self_approve ? "allowed" : "not allowed")
      << (a.self_approve ? (a.client_decline_denies ? " (a client's in-band decline denies)"
                                                    : " (a client's in-band decline leaves it "
                                                      "to a person)")
                         : "")
      << ", two approvers for "
      << (a.two_person.empty() ? "no risk" : "risk " + Risks(a.two_person)) << "\n";
  if (a.approvers.empty()) {
    out << "  approvers: every user with approver: true in the call's tenant\n";
  } else {
    out << "  approvers (an approver must be listed by an entry that matches the call):\n";
    for (const ApproverGrant& g : a.approvers) {
      out << "    " << Join(g.users) << ": tools " << (g.tools.empty() ? "any" : Globs(g.tools))
          << ", risks " << (g.risks.empty() ? "any" : Risks(g.risks)) << "\n";
    }
  }
  if (a.webhook) {
    // The secret is never printed: only where it comes from.
    out << "  webhook: " << a.webhook->url << ", signed with "
        << (a.webhook->secret.starts_with("env:") ? "the secret in $" + a.webhook->secret.substr(4)
                                                  : std::string("a secret written in the policy"))
        << "\n";
  }
}

void UpstreamSummary(const Policy& policy, std::ostream& out) {
  if (policy.upstreams.empty()) return;
  out << "upstreams:\n";
  for (const auto& [name, up] : policy.upstreams) {
    out << "  " << name << ": ";
    if (!up.command.empty()) {
      out << "stdio `" << Join(up.command, " ") << "` in sandbox "
          << (up.sandbox_profile.empty() ? "(gateway default)" : up.sandbox_profile);
      if (!up.sandbox_allow.empty()) out << " allowing " << Join(up.sandbox_allow);
    } else {
      out << "http " << up.url;
    }
    out << "; tools appear as " << (up.prefix.empty() ? "their own names" : up.prefix + "__*");
    out << "; instances " << InstancesName(up.instances) << " (at most " << up.max_instances;
    if (up.instances != Instances::kPerSession)
      out << ", idle ones stop after " << up.idle_ms << " ms";
    out << ")";
    if (up.protocol != "auto") out << "; speaks MCP " << up.protocol << " only";
    std::vector<std::string> creds;
    for (const auto& [k, v] : up.credentials.env) creds.push_back("env " + k);
    for (const auto& [k, v] : up.credentials.header) creds.push_back("header " + k);
    if (!creds.empty()) out << "; credentials " << Join(creds);
    out << "\n";
  }
}

void SandboxSummary(const Policy& policy, std::ostream& out) {
  const auto& sb = policy.sandbox;
  if (sb.profiles.empty()) return;
  out << "sandbox profiles:\n";
  for (const auto& [name, o] : sb.profiles) {
    out << "  " << name << ": backend " << o.backend << ", memory " << Bytes(o.memory_bytes)
        << ", pids " << (o.pids ? std::to_string(o.pids) : "unlimited") << ", timeout "
        << Millis(o.timeout_ms) << ", net "
        << (o.net == sandbox::NetMode::kProxy ? "proxy" : "none");
    if (!o.allow.empty()) out << " allowing " << Join(o.allow);
    size_t rw = 0;
    for (const auto& b : o.binds) rw += b.writable ? 1 : 0;
    if (!o.binds.empty()) out << ", binds " << o.binds.size() << " (" << rw << " writable)";
    out << "\n";
  }
  if (sb.pool.set)
    out << "  pool: " << sb.pool.size << " x "
        << (sb.pool.profile.empty() ? "default" : sb.pool.profile) << "\n";
}

std::string Pointers(const std::vector<JsonPattern>& patterns) {
  std::string out;
  for (const JsonPattern& p : patterns) out += (out.empty() ? "" : ", ") + ("\"" + p.text() + "\"");
  return out;
}

void TrifectaSummary(const Policy& policy, std::ostream& out) {
  const TrifectaSection& t = policy.trifecta;
  out << "trifecta: a send while untrusted and private data are held -> " << EffectName(t.effect)
      << ", fingerprints " << (t.fingerprints ? "on" : "off")
      << ", a sessionless caller's legs last " << Timeout(t.caller_window_ms)
      << ", a named task's " << Timeout(t.task_window_ms) << " without a new one\n";
  for (const TrifectaOverride& o : t.overrides) {
    out << "  override line " << o.line << ": tenant " << (o.tenant.empty() ? "any" : o.tenant)
        << ", agent " << (o.agent.empty() ? "any" : o.agent) << ", tool "
        << (o.tool ? o.tool->pattern() : std::string("any")) << " ->";
    if (o.effect) out << " effect " << EffectName(*o.effect);
    if (o.fingerprints) out << " fingerprints " << (*o.fingerprints ? "on" : "off");
    out << "\n";
  }
}

void RuleSummary(const Policy& policy, std::ostream& out) {
  out << "rules (tried in this order; the first whose match holds decides):\n";
  for (size_t i = 0; i < policy.rules.size(); ++i) {
    const Rule& r = policy.rules[i];
    out << "  " << r.id << "  line " << r.line << "  " << r.match_text << "\n";
    out << "      -> " << Gives(policy, r.risk, r.effect, r.access, r.labels, r.sandbox_profile);
    if (r.undo) out << ", undo " << r.undo->tool << " " << r.undo->args.dump();
    if (!r.approvers.empty()) out << ", approvers " << Join(r.approvers);
    if (!r.flow.untrusted_parts.empty())
      out << ", untrusted parts " << Pointers(r.flow.untrusted_parts);
    if (!r.flow.private_parts.empty()) out << ", private parts " << Pointers(r.flow.private_parts);
    if (!r.flow.destinations.empty()) out << ", destinations " << Pointers(r.flow.destinations);
    if (!r.flow.hands_over.empty()) out << ", hands over " << Pointers(r.flow.hands_over);
    out << "\n";
    if (const Rule* earlier = ShadowedBy(policy, i)) {
      out << "      (never decides: " << earlier->id << " matches every call this one does)\n";
    }
  }
  const UnknownToolDefault& u = policy.defaults.unknown_tool;
  out << "  otherwise  defaults.unknown_tool\n";
  out << "      -> " << Gives(policy, u.risk, u.effect, u.access, u.labels, "") << "\n";
  const auto& e = policy.defaults.effect_by_risk;
  out << "effect by risk: low " << EffectName(e[0]) << ", medium " << EffectName(e[1]) << ", high "
      << EffectName(e[2]) << " (ask: approval required)\n";
}

}  // namespace

std::string Explain(const Policy& policy) {
  std::ostringstream out;
  out << "policy " << policy.origin << " (version " << policy.version << ")\n";
  out << "listen: " << policy.listen << "\n";
  out << "storage: "
      << (policy.storage.postgres.empty() ? "sqlite " + policy.storage.sqlite
                                          : "postgres " + policy.storage.postgres)
      << ", sync " << (policy.storage.sync_full ? "full" : "normal") << "\n";
  IdentitySummary(policy, out);
  ApprovalsSummary(policy, out);
  TrifectaSummary(policy, out);
  UpstreamSummary(policy, out);
  SandboxSummary(policy, out);
  if (!policy.agent_profiles.empty()) {
    out << "agent profiles:\n";
    for (const auto& [name, p] : policy.agent_profiles) {
      out << "  " << name << ": "
          << (p.never ? "hides tools labelled " + Join(LabelNames(p.never), " or ")
                      : "hides nothing")
          << "\n";
    }
  }
  if (!policy.scopes.empty()) {
    out << "scopes (a session may narrow itself to one):\n";
    for (const auto& [name, s] : policy.scopes) {
      out << "  " << name << ": tools " << (s.tools ? Globs(*s.tools) : "any") << ", access "
          << (s.access == Access::kRead ? "read only" : "read and write") << "\n";
    }
  }
  out << "egress allow: " << (policy.egress_allow.empty() ? "nothing" : Join(policy.egress_allow))
      << "\n";
  RuleSummary(policy, out);
  return out.str();
}

}  // namespace warden::policy
