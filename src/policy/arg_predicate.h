// Argument predicates: conditions on a tool call's JSON arguments, addressed by JSON pointer.
// Everything is parsed and compiled at load; evaluation never allocates.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace re2 {
class RE2;
}

namespace warden::policy {

// An RFC 6901 JSON pointer ("/to", "/items/0/name", "" for the whole document), split into
// unescaped tokens at load.
class JsonPointer {
 public:
  // Fails when `text` is neither empty nor starts with '/', or has a bad '~' escape.
  static Result<JsonPointer> Parse(std::string_view text);

  // The value the pointer names inside `document`, or nullptr when there is none.
  const nlohmann::json* Resolve(const nlohmann::json& document) const;
  const std::string& text() const { return text_; }

 private:
  struct Token {
    std::string key;              // object member name
    std::optional<size_t> index;  // set when the token is also a valid array index
  };
  std::string text_;
  std::vector<Token> tokens_;
};

// A YAML scalar as written in the policy, ready to compare with JSON values.
// A plain (unquoted) scalar compares equal to the JSON value of its YAML type (number, true/false,
// null) and also to a JSON string with the same text; a quoted scalar only to that string.
struct ScalarValue {
  std::string text;
  bool quoted = false;
  std::optional<double> number;
  std::optional<int64_t> integer;
  std::optional<bool> boolean;
  bool is_null = false;

  bool Equals(const nlohmann::json& value) const;
};

// One predicate on one argument value.
struct ArgPredicate {
  enum class Kind { kEquals, kPrefix, kSuffix, kRegex, kIn, kMin, kMax, kExists };
  Kind kind = Kind::kExists;
  ScalarValue value;                      // kEquals
  std::vector<ScalarValue> values;        // kIn
  std::string text;                       // kPrefix, kSuffix, kRegex (the source)
  double bound = 0;                       // kMin, kMax (inclusive)
  bool exists = true;                     // kExists
  std::shared_ptr<const re2::RE2> regex;  // kRegex, compiled at load

  // `value` is what the pointer resolved to, nullptr when absent. Only `exists: false` holds for
  // an absent value. prefix, suffix and regex (a full match) test strings only; min and max test
  // numbers and strings that are a whole decimal number; equals and in follow ScalarValue.
  bool Holds(const nlohmann::json* value) const;
};

// `args: { POINTER: { PREDICATE: ..., ... } }`: every predicate must hold for the value.
struct ArgCondition {
  JsonPointer pointer;
  std::vector<ArgPredicate> predicates;

  bool Holds(const nlohmann::json& arguments) const;
};

// Compiles an RE2 pattern for full matching; the error carries RE2's message.
Result<std::shared_ptr<const re2::RE2>> CompileRegex(const std::string& pattern);

}  // namespace warden::policy
