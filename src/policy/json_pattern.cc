#include "policy/json_pattern.h"

namespace warden::policy {
namespace {

using nlohmann::json;

void VisitAt(const json& value, const std::vector<std::string>& segments, size_t at,
             const std::function<void(const json&)>& visit) {
  if (at == segments.size()) return visit(value);
  const std::string& segment = segments[at];
  if (value.is_object()) {
    if (segment == "*") {
      for (const auto& [key, member] : value.items()) VisitAt(member, segments, at + 1, visit);
      return;
    }
    auto it = value.find(segment);
    if (it != value.end()) VisitAt(*it, segments, at + 1, visit);
    return;
  }
  if (value.is_array()) {
    if (segment == "*") {
      for (const json& element : value) VisitAt(element, segments, at + 1, visit);
      return;
    }
    // RFC 6901: an array index is 0 or digits without a leading zero.
    if (segment.empty() || segment.size() > 9 || (segment.size() > 1 && segment[0] == '0')) return;
    size_t index = 0;
    for (char c : segment) {
      if (c < '0' || c > '9') return;
      index = index * 10 + static_cast<size_t>(c - '0');
    }
    if (index < value.size()) VisitAt(value[index], segments, at + 1, visit);
  }
}

void VisitOutsideAt(const json& value, std::vector<std::string_view>& path,
                    const std::vector<JsonPattern>& patterns,
                    const std::function<bool(const std::vector<std::string_view>&)>& covered,
                    const std::function<void(const json&)>& visit) {
  if (covered(path)) return;
  if (value.is_object()) {
    for (const auto& [key, member] : value.items()) {
      path.push_back(key);
      VisitOutsideAt(member, path, patterns, covered, visit);
      path.pop_back();
    }
  } else if (value.is_array()) {
    std::vector<std::string> indexes;  // keeps the views alive for this level
    indexes.reserve(value.size());
    for (size_t i = 0; i < value.size(); ++i) indexes.push_back(std::to_string(i));
    for (size_t i = 0; i < value.size(); ++i) {
      path.push_back(indexes[i]);
      VisitOutsideAt(value[i], path, patterns, covered, visit);
      path.pop_back();
    }
  } else if (!value.is_null()) {
    visit(value);
  }
}

}  // namespace

Result<JsonPattern> JsonPattern::Parse(std::string_view text) {
  JsonPattern p;
  p.text_ = std::string(text);
  if (text.empty()) return p;
  if (text.front() != '/')
    return Status::Error("a JSON pointer starts with '/' (or is \"\" for the whole value), got '" +
                         std::string(text) + "'");
  size_t index = 0;
  size_t start = 1;
  while (true) {
    size_t end = text.find('/', start);
    std::string_view raw = text.substr(start, end == std::string_view::npos ? end : end - start);
    ++index;
    std::string segment;
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] != '~') {
        segment += raw[i];
        continue;
      }
      if (i + 1 < raw.size() && (raw[i + 1] == '0' || raw[i + 1] == '1')) {
        segment += raw[i + 1] == '0' ? '~' : '/';
        ++i;
        continue;
      }
      return Status::Error("segment " + std::to_string(index) + " of '" + std::string(text) +
                           "': '~' must be followed by 0 or 1 (RFC 6901)");
    }
    p.segments_.push_back(std::move(segment));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return p;
}

void JsonPattern::Visit(const json& root, const std::function<void(const json&)>& visit) const {
  VisitAt(root, segments_, 0, visit);
}

bool JsonPattern::ReachesSomething(const json& root) const {
  bool found = false;
  Visit(root, [&](const json& v) {
    if (v.is_null()) return;
    if (v.is_string() && v.get_ref<const std::string&>().empty()) return;
    if ((v.is_array() || v.is_object()) && v.empty()) return;
    found = true;
  });
  return found;
}

bool JsonPattern::Covers(const std::vector<std::string_view>& path) const {
  if (path.size() < segments_.size()) return false;
  for (size_t i = 0; i < segments_.size(); ++i)
    if (segments_[i] != "*" && segments_[i] != path[i]) return false;
  return true;
}

void JsonPattern::VisitOutside(const json& root, const std::vector<JsonPattern>& patterns,
                               const std::function<void(const json&)>& visit) {
  std::vector<std::string_view> path;
  auto covered = [&](const std::vector<std::string_view>& at) {
    for (const JsonPattern& p : patterns)
      if (p.Covers(at)) return true;
    return false;
  };
  VisitOutsideAt(root, path, patterns, covered, visit);
}

void VisitStrings(const json& value, const std::function<void(const std::string&)>& visit,
                  bool numbers) {
  if (value.is_string()) return visit(value.get_ref<const std::string&>());
  if (numbers && (value.is_number_integer() || value.is_number_unsigned()))
    return visit(value.dump());
  if (value.is_object()) {
    for (const auto& [key, member] : value.items()) VisitStrings(member, visit, numbers);
  } else if (value.is_array()) {
    for (const json& element : value) VisitStrings(element, visit, numbers);
  }
}

}  // namespace warden::policy
