// Reading checked values out of yaml-cpp nodes, with errors that say "FILE:LINE: PATH: what was
// expected". Internal to the loader.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"
#include "policy/arg_predicate.h"
#include "policy/glob.h"

namespace warden::policy::internal {

// Called for each key of a mapping with the key, its node (for its line) and its value.
using KeyVisitor = std::function<Status(const std::string& key, const YAML::Node& key_node,
                                        const YAML::Node& value)>;

class YamlReader {
 public:
  explicit YamlReader(std::string origin) : origin_(std::move(origin)) {}

  const std::string& origin() const { return origin_; }
  // The node's 1-based line, or 0 when yaml-cpp does not know it.
  static int Line(const YAML::Node& node);
  // "FILE:LINE: PATH: MESSAGE" (PATH omitted when empty).
  Status Error(const YAML::Node& at, const std::string& path, const std::string& message) const;
  Status ErrorAtLine(int line, const std::string& path, const std::string& message) const;

  // A mapping with a fixed set of keys: each key once, no others. A null node is an empty mapping.
  Status Fields(const YAML::Node& node, const std::string& path,
                std::initializer_list<const char*> keys, const KeyVisitor& visit) const;
  // A mapping from names to entries (tenants, profiles, upstreams): non-empty names, each once.
  Status Entries(const YAML::Node& node, const std::string& path, const KeyVisitor& visit) const;

  Result<std::string> String(const YAML::Node& node, const std::string& path) const;
  Result<std::string> NonEmptyString(const YAML::Node& node, const std::string& path) const;
  Result<bool> Bool(const YAML::Node& node, const std::string& path) const;
  Result<uint64_t> Count(const YAML::Node& node, const std::string& path) const;
  Result<std::vector<std::string>> NonEmptyStrings(const YAML::Node& node,
                                                   const std::string& path) const;
  Result<std::vector<Glob>> Globs(const YAML::Node& node, const std::string& path) const;
  Result<ScalarValue> Scalar(const YAML::Node& node, const std::string& path) const;
  // Any YAML value as JSON: plain scalars become null, booleans and numbers where they read as
  // such; quoted scalars stay strings.
  Result<nlohmann::json> Json(const YAML::Node& node, const std::string& path) const;

 private:
  Status CheckMapping(const YAML::Node& node, const std::string& path) const;
  std::string origin_;
};

// "a, b or c"
std::string OneOf(std::initializer_list<const char*> words);

}  // namespace warden::policy::internal
