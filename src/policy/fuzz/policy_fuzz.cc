// libFuzzer entry point for the policy loader (YAML text -> Policy). Policy files are written by
// people, but a gateway reloads them while running and an agent with write access to the
// workspace may be the one who edits them. Invariants, beyond not crashing or throwing:
//   * an error names the file ("fuzz.yaml:LINE: ..." or "fuzz.yaml: ...");
//   * loading is deterministic (the same Explain text twice);
//   * for callers and tools taken from the policy itself, Decide with the loader's rule index
//     gives the same decision as the plain scan in file order (the index is an optimisation only),
//     Decision::visible is what Visible says, and an unknown caller is always denied.
// Seed corpus: tests/fuzz/corpus/policy/ (docs/testing-fuzz.md).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "policy/policy.h"

namespace {

using namespace warden::policy;

bool SameDecision(const Decision& a, const Decision& b) {
  return a.effect == b.effect && a.risk == b.risk && a.access == b.access && a.labels == b.labels &&
         a.rule == b.rule && a.reason == b.reason && a.sandbox_profile == b.sandbox_profile &&
         a.visible == b.visible;
}

// A name the pattern matches: each wildcard replaced by one letter.
std::string Instance(const std::string& pattern) {
  std::string name = pattern;
  std::replace(name.begin(), name.end(), '*', 'x');
  std::replace(name.begin(), name.end(), '?', 'y');
  return name;
}

std::vector<CallContext> Callers(const Policy& policy) {
  std::vector<CallContext> out = {{"", "", "", ""}};
  std::vector<std::string> scopes = {""};
  for (const auto& [name, scope] : policy.scopes) {
    if (scopes.size() < 3) scopes.push_back(name);
  }
  size_t tenants = 0;
  for (const auto& [tenant_name, tenant] : policy.identity.tenants) {
    if (++tenants > 2) break;
    size_t users = 0;
    for (const auto& [user_name, user] : tenant.users) {
      if (++users > 2) break;
      for (const auto& scope : scopes) out.push_back({tenant_name, user_name, "", scope});
    }
    size_t agents = 0;
    for (const auto& [agent_name, agent] : tenant.agents) {
      if (++agents > 2) break;
      for (const auto& scope : scopes) out.push_back({tenant_name, agent.user, agent_name, scope});
    }
  }
  return out;
}

std::vector<std::string> Tools(const Policy& policy) {
  std::vector<std::string> out = {"sandbox__exec", "web__fetch", "nobody__knows"};
  for (const auto& rule : policy.rules) {
    if (out.size() >= 10) break;
    out.push_back(Instance(rule.match.tool.pattern()));
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto policy = LoadPolicyText(text, "fuzz.yaml");
  if (!policy.ok()) {
    FUZZ_CHECK(policy.status().message().rfind("fuzz.yaml:", 0) == 0);
    return 0;
  }
  const std::string explained = Explain(*policy);
  auto again = LoadPolicyText(text, "fuzz.yaml");
  FUZZ_CHECK(again.ok() && Explain(*again) == explained);

  Policy scan = *policy;
  scan.index = nullptr;
  static const nlohmann::json kArguments[] = {
      nlohmann::json::object(),
      {{"path", "/work/.git/hooks/pre-commit"}, {"to", "someone@example.com"}, {"n", 3}},
      {{"to", "x@acme.com"}, {"amount", 50}, {"currency", "EUR"}, {"priority", "low"}},
  };
  const CallContext stranger{"no-such-tenant", "nobody", "", ""};
  for (const auto& tool : Tools(*policy)) {
    const std::string server = ServerForTool(*policy, tool);
    for (const auto& arguments : kArguments) {
      const ToolCall call{server, tool, arguments};
      if (!policy->identity.tenants.empty()) {
        FUZZ_CHECK(Decide(*policy, stranger, call).effect == Effect::kDeny);
        FUZZ_CHECK(!Visible(*policy, stranger, tool, {}));
      }
      for (const auto& caller : Callers(*policy)) {
        const Decision indexed = Decide(*policy, caller, call);
        FUZZ_CHECK(SameDecision(indexed, Decide(scan, caller, call)));
        FUZZ_CHECK(indexed.visible == Visible(*policy, caller, tool, {}));
      }
    }
  }
  return 0;
}
