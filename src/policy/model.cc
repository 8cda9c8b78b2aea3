#include "policy/model.h"

namespace warden::policy {

const char* EffectName(Effect effect) {
  switch (effect) {
    case Effect::kAllow:
      return "allow";
    case Effect::kAsk:
      return "ask";
    case Effect::kDeny:
      return "deny";
  }
  return "deny";
}

const char* RiskName(Risk risk) {
  switch (risk) {
    case Risk::kLow:
      return "low";
    case Risk::kMedium:
      return "medium";
    case Risk::kHigh:
      return "high";
  }
  return "high";
}

const char* AccessName(Access access) { return access == Access::kRead ? "read" : "write"; }

const char* InstancesName(Instances instances) {
  switch (instances) {
    case Instances::kShared:
      return "shared";
    case Instances::kPerUser:
      return "per_user";
    case Instances::kPerSession:
      return "per_session";
  }
  return "per_user";
}

std::optional<Effect> ParseEffect(std::string_view text) {
  if (text == "allow") return Effect::kAllow;
  if (text == "ask") return Effect::kAsk;
  if (text == "deny") return Effect::kDeny;
  return std::nullopt;
}

std::optional<Risk> ParseRisk(std::string_view text) {
  if (text == "low") return Risk::kLow;
  if (text == "medium") return Risk::kMedium;
  if (text == "high") return Risk::kHigh;
  return std::nullopt;
}

std::optional<Access> ParseAccess(std::string_view text) {
  if (text == "read") return Access::kRead;
  if (text == "write") return Access::kWrite;
  return std::nullopt;
}

std::optional<Label> ParseLabel(std::string_view text) {
  if (text == "untrusted_output") return kUntrustedOutput;
  if (text == "private_output") return kPrivateOutput;
  if (text == "external_send") return kExternalSend;
  if (text == "sensitive") return kSensitive;
  return std::nullopt;
}

LabelSet LabelSetOf(const std::vector<std::string>& names) {
  LabelSet out = 0;
  for (const std::string& name : names)
    if (auto label = ParseLabel(name)) out |= *label;
  return out;
}

std::vector<std::string> LabelNames(LabelSet labels) {
  std::vector<std::string> out;
  if (labels & kUntrustedOutput) out.emplace_back("untrusted_output");
  if (labels & kPrivateOutput) out.emplace_back("private_output");
  if (labels & kExternalSend) out.emplace_back("external_send");
  if (labels & kSensitive) out.emplace_back("sensitive");
  return out;
}

std::string OtherTenantNaming(const Policy& policy, std::string_view tenant, bool user,
                              std::string_view name) {
  for (const auto& [other, t] : policy.identity.tenants) {
    if (other == tenant) continue;
    if (user ? t.users.contains(name) : t.agents.contains(name)) return other;
  }
  return "";
}

}  // namespace warden::policy
