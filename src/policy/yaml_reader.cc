#include "policy/yaml_reader.h"

#include <charconv>
#include <cstdint>
#include <set>
#include <string_view>

namespace warden::policy::internal {
namespace {

std::string Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Null:
      return "nothing";
    case YAML::NodeType::Scalar:
      return "'" + node.Scalar() + "'";
    default:
      return "an undefined value";
  }
}

bool IsPlain(const YAML::Node& node) { return node.Tag() != "!"; }

// Whether `s` is well-formed UTF-8 (no overlong forms, no surrogates, at most U+10FFFF). yaml-cpp
// passes any bytes through, and JSON text must be UTF-8: a value that is not would make every
// later dump() of it throw (found by src/policy/fuzz/policy_fuzz.cc, in `warden policy check`).
bool IsUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80           ? 1
                     : (c >> 5) == 0x6  ? 2
                     : (c >> 4) == 0xe  ? 3
                     : (c >> 3) == 0x1e ? 4
                                        : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : c & (0x7f >> n);
    for (size_t k = 1; k < n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = cp << 6 | (cc & 0x3f);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += n;
  }
  return true;
}

}  // namespace

std::string OneOf(std::initializer_list<const char*> words) {
  std::string out;
  size_t i = 0;
  for (const char* w : words) {
    if (i > 0) out += (i + 1 == words.size()) ? " or " : ", ";
    out += w;
    ++i;
  }
  return out;
}

int YamlReader::Line(const YAML::Node& node) {
  if (!node.IsDefined()) return 0;
  int line = node.Mark().line;
  return line < 0 ? 0 : line + 1;
}

Status YamlReader::ErrorAtLine(int line, const std::string& path,
                               const std::string& message) const {
  std::string where = origin_;
  if (line > 0) where += ":" + std::to_string(line);
  return Status::Error(where + ": " + (path.empty() ? "" : path + ": ") + message);
}

Status YamlReader::Error(const YAML::Node& at, const std::string& path,
                         const std::string& message) const {
  return ErrorAtLine(Line(at), path, message);
}

Status YamlReader::CheckMapping(const YAML::Node& node, const std::string& path) const {
  if (node.IsMap() || node.IsNull()) return Status::Ok();
  return Error(node, path, "expected a mapping, got " + Describe(node));
}

Status YamlReader::Fields(const YAML::Node& node, const std::string& path,
                          std::initializer_list<const char*> keys, const KeyVisitor& visit) const {
  WARDEN_RETURN_IF_ERROR(CheckMapping(node, path));
  if (node.IsNull()) return Status::Ok();
  std::set<std::string> seen;
  for (const auto& kv : node) {
    if (!kv.first.IsScalar())
      return Error(kv.first, path, "expected a key name, got " + Describe(kv.first));
    const std::string& key = kv.first.Scalar();
    bool known = false;
    for (const char* k : keys) known = known || key == k;
    const std::string key_path = path.empty() ? key : path + "." + key;
    if (!known) {
      std::string list;
      for (const char* k : keys) list += std::string(list.empty() ? "" : ", ") + k;
      return Error(kv.first, path.empty() ? "" : path,
                   "unknown key '" + key + "' (expected one of: " + list + ")");
    }
    if (!seen.insert(key).second) return Error(kv.first, key_path, "given twice");
    WARDEN_RETURN_IF_ERROR(visit(key, kv.first, kv.second));
  }
  return Status::Ok();
}

Status YamlReader::Entries(const YAML::Node& node, const std::string& path,
                           const KeyVisitor& visit) const {
  WARDEN_RETURN_IF_ERROR(CheckMapping(node, path));
  if (node.IsNull()) return Status::Ok();
  std::set<std::string> seen;
  for (const auto& kv : node) {
    if (!kv.first.IsScalar() || kv.first.Scalar().empty()) {
      return Error(kv.first, path, "expected a non-empty name, got " + Describe(kv.first));
    }
    const std::string& key = kv.first.Scalar();
    if (!seen.insert(key).second) return Error(kv.first, path + "." + key, "given twice");
    WARDEN_RETURN_IF_ERROR(visit(key, kv.first, kv.second));
  }
  return Status::Ok();
}

Result<std::string> YamlReader::String(const YAML::Node& node, const std::string& path) const {
  if (!node.IsScalar()) return Error(node, path, "expected a single value, got " + Describe(node));
  return node.Scalar();
}

