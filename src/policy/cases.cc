#include "policy/cases.h"

#include <fstream>
#include <sstream>

#include "policy/yaml_reader.h"

namespace warden::policy {
namespace {

using internal::YamlReader;

Status LoadExpect(const YamlReader& r, const YAML::Node& node, const std::string& path,
                  PolicyCase* c) {
  return r.Fields(
      node, path, {"effect", "risk", "rule"},
      [&](const std::string& key, const YAML::Node&, const YAML::Node& value) -> Status {
        auto s = r.NonEmptyString(value, path + "." + key);
        if (!s) return s.status();
        if (key == "effect") {
          c->expect_effect = ParseEffect(*s);
          if (!c->expect_effect)
            return r.Error(value, path + ".effect",
                           "expected allow, ask or deny, got '" + *s + "'");
        } else if (key == "risk") {
          c->expect_risk = ParseRisk(*s);
          if (!c->expect_risk)
            return r.Error(value, path + ".risk", "expected low, medium or high, got '" + *s + "'");
        } else {
          c->expect_rule = *s;
        }
        return Status::Ok();
      });
}

Result<PolicyCase> LoadCase(const YamlReader& r, const YAML::Node& node, size_t index,
                            const Policy& policy) {
  PolicyCase c;
  c.line = YamlReader::Line(node);
  const std::string path = "[" + std::to_string(index) + "]";
  c.call.arguments = nlohmann::json::object();
  WARDEN_RETURN_IF_ERROR(r.Fields(
      node, path,
      {"name", "tenant", "user", "agent", "scope", "server", "tool", "args", "expect", "calls"},
      [&](const std::string& key, const YAML::Node& key_node, const YAML::Node& value) -> Status {
        const std::string kpath = path + "." + key;
        if (key == "calls") {
          return r.Error(key_node, kpath,
                         "sequences of calls are not supported yet (issue: lethal trifecta: "
                         "session labels and "
                         "exfiltration checks); give one call per case");
        }
        if (key == "expect") return LoadExpect(r, value, kpath, &c);
        if (key == "args") {
          if (!value.IsMap() && !value.IsNull())
            return r.Error(value, kpath, "expected a mapping of arguments");
          auto json = r.Json(value, kpath);
          if (!json) return json.status();
          if (!json->is_null()) c.call.arguments = std::move(*json);
          return Status::Ok();
        }
        auto s = r.String(value, kpath);
        if (!s) return s.status();
        std::string* field = key == "name"     ? &c.name
                             : key == "tenant" ? &c.context.tenant
                             : key == "user"   ? &c.context.user
                             : key == "agent"  ? &c.context.agent
                             : key == "scope"  ? &c.context.scope
                             : key == "server" ? &c.call.server
                                               : &c.call.tool;
        *field = *s;
        return Status::Ok();
      }));
  if (c.call.tool.empty())
    return r.Error(node, path, "missing 'tool': expected the full tool name the call uses");
  if (c.name.empty()) c.name = "case " + std::to_string(index);
  if (c.call.server.empty()) c.call.server = ServerForTool(policy, c.call.tool);
  return c;
}

}  // namespace

Result<std::vector<PolicyCase>> LoadCasesText(const std::string& yaml, const std::string& origin,
                                              const Policy& policy) {
  YamlReader r(origin);
  try {
    YAML::Node root = YAML::Load(yaml);
    if (!root.IsSequence())
      return r.Error(root, "", "expected a list of cases (each '- name: ...')");
    std::vector<PolicyCase> cases;
    for (size_t i = 0; i < root.size(); ++i) {
      auto c = LoadCase(r, root[i], i, policy);
      if (!c) return c.status();
      cases.push_back(std::move(*c));
    }
    return cases;
  } catch (const YAML::Exception& e) {
    return r.ErrorAtLine(e.mark.line + 1, "", "invalid YAML: " + e.msg);
  }
}

Result<std::vector<PolicyCase>> LoadCasesFile(const std::string& path, const Policy& policy) {
  std::ifstream in(path);
  if (!in) return Status::FromErrno("cannot read cases file " + path, errno);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return LoadCasesText(buffer.str(), path, policy);
}

CaseOutcome RunCase(const Policy& policy, const PolicyCase& c) {
  CaseOutcome out;
  out.decision = Decide(policy, c.context, c.call);
  const Decision& d = out.decision;
  if (c.expect_effect && *c.expect_effect != d.effect) {
    out.mismatches.push_back(std::string("effect: expected ") + EffectName(*c.expect_effect) +
                             ", got " + EffectName(d.effect));
  }
  if (c.expect_risk && *c.expect_risk != d.risk) {
    out.mismatches.push_back(std::string("risk: expected ") + RiskName(*c.expect_risk) + ", got " +
                             RiskName(d.risk));
  }
  if (c.expect_rule && d.rule != *c.expect_rule && !d.rule.starts_with(*c.expect_rule + " ")) {
    out.mismatches.push_back("rule: expected " + *c.expect_rule + ", got " + d.rule);
  }
  return out;
}

}  // namespace warden::policy
