// Tool and server name patterns, compiled once at load.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace warden::policy {

// A shell-style name pattern: '*' matches any run of characters (also none), '?' exactly one;
// every other character is literal (no character classes, no escapes). Matching never allocates
// and takes at most O(pattern x name) steps, with no backtracking blow-up.
class Glob {
 public:
  Glob() = default;  // matches every name
  explicit Glob(std::string pattern);

  bool Matches(std::string_view name) const;

  const std::string& pattern() const { return pattern_; }
  bool matches_all() const { return kind_ == Kind::kAll; }
  bool is_literal() const { return kind_ == Kind::kExact; }
  // The characters before the first wildcard: every matching name starts with them.
  std::string_view literal_prefix() const {
    return std::string_view(pattern_).substr(0, prefix_len_);
  }
  // True when every name this glob matches is certainly matched by `other` too. Only cheap cases
  // are recognised (`*`, exact names, `PREFIX*`, identical patterns); false means "not known".
  bool CoveredBy(const Glob& other) const;

 private:
  // kStars: only '*' wildcards, matched as literal pieces found left to right; kGeneral has '?'.
  enum class Kind { kAll, kExact, kPrefix, kStars, kGeneral };
  bool MatchesStars(std::string_view name) const;
  bool MatchesGeneral(std::string_view name) const;

  std::string pattern_;
  Kind kind_ = Kind::kAll;
  size_t prefix_len_ = 0;
  std::vector<std::string>
      pieces_;  // kStars: the literal runs between stars (first and last may be empty)
};

}  // namespace warden::policy