Result<std::string> YamlReader::NonEmptyString(const YAML::Node& node,
                                               const std::string& path) const {
  auto s = String(node, path);
  if (s.ok() && s->empty()) return Error(node, path, "expected a non-empty value");
  return s;
}

Result<bool> YamlReader::Bool(const YAML::Node& node, const std::string& path) const {
  if (node.IsScalar() && IsPlain(node)) {
    if (node.Scalar() == "true") return true;
    if (node.Scalar() == "false") return false;
  }
  return Error(node, path, "expected true or false, got " + Describe(node));
}

Result<uint64_t> YamlReader::Count(const YAML::Node& node, const std::string& path) const {
  if (node.IsScalar()) {
    const std::string& s = node.Scalar();
    uint64_t v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (!s.empty() && ec == std::errc() && end == s.data() + s.size() && v <= 1000000) return v;
  }
  return Error(node, path, "expected a whole number (0 to 1000000), got " + Describe(node));
}

Result<std::vector<std::string>> YamlReader::NonEmptyStrings(const YAML::Node& node,
                                                             const std::string& path) const {
  if (!node.IsSequence()) return Error(node, path, "expected a list, got " + Describe(node));
  std::vector<std::string> out;
  for (size_t i = 0; i < node.size(); ++i) {
    auto s = NonEmptyString(node[i], path + "[" + std::to_string(i) + "]");
    if (!s) return s.status();
    out.push_back(*s);
  }
  return out;
}

Result<std::vector<Glob>> YamlReader::Globs(const YAML::Node& node, const std::string& path) const {
  auto patterns = NonEmptyStrings(node, path);
  if (!patterns) return patterns.status();
  std::vector<Glob> out;
  for (auto& p : *patterns) out.emplace_back(std::move(p));
  return out;
}

Result<ScalarValue> YamlReader::Scalar(const YAML::Node& node, const std::string& path) const {
  if (!node.IsScalar() && !node.IsNull()) {
    return Error(
        node, path,
        "expected a single value (text, number, true/false or null), got " + Describe(node));
  }
  ScalarValue v;
  if (node.IsNull()) {
    v.is_null = true;
    v.text = "null";
    return v;
  }
  v.text = node.Scalar();
  v.quoted = !IsPlain(node);
  if (v.quoted) return v;
  const std::string& s = v.text;
  if (s == "true" || s == "false") v.boolean = s == "true";
  if (s == "null" || s == "~") v.is_null = true;
  int64_t i = 0;
  auto [iend, iec] = std::from_chars(s.data(), s.data() + s.size(), i);
  if (!s.empty() && iec == std::errc() && iend == s.data() + s.size()) v.integer = i;
  double d = 0;
  auto [dend, dec] = std::from_chars(s.data(), s.data() + s.size(), d);
  if (!s.empty() && dec == std::errc() && dend == s.data() + s.size()) v.number = d;
  return v;
}

Result<nlohmann::json> YamlReader::Json(const YAML::Node& node, const std::string& path) const {
  if (node.IsNull()) return nlohmann::json(nullptr);
  if (node.IsSequence()) {
    nlohmann::json out = nlohmann::json::array();
    for (size_t i = 0; i < node.size(); ++i) {
      auto item = Json(node[i], path + "[" + std::to_string(i) + "]");
      if (!item) return item.status();
      out.push_back(std::move(*item));
    }
    return out;
  }
  if (node.IsMap()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& kv : node) {
      if (!kv.first.IsScalar())
        return Error(kv.first, path, "expected a key name, got " + Describe(kv.first));
      const std::string& key = kv.first.Scalar();
      if (!IsUtf8(key)) return Error(kv.first, path, "a key name is not valid UTF-8");
      if (out.contains(key)) return Error(kv.first, path + "." + key, "given twice");
      auto value = Json(kv.second, path + "." + key);
      if (!value) return value.status();
      out[key] = std::move(*value);
    }
    return out;
  }
  auto scalar = Scalar(node, path);
  if (!scalar) return scalar.status();
  if (!IsUtf8(scalar->text)) return Error(node, path, "not valid UTF-8");
  if (scalar->quoted) return nlohmann::json(scalar->text);
  if (scalar->is_null) return nlohmann::json(nullptr);
  if (scalar->boolean) return nlohmann::json(*scalar->boolean);
  if (scalar->integer) return nlohmann::json(*scalar->integer);
  if (scalar->number) return nlohmann::json(*scalar->number);
  return nlohmann::json(scalar->text);
}

}  // namespace warden::policy::internal
