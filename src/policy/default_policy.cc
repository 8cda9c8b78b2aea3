#include "policy/default_policy.h"

#include <string>

namespace warden::policy {

std::string_view DefaultPolicyText() {
  return R"(version: 1
tools:
  - match: { tool: "sandbox__exec", server: "sandbox" }
    risk: medium
    effect: allow
  # web__fetch is listed but reaches nothing: the default egress allow-list is empty.
  - match: { tool: "web__fetch", server: "web" }
    risk: low
    effect: allow
  # Ends the caller's task: forgets what it was exposed to, cancels its other calls.
  - match: { tool: "task__end", server: "task" }
    risk: low
    effect: allow
defaults:
  unknown_tool: { risk: high, effect: deny }
)";
}

Result<policy::Policy> LoadDefaultPolicy() {
  return policy::LoadPolicyText(std::string(DefaultPolicyText()), "<embedded default policy>");
}

}  // namespace warden::policy
