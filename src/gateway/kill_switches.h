// Kill switches: calls refused because an operator pulled a switch for everything, a tenant, an
// agent or a tool. In memory for this slice; this class is the seam the durable store (SQLite,
// `warden kill|unkill`, the API, "in force within one second") replaces. Thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

namespace warden::gateway {

enum class KillScope { kGlobal, kTenant, kAgent, kTool };

class KillSwitches {
 public:
  // Pulls the switch for `name` in `scope` (name ignored for kGlobal). `reason` is shown to agents.
  void Kill(KillScope scope, const std::string& name, const std::string& reason);
  void Unkill(KillScope scope, const std::string& name);

  // A switch that stops this call, as {switch, reason} ("tool:sandbox__exec", "..."), checked in
  // the order global, tenant, agent, tool; nullopt when none does.
  std::optional<std::pair<std::string, std::string>> Check(const std::string& tenant,
                                                           const std::string& agent,
                                                           const std::string& tool) const;

 private:
  static std::string Key(KillScope scope, const std::string& name);
  mutable std::mutex mu_;
  std::map<std::string, std::string> pulled_;  // key -> reason
};

}  // namespace warden::gateway
