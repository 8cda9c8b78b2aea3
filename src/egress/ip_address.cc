#include "egress/ip_address.h"

#include <arpa/inet.h>

#include <cstring>
#include <vector>

namespace warden::egress {

IpAddress IpAddress::V4(uint32_t host_order) {
  IpAddress a;
  a.family = Family::kV4;
  a.bytes[0] = static_cast<uint8_t>(host_order >> 24);
  a.bytes[1] = static_cast<uint8_t>(host_order >> 16);
  a.bytes[2] = static_cast<uint8_t>(host_order >> 8);
  a.bytes[3] = static_cast<uint8_t>(host_order);
  return a;
}

IpAddress IpAddress::V4(const uint8_t (&b)[4]) {
  return V4(uint32_t{b[0]} << 24 | uint32_t{b[1]} << 16 | uint32_t{b[2]} << 8 | b[3]);
}

IpAddress IpAddress::V6(const std::array<uint8_t, 16>& b) {
  IpAddress a;
  a.family = Family::kV6;
  a.bytes = b;
  return a;
}

uint32_t IpAddress::v4() const {
  return uint32_t{bytes[0]} << 24 | uint32_t{bytes[1]} << 16 | uint32_t{bytes[2]} << 8 | bytes[3];
}

std::string IpAddress::ToString() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (is_v4()) {
    inet_ntop(AF_INET, bytes.data(), buf, sizeof buf);
  } else {
    inet_ntop(AF_INET6, bytes.data(), buf, sizeof buf);
  }
  return buf;
}

std::string IpAddress::ToUrlHost() const { return is_v6() ? "[" + ToString() + "]" : ToString(); }

namespace {

bool IsDecimalDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

bool IsHexDigit(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

bool HasHexPrefix(std::string_view s) {
  return s.size() >= 2 && s[0] == '0' && (s[1] | 0x20) == 'x';
}

// True when `label` reads as a number in one of the inet_aton bases. Such a last label makes the
// whole host an IPv4 spelling (the rule browsers use: "ends in a number").
bool LooksNumeric(std::string_view label) {
  if (IsDecimalDigits(label)) return true;
  if (!HasHexPrefix(label)) return false;
  for (char c : label.substr(2)) {
    if (!IsHexDigit(c)) return false;
  }
  return true;
}

// One inet_aton part: decimal, octal (leading 0) or hex (0x). Values above 2^32 are refused.
std::optional<uint64_t> ParseV4Part(std::string_view part) {
  if (part.empty()) return std::nullopt;
  unsigned base = 10;
  if (HasHexPrefix(part)) {
    base = 16;
    part.remove_prefix(2);
  } else if (part.size() > 1 && part[0] == '0') {
    base = 8;
    part.remove_prefix(1);
  }
  uint64_t value = 0;
  for (char c : part) {
    unsigned digit;
    if (c >= '0' && c <= '9') {
      digit = static_cast<unsigned>(c - '0');
    } else if (base == 16 && IsHexDigit(c)) {
      digit = static_cast<unsigned>((c | 0x20) - 'a' + 10);
    } else {
      return std::nullopt;
    }
    if (digit >= base) return std::nullopt;
    value = value * base + digit;
    if (value > 0xffffffffull) return std::nullopt;
  }
  return value;  // "0x" alone is 0, as inet_aton reads it
}

std::optional<IpAddress> ParseInetAtonV4(std::string_view text) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t dot = text.find('.', start);
    parts.push_back(text.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  if (parts.size() > 4) return std::nullopt;
  std::vector<uint64_t> values;
  for (auto p : parts) {
    auto v = ParseV4Part(p);
    if (!v) return std::nullopt;
    values.push_back(*v);
  }
  uint32_t result = 0;
  for (size_t i = 0; i + 1 < values.size(); ++i) {
    if (values[i] > 255) return std::nullopt;
    result |= static_cast<uint32_t>(values[i]) << (24 - 8 * i);
  }
  // The last part fills all the remaining bytes.
  const size_t remaining_bytes = 5 - values.size();
  const uint64_t limit = remaining_bytes >= 4 ? (1ull << 32) : (1ull << (8 * remaining_bytes));
  if (values.back() >= limit) return std::nullopt;
  result |= static_cast<uint32_t>(values.back());
  return IpAddress::V4(result);
}

std::optional<IpAddress> ParseV6(std::string_view text) {
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') {
    text = text.substr(1, text.size() - 2);
  }
  if (text.empty() || text.size() >= INET6_ADDRSTRLEN) return std::nullopt;
  std::string s(text);
  std::array<uint8_t, 16> b{};
  if (inet_pton(AF_INET6, s.c_str(), b.data()) != 1) return std::nullopt;
  return IpAddress::V6(b);
}

}  // namespace

std::optional<IpAddress> ParseCanonicalIp(std::string_view text) {
  if (text.find(':') != std::string_view::npos) return ParseV6(text);
  // Four decimal parts, no leading zeros: exactly what inet_pton(AF_INET) accepts.
  if (text.empty() || text.size() > 15) return std::nullopt;
  std::string s(text);
  uint8_t b[4];
  if (inet_pton(AF_INET, s.c_str(), b) != 1) return std::nullopt;
  return IpAddress::V4(b);
}

HostSpelling ClassifyHostSpelling(std::string_view host) {
  HostSpelling out;
  if (host.find(':') != std::string_view::npos || host.find('[') != std::string_view::npos) {
    // Only an IPv6 literal may contain these; a zone id or anything else is invalid.
    auto v6 = ParseV6(host);
    if (!v6) {
      out.kind = HostSpelling::Kind::kInvalid;
      return out;
    }
    out.kind = HostSpelling::Kind::kAddress;
    out.address = *v6;
    return out;
  }
  if (!host.empty() && host.back() == '.') host.remove_suffix(1);
  size_t last_dot = host.rfind('.');
  std::string_view last = last_dot == std::string_view::npos ? host : host.substr(last_dot + 1);
  if (!LooksNumeric(last)) return out;  // a name
  auto v4 = ParseInetAtonV4(host);
  if (!v4) {
    out.kind = HostSpelling::Kind::kInvalid;
    return out;
  }
  out.kind = HostSpelling::Kind::kAddress;
  out.address = *v4;
  return out;
}

}  // namespace warden::egress
