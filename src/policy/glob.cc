#include "policy/glob.h"

namespace warden::policy {

Glob::Glob(std::string pattern) : pattern_(std::move(pattern)) {
  prefix_len_ = pattern_.find_first_of("*?");
  if (prefix_len_ == std::string::npos) {
    prefix_len_ = pattern_.size();
    kind_ = Kind::kExact;
  } else if (pattern_.find_first_not_of('*') == std::string::npos) {
    kind_ = Kind::kAll;
  } else if (prefix_len_ + 1 == pattern_.size() && pattern_.back() == '*') {
    kind_ = Kind::kPrefix;
  } else if (pattern_.find('?') == std::string::npos) {
    kind_ = Kind::kStars;
    size_t start = 0;
    while (true) {
      size_t star = pattern_.find('*', start);
      pieces_.push_back(
          pattern_.substr(start, star == std::string::npos ? std::string::npos : star - start));
      if (star == std::string::npos) break;
      start = star + 1;
    }
  } else {
    kind_ = Kind::kGeneral;
  }
}

bool Glob::Matches(std::string_view name) const {
  switch (kind_) {
    case Kind::kAll:
      return true;
    case Kind::kExact:
      return name == pattern_;
    case Kind::kPrefix:
      return name.starts_with(literal_prefix());
    case Kind::kStars:
      return MatchesStars(name);
    case Kind::kGeneral:
      return MatchesGeneral(name);
  }
  return false;
}

// PIECE0*PIECE1*...*PIECEn: the name starts with the first piece, ends with the last, and holds
// the others in order in between. Taking the leftmost occurrence of each is always right.
bool Glob::MatchesStars(std::string_view name) const {
  const std::string& first = pieces_.front();
  const std::string& last = pieces_.back();
  if (name.size() < first.size() + last.size() || !name.starts_with(first) || !name.ends_with(last))
    return false;
  size_t pos = first.size();
  const size_t end = name.size() - last.size();
  for (size_t i = 1; i + 1 < pieces_.size(); ++i) {
    const std::string& piece = pieces_[i];
    if (piece.empty()) continue;
    size_t found = name.substr(0, end).find(piece, pos);
    if (found == std::string_view::npos) return false;
    pos = found + piece.size();
  }
  return true;
}

bool Glob::MatchesGeneral(std::string_view name) const {
  // Iterative wildcard match: on a mismatch, retry from the most recent '*' consuming one more
  // character. Only the latest star matters, so the work is bounded by pattern x name.
  std::string_view pat = pattern_;
  size_t p = 0, n = 0;
  size_t star = std::string_view::npos, resume = 0;
  while (n < name.size()) {
    if (p < pat.size() && (pat[p] == '?' || pat[p] == name[n])) {
      ++p;
      ++n;
    } else if (p < pat.size() && pat[p] == '*') {
      star = p++;
      resume = n;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pat.size() && pat[p] == '*') ++p;
  return p == pat.size();
}

bool Glob::CoveredBy(const Glob& other) const {
  switch (other.kind_) {
    case Kind::kAll:
      return true;
    case Kind::kExact:
      return kind_ == Kind::kExact && pattern_ == other.pattern_;
    case Kind::kPrefix:
      return literal_prefix().starts_with(other.literal_prefix());
    case Kind::kStars:
    case Kind::kGeneral:
      return pattern_ == other.pattern_;
  }
  return false;
}

}  // namespace warden::policy
