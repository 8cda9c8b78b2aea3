#include "policy/cases.h"

#include <fstream>
#include <sstream>

#include "policy/yaml_reader.h"

namespace warden::policy {
namespace {

using internal::YamlReader;
using nlohmann::json;

Status LoadExpect(const YamlReader& r, const YAML::Node& node, const std::string& path,
                  CaseExpect* expect) {
  auto effect = [&](const YAML::Node& value, const std::string& at) -> Status {
    auto s = r.NonEmptyString(value, at);
    if (!s) return s.status();
    expect->effect = ParseEffect(*s);
    if (!expect->effect) return r.Error(value, at, "expected allow, ask or deny, got '" + *s + "'");
    return Status::Ok();
  };
  if (node.IsScalar()) return effect(node, path);
  return r.Fields(
      node, path, {"effect", "risk", "rule"},
      [&](const std::string& key, const YAML::Node&, const YAML::Node& value) -> Status {
        if (key == "effect") return effect(value, path + ".effect");
        auto s = r.NonEmptyString(value, path + "." + key);
        if (!s) return s.status();
        if (key == "risk") {
          expect->risk = ParseRisk(*s);
          if (!expect->risk)
            return r.Error(value, path + ".risk", "expected low, medium or high, got '" + *s + "'");
        } else {
          expect->rule = *s;
        }
        return Status::Ok();
      });
}

Result<json> LoadArgs(const YamlReader& r, const YAML::Node& value, const std::string& path) {
  if (!value.IsMap() && !value.IsNull())
    return r.Error(value, path, "expected a mapping of arguments");
  auto j = r.Json(value, path);
  if (!j) return j.status();
  return j->is_null() ? json::object() : std::move(*j);
}

// `result:` as the CallToolResult the tool would have returned: a mapping or list is its
// structured content (and, as text, its content); a string is its text.
json ToolResult(const json& value) {
  if (value.is_string()) return {{"content", json::array({{{"type", "text"}, {"text", value}}})}};
  return {{"structuredContent", value},
          {"content", json::array({{{"type", "text"}, {"text", value.dump()}}})}};
}

Result<CaseStep> LoadStep(const YamlReader& r, const YAML::Node& node, const std::string& path,
                          const Policy& policy) {
  CaseStep step;
  step.line = YamlReader::Line(node);
  step.call.arguments = json::object();
  if (!node.IsMap()) return r.Error(node, path, "expected a call: {tool, args, result, expect}");
  WARDEN_RETURN_IF_ERROR(r.Fields(
      node, path, {"server", "tool", "args", "result", "expect", "attack"},
      [&](const std::string& key, const YAML::Node&, const YAML::Node& value) -> Status {
        const std::string kpath = path + "." + key;
        if (key == "expect") return LoadExpect(r, value, kpath, &step.expect);
        if (key == "args") {
          auto args = LoadArgs(r, value, kpath);
          if (!args) return args.status();
          step.call.arguments = std::move(*args);
          return Status::Ok();
        }
        if (key == "result") {
          auto j = r.Json(value, kpath);
          if (!j) return j.status();
          if (!j->is_object() && !j->is_array() && !j->is_string())
            return r.Error(value, kpath,
                           "expected the tool's structured result (a mapping or a list) or its "
                           "text (a string)");
          step.result = ToolResult(*j);
          return Status::Ok();
        }
        if (key == "attack") {
          auto b = r.Bool(value, kpath);
          if (!b) return b.status();
          step.attack = *b;
          return Status::Ok();
        }
        auto s = r.NonEmptyString(value, kpath);
        if (!s) return s.status();
        (key == "server" ? step.call.server : step.call.tool) = *s;
        return Status::Ok();
      }));
  if (step.call.tool.empty())
    return r.Error(node, path, "missing 'tool': expected the full tool name the call uses");
  if (step.call.server.empty()) step.call.server = ServerForTool(policy, step.call.tool);
  return step;
}

Result<PolicyCase> LoadCase(const YamlReader& r, const YAML::Node& node, size_t index,
                            const Policy& policy) {
  PolicyCase c;
  c.line = YamlReader::Line(node);
  const std::string path = "[" + std::to_string(index) + "]";
  c.call.arguments = json::object();
  bool single = false;
  WARDEN_RETURN_IF_ERROR(r.Fields(
      node, path,
      {"name", "tenant", "user", "agent", "scope", "server", "tool", "args", "expect", "calls"},
      [&](const std::string& key, const YAML::Node&, const YAML::Node& value) -> Status {
        const std::string kpath = path + "." + key;
        if (key == "calls") {
          if (!value.IsSequence() || value.size() == 0)
            return r.Error(value, kpath, "expected a non-empty list of calls, in session order");
          for (size_t i = 0; i < value.size(); ++i) {
            auto step = LoadStep(r, value[i], kpath + "[" + std::to_string(i) + "]", policy);
            if (!step) return step.status();
            c.steps.push_back(std::move(*step));
          }
          return Status::Ok();
        }
        if (key == "expect") {
          single = true;
          return LoadExpect(r, value, kpath, &c.expect);
        }
        if (key == "args") {
          single = true;
          auto args = LoadArgs(r, value, kpath);
          if (!args) return args.status();
          c.call.arguments = std::move(*args);
          return Status::Ok();
        }
        auto s = r.String(value, kpath);
        if (!s) return s.status();
        if (key == "server" || key == "tool") single = true;
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
  if (!c.steps.empty() && single)
    return r.Error(node, path,
                   "a case is one call (tool, args, expect) or a sequence (calls), not both");
  if (c.steps.empty() && c.call.tool.empty())
    return r.Error(node, path,
                   "missing 'tool': expected the full tool name the call uses (or 'calls:' for a "
                   "sequence)");
  if (c.name.empty()) c.name = "case " + std::to_string(index);
  if (c.steps.empty() && c.call.server.empty()) c.call.server = ServerForTool(policy, c.call.tool);
  return c;
}

void Compare(const CaseExpect& expect, const Decision& d, Effect effect, const std::string& rule,
             std::vector<std::string>* mismatches) {
  if (expect.effect && *expect.effect != effect)
    mismatches->push_back(std::string("effect: expected ") + EffectName(*expect.effect) + ", got " +
                          EffectName(effect));
  if (expect.risk && *expect.risk != d.risk)
    mismatches->push_back(std::string("risk: expected ") + RiskName(*expect.risk) + ", got " +
                          RiskName(d.risk));
  if (expect.rule && rule != *expect.rule && !rule.starts_with(*expect.rule + " "))
    mismatches->push_back("rule: expected " + *expect.rule + ", got " + rule);
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
  if (c.steps.empty()) {
    out.decision = Decide(policy, c.context, c.call);
    Compare(c.expect, out.decision, out.decision.effect, out.decision.rule, &out.mismatches);
    return out;
  }
  FlowState state;
  for (size_t i = 0; i < c.steps.size(); ++i) {
    const CaseStep& step = c.steps[i];
    StepOutcome s;
    s.decision = Decide(policy, c.context, step.call);
    s.effect = s.decision.effect;
    s.rule = s.decision.rule;
    const FlowSpec* flow = s.decision.rule_index >= 0
                               ? &policy.rules[static_cast<size_t>(s.decision.rule_index)].flow
                               : nullptr;
    const LabelSet labels =
        LabelSetOf(s.decision.labels);  // built-ins' own labels included by Decide
    if (s.effect != Effect::kDeny) {
      TrifectaSettings settings =
          SettingsFor(policy.trifecta, c.context.tenant, c.context.agent, step.call.tool);
      s.trifecta = CheckCall(state, {}, settings, flow, labels, step.call.arguments);
      if (s.trifecta.effect == Effect::kDeny ||
          (s.trifecta.effect == Effect::kAsk && s.effect == Effect::kAllow)) {
        s.effect = s.trifecta.effect;
        s.rule = s.trifecta.rule;
      }
      // What ran (allowed, or asked and approved) brings its result into the session.
      if (s.effect != Effect::kDeny && step.result)
        state.Add(Absorb(flow, labels, step.call.arguments, *step.result,
                         {static_cast<uint64_t>(i + 1), step.call.tool}));
    }
    Compare(step.expect, s.decision, s.effect, s.rule, &s.mismatches);
    for (const std::string& m : s.mismatches)
      out.mismatches.push_back("call " + std::to_string(i + 1) + " (" + step.call.tool + "): " + m);
    out.decision = s.decision;
    out.steps.push_back(std::move(s));
  }
  return out;
}

}  // namespace warden::policy
