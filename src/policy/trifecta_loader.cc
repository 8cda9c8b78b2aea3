// The `trifecta:` section and the rules' JSON pointer lists (docs/trifecta.md, "Policy").
#include <algorithm>

#include "policy/loader.h"
#include "sandbox/options.h"

namespace warden::policy::internal {

Result<std::vector<JsonPattern>> LoadPointers(const YamlReader& r, const YAML::Node& node,
                                              const std::string& path) {
  if (!node.IsSequence() || node.size() == 0)
    return r.Error(node, path,
                   "expected a non-empty list of JSON pointers like \"/messages/*/body\" (\"*\" "
                   "matches every member or element)");
  std::vector<JsonPattern> out;
  for (size_t i = 0; i < node.size(); ++i) {
    const std::string ipath = path + "[" + std::to_string(i) + "]";
    auto text = r.String(node[i], ipath);
    if (!text) return text.status();
    auto pattern = JsonPattern::Parse(*text);
    if (!pattern) return r.Error(node[i], ipath, pattern.status().message());
    out.push_back(std::move(*pattern));
  }
  return out;
}

namespace {

Result<Effect> TrifectaEffect(const YamlReader& r, const YAML::Node& value,
                              const std::string& path) {
  auto text = r.NonEmptyString(value, path);
  if (!text) return text.status();
  if (*text == "ask") return Effect::kAsk;
  if (*text == "deny") return Effect::kDeny;
  return r.Error(value, path,
                 "expected ask or deny, got '" + *text +
                     "' (a call that would complete the trifecta is never simply allowed: "
                     "to let a tool through, leave external_send off its labels)");
}

bool HasAgent(const Identity& identity, const std::string& tenant, const std::string& agent) {
  for (const auto& [name, t] : identity.tenants)
    if ((tenant.empty() || name == tenant) && t.agents.contains(agent)) return true;
  return false;
}

Status LoadOverride(const YamlReader& r, const YAML::Node& node, const std::string& path,
                    const Policy& policy, TrifectaOverride* o) {
  if (!node.IsMap())
    return r.Error(node, path,
                   "expected a mapping {tenant, agent, tool, effect, fingerprints} (the calls it "
                   "applies to, and what it changes)");
  o->line = YamlReader::Line(node);
  bool changes = false;
  WARDEN_RETURN_IF_ERROR(
      r.Fields(node, path, {"tenant", "agent", "tool", "effect", "fingerprints"},
               [&](const std::string& key, const YAML::Node&, const YAML::Node& value) -> Status {
                 const std::string kpath = path + "." + key;
                 if (key == "effect") {
                   auto e = TrifectaEffect(r, value, kpath);
                   if (!e) return e.status();
                   o->effect = *e;
                   changes = true;
                 } else if (key == "fingerprints") {
                   auto b = r.Bool(value, kpath);
                   if (!b) return b.status();
                   o->fingerprints = *b;
                   changes = true;
                 } else if (key == "tool") {
                   auto text = r.NonEmptyString(value, kpath);
                   if (!text) return text.status();
                   o->tool = Glob(*text);
                 } else {
                   auto text = r.NonEmptyString(value, kpath);
                   if (!text) return text.status();
                   (key == "tenant" ? o->tenant : o->agent) = *text;
                 }
                 return Status::Ok();
               }));
  if (!changes) return r.Error(node, path, "an override needs effect or fingerprints (or both)");
  // Names must exist: an override for a misspelt agent would silently protect nobody.
  if (!o->tenant.empty() && !policy.identity.tenants.contains(o->tenant))
    return r.Error(node, path + ".tenant", "no tenant '" + o->tenant + "' under identity.tenants");
  if (!o->agent.empty() && !HasAgent(policy.identity, o->tenant, o->agent))
    return r.Error(node, path + ".agent",
                   "no agent '" + o->agent + "'" +
                       (o->tenant.empty() ? "" : " in tenant '" + o->tenant + "'") +
                       " under identity.tenants");
  return Status::Ok();
}

}  // namespace

Status LoadTrifecta(const YamlReader& r, const YAML::Node& node, Policy* policy) {
  TrifectaSection& t = policy->trifecta;
  if (!node.IsMap())
    return r.Error(node, "trifecta",
                   "expected a mapping {effect: ask|deny, fingerprints: true|false, "
                   "caller_window: DURATION, overrides: [...]}");
  return r.Fields(
      node, "trifecta", {"effect", "fingerprints", "caller_window", "task_window", "overrides"},
      [&](const std::string& key, const YAML::Node&, const YAML::Node& value) -> Status {
        const std::string path = "trifecta." + key;
        if (key == "effect") {
          auto e = TrifectaEffect(r, value, path);
          if (!e) return e.status();
          t.effect = *e;
        } else if (key == "fingerprints") {
          auto b = r.Bool(value, path);
          if (!b) return b.status();
          t.fingerprints = *b;
        } else if (key == "caller_window" || key == "task_window") {
          auto text = r.NonEmptyString(value, path);
          if (!text) return text.status();
          auto ms = sandbox::ParseDuration(*text);
          if (!ms) return r.Error(value, path, ms.status().message());
          if (*ms < 60000 || *ms > 30ull * 24 * 3600 * 1000)
            return r.Error(value, path, "expected a duration from 1m to 720h, got '" + *text + "'");
          (key == "caller_window" ? t.caller_window_ms : t.task_window_ms) = *ms;
        } else {
          if (!value.IsSequence())
            return r.Error(value, path,
                           "expected a list of {tenant, agent, tool, effect, "
                           "fingerprints} entries");
          for (size_t i = 0; i < value.size(); ++i) {
            TrifectaOverride o;
            WARDEN_RETURN_IF_ERROR(
                LoadOverride(r, value[i], path + "[" + std::to_string(i) + "]", *policy, &o));
            t.overrides.push_back(std::move(o));
          }
        }
        return Status::Ok();
      });
}

}  // namespace warden::policy::internal
