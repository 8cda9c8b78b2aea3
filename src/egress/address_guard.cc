#include "egress/address_guard.h"

#include <algorithm>
#include <cstdint>

namespace warden::egress {

namespace {

struct V4Range {
  uint32_t base;
  int prefix;
  const char* what;
};

constexpr uint32_t Ip4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  return uint32_t{a} << 24 | uint32_t{b} << 16 | uint32_t{c} << 8 | d;
}

// Order matters only for the message: the most specific description first.
constexpr V4Range kV4Special[] = {
    {Ip4(0, 0, 0, 0), 32, "unspecified"},
    {Ip4(255, 255, 255, 255), 32, "broadcast"},
    {Ip4(0, 0, 0, 0), 8, "reserved (\"this network\", 0.0.0.0/8)"},
    {Ip4(10, 0, 0, 0), 8, "private (RFC 1918)"},
    {Ip4(100, 64, 0, 0), 10, "shared address space (CGNAT, RFC 6598)"},
    {Ip4(127, 0, 0, 0), 8, "loopback"},
    {Ip4(169, 254, 0, 0), 16, "link-local (cloud metadata range)"},
    {Ip4(172, 16, 0, 0), 12, "private (RFC 1918)"},
    {Ip4(192, 0, 0, 0), 24, "reserved (IETF protocol assignments)"},
    {Ip4(192, 0, 2, 0), 24, "reserved (documentation, TEST-NET-1)"},
    {Ip4(192, 31, 196, 0), 24, "reserved (AS112)"},
    {Ip4(192, 52, 193, 0), 24, "reserved (AMT)"},
    {Ip4(192, 88, 99, 0), 24, "reserved (6to4 relay anycast)"},
    {Ip4(192, 168, 0, 0), 16, "private (RFC 1918)"},
    {Ip4(192, 175, 48, 0), 24, "reserved (AS112 direct delegation)"},
    {Ip4(198, 18, 0, 0), 15, "reserved (benchmarking)"},
    {Ip4(198, 51, 100, 0), 24, "reserved (documentation, TEST-NET-2)"},
    {Ip4(203, 0, 113, 0), 24, "reserved (documentation, TEST-NET-3)"},
    {Ip4(224, 0, 0, 0), 4, "multicast"},
    {Ip4(240, 0, 0, 0), 4, "reserved (240.0.0.0/4)"},
};

std::optional<std::string> SpecialPurposeV4(uint32_t a) {
  for (const auto& r : kV4Special) {
    uint32_t mask = r.prefix == 0 ? 0 : ~uint32_t{0} << (32 - r.prefix);
    if ((a & mask) == r.base) return std::string(r.what);
  }
  return std::nullopt;
}

bool V6HasPrefix(const IpAddress& a, std::initializer_list<uint8_t> prefix_bytes, int bits) {
  std::array<uint8_t, 16> p{};
  std::copy(prefix_bytes.begin(), prefix_bytes.end(), p.begin());
  for (int i = 0; i < 16 && bits > 0; ++i, bits -= 8) {
    uint8_t mask = bits >= 8 ? 0xff : static_cast<uint8_t>(0xff << (8 - bits));
    if ((a.bytes[i] & mask) != (p[i] & mask)) return false;
  }
  return true;
}

uint32_t V4At(const IpAddress& a, int offset) {
  return uint32_t{a.bytes[offset]} << 24 | uint32_t{a.bytes[offset + 1]} << 16 |
         uint32_t{a.bytes[offset + 2]} << 8 | a.bytes[offset + 3];
}

// The IPv4 address embedded in a form that reaches IPv4, and the name of that form.
std::optional<std::string> EmbeddedV4Reason(uint32_t v4, const char* form) {
  auto why = SpecialPurposeV4(v4);
  if (!why) return std::nullopt;
  return *why + " (" + form + " " + IpAddress::V4(v4).ToString() + ")";
}

std::optional<std::string> SpecialPurposeV6(const IpAddress& a) {
  static const std::array<uint8_t, 16> kZero{};
  std::array<uint8_t, 16> loopback{};
  loopback[15] = 1;
  if (a.bytes == kZero) return "unspecified";
  if (a.bytes == loopback) return "loopback";
  // ::ffff:a.b.c.d reaches the IPv4 address through a dual-stack socket.
  if (V6HasPrefix(a, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff}, 96)) {
    return EmbeddedV4Reason(V4At(a, 12), "IPv4-mapped");
  }
  if (V6HasPrefix(a, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 96)) {
    auto why = EmbeddedV4Reason(V4At(a, 12), "IPv4-compatible");
    return why ? *why : "reserved (deprecated IPv4-compatible address)";
  }
  if (V6HasPrefix(a, {0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0}, 96)) {
    return EmbeddedV4Reason(V4At(a, 12), "NAT64");
  }
  if (V6HasPrefix(a, {0x00, 0x64, 0xff, 0x9b, 0x00, 0x01}, 48)) return "reserved (local-use NAT64)";
  if (V6HasPrefix(a, {0xff}, 8)) return "multicast";
  if (V6HasPrefix(a, {0xfe, 0x80}, 10)) return "link-local";
  if (V6HasPrefix(a, {0xfe, 0xc0}, 10)) return "reserved (deprecated site-local)";
  if (V6HasPrefix(a, {0xfc}, 7)) return "private (unique local address, fc00::/7)";
  if (V6HasPrefix(a, {0x01, 0x00, 0, 0, 0, 0, 0, 0}, 64)) return "reserved (discard-only)";
  if (V6HasPrefix(a, {0x20, 0x01, 0x0d, 0xb8}, 32))
    return "reserved (documentation, 2001:db8::/32)";
  if (V6HasPrefix(a, {0x3f, 0xff}, 20)) return "reserved (documentation, 3fff::/20)";
  if (V6HasPrefix(a, {0x20, 0x01, 0x00, 0x00}, 32)) return "reserved (Teredo tunnel)";
  if (V6HasPrefix(a, {0x20, 0x01}, 23)) return "reserved (IETF protocol assignments)";
  if (V6HasPrefix(a, {0x20, 0x02}, 16)) {
    auto why = EmbeddedV4Reason(V4At(a, 2), "6to4");
    return why ? *why : "reserved (6to4 tunnel)";
  }
  if (V6HasPrefix(a, {0x5f, 0x00}, 16)) return "reserved (SRv6 SIDs)";
  if (!V6HasPrefix(a, {0x20}, 3)) return "reserved (not global unicast, outside 2000::/3)";
  return std::nullopt;
}

}  // namespace

std::optional<std::string> SpecialPurpose(const IpAddress& address) {
  return address.is_v4() ? SpecialPurposeV4(address.v4()) : SpecialPurposeV6(address);
}

AddressGuard::AddressGuard(const AllowList& allow_list, ResolveMap resolve)
    : resolve_(std::move(resolve)) {
  for (const auto& rule : allow_list.rules()) {
    if (rule.kind == AllowRule::Kind::kAddress) address_rules_.push_back(rule);
  }
}

Verdict AddressGuard::Check(const Host& host, const IpAddress& address, uint16_t port) const {
  auto why = SpecialPurpose(address);
  if (!why) return Verdict::Allow("public address");
  for (const auto& rule : address_rules_) {
    if (rule.address && *rule.address == address && rule.AllowsPort(port)) {
      return Verdict::Allow("allow entry " + rule.text);
    }
  }
  if (!host.address) {
    if (const auto* mapped = resolve_.Find(host.name)) {
      if (std::find(mapped->begin(), mapped->end(), address) != mapped->end()) {
        return Verdict::Allow("--resolve " + host.name + "=" + address.ToString());
      }
    }
  }
  return Verdict::Deny("address " + address.ToString() + " is " + *why);
}

}  // namespace warden::egress
