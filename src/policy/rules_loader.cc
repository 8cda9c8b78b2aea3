// Loads `tools:` (the rules) and `defaults:`. Globs are compiled, JSON pointers split and regexes
// compiled here, once, so that deciding a call allocates nothing for matching.
#include <cmath>
#include <optional>

#include "policy/loader.h"

namespace warden::policy::internal {
namespace {

Result<Risk> LoadRisk(const YamlReader& r, const YAML::Node& node, const std::string& path) {
  auto s = r.String(node, path);
  if (!s) return s.status();
  if (auto risk = ParseRisk(*s)) return *risk;
  return r.Error(node, path, "expected low, medium or high, got '" + *s + "'");
}

Result<Effect> LoadEffect(const YamlReader& r, const YAML::Node& node, const std::string& path) {
  auto s = r.String(node, path);
  if (!s) return s.status();
  if (auto effect = ParseEffect(*s)) return *effect;
  return r.Error(node, path, "expected allow, ask or deny, got '" + *s + "'");
}

Result<Access> LoadAccess(const YamlReader& r, const YAML::Node& node, const std::string& path) {
  auto s = r.String(node, path);
  if (!s) return s.status();
  if (auto access = ParseAccess(*s)) return *access;
  return r.Error(node, path, "expected read or write, got '" + *s + "'");
}

Result<double> LoadBound(const YamlReader& r, const YAML::Node& node, const std::string& path) {
  auto v = r.Scalar(node, path);
  if (!v) return v.status();
  if (v->quoted || !v->number || !std::isfinite(*v->number)) {
    return r.Error(node, path, "expected a number, got '" + v->text + "'");
  }
  return *v->number;
}

Result<ArgPredicate> LoadPredicate(const YamlReader& r, const std::string& kind,
                                   const YAML::Node& node, const std::string& path) {
  ArgPredicate p;
  if (kind == "equals") {
    p.kind = ArgPredicate::Kind::kEquals;
    auto v = r.Scalar(node, path);
    if (!v) return v.status();
    p.value = std::move(*v);
  } else if (kind == "in") {
    p.kind = ArgPredicate::Kind::kIn;
    if (!node.IsSequence() || node.size() == 0)
      return r.Error(node, path, "expected a non-empty list of values");
    for (size_t i = 0; i < node.size(); ++i) {
      auto v = r.Scalar(node[i], path + "[" + std::to_string(i) + "]");
      if (!v) return v.status();
      p.values.push_back(std::move(*v));
    }
  } else if (kind == "prefix" || kind == "suffix" || kind == "regex") {
    p.kind = kind == "prefix"   ? ArgPredicate::Kind::kPrefix
             : kind == "suffix" ? ArgPredicate::Kind::kSuffix
                                : ArgPredicate::Kind::kRegex;
    auto s = kind == "regex" ? r.NonEmptyString(node, path) : r.String(node, path);
    if (!s) return s.status();
    p.text = *s;
    if (p.kind == ArgPredicate::Kind::kRegex) {
      auto re = CompileRegex(p.text);
      if (!re) return r.Error(node, path, re.status().message());
      p.regex = std::move(*re);
    }
  } else if (kind == "min" || kind == "max") {
    p.kind = kind == "min" ? ArgPredicate::Kind::kMin : ArgPredicate::Kind::kMax;
    auto b = LoadBound(r, node, path);
    if (!b) return b.status();
    p.bound = *b;
  } else {
    p.kind = ArgPredicate::Kind::kExists;
    auto b = r.Bool(node, path);
    if (!b) return b.status();
    p.exists = *b;
  }
  return p;
}

Result<ArgCondition> LoadArgCondition(const YamlReader& r, const std::string& pointer,
                                      const YAML::Node& key_node, const YAML::Node& node,
                                      const std::string& path) {
  ArgCondition condition;
  auto parsed = JsonPointer::Parse(pointer);
  if (!parsed) return r.Error(key_node, path, parsed.status().message());
  condition.pointer = std::move(*parsed);
  std::optional<double> min, max;
  WARDEN_RETURN_IF_ERROR(
      r.Fields(node, path, {"equals", "prefix", "suffix", "regex", "in", "min", "max", "exists"},
               [&](const std::string& kind, const YAML::Node&, const YAML::Node& value) -> Status {
                 auto p = LoadPredicate(r, kind, value, path + "." + kind);
                 if (!p) return p.status();
                 if (kind == "min") min = p->bound;
                 if (kind == "max") max = p->bound;
                 condition.predicates.push_back(std::move(*p));
                 return Status::Ok();
               }));
  if (condition.predicates.empty()) {
    return r.Error(key_node, path,
                   "expected at least one of equals, prefix, suffix, regex, in, min, max, exists");
  }
  if (min && max && *min > *max)
    return r.Error(node, path, "min is greater than max: nothing could match");
  return condition;
}

// `match:` conditions. Names of tenants, users, agents and scopes must exist: a typo would
// otherwise make a rule silently never match.
Status LoadMatch(const YamlReader& r, const YAML::Node& node, const std::string& path,
                 const Policy& policy, RuleMatch* match) {
  const auto& tenants = policy.identity.tenants;
  auto user_exists = [&](const std::string& user) {
    for (const auto& [name, t] : tenants) {
      if ((match->tenant.empty() || name == match->tenant) && t.users.contains(user)) return true;
    }
    return false;
  };
  auto agent_exists = [&](const std::string& agent) {
    for (const auto& [name, t] : tenants) {
      if ((match->tenant.empty() || name == match->tenant) && t.agents.contains(agent)) return true;
    }
    return false;
  };
  // tenant first, so that user and agent are checked against it wherever they are written.
  if (node.IsMap() && node["tenant"].IsDefined()) {
    auto s = r.NonEmptyString(node["tenant"], path + ".tenant");
    if (!s) return s.status();
    if (!tenants.contains(*s)) {
      return r.Error(node["tenant"], path + ".tenant",
                     "expected a tenant under identity.tenants, got '" + *s + "'");
    }
    match->tenant = *s;
  }
  return r.Fields(
      node, path, {"tool", "server", "tenant", "user", "agent", "scope", "args"},
      [&](const std::string& key, const YAML::Node&, const YAML::Node& value) -> Status {
        const std::string kpath = path + "." + key;
        if (key == "args") {
          return r.Entries(
              value, kpath,
              [&](const std::string& pointer, const YAML::Node& key_node, const YAML::Node& v) {
                auto condition = LoadArgCondition(r, pointer, key_node, v, kpath + "." + pointer);
                if (!condition) return condition.status();
                match->args.push_back(std::move(*condition));
                return Status::Ok();
              });
        }
        if (key == "tenant") return Status::Ok();  // read above
        auto s = r.NonEmptyString(value, kpath);
        if (!s) return s.status();
        if (key == "tool") {
          match->tool = Glob(*s);
        } else if (key == "server") {
          match->server = Glob(*s);
        } else if (key == "user") {
          if (!user_exists(*s))
            return r.Error(value, kpath,
                           "expected a user under identity.tenants, got '" + *s + "'");
          match->user = *s;
        } else if (key == "agent") {
          if (!agent_exists(*s))
            return r.Error(value, kpath,
                           "expected an agent under identity.tenants, got '" + *s + "'");
          match->agent = *s;
        } else {
          if (!policy.scopes.contains(*s))
            return r.Error(value, kpath, "expected a scope under scopes, got '" + *s + "'");
          match->scope = *s;
        }
        return Status::Ok();
      });
}

Status LoadUndo(const YamlReader& r, const YAML::Node& node, const std::string& path, Undo* undo) {
  WARDEN_RETURN_IF_ERROR(r.Fields(
      node, path, {"tool", "args"},
      [&](const std::string& key, const YAML::Node&, const YAML::Node& v) -> Status {
        if (key == "tool") {
          auto s = r.NonEmptyString(v, path + ".tool");
          if (!s) return s.status();
          undo->tool = *s;
          return Status::Ok();
        }
        if (!v.IsMap())
          return r.Error(v, path + ".args", "expected a mapping of argument names to values");
        auto args = r.Json(v, path + ".args");
        if (!args) return args.status();
        undo->args = std::move(*args);
        return Status::Ok();
      }));
  if (undo->tool.empty())
    return r.Error(node, path, "missing 'tool': expected the compensating tool's name");
  if (undo->args.is_null()) undo->args = nlohmann::json::object();
  return Status::Ok();
}

// A rule's `approvers:`: users of the rule's tenant (match.tenant) when it names one, else of
// any tenant. An empty list is refused: it would read as "nobody" but mean "anyone".
Result<std::vector<std::string>> LoadRuleApprovers(const YamlReader& r, const YAML::Node& node,
                                                   const std::string& path, const Policy& policy,
                                                   const std::string& tenant) {
  auto users = r.NonEmptyStrings(node, path);
  if (!users) return users.status();
  if (users->empty()) {
    return r.Error(node, path,
                   "expected at least one user name (leave 'approvers' out to let every approver "
                   "decide)");
  }
  for (size_t i = 0; i < users->size(); ++i) {
    const std::string& user = (*users)[i];
    const std::string ipath = path + "[" + std::to_string(i) + "]";
    if (!tenant.empty()) {
      if (!policy.identity.tenants.at(tenant).users.contains(user)) {
        return r.Error(node[i], ipath,
                       "expected a user of tenant '" + tenant +
                           "' (the rule's match.tenant), got '" + user + "'");
      }
      continue;
    }
    bool exists = false;
    for (const auto& [name, t] : policy.identity.tenants) exists = exists || t.users.contains(user);
    if (!exists)
      return r.Error(node[i], ipath, "expected a user under identity.tenants, got '" + user + "'");
  }
  return users;
}

std::string OneLine(const YAML::Node& node) {
  YAML::Emitter out;
  out << YAML::Flow << node;
  return out.c_str();
}

Result<Rule> LoadRule(const YamlReader& r, const YAML::Node& node, size_t index,
                      const Policy& policy) {
  Rule rule;
  rule.id = "tools[" + std::to_string(index) + "]";
  rule.line = YamlReader::Line(node);
  const std::string& path = rule.id;
  if (!node.IsMap())
    return r.Error(node, path, "expected a rule: a mapping with 'match:' and what it gives");
  bool has_match = false;
  std::optional<YAML::Node> approvers;  // checked once match.tenant is known
  WARDEN_RETURN_IF_ERROR(r.Fields(
      node, path,
      {"match", "risk", "effect", "access", "labels", "sandbox", "undo", "approvers",
       "credentials", "untrusted_output", "private_output", "destinations", "hands_over"},
      [&](const std::string& key, const YAML::Node& key_node, const YAML::Node& value) -> Status {
        const std::string kpath = path + "." + key;
        if (key == "match") {
          has_match = true;
          rule.match_text = value.IsNull() ? "{}" : OneLine(value);
          return LoadMatch(r, value, kpath, policy, &rule.match);
        }
        if (key == "risk") {
          auto risk = LoadRisk(r, value, kpath);
          if (!risk) return risk.status();
          rule.risk = *risk;
        } else if (key == "effect") {
          auto effect = LoadEffect(r, value, kpath);
          if (!effect) return effect.status();
          rule.effect = *effect;
        } else if (key == "access") {
          auto access = LoadAccess(r, value, kpath);
          if (!access) return access.status();
          rule.access = *access;
        } else if (key == "labels") {
          auto labels = LoadLabels(r, value, kpath);
          if (!labels) return labels.status();
          rule.labels = *labels;
        } else if (key == "sandbox") {
          auto profile = r.NonEmptyString(value, kpath);
          if (!profile) return profile.status();
          if (!policy.sandbox.profiles.contains(*profile)) {
            return r.Error(
                value, kpath,
                "expected the name of a profile under sandbox.profiles, got '" + *profile + "'");
          }
          rule.sandbox_profile = *profile;
        } else if (key == "undo") {
          rule.undo.emplace();
          return LoadUndo(r, value, kpath, &*rule.undo);
        } else if (key == "approvers") {
          approvers = value;
        } else if (key == "untrusted_output" || key == "private_output" ||
                   key == "destinations" || key == "hands_over") {
          auto pointers = LoadPointers(r, value, kpath);
          if (!pointers) return pointers.status();
          FlowSpec& f = rule.flow;
          (key == "untrusted_output" ? f.untrusted_parts
           : key == "private_output" ? f.private_parts
           : key == "destinations"   ? f.destinations
                                     : f.hands_over) = std::move(*pointers);
        } else {
          return r.Error(
              key_node, kpath,
              "per-rule credentials are not supported yet (issue: credentials: secret store, token "
              "minting and injection); remove the key for now");
        }
        return Status::Ok();
      }));
  if (!has_match)
    return r.Error(node, path,
                   "missing 'match:': expected the tool (and optionally more) it applies to");
  // A field list is the label, narrowed to those parts.
  if (!rule.flow.untrusted_parts.empty()) rule.labels |= kUntrustedOutput;
  if (!rule.flow.private_parts.empty()) rule.labels |= kPrivateOutput;
  if ((!rule.flow.destinations.empty() || !rule.flow.hands_over.empty()) &&
      !(rule.labels & kExternalSend))
    return r.Error(node, path,
                   "destinations and hands_over describe a send: add external_send to the rule's "
                   "labels (the trifecta only checks calls that can send data out)");
  if (approvers) {
    auto users = LoadRuleApprovers(r, *approvers, path + ".approvers", policy, rule.match.tenant);
    if (!users) return users.status();
    rule.approvers = std::move(*users);
  }
  rule.text = rule.id + " " + rule.match_text;
  return rule;
}

}  // namespace

Result<LabelSet> LoadLabels(const YamlReader& r, const YAML::Node& node, const std::string& path) {
  if (!node.IsSequence()) return r.Error(node, path, "expected a list of labels");
  LabelSet labels = 0;
  for (size_t i = 0; i < node.size(); ++i) {
    const std::string ipath = path + "[" + std::to_string(i) + "]";
    auto s = r.String(node[i], ipath);
    if (!s) return s.status();
    auto label = ParseLabel(*s);
    if (!label) {
      return r.Error(
          node[i], ipath,
          "expected untrusted_output, private_output, external_send or sensitive, got '" + *s + "'");
    }
    labels |= *label;
  }
  return labels;
}

Status LoadDefaults(const YamlReader& r, const YAML::Node& node, Policy* policy) {
  Defaults& d = policy->defaults;
  return r.Fields(
      node, "defaults", {"effect_by_risk", "unknown_tool"},
      [&](const std::string& key, const YAML::Node&, const YAML::Node& value) {
        const std::string path = "defaults." + key;
        if (key == "effect_by_risk") {
          return r.Fields(
              value, path, {"low", "medium", "high"},
              [&](const std::string& risk, const YAML::Node&, const YAML::Node& v) -> Status {
                auto effect = LoadEffect(r, v, path + "." + risk);
                if (!effect) return effect.status();
                d.effect_by_risk[static_cast<size_t>(*ParseRisk(risk))] = *effect;
                return Status::Ok();
              });
        }
        return r.Fields(
            value, path, {"risk", "effect", "access", "labels"},
            [&](const std::string& k, const YAML::Node&, const YAML::Node& v) -> Status {
              const std::string kpath = path + "." + k;
              UnknownToolDefault& u = d.unknown_tool;
              if (k == "risk") {
                auto risk = LoadRisk(r, v, kpath);
                if (!risk) return risk.status();
                u.risk = *risk;
              } else if (k == "effect") {
                auto effect = LoadEffect(r, v, kpath);
                if (!effect) return effect.status();
                u.effect = *effect;
              } else if (k == "access") {
                auto access = LoadAccess(r, v, kpath);
                if (!access) return access.status();
                u.access = *access;
              } else {
                auto labels = LoadLabels(r, v, kpath);
                if (!labels) return labels.status();
                u.labels = *labels;
              }
              return Status::Ok();
            });
      });
}

Status LoadRules(const YamlReader& r, const YAML::Node& node, Policy* policy) {
  if (node.IsNull()) return Status::Ok();
  if (!node.IsSequence())
    return r.Error(node, "tools", "expected a list of rules (each '- match: ...')");
  for (size_t i = 0; i < node.size(); ++i) {
    auto rule = LoadRule(r, node[i], i, *policy);
    if (!rule) return rule.status();
    policy->rules.push_back(std::move(*rule));
  }
  return Status::Ok();
}

}  // namespace warden::policy::internal
