// JSON pointer patterns: RFC 6901 pointers ("/messages/0/body") where a segment may be `*`, which
// matches every member of an object or element of an array ("/messages/*/body"). Rules use them
// to name parts of a tool's result (untrusted_output, private_output) and of its arguments
// (destinations, hands_over). Parsed once at load; matching walks the value and never allocates
// beyond the caller's visitor.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace warden::policy {

class JsonPattern {
 public:
  // "" is the whole value; otherwise "/" then segments separated by "/", with ~0 for ~ and ~1
  // for / (RFC 6901). An error names what is wrong ("segment 2: '~' must be followed by 0 or 1").
  static Result<JsonPattern> Parse(std::string_view text);

  // Calls `visit` with every value the pattern reaches in `root` (none when a segment is absent).
  void Visit(const nlohmann::json& root,
             const std::function<void(const nlohmann::json&)>& visit) const;
  // Whether some value is reached and it is not null, "" or an empty array or object.
  bool ReachesSomething(const nlohmann::json& root) const;
  // Calls `visit` with every value of `root` that is NOT inside a value the pattern reaches: the
  // scalar leaves and the containers' members outside it (what "the rest of the result" is).
  // Leaves only: objects and arrays are walked, strings, numbers and booleans visited.
  static void VisitOutside(const nlohmann::json& root, const std::vector<JsonPattern>& patterns,
                           const std::function<void(const nlohmann::json&)>& visit);

  const std::string& text() const { return text_; }

 private:
  bool Covers(const std::vector<std::string_view>& path) const;
  std::string text_;
  std::vector<std::string> segments_;  // unescaped; "*" is the wildcard
};

// Every string leaf under `value` (the value itself when it is a string), depth first. Numbers
// are visited as their decimal text when `numbers` is set.
void VisitStrings(const nlohmann::json& value, const std::function<void(const std::string&)>& visit,
                  bool numbers = false);

}  // namespace warden::policy
