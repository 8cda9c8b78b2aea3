#include "gateway/kill_switches.h"

namespace warden::gateway {

std::string KillSwitches::Key(KillScope scope, const std::string& name) {
  switch (scope) {
    case KillScope::kGlobal:
      return "global";
    case KillScope::kTenant:
      return "tenant:" + name;
    case KillScope::kAgent:
      return "agent:" + name;
    case KillScope::kTool:
      return "tool:" + name;
  }
  return "global";
}

void KillSwitches::Kill(KillScope scope, const std::string& name, const std::string& reason) {
  std::lock_guard lock(mu_);
  pulled_[Key(scope, name)] = reason;
}

void KillSwitches::Unkill(KillScope scope, const std::string& name) {
  std::lock_guard lock(mu_);
  pulled_.erase(Key(scope, name));
}

std::optional<std::pair<std::string, std::string>> KillSwitches::Check(
    const std::string& tenant, const std::string& agent, const std::string& tool) const {
  std::lock_guard lock(mu_);
  if (pulled_.empty()) return std::nullopt;
  const std::string keys[] = {Key(KillScope::kGlobal, ""), Key(KillScope::kTenant, tenant),
                              Key(KillScope::kAgent, agent), Key(KillScope::kTool, tool)};
  const bool applies[] = {true, !tenant.empty(), !agent.empty(), !tool.empty()};
  for (size_t i = 0; i < 4; ++i) {
    if (!applies[i]) continue;
    auto it = pulled_.find(keys[i]);
    if (it != pulled_.end()) return std::make_pair(it->first, it->second);
  }
  return std::nullopt;
}

}  // namespace warden::gateway
