#include "egress/host_name.h"

#include <cstdio>

namespace warden::egress {

namespace {

constexpr size_t kMaxNameLength = 253;
constexpr size_t kMaxLabelLength = 63;

bool IsLabelChar(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; }

}  // namespace

std::string ToLowerAscii(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

namespace {

std::string Escape(std::string_view text, size_t max, bool quoted) {
  std::string out = quoted ? "\"" : "";
  for (size_t i = 0; i < text.size() && i < max; ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (quoted && (c == '"' || c == '\\')) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (text.size() > max) out += "...";
  if (quoted) out += '"';
  return out;
}

}  // namespace

std::string Quote(std::string_view text) { return Escape(text, 100, true); }
std::string Printable(std::string_view text) { return Escape(text, 300, false); }

Status ValidateHostName(std::string_view name) {
  if (name.empty()) return Status::Error("host name is empty");
  if (name.size() > kMaxNameLength) {
    return Status::Error("host name " + Quote(name) + " is longer than 253 characters");
  }
  size_t start = 0;
  while (start <= name.size()) {
    size_t dot = name.find('.', start);
    if (dot == std::string_view::npos) dot = name.size();
    std::string_view label = name.substr(start, dot - start);
    if (label.empty()) {
      return Status::Error("host name " + Quote(name) + " has an empty label");
    }
    if (label.size() > kMaxLabelLength) {
      return Status::Error("host name " + Quote(name) + " has a label longer than 63 characters");
    }
    for (char c : label) {
      if (!IsLabelChar(c)) {
        return Status::Error("host name " + Quote(name) + " contains " +
                             Quote(std::string_view(&c, 1)) +
                             " (only letters, digits, hyphens and dots are allowed)");
      }
    }
    if (label.front() == '-' || label.back() == '-') {
      return Status::Error("host name " + Quote(name) +
                           " has a label that starts or ends with '-'");
    }
    start = dot + 1;
  }
  return Status::Ok();
}

Result<Host> ParseHost(std::string_view raw) {
  if (raw.empty()) return Status::Error("host name is empty");
  HostSpelling spelling = ClassifyHostSpelling(raw);
  if (spelling.kind == HostSpelling::Kind::kInvalid) {
    return Status::Error("host " + Quote(raw) + " is neither a valid host name nor an IP address");
  }
  if (spelling.kind == HostSpelling::Kind::kAddress) {
    return Host{spelling.address.ToString(), spelling.address};
  }
  std::string name = ToLowerAscii(raw);
  if (name.size() > 1 && name.back() == '.') name.pop_back();
  Status st = ValidateHostName(name);
  if (!st.ok()) return st;
  return Host{std::move(name), std::nullopt};
}

}  // namespace warden::egress
