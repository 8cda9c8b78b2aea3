#include "policy/arg_predicate.h"

#include <re2/re2.h>

#include <charconv>
#include <cmath>

namespace warden::policy {
namespace {

// "12", "-3", "4.5", "1e3" -> the number; anything else (including "", " 1", "0x10") -> nullopt.
std::optional<double> ParseDecimal(std::string_view text) {
  if (text.empty()) return std::nullopt;
  double out = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(out))
    return std::nullopt;
  return out;
}

std::optional<double> NumberOf(const nlohmann::json& value) {
  if (value.is_number()) return value.get<double>();
  if (value.is_string()) return ParseDecimal(value.get_ref<const std::string&>());
  return std::nullopt;
}

}  // namespace

Result<JsonPointer> JsonPointer::Parse(std::string_view text) {
  JsonPointer pointer;
  pointer.text_ = std::string(text);
  if (text.empty()) return pointer;
  if (text[0] != '/') {
    return Status::Error("expected a JSON pointer starting with '/' (like /to or /items/0), got '" +
                         std::string(text) + "'");
  }
  size_t start = 1;
  while (true) {
    size_t slash = text.find('/', start);
    std::string_view raw = text.substr(
        start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    Token token;
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] != '~') {
        token.key += raw[i];
        continue;
      }
      if (i + 1 < raw.size() && (raw[i + 1] == '0' || raw[i + 1] == '1')) {
        token.key += raw[i + 1] == '0' ? '~' : '/';
        ++i;
      } else {
        return Status::Error("JSON pointer '" + std::string(text) +
                             "': '~' must be followed by 0 or 1");
      }
    }
    const std::string& k = token.key;
    if (!k.empty() && k.size() < 19 && k.find_first_not_of("0123456789") == std::string::npos &&
        (k.size() == 1 || k[0] != '0')) {
      token.index = std::stoull(k);
    }
    pointer.tokens_.push_back(std::move(token));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return pointer;
}

const nlohmann::json* JsonPointer::Resolve(const nlohmann::json& document) const {
  const nlohmann::json* current = &document;
  for (const Token& token : tokens_) {
    if (current->is_object()) {
      auto it = current->find(token.key);
      if (it == current->end()) return nullptr;
      current = &*it;
    } else if (current->is_array()) {
      if (!token.index || *token.index >= current->size()) return nullptr;
      current = &(*current)[*token.index];
    } else {
      return nullptr;
    }
  }
  return current;
}

bool ScalarValue::Equals(const nlohmann::json& value) const {
  if (value.is_string()) return value.get_ref<const std::string&>() == text;
  if (quoted) return false;
  if (value.is_boolean()) return boolean && *boolean == value.get<bool>();
  if (value.is_null()) return is_null;
  if (value.is_number_integer() && integer) {
    return value.is_number_unsigned()
               ? *integer >= 0 && static_cast<uint64_t>(*integer) == value.get<uint64_t>()
               : *integer == value.get<int64_t>();
  }
  if (value.is_number()) return number && *number == value.get<double>();
  return false;
}

bool ArgPredicate::Holds(const nlohmann::json* value) const {
  if (kind == Kind::kExists) return (value != nullptr) == exists;
  if (value == nullptr) return false;
  switch (kind) {
    case Kind::kEquals:
      return this->value.Equals(*value);
    case Kind::kIn:
      for (const ScalarValue& v : values) {
        if (v.Equals(*value)) return true;
      }
      return false;
    case Kind::kPrefix:
      return value->is_string() && value->get_ref<const std::string&>().starts_with(text);
    case Kind::kSuffix:
      return value->is_string() && value->get_ref<const std::string&>().ends_with(text);
    case Kind::kRegex:
      return value->is_string() && RE2::FullMatch(value->get_ref<const std::string&>(), *regex);
    case Kind::kMin:
    case Kind::kMax: {
      std::optional<double> n = NumberOf(*value);
      if (!n) return false;
      return kind == Kind::kMin ? *n >= bound : *n <= bound;
    }
    case Kind::kExists:
      break;
  }
  return false;
}

bool ArgCondition::Holds(const nlohmann::json& arguments) const {
  const nlohmann::json* value = pointer.Resolve(arguments);
  for (const ArgPredicate& p : predicates) {
    if (!p.Holds(value)) return false;
  }
  return true;
}

Result<std::shared_ptr<const re2::RE2>> CompileRegex(const std::string& pattern) {
  RE2::Options options;
  options.set_log_errors(false);
  auto re = std::make_shared<const RE2>(pattern, options);
  if (!re->ok()) return Status::Error("invalid RE2 regex '" + pattern + "': " + re->error());
  return std::shared_ptr<const re2::RE2>(re);
}

}  // namespace warden::policy
