// The policy loader's sections, shared between loader.cc (the file, identity, upstreams, sandbox,
// scopes, egress) and rules_loader.cc (tools and defaults). Internal: use policy.h.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

#include "common/status.h"
#include "policy/model.h"
#include "policy/yaml_reader.h"

namespace warden::policy::internal {

// Parses `defaults:` into policy->defaults.
Status LoadDefaults(const YamlReader& reader, const YAML::Node& node, Policy* policy);
// Parses `tools:` into policy->rules. Needs identity, scopes and sandbox profiles loaded first:
// rules may only name ones that exist.
Status LoadRules(const YamlReader& reader, const YAML::Node& node, Policy* policy);
// Parses `trifecta:` into policy->trifecta (trifecta_loader.cc). Needs identity loaded first:
// overrides may only name tenants and agents that exist.
Status LoadTrifecta(const YamlReader& reader, const YAML::Node& node, Policy* policy);
// Parses a rule's untrusted_output / private_output / destinations / hands_over list of JSON
// pointers (trifecta_loader.cc).
Result<std::vector<JsonPattern>> LoadPointers(const YamlReader& reader, const YAML::Node& node,
                                              const std::string& path);
// Parses `monitoring:` into policy->monitoring (monitoring_loader.cc). Needs identity loaded
// first: monitoring.tenants may only name tenants that exist.
Status LoadMonitoring(const YamlReader& reader, const YAML::Node& node, Policy* policy);
// A webhook mapping {url, secret} at `where` ("approvals.webhook"); `what` is what it is sent,
// for the error naming a missing url ("approvals").
Result<ApprovalWebhook> LoadWebhook(const YamlReader& reader, const YAML::Node& node,
                                    const std::string& where, const std::string& what);
// Who a key hash belongs to, for errors: "agent 'bot' of tenant 'acme'".
std::string OwnerName(const KeyOwner& owner);
// "sha256:" and 64 lower-case hex digits: how the policy writes a key's hash.
bool IsKeyHash(const std::string& s);
// Parses a `labels:` / `never:` list.
Result<LabelSet> LoadLabels(const YamlReader& reader, const YAML::Node& node,
                            const std::string& path);

}  // namespace warden::policy::internal
