#include "schema/json_schema.h"

#include <re2/re2.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string_view>
#include <tuple>
#include <unordered_set>
#include <utility>
#include <vector>

namespace warden::schema {

using json = nlohmann::json;

namespace {

// Bits of Node::types; 0 means any type.
enum TypeBit : uint8_t {
  kNull = 1,
  kBoolean = 2,
  kObject = 4,
  kArray = 8,
  kNumber = 16,
  kString = 32,
  kInteger = 64,
};

constexpr std::pair<std::string_view, uint8_t> kTypeNames[] = {
    {"null", kNull},     {"boolean", kBoolean}, {"object", kObject},   {"array", kArray},
    {"number", kNumber}, {"string", kString},   {"integer", kInteger},
};

// Each pattern's DFA cache is capped so that many regexes in one hostile schema stay cheap; RE2
// falls back to its (still linear) NFA when the budget is spent.
constexpr int64_t kRegexMaxMem = 1 << 20;
// Distinct regexes one schema may hold.
constexpr size_t kMaxPatterns = 1000;
// Longest excerpt of a value or of a list quoted in an error message.
constexpr size_t kMaxQuote = 80;
constexpr size_t kMaxListed = 10;
// JSON nesting of an inputSchema the cache accepts (a schema level is about two JSON levels, and
// Compile refuses schemas nested deeper than JsonSchemaLimits::max_depth anyway).
constexpr int kMaxKeyDepth = 256;

bool NestedDeeperThan(const nlohmann::json& value, int limit) {
  if (!value.is_structured()) return false;
  if (limit <= 0) return true;
  for (const auto& child : value) {
    if (NestedDeeperThan(child, limit - 1)) return true;
  }
  return false;
}

}  // namespace

struct JsonSchema::Compiled {
  // One compiled subschema. Children are indices into `nodes`; -1 means absent.
  struct Node;
  std::vector<Node> nodes;
  JsonSchemaLimits limits;
};

struct JsonSchema::Compiled::Node {
  bool always_false = false;  // the schema `false`
  uint8_t types = 0;
  std::optional<json> constant;
  std::string constant_key;
  std::shared_ptr<const std::unordered_set<std::string>> enum_keys;  // canonical forms
  std::shared_ptr<const json> enum_values;                           // for the message
  std::optional<json> minimum, maximum, exclusive_minimum, exclusive_maximum;
  std::optional<json> multiple_of;
  std::optional<uint64_t> min_length, max_length, min_items, max_items;
  std::optional<uint64_t> min_properties, max_properties, min_contains, max_contains;
  bool unique_items = false;
  std::shared_ptr<const RE2> pattern;
  std::map<std::string, int> properties;
  std::vector<std::pair<std::shared_ptr<const RE2>, int>> pattern_properties;
  int additional_properties = -1;
  int property_names = -1;
  std::vector<std::string> required;
  std::map<std::string, std::vector<std::string>> dependent_required;
  std::map<std::string, int> dependent_schemas;
  std::vector<int> prefix_items;
  int items = -1;  // for every item after prefix_items
  int contains = -1;
  std::vector<int> all_of, any_of, one_of;
  int not_schema = -1, if_schema = -1, then_schema = -1, else_schema = -1;
  int ref = -1;
};

namespace {

using Node = JsonSchema::Compiled::Node;

std::string EscapeToken(std::string_view token) {
  std::string out;
  for (char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

std::string Shown(const std::string& pointer) { return pointer.empty() ? "/" : pointer; }

std::string Dump(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

// `value` as JSON text, cut to about kMaxQuote bytes on a UTF-8 character boundary.
std::string Quote(const json& value) {
  std::string text = Dump(value);
  if (text.size() <= kMaxQuote) return text;
  size_t cut = kMaxQuote;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut) + "...";
}

std::string Plural(uint64_t n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

std::string TypeWord(const json& value) {
  switch (value.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::string:
      return "a string";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      return "a number";
    default:
      return "an unusual value";
  }
}

std::string ExpectedTypes(uint8_t types) {
  static constexpr std::pair<uint8_t, const char*> kWords[] = {
      {kObject, "an object"}, {kArray, "an array"},     {kString, "a string"},
      {kNumber, "a number"},  {kInteger, "an integer"}, {kBoolean, "a boolean"},
      {kNull, "null"},
  };
  std::vector<const char*> words;
  for (const auto& [bit, word] : kWords) {
    if ((types & bit) && !(bit == kInteger && (types & kNumber))) words.push_back(word);
  }
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out += i + 1 == words.size() ? " or " : ", ";
    out += words[i];
  }
  return out;
}

bool IsIntegral(const json& value) {
  if (value.is_number_integer()) return true;
  if (!value.is_number_float()) return false;
  double d = value.get<double>();
  return std::isfinite(d) && std::floor(d) == d;
}

// -1, 0 or 1 as a < b, a == b, a > b, exactly for any pair of JSON numbers.
int CompareNumbers(const json& a, const json& b) {
  if (a.is_number_integer() && b.is_number_integer()) {
    auto wide = [](const json& n) -> __int128 {
      return n.is_number_unsigned() ? static_cast<__int128>(n.get<uint64_t>())
                                    : static_cast<__int128>(n.get<int64_t>());
    };
    __int128 x = wide(a), y = wide(b);
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  // long double holds every int64, uint64 and double exactly on x86-64.
  auto wide = [](const json& n) -> long double {
    if (n.is_number_unsigned()) return static_cast<long double>(n.get<uint64_t>());
    if (n.is_number_integer()) return static_cast<long double>(n.get<int64_t>());
    return static_cast<long double>(n.get<double>());
  };
  long double x = wide(a), y = wide(b);
  return x < y ? -1 : (x > y ? 1 : 0);
}

bool IsMultipleOf(const json& value, const json& divisor) {
  if (value.is_number_integer() && divisor.is_number_integer()) {
    auto wide = [](const json& n) -> __int128 {
      return n.is_number_unsigned() ? static_cast<__int128>(n.get<uint64_t>())
                                    : static_cast<__int128>(n.get<int64_t>());
    };
    return wide(value) % wide(divisor) == 0;
  }
  double q = value.get<double>() / divisor.get<double>();
  if (!std::isfinite(q)) return false;
  // Decimal divisors (0.01) are not exact in binary: allow the rounding error of one division.
  return std::fabs(q - std::round(q)) <= 1e-9 * std::max(1.0, std::fabs(q));
}

uint64_t CodePoints(const std::string& s) {
  uint64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// A text equal for exactly the values JSON Schema calls equal (1 and 1.0 alike, member order
// irrelevant). False when `value` nests deeper than `max_depth`.
bool Canonical(const json& value, int max_depth, std::string& out) {
  if (max_depth < 0) return false;
  switch (value.type()) {
    case json::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& [key, member] : value.items()) {  // json's std::map: keys sorted
        if (!first) out += ',';
        first = false;
        out += Dump(json(key));
        out += ':';
        if (!Canonical(member, max_depth - 1, out)) return false;
      }
      out += '}';
      return true;
    }
    case json::value_t::array: {
      out += '[';
      for (size_t i = 0; i < value.size(); ++i) {
        if (i > 0) out += ',';
        if (!Canonical(value[i], max_depth - 1, out)) return false;
      }
      out += ']';
      return true;
    }
    case json::value_t::number_float: {
      double d = value.get<double>();
      if (std::isnan(d)) {
        out += "nan";
      } else if (std::isinf(d)) {
        out += d > 0 ? "inf" : "-inf";
      } else if (std::floor(d) == d && d >= -9223372036854775808.0 && d < 9223372036854775808.0) {
        out += std::to_string(static_cast<int64_t>(d));
      } else if (std::floor(d) == d && d >= 0 && d < 18446744073709551616.0) {
        out += std::to_string(static_cast<uint64_t>(d));
      } else {
        out += Dump(value);
      }
      return true;
    }
    default:
      out += Dump(value);
      return true;
  }
}

// Splits a JSON pointer ("" or "/a/b~1c") into unescaped tokens; nullopt when malformed.
std::optional<std::vector<std::string>> PointerTokens(const std::string& pointer) {
  std::vector<std::string> tokens;
  if (pointer.empty()) return tokens;
  if (pointer[0] != '/') return std::nullopt;
  std::string token;
  for (size_t i = 1; i <= pointer.size(); ++i) {
    if (i == pointer.size() || pointer[i] == '/') {
      tokens.push_back(std::move(token));
      token.clear();
    } else if (pointer[i] == '~') {
      if (i + 1 >= pointer.size() || (pointer[i + 1] != '0' && pointer[i + 1] != '1'))
        return std::nullopt;
      token += pointer[++i] == '0' ? '~' : '/';
    } else {
      token += pointer[i];
    }
  }
  return tokens;
}

std::optional<std::string> PercentDecode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) return std::nullopt;
    auto hex = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    int hi = hex(s[i + 1]), lo = hex(s[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

// Builds the node graph from a schema document.
class Compiler {
 public:
  Compiler(const json& document, const JsonSchemaLimits& limits)
      : document_(document), limits_(limits) {}

  Result<std::vector<Node>> Run() {
    int root = Compile(document_, "", 0);
    if (!error_.ok()) return error_;
    (void)root;  // always node 0
    // Resolve $refs; a target compiled on demand may bring more.
    for (size_t i = 0; i < refs_.size() && error_.ok(); ++i) {
      PendingRef ref = refs_[i];
      int target = Target(ref);
      if (!error_.ok()) break;
      nodes_[ref.node].ref = target;
    }
    if (!error_.ok()) return error_;
    WARDEN_RETURN_IF_ERROR(CheckNoInPlaceCycle());
    return std::move(nodes_);
  }

 private:
  struct PendingRef {
    int node;
    std::string target;  // a canonical JSON pointer into the document
    std::string text;    // the $ref as written
    std::string where;   // pointer of the $ref keyword
  };

  Status Fail(const std::string& where, const std::string& what) {
    if (error_.ok()) error_ = Status::Error(Shown(where) + ": " + what);
    return error_;
  }

  int Compile(const json& schema, const std::string& where, int depth) {
    if (!error_.ok()) return -1;
    if (depth > limits_.max_depth) {
      Fail(where, "schema nested deeper than " + std::to_string(limits_.max_depth) + " levels");
      return -1;
    }
    if (nodes_.size() >= static_cast<size_t>(limits_.max_subschemas)) {
      Fail(where, "schema has more than " + std::to_string(limits_.max_subschemas) + " subschemas");
      return -1;
    }
    if (!schema.is_object() && !schema.is_boolean()) {
      Fail(where, "a schema must be an object or a boolean, got " + TypeWord(schema));
      return -1;
    }
    // Reserve the index first: a $ref to this very place may be resolved to it.
    const int index = static_cast<int>(nodes_.size());
    nodes_.emplace_back();
    by_pointer_.emplace(where, index);
    Node node;
    if (schema.is_boolean()) {
      node.always_false = !schema.get<bool>();
    } else {
      CompileKeywords(schema, where, depth, index, node);
    }
    nodes_[index] = std::move(node);
    return index;
  }

  int Sub(const json& schema, const std::string& parent, const std::string& keyword, int depth) {
    return Compile(schema, parent + "/" + EscapeToken(keyword), depth + 1);
  }

  std::vector<int> SubArray(const json& schema, const std::string& where,
                            const std::string& keyword, int depth) {
    std::vector<int> out;
    const json& list = schema[keyword];
    const std::string at = where + "/" + EscapeToken(keyword);
    if (!list.is_array() || list.empty()) {
      Fail(at, "must be a non-empty array of schemas");
      return out;
    }
    for (size_t i = 0; i < list.size(); ++i)
      out.push_back(Compile(list[i], at + "/" + std::to_string(i), depth + 1));
    return out;
  }

  std::map<std::string, int> SubMap(const json& schema, const std::string& where,
                                    const std::string& keyword, int depth) {
    std::map<std::string, int> out;
    const json& map = schema[keyword];
    const std::string at = where + "/" + EscapeToken(keyword);
    if (!map.is_object()) {
      Fail(at, "must be an object whose members are schemas");
      return out;
    }
    for (const auto& [key, sub] : map.items())
      out[key] = Compile(sub, at + "/" + EscapeToken(key), depth + 1);
    return out;
  }

  std::optional<uint64_t> Count(const json& schema, const std::string& where, const char* keyword) {
    if (!schema.contains(keyword)) return std::nullopt;
    const json& v = schema[keyword];
    if (!IsIntegral(v) || CompareNumbers(v, json(0)) < 0) {
      Fail(where + "/" + keyword, "must be a non-negative integer");
      return std::nullopt;
    }
    if (v.is_number_unsigned()) return v.get<uint64_t>();
    if (v.is_number_integer()) return static_cast<uint64_t>(v.get<int64_t>());
    double d = v.get<double>();
    return d >= 18446744073709551615.0 ? std::numeric_limits<uint64_t>::max()
                                       : static_cast<uint64_t>(d);
  }

  std::optional<json> Number(const json& schema, const std::string& where, const char* keyword) {
    if (!schema.contains(keyword)) return std::nullopt;
    const json& v = schema[keyword];
    if (!v.is_number() || (v.is_number_float() && !std::isfinite(v.get<double>()))) {
      Fail(where + "/" + keyword, "must be a number");
      return std::nullopt;
    }
    return v;
  }

  std::vector<std::string> Strings(const json& list, const std::string& at) {
    std::vector<std::string> out;
    if (!list.is_array()) {
      Fail(at, "must be an array of strings");
      return out;
    }
    for (const json& s : list) {
      if (!s.is_string()) {
        Fail(at, "must be an array of strings");
        return out;
      }
      out.push_back(s.get<std::string>());
    }
    return out;
  }

  std::shared_ptr<const RE2> Regex(const json& pattern, const std::string& at) {
    if (!pattern.is_string()) {
      Fail(at, "must be a string (a regular expression)");
      return nullptr;
    }
    const std::string text = pattern.get<std::string>();
    auto it = regexes_.find(text);
    if (it != regexes_.end()) return it->second;
    if (regexes_.size() >= kMaxPatterns) {
      Fail(at, "schema has more than " + std::to_string(kMaxPatterns) + " distinct patterns");
      return nullptr;
    }
    RE2::Options options;
    options.set_log_errors(false);
    options.set_max_mem(kRegexMaxMem);
    auto re = std::make_shared<const RE2>(text, options);
    if (!re->ok()) {
      const std::string why =
          re->error_code() == RE2::ErrorPatternTooLarge
              ? "it compiles to more than RE2's 1 MiB budget for one pattern"
              : re->error() + " (patterns are RE2 syntax: no lookaround, no backreferences)";
      Fail(at, "invalid regex " + Quote(json(text)) + ": " + why);
      return nullptr;
    }
    regexes_.emplace(text, re);
    return re;
  }

  void CompileTypes(const json& type, const std::string& at, Node& node) {
    auto one = [&](const json& name) -> bool {
      if (name.is_string()) {
        for (const auto& [word, bit] : kTypeNames) {
          if (name.get<std::string>() == word) {
            node.types |= bit;
            return true;
          }
        }
      }
      Fail(at,
           Quote(name) + " is not a type (null, boolean, object, array, number, string, integer)");
      return false;
    };
    if (type.is_array()) {
      if (type.empty()) Fail(at, "must name at least one type");
      for (const json& name : type) {
        if (!one(name)) return;
      }
    } else {
      one(type);
    }
  }

  void CompileKeywords(const json& s, const std::string& where, int depth, int index, Node& node) {
    CompileValueKeywords(s, where, node);
    CompileObjectKeywords(s, where, depth, node);
    CompileArrayKeywords(s, where, depth, node);
    CompileInPlaceKeywords(s, where, depth, index, node);
  }

  static std::string At(const std::string& where, const char* keyword) {
    return where + "/" + EscapeToken(keyword);
  }

  // type, const, enum and the number and string keywords.
  void CompileValueKeywords(const json& s, const std::string& where, Node& node) {
    auto at = [&](const char* keyword) { return At(where, keyword); };
    if (s.contains("type")) CompileTypes(s["type"], at("type"), node);
    if (s.contains("const")) {
      node.constant = s["const"];
      if (!Canonical(s["const"], limits_.max_depth, node.constant_key))
        Fail(at("const"), "nested deeper than " + std::to_string(limits_.max_depth) + " levels");
    }
    if (s.contains("enum")) {
      const json& values = s["enum"];
      if (!values.is_array()) {
        Fail(at("enum"), "must be an array");
      } else {
        auto keys = std::make_shared<std::unordered_set<std::string>>();
        for (const json& v : values) {
          std::string key;
          if (!Canonical(v, limits_.max_depth, key)) {
            Fail(at("enum"), "nested deeper than " + std::to_string(limits_.max_depth) + " levels");
            break;
          }
          keys->insert(std::move(key));
        }
        node.enum_keys = std::move(keys);
        node.enum_values = std::make_shared<const json>(values);
      }
    }
    node.minimum = Number(s, where, "minimum");
    node.maximum = Number(s, where, "maximum");
    // Draft-04 wrote exclusiveMinimum: true next to minimum; later drafts give the bound itself.
    for (auto [keyword, bound, exclusive] :
         {std::tuple{"exclusiveMinimum", &node.minimum, &node.exclusive_minimum},
          std::tuple{"exclusiveMaximum", &node.maximum, &node.exclusive_maximum}}) {
      if (!s.contains(keyword)) continue;
      if (s[keyword].is_boolean()) {
        if (s[keyword].get<bool>() && bound->has_value()) {
          *exclusive = **bound;
          bound->reset();
        }
      } else {
        *exclusive = Number(s, where, keyword);
      }
    }
    node.multiple_of = Number(s, where, "multipleOf");
    if (node.multiple_of && CompareNumbers(*node.multiple_of, json(0)) <= 0)
      Fail(at("multipleOf"), "must be more than 0");
    node.min_length = Count(s, where, "minLength");
    node.max_length = Count(s, where, "maxLength");
    node.min_items = Count(s, where, "minItems");
    node.max_items = Count(s, where, "maxItems");
    node.min_properties = Count(s, where, "minProperties");
    node.max_properties = Count(s, where, "maxProperties");
    node.min_contains = Count(s, where, "minContains");
    node.max_contains = Count(s, where, "maxContains");
    if (s.contains("uniqueItems")) {
      if (!s["uniqueItems"].is_boolean())
        Fail(at("uniqueItems"), "must be a boolean");
      else
        node.unique_items = s["uniqueItems"].get<bool>();
    }
    if (s.contains("pattern")) node.pattern = Regex(s["pattern"], at("pattern"));
  }

  void CompileObjectKeywords(const json& s, const std::string& where, int depth, Node& node) {
    auto at = [&](const char* keyword) { return At(where, keyword); };
    if (s.contains("properties")) node.properties = SubMap(s, where, "properties", depth);
    if (s.contains("patternProperties")) {
      const json& map = s["patternProperties"];
      if (!map.is_object()) {
        Fail(at("patternProperties"), "must be an object: regex -> schema");
      } else {
        for (const auto& [key, sub] : map.items()) {
          const std::string here = at("patternProperties") + "/" + EscapeToken(key);
          auto re = Regex(json(key), here);
          node.pattern_properties.emplace_back(re, Compile(sub, here, depth + 1));
        }
      }
    }
    if (s.contains("additionalProperties"))
      node.additional_properties =
          Sub(s["additionalProperties"], where, "additionalProperties", depth);
    if (s.contains("propertyNames"))
      node.property_names = Sub(s["propertyNames"], where, "propertyNames", depth);
    if (s.contains("required")) node.required = Strings(s["required"], at("required"));
    if (s.contains("dependentRequired")) {
      const json& map = s["dependentRequired"];
      if (!map.is_object())
        Fail(at("dependentRequired"), "must be an object: member -> array of strings");
      else
        for (const auto& [key, list] : map.items())
          node.dependent_required[key] =
              Strings(list, at("dependentRequired") + "/" + EscapeToken(key));
    }
    if (s.contains("dependentSchemas"))
      node.dependent_schemas = SubMap(s, where, "dependentSchemas", depth);
    if (s.contains("dependencies")) {  // draft-07: both of the above in one keyword
      const json& map = s["dependencies"];
      if (!map.is_object()) {
        Fail(at("dependencies"), "must be an object");
      } else {
        for (const auto& [key, dep] : map.items()) {
          const std::string here = at("dependencies") + "/" + EscapeToken(key);
          if (dep.is_array())
            node.dependent_required[key] = Strings(dep, here);
          else
            node.dependent_schemas[key] = Compile(dep, here, depth + 1);
        }
      }
    }
  }

  // 2020-12: prefixItems + items (the rest); draft-07: items as an array + additionalItems.
  void CompileArrayKeywords(const json& s, const std::string& where, int depth, Node& node) {
    if (s.contains("prefixItems")) node.prefix_items = SubArray(s, where, "prefixItems", depth);
    if (s.contains("items")) {
      if (s["items"].is_array() && !s.contains("prefixItems")) {
        for (size_t i = 0; i < s["items"].size(); ++i)
          node.prefix_items.push_back(
              Compile(s["items"][i], At(where, "items") + "/" + std::to_string(i), depth + 1));
        if (s.contains("additionalItems"))
          node.items = Sub(s["additionalItems"], where, "additionalItems", depth);
      } else {
        node.items = Sub(s["items"], where, "items", depth);
      }
    }
    if (s.contains("contains")) node.contains = Sub(s["contains"], where, "contains", depth);
  }

  // The keywords that apply to the value itself: combinators, $ref (and $defs, their targets).
  void CompileInPlaceKeywords(const json& s, const std::string& where, int depth, int index,
                              Node& node) {
    if (s.contains("allOf")) node.all_of = SubArray(s, where, "allOf", depth);
    if (s.contains("anyOf")) node.any_of = SubArray(s, where, "anyOf", depth);
    if (s.contains("oneOf")) node.one_of = SubArray(s, where, "oneOf", depth);
    if (s.contains("not")) node.not_schema = Sub(s["not"], where, "not", depth);
    if (s.contains("if")) {
      node.if_schema = Sub(s["if"], where, "if", depth);
      if (s.contains("then")) node.then_schema = Sub(s["then"], where, "then", depth);
      if (s.contains("else")) node.else_schema = Sub(s["else"], where, "else", depth);
    }

    // Definitions are compiled whether used or not: a bad one makes the schema unusable, and
    // $refs to them find them by pointer.
    for (const char* keyword : {"$defs", "definitions"}) {
      if (s.contains(keyword)) SubMap(s, where, keyword, depth);
    }
    if (s.contains("$ref")) AddRef(s["$ref"], At(where, "$ref"), index);
  }

  // Records a $ref for resolution once the whole document is compiled. Only local JSON pointers
  // are checked; anything else (a URL, "other.json#/x", "#anchor") is accepted unchecked.
  void AddRef(const json& ref, const std::string& at, int index) {
    if (!ref.is_string()) {
      Fail(at, "must be a string");
      return;
    }
    const std::string text = ref.get<std::string>();
    if (text.empty() || text[0] != '#') return;
    auto fragment = PercentDecode(text.substr(1));
    if (!fragment) {
      Fail(at, Quote(json(text)) + " has a bad %-escape");
      return;
    }
    if (!fragment->empty() && (*fragment)[0] != '/') return;  // a plain-name anchor
    auto tokens = PointerTokens(*fragment);
    if (!tokens) {
      Fail(at, Quote(json(text)) + " is not a valid JSON pointer");
      return;
    }
    std::string canonical;
    for (const std::string& t : *tokens) canonical += "/" + EscapeToken(t);
    ref_of_node_[index] = refs_.size();
    refs_.push_back({index, canonical, text, at});
  }

  int Target(const PendingRef& ref) {
    auto it = by_pointer_.find(ref.target);
    if (it != by_pointer_.end()) return it->second;
    // Not a place compiled as a schema yet (e.g. "#/x-shared/a"): find it and compile it there.
    const json* here = &document_;
    int depth = 0;
    const std::vector<std::string> tokens =
        PointerTokens(ref.target)
            .value_or(std::vector<std::string>{});  // canonical, so always well formed
    for (const std::string& token : tokens) {
      ++depth;
      if (here->is_object() && here->contains(token)) {
        here = &(*here)[token];
      } else if (here->is_array() && !token.empty() &&
                 token.find_first_not_of("0123456789") == std::string::npos &&
                 (token == "0" || token[0] != '0') && token.size() < 10 &&
                 std::stoul(token) < here->size()) {
        here = &(*here)[std::stoul(token)];
      } else {
        Fail(ref.where, Quote(json(ref.text)) + " points at nothing in this schema");
        return -1;
      }
    }
    return Compile(*here, ref.target, depth);
  }

  // A $ref cycle that never moves into a member or an item would recurse forever on some value:
  // such a schema is unusable. Edges here are the keywords that apply to the same value.
  Status CheckNoInPlaceCycle() const {
    std::vector<uint8_t> state(nodes_.size(), 0);  // 0 new, 1 on the stack, 2 done
    auto in_place = [&](int i) {
      const Node& n = nodes_[i];
      std::vector<int> out = n.all_of;
      out.insert(out.end(), n.any_of.begin(), n.any_of.end());
      out.insert(out.end(), n.one_of.begin(), n.one_of.end());
      for (int c : {n.not_schema, n.if_schema, n.then_schema, n.else_schema, n.ref})
        if (c >= 0) out.push_back(c);
      for (const auto& [key, c] : n.dependent_schemas) out.push_back(c);
      return out;
    };
    for (size_t start = 0; start < nodes_.size(); ++start) {
      if (state[start]) continue;
      std::vector<std::pair<int, std::vector<int>>> stack;
      stack.emplace_back(static_cast<int>(start), in_place(static_cast<int>(start)));
      state[start] = 1;
      while (!stack.empty()) {
        auto& [node, next] = stack.back();
        if (next.empty()) {
          state[node] = 2;
          stack.pop_back();
          continue;
        }
        int child = next.back();
        next.pop_back();
        if (child < 0 || state[child] == 2) continue;
        if (state[child] == 1) {
          // Every such cycle goes through a $ref (plain nesting only goes deeper): name one.
          int to = child;
          for (auto it = stack.rbegin(); it != stack.rend(); to = it->first, ++it) {
            auto ref = ref_of_node_.find(it->first);
            if (ref != ref_of_node_.end() && nodes_[it->first].ref == to) {
              const PendingRef& r = refs_[ref->second];
              return Status::Error(Shown(r.where) + ": " + Quote(json(r.text)) +
                                   " makes a cycle that never moves into a member or an item "
                                   "(validation would never end)");
            }
            if (it->first == child) break;
          }
          return Status::Error("/: the schema applies itself to the same value without end");
        }
        state[child] = 1;
        stack.emplace_back(child, in_place(child));
      }
    }
    return Status::Ok();
  }

  const json& document_;
  const JsonSchemaLimits limits_;
  std::vector<Node> nodes_;
  std::unordered_map<std::string, int> by_pointer_;
  std::unordered_map<std::string, std::shared_ptr<const RE2>> regexes_;
  std::vector<PendingRef> refs_;
  std::unordered_map<int, size_t> ref_of_node_;  // node -> its entry in refs_
  Status error_;
};

// One validation: a step budget, a depth bound and the path of the value being checked.
class Validator {
 public:
  explicit Validator(const JsonSchema::Compiled& compiled)
      : nodes_(compiled.nodes), limits_(compiled.limits) {}

  Status Run(const json& value) {
    if (Check(0, value, 0)) return Status::Ok();
    return Status::Error(error_);
  }

 private:
  struct PathPart {
    const std::string* key;  // null for an array index
    size_t index;
  };

  std::string Pointer() const {
    if (path_.empty()) return "/";
    std::string out;
    for (const PathPart& p : path_)
      out += "/" + (p.key ? EscapeToken(*p.key) : std::to_string(p.index));
    return out;
  }

  bool Fail(const std::string& what) {
    error_ = Pointer() + ": " + what;
    return false;
  }

  // Stops the whole validation (not just this branch: an `anyOf` or a `not` must never turn
  // an exhausted budget into a pass).
  bool Abort(const std::string& what) {
    if (!aborted_) Fail(what);
    aborted_ = true;
    return false;
  }

  bool Spend(int steps) {
    steps_ += steps;
    if (steps_ <= limits_.max_steps) return true;
    return Abort("stopped after " + std::to_string(limits_.max_steps) +
                 " steps: the arguments are too large or the schema too complex to check");
  }

  bool CanonicalOf(const json& value, std::string& out) {
    if (Canonical(value, limits_.max_depth, out)) return true;
    return Abort("value nested deeper than " + std::to_string(limits_.max_depth) + " levels");
  }

  bool Check(int index, const json& v, int depth) {
    if (aborted_ || !Spend(1)) return false;
    if (depth > limits_.max_depth)
      return Abort("schema applied deeper than " + std::to_string(limits_.max_depth) +
                   " levels (a deeply nested value or a long $ref chain)");
    const Node& n = nodes_[index];
    if (n.always_false) return Fail("no value is allowed here");
    if (n.types && !TypeMatches(n.types, v)) {
      if ((n.types & kInteger) && v.is_number())
        return Fail("expected " + ExpectedTypes(n.types) + ", got " + Quote(v));
      return Fail("expected " + ExpectedTypes(n.types) + ", got " + TypeWord(v));
    }
    if (!CheckValue(n, v)) return false;
    if (v.is_number() && !CheckNumber(n, v)) return false;
    if (v.is_string() && !CheckString(n, v)) return false;
    if (v.is_array() && !CheckArray(n, v, depth)) return false;
    if (v.is_object() && !CheckObject(n, v, depth)) return false;
    if (n.ref >= 0 && !Check(n.ref, v, depth + 1)) return false;
    return CheckCombinators(n, v, depth);
  }

  static bool TypeMatches(uint8_t types, const json& v) {
    switch (v.type()) {
      case json::value_t::null:
        return types & kNull;
      case json::value_t::boolean:
        return types & kBoolean;
      case json::value_t::object:
        return types & kObject;
      case json::value_t::array:
        return types & kArray;
      case json::value_t::string:
        return types & kString;
      case json::value_t::number_integer:
      case json::value_t::number_unsigned:
      case json::value_t::number_float:
        return (types & kNumber) || ((types & kInteger) && IsIntegral(v));
      default:
        return false;
    }
  }

  bool CheckValue(const Node& n, const json& v) {
    if (!n.constant && !n.enum_keys) return true;
    std::string key;
    if (!Spend(1) || !CanonicalOf(v, key)) return false;
    if (n.constant && key != n.constant_key)
      return Fail("expected the constant " + Quote(*n.constant) + ", got " + Quote(v));
    if (n.enum_keys && !n.enum_keys->count(key)) {
      std::string listed;
      for (size_t i = 0; i < n.enum_values->size() && i < kMaxListed; ++i)
        listed += (i ? ", " : "") + Quote((*n.enum_values)[i]);
      if (n.enum_values->size() > kMaxListed)
        listed += ", ... (" + std::to_string(n.enum_values->size()) + " values)";
      if (n.enum_values->empty()) return Fail(Quote(v) + " is not allowed (the enum is empty)");
      return Fail(Quote(v) + " is not one of " + listed);
    }
    return true;
  }

  bool CheckNumber(const Node& n, const json& v) {
    if (n.minimum && CompareNumbers(v, *n.minimum) < 0)
      return Fail(Quote(v) + " is less than the minimum " + Dump(*n.minimum));
    if (n.maximum && CompareNumbers(v, *n.maximum) > 0)
      return Fail(Quote(v) + " is more than the maximum " + Dump(*n.maximum));
    if (n.exclusive_minimum && CompareNumbers(v, *n.exclusive_minimum) <= 0)
      return Fail(Quote(v) + " is not more than the exclusive minimum " +
                  Dump(*n.exclusive_minimum));
    if (n.exclusive_maximum && CompareNumbers(v, *n.exclusive_maximum) >= 0)
      return Fail(Quote(v) + " is not less than the exclusive maximum " +
                  Dump(*n.exclusive_maximum));
    if (n.multiple_of && !IsMultipleOf(v, *n.multiple_of))
      return Fail(Quote(v) + " is not a multiple of " + Dump(*n.multiple_of));
    return true;
  }

  bool CheckString(const Node& n, const json& v) {
    const std::string& s = v.get_ref<const std::string&>();
    if (n.min_length || n.max_length) {
      const uint64_t length = CodePoints(s);
      if (n.min_length && length < *n.min_length)
        return Fail("string of " + Plural(length, "character") +
                    " is shorter than the minimum length " + std::to_string(*n.min_length));
      if (n.max_length && length > *n.max_length)
        return Fail("string of " + Plural(length, "character") +
                    " is longer than the maximum length " + std::to_string(*n.max_length));
    }
    if (n.pattern) {
      if (!Spend(1)) return false;
      if (!RE2::PartialMatch(s, *n.pattern))
        return Fail(Quote(v) + " does not match the pattern " + Quote(json(n.pattern->pattern())));
    }
    return true;
  }

  bool CheckArray(const Node& n, const json& v, int depth) {
    const uint64_t size = v.size();
    if (n.min_items && size < *n.min_items)
      return Fail(Plural(size, "item") + ", fewer than the minimum " +
                  std::to_string(*n.min_items) + " (minItems)");
    if (n.max_items && size > *n.max_items)
      return Fail(Plural(size, "item") + ", more than the maximum " + std::to_string(*n.max_items) +
                  " (maxItems)");
    if (n.unique_items) {
      if (!Spend(static_cast<int>(std::min<uint64_t>(size, limits_.max_steps + 1)))) return false;
      std::unordered_map<std::string, size_t> seen;
      for (size_t i = 0; i < size; ++i) {
        std::string key;
        if (!CanonicalOf(v[i], key)) return false;
        auto [it, fresh] = seen.emplace(std::move(key), i);
        if (!fresh)
          return Fail("items " + std::to_string(it->second) + " and " + std::to_string(i) +
                      " are equal, but the items must be unique");
      }
    }
    for (size_t i = 0; i < size; ++i) {
      int sub = i < n.prefix_items.size() ? n.prefix_items[i] : n.items;
      if (sub < 0) continue;
      path_.push_back({nullptr, i});
      bool ok = Check(sub, v[i], depth + 1);
      path_.pop_back();
      if (!ok) return false;
    }
    if (n.contains >= 0) {
      uint64_t matches = 0;
      for (size_t i = 0; i < size; ++i) {
        path_.push_back({nullptr, i});
        bool ok = Check(n.contains, v[i], depth + 1);
        path_.pop_back();
        if (aborted_) return false;
        matches += ok;
      }
      const uint64_t at_least = n.min_contains.value_or(1);
      if (matches < at_least)
        return Fail(Plural(matches, "item") + " match 'contains', fewer than the minimum " +
                    std::to_string(at_least));
      if (n.max_contains && matches > *n.max_contains)
        return Fail(Plural(matches, "item") + " match 'contains', more than the maximum " +
                    std::to_string(*n.max_contains) + " (maxContains)");
    }
    return true;
  }

  bool CheckObject(const Node& n, const json& v, int depth) {
    for (const std::string& name : n.required)
      if (!v.contains(name)) return Fail("missing required member '" + name + "'");
    for (const auto& [name, needed] : n.dependent_required) {
      if (!v.contains(name)) continue;
      for (const std::string& other : needed)
        if (!v.contains(other))
          return Fail("member '" + name + "' requires member '" + other + "'");
    }
    const uint64_t size = v.size();
    if (n.min_properties && size < *n.min_properties)
      return Fail(Plural(size, "member") + ", fewer than the minimum " +
                  std::to_string(*n.min_properties) + " (minProperties)");
    if (n.max_properties && size > *n.max_properties)
      return Fail(Plural(size, "member") + ", more than the maximum " +
                  std::to_string(*n.max_properties) + " (maxProperties)");
    for (const auto& [name, member] : v.items()) {
      if (n.property_names >= 0) {
        if (!Check(n.property_names, json(name), depth + 1)) {
          if (aborted_) return false;
          std::string why = error_.substr(std::min(error_.size(), Pointer().size() + 2));
          return Fail("member name '" + name + "' is not allowed: " + why);
        }
      }
      bool matched = false;
      path_.push_back({&name, 0});
      bool ok = true;
      auto it = n.properties.find(name);
      if (it != n.properties.end()) {
        matched = true;
        ok = Check(it->second, member, depth + 1);
      }
      for (const auto& [re, sub] : n.pattern_properties) {
        if (!ok) break;
        if (!Spend(1)) {
          ok = false;
          break;
        }
        if (!RE2::PartialMatch(name, *re)) continue;
        matched = true;
        ok = Check(sub, member, depth + 1);
      }
      path_.pop_back();
      if (!ok) return false;
      if (matched || n.additional_properties < 0) continue;
      if (nodes_[n.additional_properties].always_false) return Unexpected(n, name);
      path_.push_back({&name, 0});
      ok = Check(n.additional_properties, member, depth + 1);
      path_.pop_back();
      if (!ok) return false;
    }
    for (const auto& [name, sub] : n.dependent_schemas)
      if (v.contains(name) && !Check(sub, v, depth + 1)) return false;
    return true;
  }

  bool Unexpected(const Node& n, const std::string& name) {
    std::string what = "unexpected member '" + name + "'";
    if (!n.properties.empty()) {
      what += " (allowed: ";
      size_t i = 0;
      for (const auto& [known, sub] : n.properties) {
        if (i == kMaxListed) {
          what += ", ...";
          break;
        }
        what += (i++ ? ", " : "") + known;
      }
      what += ")";
    }
    return Fail(what);
  }

  bool CheckCombinators(const Node& n, const json& v, int depth) {
    for (int sub : n.all_of)
      if (!Check(sub, v, depth + 1)) return false;
    if (!n.any_of.empty()) {
      std::vector<std::string> reasons;
      bool any = false;
      for (int sub : n.any_of) {
        if (Check(sub, v, depth + 1)) {
          any = true;
          break;
        }
        if (aborted_) return false;
        reasons.push_back(error_);
      }
      if (!any) return Fail("matches none of the anyOf alternatives: " + Reasons(reasons));
    }
    if (!n.one_of.empty()) {
      std::vector<std::string> reasons;
      std::vector<size_t> matched;
      for (size_t i = 0; i < n.one_of.size(); ++i) {
        if (Check(n.one_of[i], v, depth + 1)) {
          matched.push_back(i);
          if (matched.size() == 2) break;
        } else {
          if (aborted_) return false;
          reasons.push_back(error_);
        }
      }
      if (matched.empty())
        return Fail("matches none of the oneOf alternatives: " + Reasons(reasons));
      if (matched.size() > 1)
        return Fail("matches oneOf alternatives " + std::to_string(matched[0]) + " and " +
                    std::to_string(matched[1]) + ", but exactly one must match");
    }
    if (n.not_schema >= 0) {
      if (Check(n.not_schema, v, depth + 1)) return Fail("matches the schema under 'not'");
      if (aborted_) return false;
    }
    if (n.if_schema >= 0) {
      const bool holds = Check(n.if_schema, v, depth + 1);
      if (aborted_) return false;
      const int branch = holds ? n.then_schema : n.else_schema;
      if (branch >= 0 && !Check(branch, v, depth + 1)) return false;
    }
    return true;
  }

  static std::string Reasons(const std::vector<std::string>& reasons) {
    std::string out;
    for (size_t i = 0; i < reasons.size() && i < 3; ++i)
      out += (i ? "; " : "") + std::string("[") + std::to_string(i) + "] " + reasons[i];
    if (reasons.size() > 3) out += "; ... (" + std::to_string(reasons.size()) + " alternatives)";
    return out;
  }

  const std::vector<Node>& nodes_;
  const JsonSchemaLimits limits_;
  std::vector<PathPart> path_;
  int steps_ = 0;
  bool aborted_ = false;
  std::string error_;
};

}  // namespace

Result<JsonSchema> JsonSchema::Compile(const json& schema, JsonSchemaLimits limits) {
  try {
    Compiler compiler(schema, limits);
    auto nodes = compiler.Run();
    if (!nodes) return nodes.status();
    auto compiled = std::make_shared<Compiled>();
    compiled->nodes = std::move(*nodes);
    compiled->limits = limits;
    return JsonSchema(std::move(compiled));
  } catch (const std::exception& e) {  // allocation failure or a library surprise: fail closed
    return Status::Error(std::string("schema could not be compiled: ") + e.what());
  }
}

Status JsonSchema::Validate(const json& value) const {
  try {
    return Validator(*compiled_).Run(value);
  } catch (const std::exception& e) {
    return Status::Error(std::string("/: arguments could not be checked: ") + e.what());
  }
}

std::shared_ptr<const Result<JsonSchema>> ToolSchemaCache::Lookup(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->schema;
}

void ToolSchemaCache::Insert(const std::string& key,
                             std::shared_ptr<const Result<JsonSchema>> schema) {
  if (key.size() > max_bytes_ / 4 || max_entries_ == 0) return;
  std::lock_guard lock(mu_);
  if (index_.count(key)) return;  // another thread compiled it meanwhile
  lru_.push_front({key, std::move(schema)});
  index_[key] = lru_.begin();
  bytes_ += key.size();
  while (lru_.size() > max_entries_ || bytes_ > max_bytes_) {
    bytes_ -= lru_.back().key.size();
    index_.erase(lru_.back().key);
    lru_.pop_back();
  }
}

size_t ToolSchemaCache::size() const {
  std::lock_guard lock(mu_);
  return lru_.size();
}

Status ToolSchemaCache::Check(const json& tool_definition, const json& arguments) {
  if (!tool_definition.is_object() || !tool_definition.contains("inputSchema")) return Status::Ok();
  const json& schema = tool_definition["inputSchema"];
  // json's own dump recurses without bound: refuse an absurdly deep schema before making its key.
  if (NestedDeeperThan(schema, kMaxKeyDepth))
    return Status::Error("the tool's inputSchema is unusable: nested deeper than " +
                         std::to_string(kMaxKeyDepth) + " levels");
  // The exact text is the key: equal text, equal schema; no hash collision can swap two schemas.
  const std::string key = Dump(schema);
  auto compiled = Lookup(key);
  if (!compiled) {
    compiled = std::make_shared<const Result<JsonSchema>>(JsonSchema::Compile(schema));
    Insert(key, compiled);
  }
  if (!compiled->ok())
    return Status::Error("the tool's inputSchema is unusable: " + compiled->status().message());
  return (*compiled)->Validate(arguments.is_null() ? json::object() : arguments);
}

Status CheckToolArguments(const json& tool_definition, const json& arguments) {
  // One cache for the process: tool definitions repeat across sessions and upstream restarts.
  static ToolSchemaCache* const cache = new ToolSchemaCache();
  return cache->Check(tool_definition, arguments);
}

}  // namespace warden::schema
